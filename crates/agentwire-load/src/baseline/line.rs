//! The socket both baseline clients speak their text protocols over: buffered halves of a
//! TCP connection (Nagle off), bounded line reads and bounded payload reads, with errors that
//! name the server.

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

use crate::error::LoadError;

/// Longest line read (a server's `INFO` is a few hundred bytes).
const MAX_LINE: u64 = 64 * 1024;

/// A text-protocol connection to `server` (`"nats-server"`, `"redis-server"`).
pub(super) struct LineConn {
    rd: BufReader<OwnedReadHalf>,
    wr: BufWriter<OwnedWriteHalf>,
    line: String,
    server: &'static str,
}

impl LineConn {
    /// Connects to `addr` with `TCP_NODELAY`.
    pub(super) async fn connect(addr: &str, server: &'static str) -> Result<Self, LoadError> {
        let s = TcpStream::connect(addr)
            .await
            .map_err(|e| LoadError::io(format!("connecting to {server} at {addr}"), e))?;
        s.set_nodelay(true)
            .map_err(|e| LoadError::io("TCP_NODELAY", e))?;
        let (r, w) = s.into_split();
        Ok(Self {
            rd: BufReader::new(r),
            wr: BufWriter::new(w),
            line: String::new(),
            server,
        })
    }

    /// Writes `b` (not flushed).
    pub(super) async fn write(&mut self, b: &[u8]) -> Result<(), LoadError> {
        let server = self.server;
        self.wr
            .write_all(b)
            .await
            .map_err(|e| LoadError::io(format!("writing to {server}"), e))
    }

    pub(super) async fn flush(&mut self) -> Result<(), LoadError> {
        let server = self.server;
        self.wr
            .flush()
            .await
            .map_err(|e| LoadError::io(format!("writing to {server}"), e))
    }

    /// Whether nothing read is waiting in the buffer (time to flush before reading).
    pub(super) fn drained(&self) -> bool {
        self.rd.buffer().is_empty()
    }

    /// The next line, without its line end, at most [`MAX_LINE`] bytes: a longer one is an
    /// error, not unbounded memory, and so is the end of the stream.
    pub(super) async fn next_line(&mut self) -> Result<&str, LoadError> {
        let server = self.server;
        self.line.clear();
        let n = (&mut self.rd)
            .take(MAX_LINE)
            .read_line(&mut self.line)
            .await
            .map_err(|e| LoadError::io(format!("reading from {server}"), e))?;
        if n == 0 {
            return Err(LoadError::Protocol(format!(
                "{server} closed the connection"
            )));
        }
        if !self.line.ends_with('\n') {
            return Err(LoadError::Protocol(format!("{server}: a line over 64 KiB")));
        }
        Ok(self.line.trim_end())
    }

    /// The next `len` bytes and the line end after them (the caller bounds `len`).
    pub(super) async fn payload(&mut self, len: usize) -> Result<Vec<u8>, LoadError> {
        let server = self.server;
        let mut payload = vec![0; len + 2];
        self.rd
            .read_exact(&mut payload)
            .await
            .map_err(|e| LoadError::io(format!("reading from {server}"), e))?;
        payload.truncate(len);
        Ok(payload)
    }
}

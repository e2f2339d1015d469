//! The server's first look at a request: a WebSocket upgrade, or plain HTTP that gets a
//! `426 Upgrade Required` with a short text body instead of a dropped connection.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

/// What the request head turned out to be.
pub(crate) enum Head {
    /// Asks for a WebSocket upgrade (or cannot be read as HTTP: tungstenite reports it).
    Upgrade(Vec<u8>),
    /// A complete HTTP request head without `Upgrade: websocket` (the bytes read).
    Plain(Vec<u8>),
}

/// Reads the request head (up to the blank line; the socket's byte cap bounds it) and says
/// whether it asks for a WebSocket upgrade. The bytes read are returned for replay.
pub(crate) async fn read_head<S: AsyncRead + Unpin>(io: &mut S) -> io::Result<Head> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = io.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed during the upgrade request",
            ));
        }
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = find_blank_line(&buf[from..]) {
            let head = &buf[..from + end];
            return Ok(if looks_like_http(head) && !asks_for_websocket(head) {
                Head::Plain(buf)
            } else {
                Head::Upgrade(buf)
            });
        }
    }
}

/// The offset just past the first `\r\n\r\n` in `bytes`.
fn find_blank_line(bytes: &[u8]) -> Option<usize> {
    bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4)
}

/// Whether the first line reads `METHOD target HTTP/x`: only then is a 426 the right answer
/// (anything else goes to tungstenite, which refuses it as before).
fn looks_like_http(head: &[u8]) -> bool {
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let mut words = line.trim_ascii().split(|b| *b == b' ');
    let method = words.next().unwrap_or_default();
    let _target = words.next();
    let version = words.next().unwrap_or_default();
    !method.is_empty()
        && method.iter().all(u8::is_ascii_alphabetic)
        && version.starts_with(b"HTTP/")
}

/// Whether any `Upgrade` header lists the `websocket` token (case-insensitive).
fn asks_for_websocket(head: &[u8]) -> bool {
    head.split(|b| *b == b'\n').skip(1).any(|line| {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            return false;
        };
        let (name, value) = line.split_at(colon);
        name.trim_ascii().eq_ignore_ascii_case(b"upgrade")
            && value[1..]
                .split(|b| *b == b',')
                .any(|token| token.trim_ascii().eq_ignore_ascii_case(b"websocket"))
    })
}

/// The path of the request target in the first line of `head` (without the query), for
/// an origin-form target (`GET /agent/ws?x=1 HTTP/1.1` gives `/agent/ws`).
pub(crate) fn request_path(head: &[u8]) -> Option<&str> {
    let line = head.split(|b| *b == b'\n').next()?;
    let target = line.trim_ascii().split(|b| *b == b' ').nth(1)?;
    let path = target.split(|b| *b == b'?').next()?;
    if path.first() != Some(&b'/') {
        return None;
    }
    std::str::from_utf8(path).ok()
}

/// Writes `426 Upgrade Required` with `body` and closes the write side.
pub(crate) async fn answer_426<S: AsyncWrite + Unpin>(io: &mut S, body: &str) -> io::Result<()> {
    answer(
        io,
        "426 Upgrade Required",
        "Upgrade: websocket\r\nConnection: Upgrade, close",
        body,
    )
    .await
}

/// Writes `404 Not Found` with `body` and closes the write side.
pub(crate) async fn answer_404<S: AsyncWrite + Unpin>(io: &mut S, body: &str) -> io::Result<()> {
    answer(io, "404 Not Found", "Connection: close", body).await
}

/// Writes a complete response (`status`, the `headers` lines, a text `body`) and closes
/// the write side.
async fn answer<S: AsyncWrite + Unpin>(
    io: &mut S,
    status: &str,
    headers: &str,
    body: &str,
) -> io::Result<()> {
    let response = format!(
        "HTTP/1.1 {status}\r\n{headers}\r\n\
         Content-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    io.write_all(response.as_bytes()).await?;
    io.flush().await?;
    io.shutdown().await
}

/// A socket that first yields bytes already read from it (the request head), then reads on.
pub(crate) struct Replay<S> {
    head: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S> Replay<S> {
    /// `inner`, with `head` to be read first.
    pub(crate) fn new(head: Vec<u8>, inner: S) -> Self {
        Self { head, at: 0, inner }
    }

    /// The wrapped socket.
    pub(crate) fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Replay<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.at < this.head.len() {
            let rest = &this.head[this.at..];
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            this.at += n;
            if this.at == this.head.len() {
                this.head = Vec::new();
                this.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

crate::stream::write_through!(Replay);

#[cfg(test)]
mod tests {
    use super::*;

    async fn head_of(bytes: &[u8]) -> io::Result<Head> {
        let mut r = bytes;
        read_head(&mut r).await
    }

    #[tokio::test]
    async fn tells_upgrades_from_plain_requests() {
        let plain = b"GET / HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n";
        assert!(matches!(head_of(plain).await, Ok(Head::Plain(_))));
        let up = b"GET /ws HTTP/1.1\r\nHost: x\r\nconnection: Upgrade\r\nUPGRADE:  h2c, WebSocket \r\n\r\n";
        match head_of(up).await {
            Ok(Head::Upgrade(bytes)) => assert_eq!(bytes, up),
            _ => panic!("an upgrade was taken for plain HTTP"),
        }
        // Not HTTP at all: left to tungstenite (which refuses it).
        assert!(matches!(
            head_of(b"\x16\x03\x01 hello\r\n\r\n").await,
            Ok(Head::Upgrade(_))
        ));
        assert!(head_of(b"GET / HTTP/1.1\r\nHost").await.is_err());
    }

    #[test]
    fn request_path_is_the_target_without_its_query() {
        assert_eq!(
            request_path(b"GET /agent/ws?t=1 HTTP/1.1\r\nHost: x\r\n\r\n"),
            Some("/agent/ws")
        );
        assert_eq!(request_path(b"GET / HTTP/1.1\r\n\r\n"), Some("/"));
        assert_eq!(request_path(b"GET http://x/ HTTP/1.1\r\n\r\n"), None);
        assert_eq!(request_path(b"\x16\x03\x01"), None);
    }

    #[tokio::test]
    async fn replay_yields_the_head_then_the_rest() {
        let rest: &[u8] = b" world";
        let mut r = Replay::new(b"hello".to_vec(), rest);
        let mut out = String::new();
        r.read_to_string(&mut out).await.expect("read");
        assert_eq!(out, "hello world");
    }
}

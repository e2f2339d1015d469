//! The server's socket type: plain or TLS, with a byte cap during the handshake.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// An accepted socket, plain or TLS.
pub(crate) enum ServerIo {
    /// `ws://`
    Plain(TcpStream),
    /// `wss://` (boxed: the TLS state is large)
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl AsyncRead for ServerIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ServerIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(s) => s.is_write_vectored(),
            Self::Tls(s) => s.is_write_vectored(),
        }
    }
}

/// Counts bytes read while armed and fails the read once more than the cap arrived.
///
/// Wraps the socket during the upgrade so a client cannot make the handshake buffer grow
/// past `max_header_bytes`; disarmed once the upgrade is done.
pub(crate) struct Capped<S> {
    inner: S,
    remaining: Option<usize>,
}

impl<S> Capped<S> {
    /// Wraps `inner`, allowing `cap` bytes to be read until [`disarm`](Self::disarm).
    pub(crate) fn new(inner: S, cap: usize) -> Self {
        Self {
            inner,
            remaining: Some(cap),
        }
    }

    /// Stops counting.
    pub(crate) fn disarm(&mut self) {
        self.remaining = None;
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Capped<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let res = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let (Poll::Ready(Ok(())), Some(remaining)) = (&res, this.remaining.as_mut()) {
            let n = buf.filled().len() - before;
            if n > *remaining {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "upgrade request larger than max_header_bytes",
                )));
            }
            *remaining -= n;
        }
        res
    }
}

/// Implements `AsyncWrite` for a read-side wrapper `$ty<S>` by passing every call through to
/// its `inner` stream (the wrappers here change only what is read).
macro_rules! write_through {
    ($ty:ident) => {
        impl<S: AsyncWrite + Unpin> AsyncWrite for $ty<S> {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
            }

            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Pin::new(&mut self.get_mut().inner).poll_flush(cx)
            }

            fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[io::IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                self.inner.is_write_vectored()
            }
        }
    };
}
pub(crate) use write_through;

write_through!(Capped);

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn cap_fails_the_read_past_the_limit_until_disarmed() {
        let data = [b'x'; 100];
        let mut c = Capped::new(&data[..], 60);
        let mut buf = [0u8; 50];
        assert_eq!(c.read(&mut buf).await.ok(), Some(50));
        assert!(c.read(&mut buf).await.is_err());
        let mut c = Capped::new(&data[..], 60);
        c.disarm();
        let mut all = Vec::new();
        assert_eq!(c.read_to_end(&mut all).await.ok(), Some(100));
    }
}

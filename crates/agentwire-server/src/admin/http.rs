//! A small HTTP/1.1 server for plain GET endpoints (the admin listener, and the MCPW
//! example's `--metrics` port), written on `httparse` rather than a full HTTP stack: the
//! endpoints answer a short text to one GET, so the whole server is one request per
//! connection, then `Connection: close`.
//!
//! What a hostile client can do is bounded: the request head is capped
//! ([`HttpLimits::max_head_bytes`], else `431`), reading it and writing the answer each
//! have a deadline ([`HttpLimits::timeout`]; a head not complete in time gets `408`), and
//! at most [`HttpLimits::max_connections`] connections are served at once, at most
//! [`HttpLimits::max_connections_per_address`] of them from one client address (IPv6: one
//! /64), so one client holding idle connections cannot lock the others out (more are closed
//! at accept). A method other than `GET` gets `405` with `Allow: GET`, a path no endpoint
//! serves `404`, a head that is not HTTP `400`.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv6Addr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// An answer: status, content type and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The HTTP status code.
    pub status: u16,
    /// The `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub body: String,
}

impl Response {
    /// A `text/plain` answer.
    pub fn text(status: u16, body: impl Into<String>) -> Self {
        Self {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
        }
    }

    /// A `200` with `body` of `content_type`.
    pub fn ok(content_type: &'static str, body: String) -> Self {
        Self {
            status: 200,
            content_type,
            body,
        }
    }
}

/// An endpoint's answer, computed after the request was read.
pub type Reply = Pin<Box<dyn Future<Output = Response> + Send>>;

/// Bounds of the server (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpLimits {
    /// Bytes of request head read at most; a longer head gets `431`. Default 8 KiB.
    pub max_head_bytes: usize,
    /// Time to read the request head, and again to write the answer. Default 5 s.
    pub timeout: Duration,
    /// Connections served at once; more are closed at accept. Default 64.
    pub max_connections: usize,
    /// Connections served at once from one client address (IPv6: one /64); more from it
    /// are closed at accept. Default 8.
    pub max_connections_per_address: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            max_head_bytes: 8 << 10,
            timeout: Duration::from_secs(5),
            max_connections: 64,
            max_connections_per_address: 8,
        }
    }
}

/// Most headers a request may have (httparse's table is on the stack).
const MAX_HEADERS: usize = 64;

/// Serves `listener` until the task running it is dropped or aborted (the connections in
/// progress go with it). `route` maps the request path (without its query) to the answer,
/// or `None` for `404`.
pub async fn serve<R>(listener: TcpListener, limits: HttpLimits, route: R)
where
    R: Fn(&str) -> Option<Reply> + Send + Sync + 'static,
{
    let route = Arc::new(route);
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let per_address = Arc::new(PerAddress::default());
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((sock, peer)) => {
                    let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                        tracing::debug!(%peer, "admin: too many connections; closed");
                        continue;
                    };
                    let Some(mine) = per_address.take(peer.ip(), limits.max_connections_per_address)
                    else {
                        tracing::debug!(%peer, "admin: too many connections from this address; closed");
                        continue;
                    };
                    let route = Arc::clone(&route);
                    conns.spawn(async move {
                        answer(sock, limits, &*route).await;
                        drop((slot, mine));
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "admin: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

/// Connections in progress per client address.
#[derive(Default)]
struct PerAddress(Mutex<HashMap<IpAddr, usize>>);

/// One connection of `ip` counted in a [`PerAddress`]; uncounted on drop.
struct AddressSlot(Arc<PerAddress>, IpAddr);

impl PerAddress {
    /// Counts one more connection of `ip` (IPv6 by its /64) if it has fewer than `max`.
    fn take(self: &Arc<Self>, ip: IpAddr, max: usize) -> Option<AddressSlot> {
        let key = match ip {
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => {
                    let s = v6.segments();
                    IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
                }
            },
            v4 => v4,
        };
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let n = map.entry(key).or_default();
        if *n >= max.max(1) {
            return None;
        }
        *n += 1;
        Some(AddressSlot(Arc::clone(self), key))
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut map = self.0 .0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = map.get_mut(&self.1) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                map.remove(&self.1);
            }
        }
    }
}

/// What reading the request head gave.
enum Request {
    Get(String),
    Answer(Response),
}

/// Reads one request from `sock` and answers it.
async fn answer<R>(mut sock: TcpStream, limits: HttpLimits, route: &R)
where
    R: Fn(&str) -> Option<Reply> + ?Sized,
{
    let request = match tokio::time::timeout(limits.timeout, read_request(&mut sock, limits)).await
    {
        Ok(Ok(r)) => r,
        Ok(Err(_)) => return, // the peer went away
        Err(_) => Request::Answer(Response::text(408, "request head not received in time\n")),
    };
    let response = match request {
        Request::Answer(r) => r,
        Request::Get(path) => match route(&path) {
            Some(reply) => reply.await,
            None => Response::text(404, "not found\n"),
        },
    };
    let write = async {
        sock.write_all(&head(&response)).await?;
        sock.write_all(response.body.as_bytes()).await?;
        sock.shutdown().await
    };
    let _ = tokio::time::timeout(limits.timeout, write).await;
}

/// Reads the request head (bounded) and decides: a GET of a path, or an error answer.
async fn read_request(sock: &mut TcpStream, limits: HttpLimits) -> io::Result<Request> {
    let mut buf = vec![0u8; limits.max_head_bytes.max(16)];
    let mut len = 0;
    loop {
        let n = sock.read(&mut buf[len..]).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        len += n;
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf[..len]) {
            Ok(httparse::Status::Complete(_)) => {
                let method = req.method.unwrap_or_default();
                if method != "GET" {
                    return Ok(Request::Answer(Response::text(405, "GET only\n")));
                }
                let target = req.path.unwrap_or_default();
                let path = target.split('?').next().unwrap_or_default();
                return Ok(Request::Get(path.to_owned()));
            }
            Ok(httparse::Status::Partial) if len == buf.len() => {
                return Ok(Request::Answer(Response::text(
                    431,
                    "request head too large\n",
                )));
            }
            Ok(httparse::Status::Partial) => {}
            Err(httparse::Error::TooManyHeaders) => {
                return Ok(Request::Answer(Response::text(431, "too many headers\n")));
            }
            Err(_) => return Ok(Request::Answer(Response::text(400, "bad request\n"))),
        }
    }
}

/// The status line and headers of `r`.
fn head(r: &Response) -> Vec<u8> {
    let reason = match r.status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "",
    };
    let allow = if r.status == 405 {
        "Allow: GET\r\n"
    } else {
        ""
    };
    format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{allow}\
         Cache-Control: no-store\r\nConnection: close\r\n\r\n",
        r.status,
        r.content_type,
        r.body.len()
    )
    .into_bytes()
}

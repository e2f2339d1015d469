//! The upgrade hook: accept or reject a WebSocket upgrade before it happens.

use std::borrow::Cow;
use std::net::SocketAddr;

use agentwire_core::{CloseCode, FrameBuf};

/// What an [`UpgradeHook`] sees of an upgrade request.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct UpgradeRequest<'a> {
    /// The request path without the query, e.g. `/agent/ws`.
    pub path: &'a str,
    /// The query string after `?`, if any.
    pub query: Option<&'a str>,
    /// Request headers in arrival order, names lowercased.
    pub headers: &'a [(String, String)],
    /// Subprotocols offered in `Sec-WebSocket-Protocol`, in the client's order.
    pub subprotocols: &'a [String],
    /// The TCP peer.
    pub remote_addr: SocketAddr,
}

impl UpgradeRequest<'_> {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether the client offered subprotocol `proto`.
    pub fn offers(&self, proto: &str) -> bool {
        self.subprotocols.iter().any(|p| p == proto)
    }
}

/// The hook accepts the upgrade.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Accept {
    /// The subprotocol to echo in `Sec-WebSocket-Protocol`; it must be one the client
    /// offered (otherwise it is ignored and the connection has none).
    pub subprotocol: Option<String>,
}

impl Accept {
    /// Accepts without a subprotocol.
    pub fn new() -> Self {
        Self::default()
    }

    /// Accepts and chooses `proto`.
    pub fn with_subprotocol(proto: impl Into<String>) -> Self {
        Self {
            subprotocol: Some(proto.into()),
        }
    }
}

/// The hook rejects the upgrade: the client gets this HTTP status and body instead of `101`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reject {
    /// The HTTP status, e.g. 401, 426, 429 or 503. A status outside `300..=599` is sent as 500.
    pub status: u16,
    /// The response body (plain text).
    pub body: String,
}

impl Reject {
    /// A rejection with `status` and `body`.
    pub fn new(status: u16, body: impl Into<String>) -> Self {
        Self {
            status,
            body: body.into(),
        }
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401, "unauthorized")
    }

    /// 426 Upgrade Required (e.g. a required subprotocol is missing).
    pub fn upgrade_required() -> Self {
        Self::new(426, "upgrade required")
    }

    /// 429 Too Many Requests.
    pub fn too_many_requests() -> Self {
        Self::new(429, "too many requests")
    }

    /// 503 Service Unavailable (also what the server answers at `max_connections`).
    pub fn unavailable() -> Self {
        Self::new(503, "server full")
    }
}

/// How a server refuses a connection over
/// [`ServerConfig::max_connections_per_address`](crate::ServerConfig::max_connections_per_address):
/// the way its protocol refuses connections when it is full.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// Answer the upgrade request with this HTTP status and body instead of `101` (what an
    /// HTTP-level protocol such as mcpw does at its connection cap).
    Http(Reject),
    /// Finish the upgrade, send `frame` (the protocol's own error message, if it has one
    /// that needs no per-connection data), then close with `code` and `reason` (what
    /// chopsticks, the bus, the relay and llmrtc do when they are full). The machine never
    /// sees the connection.
    Close {
        /// The close code, e.g. 1008 or 1013.
        code: CloseCode,
        /// The close reason (cut to 123 bytes), e.g. `too-many-connections`.
        reason: Cow<'static, str>,
        /// A message sent before the close frame.
        frame: Option<FrameBuf>,
    },
}

impl Refusal {
    /// Refuses with an HTTP status and body before the upgrade.
    pub fn http(status: u16, body: impl Into<String>) -> Self {
        Self::Http(Reject::new(status, body))
    }

    /// Refuses by upgrading and closing at once with `code` and `reason`.
    pub fn close(code: CloseCode, reason: impl Into<Cow<'static, str>>) -> Self {
        Self::Close {
            code,
            reason: reason.into(),
            frame: None,
        }
    }

    /// Sends `frame` before the close frame (only for [`Refusal::Close`]; otherwise a no-op).
    pub fn with_frame(mut self, message: FrameBuf) -> Self {
        if let Self::Close { frame, .. } = &mut self {
            *frame = Some(message);
        }
        self
    }
}

impl Default for Refusal {
    /// HTTP 429 "too many connections from this address".
    fn default() -> Self {
        Self::http(429, "too many connections from this address\n")
    }
}

/// Decides, before the upgrade, whether a request becomes a WebSocket connection.
///
/// It runs in the connection's handshake task, so it must not block for long. Closures
/// `Fn(&UpgradeRequest<'_>) -> Result<Accept, Reject>` implement it.
pub trait UpgradeHook: Send + Sync + 'static {
    /// Accepts (optionally choosing a subprotocol) or rejects with an HTTP status.
    fn check(&self, req: &UpgradeRequest<'_>) -> Result<Accept, Reject>;
}

impl<F> UpgradeHook for F
where
    F: Fn(&UpgradeRequest<'_>) -> Result<Accept, Reject> + Send + Sync + 'static,
{
    fn check(&self, req: &UpgradeRequest<'_>) -> Result<Accept, Reject> {
        self(req)
    }
}

/// Decides at accept, from the peer's address alone, whether a TCP connection is served
/// (an IP allowlist). A refused socket is closed at once: before TLS, before any HTTP, and
/// without touching the pending-handshake counts.
///
/// It runs in the accept loop, so it must be quick and must not block. Closures
/// `Fn(SocketAddr) -> bool` implement it. Set it with
/// [`ServerConfig::with_address_filter`](crate::ServerConfig::with_address_filter) or
/// [`ListenerConfig::with_address_filter`](crate::ListenerConfig::with_address_filter).
pub trait AddressFilter: Send + Sync + 'static {
    /// Whether a connection from `peer` is served.
    fn allows(&self, peer: SocketAddr) -> bool;
}

impl<F> AddressFilter for F
where
    F: Fn(SocketAddr) -> bool + Send + Sync + 'static,
{
    fn allows(&self, peer: SocketAddr) -> bool {
        self(peer)
    }
}

/// Header pairs with lowercased names and lossily decoded values, in arrival order (the
/// form `PeerInfo` and `UpgradeRequest` carry).
pub(crate) fn header_pairs(
    headers: &tokio_tungstenite::tungstenite::http::HeaderMap,
) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_ascii_lowercase(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

//! The upgrade hook: accept or reject a WebSocket upgrade before it happens.

use std::net::SocketAddr;

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

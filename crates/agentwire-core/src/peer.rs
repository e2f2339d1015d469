//! What the driver knows about a connection's remote side.

use std::net::SocketAddr;

/// Facts about a connection's peer, captured at the WebSocket upgrade.
///
/// Server machines use it for per-IP limits and for anything the upgrade carried
/// (path, headers such as `Authorization`, the chosen subprotocol).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeerInfo {
    /// The remote socket address, when the transport has one.
    pub remote_addr: Option<SocketAddr>,
    /// The request path of the upgrade without its query, e.g. `/agent/ws` (client
    /// drivers: the URL's path).
    pub path: String,
    /// The query string of the upgrade request without the `?`, e.g. `token=abc&v=2`
    /// (client drivers: the URL's query); `None` when the request had none. Undecoded, as
    /// it came on the wire: the machine parses what it needs.
    pub query: Option<String>,
    /// Request headers of the upgrade in arrival order, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The subprotocol the server chose, if any.
    pub subprotocol: Option<String>,
}

impl PeerInfo {
    /// A peer at `remote_addr` with path `/`, no query, no headers and no subprotocol.
    pub fn new(remote_addr: Option<SocketAddr>) -> Self {
        Self {
            remote_addr,
            path: "/".to_owned(),
            query: None,
            headers: Vec::new(),
            subprotocol: None,
        }
    }

    /// Sets the request path.
    pub fn with_path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }

    /// Sets the query string (without the `?`).
    pub fn with_query(mut self, query: impl Into<String>) -> Self {
        self.query = Some(query.into());
        self
    }

    /// Adds a header (the name is lowercased).
    pub fn with_header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_ascii_lowercase(), value.into()));
        self
    }

    /// Sets the chosen subprotocol.
    pub fn with_subprotocol(mut self, proto: impl Into<String>) -> Self {
        self.subprotocol = Some(proto.into());
        self
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_lookup_is_case_insensitive() {
        let p = PeerInfo::new(None)
            .with_path("/ws")
            .with_query("token=a%20b")
            .with_header("Authorization", "Bearer x")
            .with_subprotocol("mcp.v1");
        assert_eq!(p.header("authorization"), Some("Bearer x"));
        assert_eq!(p.header("AUTHORIZATION"), Some("Bearer x"));
        assert_eq!(p.header("x-missing"), None);
        assert_eq!(p.path, "/ws");
        assert_eq!(p.query.as_deref(), Some("token=a%20b"));
        assert_eq!(PeerInfo::new(None).query, None);
        assert_eq!(p.subprotocol.as_deref(), Some("mcp.v1"));
    }
}

//! Relay configuration and limits, with documented defaults.

use std::time::Duration;

use agentwire_core::{Rate, DEFAULT_MAX_JSON_DEPTH};

/// The one endpoint of the protocol (spec §2).
pub const ENDPOINT_PATH: &str = "/agent/ws";

/// The session a `relay.join` without a (non-blank) `sessionId` joins.
pub const DEFAULT_SESSION: &str = "default";

/// Whether a WebSocket upgrade to `path` (without the query) should be accepted: only
/// [`ENDPOINT_PATH`], exactly.
///
/// Call it from the transport's upgrade hook, so other paths are refused before the upgrade
/// (with agentwire-tokio: reject with 404). The [`Relay`](crate::Relay) checks the path
/// again on connect and closes a wrong one with 1008.
pub fn accept_path(path: &str) -> bool {
    path == ENDPOINT_PATH
}

/// A token bucket per connection: `burst` messages at once, refilled at `per_second`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Sustained messages per second. Default 100.
    pub per_second: u32,
    /// Messages that may arrive at once after a quiet period. Default 200.
    pub burst: u32,
}

impl Default for RateLimit {
    fn default() -> Self {
        Self {
            per_second: 100,
            burst: 200,
        }
    }
}

impl From<RateLimit> for Rate {
    fn from(r: RateLimit) -> Self {
        Self::per_second(r.per_second, r.burst)
    }
}

/// Bounds on what peers can make the [`Relay`](crate::Relay) hold or do.
///
/// Every collection that peer input can grow has a limit here. A message over a limit is
/// answered with an `error` whose code is
/// [`LIMIT_EXCEEDED`](crate::ErrorCode::LIMIT_EXCEEDED) (with `replyTo` when the message had an
/// `id`) and is not forwarded; the connection stays open.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Connections served at once. Default 1,024; one more gets an error and close 1013
    /// `server-full`.
    pub max_connections: usize,
    /// Sessions at once. Default 256; a join that would create one more is refused.
    pub max_sessions: usize,
    /// Agents in one session. Default 64; one more agent's join is refused.
    pub max_agents_per_session: usize,
    /// Largest message body, in bytes. Default 1 MiB (1,048,576), exactly the limit allowed;
    /// checked before parsing. Snapshots carry the whole `uiSpec` and `messageHistory`, so
    /// keep it generous; the transport's own cap should match it.
    pub max_message_bytes: usize,
    /// Requests (agent messages with an `id`) one agent may have awaiting the host's reply.
    /// Default 256; one more is refused. Entries also expire after
    /// [`RelayConfig::pending_timeout`].
    pub max_pending_per_agent: usize,
    /// Longest `id` the relay keeps, in bytes. Default 256; a longer one is refused.
    pub max_id_bytes: usize,
    /// Longest `sessionId` in `relay.join`, in bytes (after trimming). Default 256.
    pub max_session_id_bytes: usize,
    /// Longest agent display name, in bytes; longer names are cut (at a character
    /// boundary), not refused. Default 128.
    pub max_name_bytes: usize,
    /// Messages per connection over time, counted before anything else is done with them.
    /// Default `Some(100/s, burst 200)`; `None` turns rate limiting off.
    pub rate: Option<RateLimit>,
    /// Deepest nesting of arrays and objects in a message, the envelope object counting as
    /// one level. Default 127: the study-log line that records the payload nests exactly as
    /// deep as the message, and serde_json (which `relay_log` and most readers use) reads at
    /// most 127 levels. A deeper message is refused with INVALID_MESSAGE before it is
    /// forwarded or logged (checked with `agentwire_core::check_json_depth`).
    pub max_json_depth: usize,
    /// Study-log bytes one relay session may produce per study session: the records the
    /// relay emits are counted (an upper bound of each JSONL line's length) from the
    /// session's last forwarded `session.ended` (or from the relay's start). Default
    /// `Some(256 MiB)`, about an hour of an agent polling a 50 KB snapshot every 2 s. A
    /// message whose records would pass it is refused with LIMIT_EXCEEDED and neither
    /// forwarded nor logged; the relay's own records beyond it are dropped and counted
    /// ([`RelayStats::log_records_dropped`](crate::RelayStats::log_records_dropped)).
    /// `session.end` and `session.ended` always pass, so a study can end. `None`: no cap.
    pub max_log_bytes_per_session: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 1024,
            max_sessions: 256,
            max_agents_per_session: 64,
            max_message_bytes: 1 << 20,
            max_pending_per_agent: 256,
            max_id_bytes: 256,
            max_session_id_bytes: 256,
            max_name_bytes: 128,
            rate: Some(RateLimit::default()),
            max_json_depth: DEFAULT_MAX_JSON_DEPTH - 1,
            max_log_bytes_per_session: Some(256 << 20),
        }
    }
}

/// Configuration of the [`Relay`](crate::Relay).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RelayConfig {
    /// The only path a connection may come in on. Default `Some("/agent/ws")`; a connection
    /// whose [`PeerInfo::path`](agentwire_core::PeerInfo::path) differs is closed 1008
    /// `unknown-path` at once. `None` accepts any path (for harnesses that do not set one).
    pub path: Option<String>,
    /// Whether to greet every connection with `relay.hello`. Default `true`, as the reference
    /// relay does.
    pub hello: bool,
    /// Whether to send the host `relay.presence` when its session's agents change. Default
    /// `true`, as the reference relay does.
    pub presence: bool,
    /// Whether a message without `v` is accepted. Default `false`: the spec says `v` is always
    /// `"mvp-0.2"`. A wrong `v` is refused either way.
    pub allow_missing_version: bool,
    /// Whether to emit a [`RelayEvent::Log`](crate::RelayEvent::Log) study-log record for every
    /// message. Default `true`.
    pub log_records: bool,
    /// Time a connection has to send `relay.join`. Default `Some(30 s)`; then close 1008
    /// `join-required`. `None` waits forever, as the reference relay.
    pub join_timeout: Option<Duration>,
    /// How long the relay remembers an agent request awaiting the host's reply. Default
    /// `Some(60 s)` (the reference agent gives up after 12 s); a reply after that is dropped
    /// as unroutable. `None` keeps requests until answered or their agent or host leaves.
    pub pending_timeout: Option<Duration>,
    /// Limits on what peers can make the relay hold.
    pub limits: Limits,
}

impl Default for RelayConfig {
    fn default() -> Self {
        Self {
            path: Some(ENDPOINT_PATH.to_owned()),
            hello: true,
            presence: true,
            allow_missing_version: false,
            log_records: true,
            join_timeout: Some(Duration::from_secs(30)),
            pending_timeout: Some(Duration::from_secs(60)),
            limits: Limits::default(),
        }
    }
}

impl RelayConfig {
    /// Whether a connection on `path` is accepted under this config.
    pub fn accepts_path(&self, path: &str) -> bool {
        self.path.as_deref().is_none_or(|p| p == path)
    }

    /// Sets (or, with `None`, removes) the required path.
    pub fn with_path(mut self, path: Option<&str>) -> Self {
        self.path = path.map(str::to_owned);
        self
    }

    /// Turns the `relay.hello` greeting on or off.
    pub fn with_hello(mut self, hello: bool) -> Self {
        self.hello = hello;
        self
    }

    /// Turns `relay.presence` to hosts on or off.
    pub fn with_presence(mut self, presence: bool) -> Self {
        self.presence = presence;
        self
    }

    /// Accepts messages without `v`.
    pub fn with_missing_version_allowed(mut self, allow: bool) -> Self {
        self.allow_missing_version = allow;
        self
    }

    /// Sets the join deadline.
    pub fn with_join_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.join_timeout = timeout;
        self
    }

    /// Sets how long pending requests are remembered.
    pub fn with_pending_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.pending_timeout = timeout;
        self
    }

    /// Sets the limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }
}

/// Bounds on what peers can make the [`Host`](crate::Host) hold.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostLimits {
    /// Largest message body the host accepts from the relay, in bytes. Default 1 MiB
    /// (1,048,576), the relay's own default; checked before parsing. A larger frame is
    /// dropped and reported.
    pub max_message_bytes: usize,
    /// Entries the chat timeline holds. Default 1,000; one more `agent.message` is answered
    /// `LIMIT_EXCEEDED`, one more participant message is refused to the caller. The timeline
    /// travels whole in every snapshot, so it is bounded.
    pub max_history_entries: usize,
    /// Pushes (`user.message`, `session.ended`) kept while the host is not joined to the
    /// relay, sent in order once it is. Default 64; beyond it
    /// [`Host::user_message`](crate::Host::user_message) is refused.
    pub max_queued_pushes: usize,
}

impl Default for HostLimits {
    fn default() -> Self {
        Self {
            max_message_bytes: 1 << 20,
            max_history_entries: 1000,
            max_queued_pushes: 64,
        }
    }
}

/// Configuration of the [`Host`](crate::Host).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostConfig {
    /// The relay session the host joins on every connect. Default `"default"`, as the
    /// reference host and agents. This is the relay's routing key, not the study session id
    /// (`s-YYYYMMDD-NNN`), which changes with every `session.start`.
    pub relay_session: String,
    /// Time the relay has to answer `relay.join`. Default `Some(10 s)`; then the host closes
    /// the connection (1000 `join-timeout`) so the driver reconnects. `None` waits forever.
    pub join_timeout: Option<Duration>,
    /// Time the application has to confirm the log flush of a session end
    /// ([`Host::confirm_flush`](crate::Host::confirm_flush)). Default `Some(10 s)`; then the
    /// end fails as if [`Host::fail_flush`](crate::Host::fail_flush) had been called.
    /// `None` waits forever.
    pub flush_timeout: Option<Duration>,
    /// Limits on what peers can make the host hold.
    pub limits: HostLimits,
}

impl Default for HostConfig {
    fn default() -> Self {
        Self {
            relay_session: DEFAULT_SESSION.to_owned(),
            join_timeout: Some(Duration::from_secs(10)),
            flush_timeout: Some(Duration::from_secs(10)),
            limits: HostLimits::default(),
        }
    }
}

impl HostConfig {
    /// Sets the relay session to join.
    pub fn with_relay_session(mut self, session: impl Into<String>) -> Self {
        self.relay_session = session.into();
        self
    }

    /// Sets the time the relay has to answer `relay.join`.
    pub fn with_join_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.join_timeout = timeout;
        self
    }

    /// Sets the time the application has to confirm a log flush.
    pub fn with_flush_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.flush_timeout = timeout;
        self
    }

    /// Sets the limits.
    pub fn with_limits(mut self, limits: HostLimits) -> Self {
        self.limits = limits;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_limit_is_cores_token_bucket_rate() {
        let limit = RateLimit {
            per_second: 10,
            burst: 3,
        };
        assert_eq!(Rate::from(limit), Rate::per_second(10, 3));
        assert_eq!(Rate::from(RateLimit::default()), Rate::per_second(100, 200));
    }

    #[test]
    fn only_the_endpoint_path_is_accepted() {
        assert!(accept_path("/agent/ws"));
        for p in ["/", "/agent", "/agent/ws/", "/AGENT/WS", "/agent/ws2", ""] {
            assert!(!accept_path(p), "{p}");
        }
        assert!(RelayConfig::default().accepts_path("/agent/ws"));
        assert!(!RelayConfig::default().accepts_path("/"));
        assert!(RelayConfig::default().with_path(None).accepts_path("/"));
    }
}

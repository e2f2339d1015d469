//! `[relay]`: the agent relay and its study log.

use std::path::PathBuf;
use std::time::Duration;

use agentwire::agent_relay::{Limits, RateLimit, RelayConfig};
use serde::{Deserialize, Serialize};

use super::transport::Transport;
use crate::relay::log_writer::SyncPolicy;

/// When the study log is `fsync`ed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum RelaySync {
    /// Before each `session.ended` is forwarded, and when a session's file is closed.
    /// Default.
    #[default]
    SessionEnd,
    /// After every record as well.
    EveryRecord,
}

/// `[relay]`: the relay, its study log and limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct RelaySection {
    /// Serve the relay. Default true.
    pub enabled: bool,
    /// Name of the `[[listener]]` it is served on. Default `"main"`.
    pub listener: String,
    /// URL path on that listener. Default `"/agent/ws"` (the spec's path).
    pub path: String,
    /// Directory of the study log (one `.jsonl` file per session); created if missing; a
    /// relative path is from the directory the server starts in. Default
    /// `"./agentwire-logs"`.
    pub log_dir: PathBuf,
    /// `"session-end"` or `"every-record"`. Default `"session-end"`.
    pub sync: RelaySync,
    /// Write the study log at all. Default true.
    pub log_records: bool,
    /// Greet every connection with `relay.hello`. Default true.
    pub hello: bool,
    /// Send hosts `relay.presence` when their agents change. Default true.
    pub presence: bool,
    /// Accept messages without `v` (a wrong `v` is refused either way). Default false.
    pub allow_missing_version: bool,
    /// Seconds a connection has to send `relay.join` (0: wait forever). Default 30.
    pub join_timeout_secs: u64,
    /// Seconds an agent request waits for the host's reply (0: until answered). Default 60.
    pub pending_timeout_secs: u64,
    /// Connections served at once. Default 1024.
    pub max_connections: usize,
    /// Sessions at once. Default 256.
    pub max_sessions: usize,
    /// Agents in one session. Default 64.
    pub max_agents_per_session: usize,
    /// Largest message body, bytes. Default 1048576.
    pub max_message_bytes: usize,
    /// Requests one agent may have awaiting the host's reply. Default 256.
    pub max_pending_per_agent: usize,
    /// Longest `id`, bytes. Default 256.
    pub max_id_bytes: usize,
    /// Longest `sessionId`, bytes. Default 256.
    pub max_session_id_bytes: usize,
    /// Longest agent name, bytes (longer names are cut). Default 128.
    pub max_name_bytes: usize,
    /// Messages per second per connection (0: no rate limit). Default 100.
    pub rate_per_second: u32,
    /// Messages a connection may send at once after a quiet period. Default 200.
    pub rate_burst: u32,
    /// Deepest JSON nesting of a message (the envelope counts as one level). Default 127.
    pub max_json_depth: usize,
    /// Study-log bytes per relay session until its next `session.ended` (0: no cap).
    /// Default 268435456 (256 MiB).
    pub max_log_bytes_per_session: u64,
    /// Transport settings of the relay route.
    pub transport: Transport,
}

impl Default for RelaySection {
    fn default() -> Self {
        let c = RelayConfig::default();
        let l = &c.limits;
        let rate = l.rate.unwrap_or_default();
        Self {
            enabled: true,
            listener: "main".to_owned(),
            path: agentwire::agent_relay::ENDPOINT_PATH.to_owned(),
            log_dir: PathBuf::from("./agentwire-logs"),
            sync: RelaySync::SessionEnd,
            log_records: c.log_records,
            hello: c.hello,
            presence: c.presence,
            allow_missing_version: c.allow_missing_version,
            join_timeout_secs: c.join_timeout.map_or(0, |d| d.as_secs()),
            pending_timeout_secs: c.pending_timeout.map_or(0, |d| d.as_secs()),
            max_connections: l.max_connections,
            max_sessions: l.max_sessions,
            max_agents_per_session: l.max_agents_per_session,
            max_message_bytes: l.max_message_bytes,
            max_pending_per_agent: l.max_pending_per_agent,
            max_id_bytes: l.max_id_bytes,
            max_session_id_bytes: l.max_session_id_bytes,
            max_name_bytes: l.max_name_bytes,
            rate_per_second: l.rate.map_or(0, |r| r.per_second),
            rate_burst: rate.burst,
            max_json_depth: l.max_json_depth,
            max_log_bytes_per_session: l.max_log_bytes_per_session.unwrap_or(0),
            transport: Transport::default(),
        }
    }
}

impl RelaySection {
    /// The relay machine's configuration (its path is this section's `path`).
    pub fn relay_config(&self) -> RelayConfig {
        let mut limits = Limits::default();
        limits.max_connections = self.max_connections;
        limits.max_sessions = self.max_sessions;
        limits.max_agents_per_session = self.max_agents_per_session;
        limits.max_message_bytes = self.max_message_bytes;
        limits.max_pending_per_agent = self.max_pending_per_agent;
        limits.max_id_bytes = self.max_id_bytes;
        limits.max_session_id_bytes = self.max_session_id_bytes;
        limits.max_name_bytes = self.max_name_bytes;
        limits.max_json_depth = self.max_json_depth;
        limits.max_log_bytes_per_session =
            (self.max_log_bytes_per_session > 0).then_some(self.max_log_bytes_per_session);
        limits.rate = (self.rate_per_second > 0).then_some(RateLimit {
            per_second: self.rate_per_second,
            burst: self.rate_burst.max(1),
        });
        let mut cfg = RelayConfig::default()
            .with_path(Some(&self.path))
            .with_hello(self.hello)
            .with_presence(self.presence)
            .with_missing_version_allowed(self.allow_missing_version)
            .with_join_timeout(secs(self.join_timeout_secs))
            .with_pending_timeout(secs(self.pending_timeout_secs))
            .with_limits(limits);
        cfg.log_records = self.log_records;
        cfg
    }

    /// When the study log is synced.
    pub fn sync_policy(&self) -> SyncPolicy {
        match self.sync {
            RelaySync::SessionEnd => SyncPolicy::SessionEnd,
            RelaySync::EveryRecord => SyncPolicy::EveryRecord,
        }
    }
}

/// `secs` seconds, or none for 0.
fn secs(secs: u64) -> Option<Duration> {
    (secs > 0).then(|| Duration::from_secs(secs))
}

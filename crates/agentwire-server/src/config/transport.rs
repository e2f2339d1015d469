//! `[<protocol>.transport]`: the WebSocket transport settings of one protocol's route.

use std::time::Duration;

use agentwire::tokio::ServerConfig;
use serde::{Deserialize, Serialize};

/// The transport settings of one protocol (`[bus.transport]`, `[relay.transport]`, ...):
/// per-address cap, WebSocket keepalive, the read buffer and the outbound queue. Message and
/// frame size caps
/// are not here: they follow the protocol's own `max_message_bytes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct Transport {
    /// Open connections one client address (IPv6: one /64) may hold; the next is refused
    /// the way the protocol refuses a connection when it is full. Default 256.
    pub max_connections_per_address: usize,
    /// Seconds between WebSocket pings to an idle peer (0: no pings). Default 15.
    pub ping_interval_secs: u64,
    /// Seconds a peer has to answer a ping before it is dropped. Default 30.
    pub pong_timeout_secs: u64,
    /// Frames queued for one peer before it counts as a slow reader and is closed.
    /// Default 256.
    pub send_queue_frames: usize,
    /// Bytes queued for one peer before it counts as a slow reader and is closed.
    /// Default 8388608 (8 MiB).
    pub send_queue_bytes: usize,
    /// Seconds the server waits for a peer's close frame after sending its own. Default 5.
    pub close_timeout_secs: u64,
    /// Bytes of each connection's read buffer, held by every connection, idle or not, and
    /// the most read from its socket at once. Default 4096.
    pub read_buffer_bytes: usize,
}

impl Default for Transport {
    fn default() -> Self {
        let d = ServerConfig::default();
        Self {
            max_connections_per_address: d.max_connections_per_address,
            ping_interval_secs: d.limits.ping_interval.map_or(0, |p| p.as_secs()),
            pong_timeout_secs: d.limits.pong_timeout.as_secs(),
            send_queue_frames: d.limits.send_queue_frames,
            send_queue_bytes: d.limits.send_queue_bytes,
            close_timeout_secs: d.limits.close_timeout.as_secs(),
            read_buffer_bytes: d.limits.read_buffer_size,
        }
    }
}

impl Transport {
    /// `config` with these settings applied (its message and frame caps, refusal and
    /// endpoint text are kept).
    pub fn apply(&self, config: ServerConfig) -> ServerConfig {
        let limits = config
            .limits
            .clone()
            .with_ping_interval(
                (self.ping_interval_secs > 0).then(|| Duration::from_secs(self.ping_interval_secs)),
            )
            .with_pong_timeout(Duration::from_secs(self.pong_timeout_secs))
            .with_send_queue_frames(self.send_queue_frames)
            .with_send_queue_bytes(self.send_queue_bytes)
            .with_close_timeout(Duration::from_secs(self.close_timeout_secs))
            .with_read_buffer_size(self.read_buffer_bytes);
        config
            .with_limits(limits)
            .with_max_connections_per_address(self.max_connections_per_address)
    }
}

//! The client's connection states.

use std::fmt;

/// The connection states of the llmrtc web client.
///
/// ```text
/// disconnected --start--> connecting --ready--> connected --loss--> reconnecting
///      reconnecting --backoff elapsed--> connecting      (at most max_retries tries)
///      connecting/reconnecting --tries used up (or reconnect disabled)--> failed
///      failed --start--> connecting          any --close--> closed (terminal)
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConnectionState {
    /// Not started.
    Disconnected,
    /// A WebSocket is being opened, or is open and waiting for `ready`.
    Connecting,
    /// `ready` received: messages flow, heartbeats run.
    Connected,
    /// The connection was lost; waiting out the backoff before the next try.
    Reconnecting,
    /// Every try failed (or reconnecting is disabled); `start` tries again.
    Failed,
    /// Closed by the application; terminal.
    Closed,
}

impl ConnectionState {
    /// The web client's name for the state (`"connected"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disconnected => "disconnected",
            Self::Connecting => "connecting",
            Self::Connected => "connected",
            Self::Reconnecting => "reconnecting",
            Self::Failed => "failed",
            Self::Closed => "closed",
        }
    }
}

impl fmt::Display for ConnectionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

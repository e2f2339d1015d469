//! `ClientConfig`: the client's timers, reconnect policy and limits.

use std::time::Duration;

use crate::codec::DEFAULT_MAX_MESSAGE_BYTES;

/// How an [`LlmrtcClient`](super::LlmrtcClient) reconnects after losing its connection.
///
/// The wait before try `n` (0-based, counted since the last `ready`) is
/// `min(base_delay * 2^n, max_delay)` plus a uniform jitter of up to `jitter_percent` % of
/// that, drawn from the client's injected [`JitterSource`](super::JitterSource). With the
/// defaults: about 1 s, 2 s, 4 s, 8 s, 16 s (each + up to 30 %), then `failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reconnection {
    /// Whether to reconnect at all; when `false`, a lost or failed connection ends in
    /// `failed`. Default: `true`.
    pub enabled: bool,
    /// Tries after a loss before giving up (`failed`). Default: 5 (INTEROP.md).
    pub max_retries: u32,
    /// The first wait. Default: 1 s.
    pub base_delay: Duration,
    /// The largest wait before jitter. Default: 30 s.
    pub max_delay: Duration,
    /// Jitter bound as a percentage of the wait (added, never subtracted). Default: 30.
    pub jitter_percent: u32,
}

impl Default for Reconnection {
    fn default() -> Self {
        Self {
            enabled: true,
            max_retries: 5,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
            jitter_percent: 30,
        }
    }
}

impl Reconnection {
    /// No reconnecting: a lost connection ends in `failed`.
    pub fn disabled() -> Self {
        Self {
            enabled: false,
            ..Self::default()
        }
    }

    /// The wait before try `attempt` (0-based) given a random `rand`; deterministic.
    pub fn delay(&self, attempt: u32, rand: u64) -> Duration {
        let base = 2u32
            .checked_pow(attempt)
            .and_then(|f| self.base_delay.checked_mul(f))
            .map_or(self.max_delay, |d| d.min(self.max_delay));
        let base_ns = u64::try_from(base.as_nanos()).unwrap_or(u64::MAX);
        let bound = base_ns / 100 * u64::from(self.jitter_percent.min(100));
        let extra = if bound == 0 { 0 } else { rand % (bound + 1) };
        base.saturating_add(Duration::from_nanos(extra))
    }
}

/// Configuration of an [`LlmrtcClient`](super::LlmrtcClient). `Default` gives the values
/// of the llmrtc web client (INTEROP.md).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClientConfig {
    /// How long a new connection may wait for `ready` before it counts as failed (closed
    /// and retried). Default: 10 s.
    pub ready_timeout: Duration,
    /// Interval between `ping`s once `ready`. Default: 15 s.
    pub ping_interval: Duration,
    /// How long a `ping` waits for its `pong` before it counts as missed. Default: 10 s.
    pub pong_timeout: Duration,
    /// Missed pongs in a row that make the client drop the connection and reconnect.
    /// Default: 2.
    pub max_missed_pongs: u32,
    /// The reconnect policy.
    pub reconnection: Reconnection,
    /// A session id to resume with `reconnect` right after the first `ready` (a session
    /// persisted across page loads or process restarts). Default: none.
    pub resume_session: Option<String>,
    /// Largest server message accepted; larger ones are reported and ignored.
    /// Default: 8 MiB ([`DEFAULT_MAX_MESSAGE_BYTES`]).
    pub max_message_bytes: usize,
    /// Largest LLM reply assembled from `llm-chunk`s; beyond it chunks still surface as
    /// events but are not appended. Default: 1 MiB.
    pub max_llm_text_bytes: usize,
    /// Largest TTS audio assembled from `tts-chunk`s (decoded bytes); beyond it the reply's
    /// audio is dropped. Default: 32 MiB (about 11 minutes of 24 kHz 16-bit mono).
    pub max_tts_audio_bytes: usize,
    /// Commands (`audio`, `attachments`, `offer`) queued while not connected; beyond it
    /// they are refused. Default: 16.
    pub max_queued: usize,
    /// Bytes of queued commands; beyond it they are refused. Default: 16 MiB.
    pub max_queued_bytes: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            ready_timeout: Duration::from_secs(10),
            ping_interval: Duration::from_secs(15),
            pong_timeout: Duration::from_secs(10),
            max_missed_pongs: 2,
            reconnection: Reconnection::default(),
            resume_session: None,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_llm_text_bytes: 1 << 20,
            max_tts_audio_bytes: 32 << 20,
            max_queued: 16,
            max_queued_bytes: 16 << 20,
        }
    }
}

impl ClientConfig {
    /// Sets the reconnect policy.
    pub fn with_reconnection(mut self, reconnection: Reconnection) -> Self {
        self.reconnection = reconnection;
        self
    }

    /// Resumes `session_id` after the first `ready`.
    pub fn with_resume_session(mut self, session_id: impl Into<String>) -> Self {
        self.resume_session = Some(session_id.into());
        self
    }

    /// Sets the ready timeout.
    pub fn with_ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = timeout;
        self
    }

    /// Sets the ping interval and pong timeout.
    pub fn with_heartbeat(mut self, interval: Duration, pong_timeout: Duration) -> Self {
        self.ping_interval = interval;
        self.pong_timeout = pong_timeout;
        self
    }
}

//! Server and client configuration and limits, with documented defaults.

use std::time::Duration;

use agentwire_core::Rate;

use crate::codec::DEFAULT_MAX_MESSAGE_BYTES;
use crate::message::IceServer;
use crate::playbook::Playbook;
use crate::vad::VadConfig;

/// Bounds on what peers can make the [`LlmrtcServer`](crate::LlmrtcServer) hold.
///
/// Every collection that peer input can grow has a limit here.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Connections at once. Default 1,024; one more gets `error RATE_LIMITED` and close
    /// 1013 `server-full` instead of `ready`.
    pub max_connections: usize,
    /// Sessions held at once, connected or waiting for a reconnect. Default 1,024. A new
    /// connection over the limit evicts the least recently active disconnected session; if
    /// every session is connected, it is refused like `max_connections`.
    pub max_sessions: usize,
    /// Largest message body in bytes, checked before parsing. Default 8 MiB
    /// ([`DEFAULT_MAX_MESSAGE_BYTES`]): one `audio` message holds a whole utterance. Larger
    /// bodies get `error INVALID_MESSAGE`; the connection stays.
    pub max_message_bytes: usize,
    /// PCM buffered for one speech segment, in bytes of 16-bit mono. Default 3,840,000
    /// (two minutes at 16 kHz). A segment that reaches it ends there (`speech-end`) and is
    /// transcribed as it is.
    pub max_segment_bytes: usize,
    /// Finished speech segments waiting for the session's current turn. Default 4; one more
    /// gets `error RATE_LIMITED` and is dropped.
    pub max_queued_turns: usize,
    /// Attachments waiting for the next turn. Default 8; more get `error RATE_LIMITED` and
    /// are dropped.
    pub max_queued_attachments: usize,
    /// Conversation history entries kept per session (user and assistant turns). Default
    /// 100; the oldest are dropped.
    pub max_history: usize,
    /// Largest LLM reply in bytes. Default 64 KiB; a longer reply fails the turn with
    /// `LLM_ERROR`.
    pub max_reply_bytes: usize,
    /// Largest transcript in bytes. Default 16 KiB; a longer one fails the turn with
    /// `STT_ERROR`.
    pub max_transcript_bytes: usize,
    /// Expired session ids remembered, so that a late `reconnect` gets `SESSION_EXPIRED`
    /// rather than `SESSION_NOT_FOUND`. Default 1,024 (oldest forgotten first).
    pub max_expired_remembered: usize,
    /// Tool rounds (LLM answers with tool calls, then is asked again) per turn in playbook
    /// mode. Default 4; one more fails the turn with `PLAYBOOK_ERROR`.
    pub max_tool_rounds: usize,
    /// Tool calls in one LLM round. Default 8; more fail the turn with `PLAYBOOK_ERROR`.
    pub max_tool_calls_per_round: usize,
    /// Messages one connection may send: default 50 per second with bursts of 100 (a
    /// client streaming 20 ms audio chunks sends 50 a second; a ping comes every 15 s). A
    /// message beyond it is dropped unread; see [`byte_rate`](Self::byte_rate) for what
    /// the client is told.
    pub message_rate: Rate,
    /// Bytes one connection may send, in tokens of 1 KiB (a message of `n` bytes takes
    /// `ceil(n / 1024)` tokens, at most the burst, so a message of any allowed size passes
    /// a full bucket). Default 1,024 per second (1 MiB/s, about 30 times real time for
    /// 16 kHz mono and 5 times for 48 kHz stereo as base64 WAV) with bursts of 16,384 (two
    /// messages of the largest size). It bounds the base64 decoding and voice detection
    /// one client can make the server do: without it, `max_message_bytes`-sized `audio`
    /// messages could come as fast as the socket carries them. A message beyond either
    /// rate is dropped unread; the first of a run of drops gets `error RATE_LIMITED`, the
    /// rest of the run are only counted
    /// ([`LlmrtcServer::dropped_messages`](crate::LlmrtcServer::dropped_messages)), so a
    /// flood gets no flood of replies; the run ends with the next message let through.
    pub byte_rate: Rate,
    /// Largest TTS audio sent whole in one `tts` message when
    /// [`ServerConfig::streaming_tts`] is off, in bytes before base64. Default 6 MiB less
    /// 1 KiB, so that the message (base64, a WAV header and the JSON around it) fits in
    /// 8 MiB, the clients' default message limit; that is over two minutes of 24 kHz
    /// 16-bit mono. A longer reply fails the turn with `TTS_ERROR`.
    pub max_tts_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 1024,
            max_sessions: 1024,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_segment_bytes: 3_840_000,
            max_queued_turns: 4,
            max_queued_attachments: 8,
            max_history: 100,
            max_reply_bytes: 64 << 10,
            max_transcript_bytes: 16 << 10,
            max_expired_remembered: 1024,
            max_tool_rounds: 4,
            max_tool_calls_per_round: 8,
            message_rate: Rate::per_second(50, 100),
            byte_rate: Rate::per_second(1024, 16 * 1024),
            max_tts_bytes: (6 << 20) - 1024,
        }
    }
}

/// How long the server waits for each provider before failing the turn with a `*_TIMEOUT`
/// error. Each is an idle time: it restarts whenever the provider reports progress (a
/// partial transcript, an LLM chunk, a TTS chunk).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProviderTimeouts {
    /// Speech-to-text. Default 30 s (`STT_TIMEOUT`).
    pub stt: Duration,
    /// LLM. Default 60 s (`LLM_TIMEOUT`).
    pub llm: Duration,
    /// Text-to-speech. Default 30 s (`TTS_TIMEOUT`).
    pub tts: Duration,
    /// One playbook tool. Default 30 s (`TOOL_ERROR`).
    pub tool: Duration,
}

impl Default for ProviderTimeouts {
    fn default() -> Self {
        Self {
            stt: Duration::from_secs(30),
            llm: Duration::from_secs(60),
            tts: Duration::from_secs(30),
            tool: Duration::from_secs(30),
        }
    }
}

/// Configuration of the [`LlmrtcServer`](crate::LlmrtcServer).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ServerConfig {
    /// ICE servers sent in every `ready`. Default none, and then `iceServers` is omitted.
    pub ice_servers: Vec<IceServer>,
    /// Time without a `ping` after which a connection is closed (1000 `heartbeat-timeout`);
    /// the session stays for a reconnect. Default `Some(45 s)`; `None` never closes.
    pub heartbeat_timeout: Option<Duration>,
    /// How long a session whose connection ended waits for a `reconnect`, counted from its
    /// last activity. Default 30 minutes.
    pub session_ttl: Duration,
    /// Whether the application answers WebRTC `offer`s ([`ServerEvent::Offer`](crate::ServerEvent::Offer),
    /// [`LlmrtcServer::signal`](crate::LlmrtcServer::signal)). Default `false`: every offer is
    /// answered `error WEBRTC_UNAVAILABLE`, as the reference server without WebRTC support.
    pub webrtc: bool,
    /// Voice activity detection thresholds.
    pub vad: VadConfig,
    /// Provider timeouts.
    pub timeouts: ProviderTimeouts,
    /// Playbook mode: stages with tools. Default `None` (a plain voice conversation).
    pub playbook: Option<Playbook>,
    /// Whether TTS audio streams as `tts-chunk`s (default `true`, as the real backend's
    /// `streamingTTS`). With `false`, the spec's non-streaming fallback: the reply's audio
    /// goes out whole in one `tts` message between `tts-start` and `tts-complete` (as the
    /// real backend sends it with `streamingTTS: false` or a TTS provider that cannot
    /// stream); [`TtsRequest::streaming`](crate::TtsRequest::streaming) tells the provider,
    /// which may answer with [`LlmrtcServer::tts_audio`](crate::LlmrtcServer::tts_audio) or
    /// still with chunks, which the server then gathers (up to
    /// [`Limits::max_tts_bytes`]) and sends whole at
    /// [`LlmrtcServer::tts_done`](crate::LlmrtcServer::tts_done). Gathered PCM goes out as
    /// `format: "wav"` (a 16-bit mono WAV file at the chunks' rate), because `tts` has no
    /// `sampleRate`; other formats are concatenated as they are.
    pub streaming_tts: bool,
    /// The rate, in Hz, that audio from a WebRTC track
    /// ([`LlmrtcServer::track_audio`](crate::LlmrtcServer::track_audio)) is resampled to
    /// before the VAD, and so the rate of its speech segments for STT. Default 16,000 (what
    /// the real backend gives its STT provider, and what speech models take); it must be
    /// a rate the VAD runs at ([`VadConfig::supports_rate`]), else
    /// [`LlmrtcServer::new`](crate::LlmrtcServer::new) refuses the configuration.
    pub track_sample_rate: u32,
    /// Limits on what peers can make the server hold.
    pub limits: Limits,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            ice_servers: Vec::new(),
            heartbeat_timeout: Some(Duration::from_secs(45)),
            session_ttl: Duration::from_secs(30 * 60),
            webrtc: false,
            vad: VadConfig::default(),
            timeouts: ProviderTimeouts::default(),
            playbook: None,
            streaming_tts: true,
            track_sample_rate: 16_000,
            limits: Limits::default(),
        }
    }
}

impl ServerConfig {
    /// Sets the ICE servers of `ready`.
    pub fn with_ice_servers(mut self, servers: Vec<IceServer>) -> Self {
        self.ice_servers = servers;
        self
    }

    /// Sets (or, with `None`, turns off) the heartbeat timeout.
    pub fn with_heartbeat_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.heartbeat_timeout = timeout;
        self
    }

    /// Sets the session TTL.
    pub fn with_session_ttl(mut self, ttl: Duration) -> Self {
        self.session_ttl = ttl;
        self
    }

    /// Turns WebRTC offer handling on or off.
    pub fn with_webrtc(mut self, webrtc: bool) -> Self {
        self.webrtc = webrtc;
        self
    }

    /// Sets the VAD thresholds.
    pub fn with_vad(mut self, vad: VadConfig) -> Self {
        self.vad = vad;
        self
    }

    /// Sets the provider timeouts.
    pub fn with_timeouts(mut self, timeouts: ProviderTimeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// Turns playbook mode on with `playbook` (checked by [`Playbook::validate`] when the
    /// server is built).
    pub fn with_playbook(mut self, playbook: Playbook) -> Self {
        self.playbook = Some(playbook);
        self
    }

    /// Turns streaming TTS (`tts-chunk`s) on, or off for whole `tts` messages.
    pub fn with_streaming_tts(mut self, streaming: bool) -> Self {
        self.streaming_tts = streaming;
        self
    }

    /// Sets the limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets the rate track audio is resampled to for the VAD and STT.
    pub fn with_track_sample_rate(mut self, hz: u32) -> Self {
        self.track_sample_rate = hz;
        self
    }
}

/// How an [`LlmrtcClient`](crate::LlmrtcClient) reconnects after losing its connection.
///
/// The wait before try `n` (0-based, counted since the last `ready`) is
/// `min(base_delay * 2^n, max_delay)` plus a uniform jitter of up to `jitter_percent` % of
/// that, drawn from the client's injected [`JitterSource`](crate::JitterSource). With the
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

/// Configuration of an [`LlmrtcClient`](crate::LlmrtcClient). `Default` gives the values
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
    /// Commands (`audio`, `attachments`; never `offer`) queued while not connected; beyond it
    /// they are refused. Default: 16.
    pub max_queued: usize,
    /// Bytes of queued commands; beyond it they are refused. Default: 16 MiB.
    pub max_queued_bytes: usize,
    /// The hand-over to the data channel: payload frames handled from the WebSocket in
    /// this time before the data channel opened are recognized when the channel repeats
    /// them first, and dropped (the server may have opened its side first). Default: 2 s
    /// (a copy arrives within a round trip); zero turns the check off. At most 32 frames
    /// are remembered.
    pub data_channel_overlap: Duration,
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
            data_channel_overlap: Duration::from_secs(2),
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

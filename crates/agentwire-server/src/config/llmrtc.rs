//! `[llmrtc]`: the llmrtc signalling server with its stand-in providers and WebRTC.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use agentwire::core::Rate;
use agentwire::llmrtc::{Limits, ProviderTimeouts, ServerConfig, VadConfig};
use llmrtc_webrtc::WebrtcConfig;
use serde::{Deserialize, Serialize};

use super::error::ConfigError;
use super::listener::duration_ms;
use super::transport::Transport;
use crate::llmrtc::providers::{example_playbook, load_playbook, ScriptedStt};
use crate::llmrtc::server_app::{Pacing, WebrtcOptions};
use crate::llmrtc::server_cli::parse_ice_server;

/// `[llmrtc]`: the llmrtc server: sessions, providers, voice detection, WebRTC and limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct LlmrtcSection {
    /// Serve llmrtc. Default true.
    pub enabled: bool,
    /// Name of the `[[listener]]` it is served on. Default `"main"`.
    pub listener: String,
    /// URL path on that listener. Default `"/llmrtc"`.
    pub path: String,
    /// Playbook JSON file (stages and tools); absent: plain conversation (or the example
    /// playbook with `example_playbook`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub playbook: Option<PathBuf>,
    /// Use the example playbook built into the program. Default false.
    pub example_playbook: bool,
    /// Stand-in STT script, one utterance per line; absent: the built-in example script.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcript: Option<PathBuf>,
    /// Stream stand-in LLM tokens and TTS audio fast instead of at about real time.
    /// Default false.
    pub fast: bool,
    /// Stream TTS as `tts-chunk`s (false: one whole `tts` message per reply). Default true.
    pub streaming_tts: bool,
    /// Seconds a disconnected session waits for a `reconnect`. Default 1800.
    pub session_ttl_secs: u64,
    /// Seconds without a `ping` after which a connection is closed; the session stays for
    /// a reconnect (0: never closed). Default 45.
    pub heartbeat_timeout_secs: u64,
    /// Rate WebRTC track audio is resampled to before voice detection and STT, Hz (within
    /// `vad_min_sample_rate`..=`vad_max_sample_rate`). Default 16000.
    pub track_sample_rate: u32,
    /// ICE servers sent in `ready.iceServers`: `"URL"` or `"URL,USERNAME,CREDENTIAL"`.
    /// Default none.
    pub ice_servers: Vec<String>,
    /// Serve WebRTC (false: offers get `WEBRTC_UNAVAILABLE`, no UDP socket). Default true.
    pub webrtc: bool,
    /// UDP port of WebRTC, bound on the listener's IP (0: any free port). Default 0.
    pub udp_port: u16,
    /// Public IPs of a server behind NAT with the UDP port forwarded, offered as host
    /// candidates. Default none.
    pub public_ips: Vec<IpAddr>,
    /// Audio tracks over WebRTC when the program is built with Opus. Default true.
    pub webrtc_audio: bool,
    /// Milliseconds a WebRTC peer has to connect after the answer. Default 10000.
    pub webrtc_connect_timeout_ms: u64,
    /// Largest SDP offer, bytes. Default 65536.
    pub webrtc_max_sdp_bytes: usize,
    /// WebRTC peers at once. Default 256.
    pub webrtc_max_peers: usize,
    /// Offers per minute per connection. Default 4.
    pub webrtc_offers_per_minute: u32,
    /// Offers one connection may send at once. Default 4.
    pub webrtc_offer_burst: u32,
    /// Largest UDP datagram accepted, bytes. Default 2048.
    pub webrtc_max_datagram_bytes: usize,
    /// Remote addresses remembered per peer. Default 8.
    pub webrtc_max_addrs_per_peer: usize,
    /// Largest data-channel message, bytes. Default 262144.
    pub webrtc_max_channel_message_bytes: usize,
    /// Bytes buffered on one data channel. Default 1048576.
    pub webrtc_max_channel_buffered_bytes: usize,
    /// Seconds the STT provider has per request. Default 30.
    pub stt_timeout_secs: u64,
    /// Seconds the LLM provider has per request. Default 60.
    pub llm_timeout_secs: u64,
    /// Seconds the TTS provider has per request. Default 30.
    pub tts_timeout_secs: u64,
    /// Seconds a tool call has. Default 30.
    pub tool_timeout_secs: u64,
    /// Voice detection frame, milliseconds. Default 20.
    pub vad_frame_ms: u32,
    /// RMS level that starts speech. Default 500.
    pub vad_start_rms: u32,
    /// RMS level below which speech may end. Default 300.
    pub vad_end_rms: u32,
    /// Milliseconds of speech before it counts. Default 60.
    pub vad_min_speech_ms: u32,
    /// Milliseconds of silence that end speech. Default 500.
    pub vad_silence_ms: u32,
    /// Milliseconds of audio kept before speech starts. Default 200.
    pub vad_pre_roll_ms: u32,
    /// An `end-of-message` ends speech at once. Default true.
    pub vad_end_of_message_ends_speech: bool,
    /// Lowest audio sample rate accepted, Hz. Default 8000.
    pub vad_min_sample_rate: u32,
    /// Highest audio sample rate accepted, Hz. Default 384000.
    pub vad_max_sample_rate: u32,
    /// Connections served at once. Default 1024.
    pub max_connections: usize,
    /// Sessions at once. Default 1024.
    pub max_sessions: usize,
    /// Largest message body, bytes. Default 8388608.
    pub max_message_bytes: usize,
    /// PCM buffered for one speech segment, bytes of 16-bit mono (a longer segment ends
    /// there). Default 3840000 (two minutes at 16 kHz).
    pub max_segment_bytes: usize,
    /// Finished speech segments waiting for the session's current turn. Default 4.
    pub max_queued_turns: usize,
    /// Attachments waiting for the next turn. Default 8.
    pub max_queued_attachments: usize,
    /// Conversation history entries kept per session. Default 100.
    pub max_history: usize,
    /// Longest LLM reply, bytes. Default 65536.
    pub max_reply_bytes: usize,
    /// Longest transcript, bytes. Default 16384.
    pub max_transcript_bytes: usize,
    /// Expired session ids remembered, so a late `reconnect` gets `SESSION_EXPIRED`.
    /// Default 1024.
    pub max_expired_remembered: usize,
    /// Tool rounds in one turn. Default 4.
    pub max_tool_rounds: usize,
    /// Tool calls in one round. Default 8.
    pub max_tool_calls_per_round: usize,
    /// Messages per second per connection. Default 50.
    pub message_rate_per_second: u32,
    /// Messages a connection may send at once. Default 100.
    pub message_burst: u32,
    /// KiB per second one connection may send (a message takes one token per started
    /// KiB). Default 1024.
    pub byte_rate_kib_per_second: u32,
    /// KiB a connection may send at once after a quiet period. Default 16384.
    pub byte_burst_kib: u32,
    /// Largest TTS audio of one reply sent whole (`streaming_tts = false`), bytes before
    /// base64. Default 6290432.
    pub max_tts_bytes: usize,
    /// Transport settings of the llmrtc route.
    pub transport: Transport,
}

impl Default for LlmrtcSection {
    fn default() -> Self {
        let c = ServerConfig::default();
        let l = &c.limits;
        let v = &c.vad;
        let t = &c.timeouts;
        let w = WebrtcConfig::default();
        let wl = &w.limits;
        let (offers_per_minute, offer_burst) = per(wl.offer_rate, 60);
        let (message_rate_per_second, message_burst) = per(l.message_rate, 1);
        let (byte_rate_kib_per_second, byte_burst_kib) = per(l.byte_rate, 1);
        Self {
            enabled: true,
            listener: "main".to_owned(),
            path: "/llmrtc".to_owned(),
            playbook: None,
            example_playbook: false,
            transcript: None,
            fast: false,
            streaming_tts: c.streaming_tts,
            session_ttl_secs: c.session_ttl.as_secs(),
            heartbeat_timeout_secs: c.heartbeat_timeout.map_or(0, |d| d.as_secs()),
            track_sample_rate: c.track_sample_rate,
            ice_servers: Vec::new(),
            webrtc: true,
            udp_port: 0,
            public_ips: Vec::new(),
            webrtc_audio: true,
            webrtc_connect_timeout_ms: duration_ms(w.connect_timeout),
            webrtc_max_sdp_bytes: wl.max_sdp_bytes,
            webrtc_max_peers: wl.max_peers,
            webrtc_offers_per_minute: offers_per_minute,
            webrtc_offer_burst: offer_burst,
            webrtc_max_datagram_bytes: wl.max_datagram_bytes,
            webrtc_max_addrs_per_peer: wl.max_addrs_per_peer,
            webrtc_max_channel_message_bytes: wl.max_channel_message_bytes,
            webrtc_max_channel_buffered_bytes: wl.max_channel_buffered_bytes,
            stt_timeout_secs: t.stt.as_secs(),
            llm_timeout_secs: t.llm.as_secs(),
            tts_timeout_secs: t.tts.as_secs(),
            tool_timeout_secs: t.tool.as_secs(),
            vad_frame_ms: v.frame_ms,
            vad_start_rms: v.start_rms,
            vad_end_rms: v.end_rms,
            vad_min_speech_ms: v.min_speech_ms,
            vad_silence_ms: v.silence_ms,
            vad_pre_roll_ms: v.pre_roll_ms,
            vad_end_of_message_ends_speech: v.end_of_message_ends_speech,
            vad_min_sample_rate: v.min_sample_rate,
            vad_max_sample_rate: v.max_sample_rate,
            max_connections: l.max_connections,
            max_sessions: l.max_sessions,
            max_message_bytes: l.max_message_bytes,
            max_segment_bytes: l.max_segment_bytes,
            max_queued_turns: l.max_queued_turns,
            max_queued_attachments: l.max_queued_attachments,
            max_history: l.max_history,
            max_reply_bytes: l.max_reply_bytes,
            max_transcript_bytes: l.max_transcript_bytes,
            max_expired_remembered: l.max_expired_remembered,
            max_tool_rounds: l.max_tool_rounds,
            max_tool_calls_per_round: l.max_tool_calls_per_round,
            message_rate_per_second,
            message_burst,
            byte_rate_kib_per_second,
            byte_burst_kib,
            max_tts_bytes: l.max_tts_bytes,
            transport: Transport::default(),
        }
    }
}

/// A rate as `(count per period of period_secs, burst)`.
fn per(rate: Rate, period_secs: u64) -> (u32, u32) {
    let count = Duration::from_secs(period_secs).as_nanos() / rate.interval().as_nanos().max(1);
    (u32::try_from(count).unwrap_or(u32::MAX), rate.burst())
}

impl LlmrtcSection {
    /// The server machine's configuration; reads the playbook file when one is set.
    pub fn server_config(&self) -> Result<ServerConfig, ConfigError> {
        let mut limits = Limits::default();
        limits.max_connections = self.max_connections;
        limits.max_sessions = self.max_sessions;
        limits.max_message_bytes = self.max_message_bytes;
        limits.max_segment_bytes = self.max_segment_bytes;
        limits.max_queued_turns = self.max_queued_turns;
        limits.max_queued_attachments = self.max_queued_attachments;
        limits.max_history = self.max_history;
        limits.max_reply_bytes = self.max_reply_bytes;
        limits.max_transcript_bytes = self.max_transcript_bytes;
        limits.max_expired_remembered = self.max_expired_remembered;
        limits.max_tool_rounds = self.max_tool_rounds;
        limits.max_tool_calls_per_round = self.max_tool_calls_per_round;
        limits.message_rate = Rate::per_second(self.message_rate_per_second, self.message_burst);
        limits.byte_rate = Rate::per_second(self.byte_rate_kib_per_second, self.byte_burst_kib);
        limits.max_tts_bytes = self.max_tts_bytes;
        let mut vad = VadConfig::default();
        vad.frame_ms = self.vad_frame_ms;
        vad.start_rms = self.vad_start_rms;
        vad.end_rms = self.vad_end_rms;
        vad.min_speech_ms = self.vad_min_speech_ms;
        vad.silence_ms = self.vad_silence_ms;
        vad.pre_roll_ms = self.vad_pre_roll_ms;
        vad.end_of_message_ends_speech = self.vad_end_of_message_ends_speech;
        vad.min_sample_rate = self.vad_min_sample_rate;
        vad.max_sample_rate = self.vad_max_sample_rate;
        let mut timeouts = ProviderTimeouts::default();
        timeouts.stt = Duration::from_secs(self.stt_timeout_secs);
        timeouts.llm = Duration::from_secs(self.llm_timeout_secs);
        timeouts.tts = Duration::from_secs(self.tts_timeout_secs);
        timeouts.tool = Duration::from_secs(self.tool_timeout_secs);
        let mut config = ServerConfig::default()
            .with_session_ttl(Duration::from_secs(self.session_ttl_secs))
            .with_heartbeat_timeout(
                (self.heartbeat_timeout_secs > 0)
                    .then(|| Duration::from_secs(self.heartbeat_timeout_secs)),
            )
            .with_streaming_tts(self.streaming_tts)
            .with_track_sample_rate(self.track_sample_rate)
            .with_vad(vad)
            .with_timeouts(timeouts)
            .with_limits(limits)
            .with_ice_servers(self.ice_server_list()?);
        if let Some(path) = &self.playbook {
            let playbook =
                load_playbook(path).map_err(|e| ConfigError::invalid("llmrtc.playbook", e))?;
            config = config.with_playbook(playbook);
        } else if self.example_playbook {
            let playbook = example_playbook()
                .map_err(|e| ConfigError::invalid("llmrtc.example_playbook", e))?;
            config = config.with_playbook(playbook);
        }
        Ok(config)
    }

    /// The ICE servers, parsed.
    pub fn ice_server_list(&self) -> Result<Vec<agentwire::llmrtc::IceServer>, ConfigError> {
        self.ice_servers
            .iter()
            .enumerate()
            .map(|(i, s)| {
                parse_ice_server(s)
                    .map_err(|e| ConfigError::invalid(format!("llmrtc.ice_servers[{i}]"), e))
            })
            .collect()
    }

    /// The stand-in STT: `transcript`'s script, or the built-in example.
    pub fn stt(&self) -> Result<ScriptedStt, ConfigError> {
        match &self.transcript {
            Some(path) => ScriptedStt::from_file(path).map_err(|e| {
                ConfigError::invalid("llmrtc.transcript", format!("{}: {e}", path.display()))
            }),
            None => Ok(ScriptedStt::example()),
        }
    }

    /// How WebRTC is served, or `None` when `webrtc` is off.
    pub fn webrtc_options(&self) -> Option<WebrtcOptions> {
        if !self.webrtc {
            return None;
        }
        let mut config = WebrtcConfig::default();
        config.connect_timeout = Duration::from_millis(self.webrtc_connect_timeout_ms);
        config.audio = config.audio && self.webrtc_audio;
        let l = &mut config.limits;
        l.max_sdp_bytes = self.webrtc_max_sdp_bytes;
        l.max_peers = self.webrtc_max_peers;
        l.offer_rate = Rate::per_minute(self.webrtc_offers_per_minute, self.webrtc_offer_burst);
        l.max_datagram_bytes = self.webrtc_max_datagram_bytes;
        l.max_addrs_per_peer = self.webrtc_max_addrs_per_peer;
        l.max_channel_message_bytes = self.webrtc_max_channel_message_bytes;
        l.max_channel_buffered_bytes = self.webrtc_max_channel_buffered_bytes;
        let mut options = WebrtcOptions::default()
            .with_udp_port(self.udp_port)
            .with_config(config);
        for ip in &self.public_ips {
            options = options.with_public_ip(*ip);
        }
        Some(options)
    }

    /// How fast the stand-in providers stream.
    pub fn pacing(&self) -> Pacing {
        if self.fast {
            Pacing::fast()
        } else {
            Pacing::real_time()
        }
    }
}

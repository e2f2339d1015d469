//! Sans-IO **llmrtc** voice-AI protocol v1 (`@metered/llmrtc`, now `@llmrtc/llmrtc-*`).
//!
//! A browser running the llmrtc web client talks to a voice-agent backend over one
//! WebSocket (and, optionally, a WebRTC data channel): the server greets with `ready`, the
//! client sends speech as `audio` (base64 WAV), and the server answers with the turn's events:
//! `speech-start`, `speech-end`, `transcript`, streamed `llm-chunk`s and `llm`, then
//! `tts-start`, `tts-chunk`s and `tts-complete`. The spec is `specs/llmrtc.md`; what the real
//! TypeScript server and client do is `INTEROP.md` (llmrtc section).
//!
//! This crate never opens a socket or reads a clock: drive [`LlmrtcServer`] with
//! `agentwire-tokio`, with the in-memory `agentwire_core::sim` harness, or your own loop.
//!
//! # API map
//!
//! | you want to | use |
//! |---|---|
//! | decode a client / server message | [`ClientMessage::decode`], [`ServerMessage::decode`] → [`Decoded`] (`Message` or `Unknown`) |
//! | encode one | [`ClientMessage::encode`] / [`ServerMessage::encode`] / `to_frame` / `to_json`; fast paths [`encode_audio`], [`encode_tts_chunk`], [`encode_tts`] |
//! | read or write WAV | [`parse_wav`], [`write_wav`], [`wav::wav_from_samples`] |
//! | detect speech | [`Vad`] with [`VadConfig`] |
//! | serve clients | [`LlmrtcServer::new`] with [`ServerConfig`] (limits: [`ServerLimits`], timeouts: [`ProviderTimeouts`], playbook: [`Playbook`]) |
//! | plug in STT | on [`ServerEvent::Stt`] ([`SttRequest`]): [`LlmrtcServer::stt_partial`]*, then [`LlmrtcServer::stt_result`] |
//! | plug in the LLM | on [`ServerEvent::Llm`] ([`LlmRequest`]): [`LlmrtcServer::llm_chunk`]*, [`LlmrtcServer::llm_tool_call`]* (playbook), then [`LlmrtcServer::llm_done`] or [`LlmrtcServer::llm_failed`] |
//! | plug in TTS | on [`ServerEvent::Tts`] ([`TtsRequest`]): [`LlmrtcServer::tts_chunk`]* or [`LlmrtcServer::tts_audio`], then [`LlmrtcServer::tts_done`] or [`LlmrtcServer::tts_failed`] |
//! | run playbook tools | on [`ServerEvent::ToolCall`] ([`ToolCallRequest`]): [`LlmrtcServer::tool_result`]; move stages with [`LlmrtcServer::change_stage`] |
//! | stop provider work | on [`ServerEvent::Cancel`] (barge-in, disconnect, timeout): drop the request; late answers get [`CommandError::UnknownRequest`] |
//! | WebRTC | [`ServerConfig::webrtc`], [`ServerEvent::Offer`] → [`LlmrtcServer::signal`]; [`LlmrtcServer::set_data_channel_open`] and [`ServerEvent::DataChannel`] for the payload copies |
//! | observe | [`ServerEvent`] (sessions started, resumed, expired; errors sent; turns ended), getters [`LlmrtcServer::sessions`], [`LlmrtcServer::history`], [`LlmrtcServer::stage`], ... |
//!
//! Every provider answer takes `now` (as every `handle_*`), because it restarts or ends a
//! provider timeout.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod client;
mod codec;
mod config;
mod error;
mod event;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod message;
pub mod playbook;
mod provider;
mod server;
pub mod vad;
pub mod wav;

pub use client::{
    ClientCommandError, ClientConfig, ClientError, ClientEvent, ConnectionState, FixedJitter,
    IgnoreReason, JitterSource, LlmrtcClient, LossReason, Reconnection, SplitMix64, CLOSE_CLIENT,
    CLOSE_DROPPED, CLOSE_PONG_TIMEOUT, CLOSE_READY_TIMEOUT,
};
pub use codec::{
    decode_base64, encode_audio, encode_tts, encode_tts_chunk, write_base64, Decoded,
    DEFAULT_MAX_MESSAGE_BYTES,
};
pub use config::{ProviderTimeouts, ServerConfig, ServerLimits};
pub use error::{DecodeError, ErrorCode};
pub use event::{CommandError, ServerEvent, TurnOutcome};
pub use message::{
    channel_of, Attachments, Audio, Channel, ClientMessage, ErrorMessage, IceServer, IceUrls, Llm,
    LlmChunk, Offer, Ping, Pong, RawJson, Ready, Reconnect, ReconnectAck, ServerMessage, Signal,
    StageChange, Timestamp, ToolCallEnd, ToolCallStart, Transcript, Tts, TtsChunk,
    VisionAttachment, PROTOCOL_VERSION,
};
pub use playbook::{Playbook, PlaybookError, Stage, ToolSpec, Transition, Trigger};
pub use provider::{
    ChatMessage, ChatRole, LlmRequest, ProviderError, ProviderKind, RequestId, SpeechSegment,
    StageContext, SttRequest, ToolCallRequest, ToolRecord, TtsRequest,
};
pub use server::{
    texts, ConfigError, LlmrtcServer, CLOSE_FULL, CLOSE_HEARTBEAT, CLOSE_SESSION_MOVED,
};
pub use vad::{Vad, VadConfig, VadEvent};
pub use wav::{parse_wav, write_wav, Wav, WavError, WavFormat};

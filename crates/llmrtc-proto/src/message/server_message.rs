//! Server → client messages.

use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use super::client_message::from_variant;
use super::code::ErrorCode;
use super::common::{IceServer, SessionMode, Timestamp};
use agentwire_core::json::RawJson;
use agentwire_core::json::Tagged;

/// Every message a server sends (`type` in kebab-case, fields in camelCase).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ServerMessage {
    /// `ready`: the first message of every connection.
    Ready(Ready),
    /// `pong`: heartbeat answer echoing the ping's timestamp.
    Pong(Pong),
    /// `signal`: WebRTC SDP answer.
    Signal(Signal),
    /// `reconnect-ack`: outcome of a `reconnect`.
    ReconnectAck(ReconnectAck),
    /// `transcript`: speech-to-text result.
    Transcript(Transcript),
    /// `assistant-transcript`: what the assistant is saying (realtime mode; core 1.3.0).
    AssistantTranscript(AssistantTranscript),
    /// `usage`: one response's token usage (realtime mode; core 1.3.0).
    Usage(Usage),
    /// `mode-changed`: the session's mode changed mid-session (core 1.3.0).
    ModeChanged(ModeChanged),
    /// `llm-chunk`: one piece of the streamed LLM reply.
    LlmChunk(LlmChunk),
    /// `llm`: the complete LLM reply.
    Llm(Llm),
    /// `tts-start`: TTS playback starts.
    TtsStart,
    /// `tts-chunk`: one piece of streamed TTS audio.
    TtsChunk(TtsChunk),
    /// `tts`: the complete TTS audio (non-streaming fallback).
    Tts(Tts),
    /// `tts-complete`: TTS playback finished.
    TtsComplete,
    /// `tts-cancelled`: TTS playback was cancelled (barge-in).
    TtsCancelled,
    /// `speech-start`: voice activity detection heard the user start speaking.
    SpeechStart,
    /// `speech-end`: voice activity detection heard the user stop speaking.
    SpeechEnd,
    /// `tool-call-start`: a playbook tool is running.
    ToolCallStart(ToolCallStart),
    /// `tool-call-end`: a playbook tool finished.
    ToolCallEnd(ToolCallEnd),
    /// `stage-change`: the playbook moved to another stage.
    StageChange(StageChange),
    /// `error`: a structured error.
    Error(ErrorMessage),
}

/// `{"type":"ready","id":string,"protocolVersion":number,"iceServers"?:RTCIceServer[],"mode"?:"pipeline"|"realtime"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ready {
    /// The session id (what a later `reconnect` names).
    pub id: String,
    /// The server's protocol version ([`PROTOCOL_VERSION`](crate::PROTOCOL_VERSION)).
    pub protocol_version: u32,
    /// STUN/TURN servers for the WebRTC peer connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ice_servers: Option<Vec<IceServer>>,
    /// The session's mode (core 1.3.0); absent from older servers, which always run
    /// [`SessionMode::PIPELINE`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<SessionMode>,
}

/// `{"type":"pong","timestamp":number}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pong {
    /// The ping's timestamp, unchanged.
    pub timestamp: Timestamp,
}

/// `{"type":"signal","signal":RTCSessionDescriptionInit}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signal {
    /// The SDP answer, opaque JSON.
    pub signal: RawJson,
}

/// `{"type":"reconnect-ack","success":boolean,"sessionId":string,"historyRecovered":boolean}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReconnectAck {
    /// Whether the session was found.
    pub success: bool,
    /// The recovered session's id on success; the current connection's `ready.id` otherwise.
    pub session_id: String,
    /// Whether the conversation history was recovered.
    pub history_recovered: bool,
}

/// `{"type":"transcript","text":string,"isFinal":boolean}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transcript {
    /// The transcribed text.
    pub text: String,
    /// Whether this is the final transcription of the utterance.
    pub is_final: bool,
}

/// `{"type":"assistant-transcript","text":string,"isFinal":boolean}` (core 1.3.0).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantTranscript {
    /// Transcript text of the assistant's speech.
    pub text: String,
    /// Whether this is the final transcript of the response.
    pub is_final: bool,
}

/// `{"type":"usage","inputTokens":number,"outputTokens":number,"audioInputTokens"?:number,
/// "audioOutputTokens"?:number,"cachedTokens"?:number}` (core 1.3.0).
///
/// Token counts are integers (`u64`), as `durationMs` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Input tokens of the response.
    pub input_tokens: u64,
    /// Output tokens of the response.
    pub output_tokens: u64,
    /// Of the input, audio tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio_input_tokens: Option<u64>,
    /// Of the output, audio tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio_output_tokens: Option<u64>,
    /// Input tokens served from the provider's cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
}

/// `{"type":"mode-changed","mode":"pipeline"|"realtime"}` (core 1.3.0): e.g. a realtime
/// relay fell back to the pipeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModeChanged {
    /// The session's mode from now on.
    pub mode: SessionMode,
}

/// `{"type":"llm-chunk","content":string,"done":boolean}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmChunk {
    /// Partial reply text.
    pub content: String,
    /// Whether this is the last chunk.
    pub done: bool,
}

/// `{"type":"llm","text":string}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Llm {
    /// The full reply text.
    pub text: String,
}

/// `{"type":"tts-chunk","format":string,"sampleRate":number,"data":string}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TtsChunk {
    /// Audio format, e.g. `"pcm"` (16-bit little-endian mono) or `"mp3"`.
    pub format: String,
    /// Sample rate in Hz (24000 by default, see INTEROP.md).
    pub sample_rate: u32,
    /// Base64-encoded audio.
    pub data: String,
}

/// `{"type":"tts","format":string,"data":string}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tts {
    /// Audio format.
    pub format: String,
    /// Base64-encoded audio.
    pub data: String,
}

/// `{"type":"tool-call-start","name":string,"callId":string,"arguments":object}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallStart {
    /// The tool's function name.
    pub name: String,
    /// Unique call id, repeated by `tool-call-end`.
    pub call_id: String,
    /// The arguments passed to the tool.
    pub arguments: Map<String, Value>,
}

/// `{"type":"tool-call-end","callId":string,"result"?:unknown,"error"?:string,"durationMs":number}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallEnd {
    /// The `callId` of the matching `tool-call-start`.
    pub call_id: String,
    /// The tool's result on success. A present `null` decodes as `Some(Value::Null)`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub result: Option<Value>,
    /// The error message on failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How long the tool ran, in milliseconds.
    pub duration_ms: u64,
}

/// A present field, whatever its value (so `"result": null` is `Some(Null)`).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// `{"type":"stage-change","from":string,"to":string,"reason":string}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageChange {
    /// The previous stage's name.
    pub from: String,
    /// The new stage's name.
    pub to: String,
    /// Why (`"tool_result"`, `"keyword_match"`, ...).
    pub reason: String,
}

/// `{"type":"error","code":ErrorCode,"message":string}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorMessage {
    /// The structured code.
    pub code: ErrorCode,
    /// Human-readable description.
    pub message: String,
}

impl ErrorMessage {
    /// An error with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// Which channels a server message travels on (spec "Transport Channels").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Channel {
    /// Signalling (`ready`, `pong`, `signal`, `reconnect-ack`): WebSocket only.
    WebSocket,
    /// Payload events: the WebSocket and, when connected, the WebRTC data channel.
    Both,
}

impl ServerMessage {
    /// Every wire `type` a server sends.
    pub const TYPES: [&'static str; 21] = [
        "ready",
        "pong",
        "signal",
        "reconnect-ack",
        "transcript",
        "assistant-transcript",
        "usage",
        "mode-changed",
        "llm-chunk",
        "llm",
        "tts-start",
        "tts-chunk",
        "tts",
        "tts-complete",
        "tts-cancelled",
        "speech-start",
        "speech-end",
        "tool-call-start",
        "tool-call-end",
        "stage-change",
        "error",
    ];

    /// The wire `type`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Ready(_) => "ready",
            Self::Pong(_) => "pong",
            Self::Signal(_) => "signal",
            Self::ReconnectAck(_) => "reconnect-ack",
            Self::Transcript(_) => "transcript",
            Self::AssistantTranscript(_) => "assistant-transcript",
            Self::Usage(_) => "usage",
            Self::ModeChanged(_) => "mode-changed",
            Self::LlmChunk(_) => "llm-chunk",
            Self::Llm(_) => "llm",
            Self::TtsStart => "tts-start",
            Self::TtsChunk(_) => "tts-chunk",
            Self::Tts(_) => "tts",
            Self::TtsComplete => "tts-complete",
            Self::TtsCancelled => "tts-cancelled",
            Self::SpeechStart => "speech-start",
            Self::SpeechEnd => "speech-end",
            Self::ToolCallStart(_) => "tool-call-start",
            Self::ToolCallEnd(_) => "tool-call-end",
            Self::StageChange(_) => "stage-change",
            Self::Error(_) => "error",
        }
    }

    /// The channels this message goes to: see [`channel_of`].
    pub fn channel(&self) -> Channel {
        channel_of(self.type_name())
    }
}

/// The channels a server message of wire type `type_name` goes to.
///
/// `ready`, `pong`, `signal` and `reconnect-ack` are WebSocket only; every other type (the
/// payload events, including `error`) goes to both, and a client handles it from the WebSocket
/// only while its data channel is not connected (INTEROP.md's dual-channel rule).
pub fn channel_of(type_name: &str) -> Channel {
    match type_name {
        "ready" | "pong" | "signal" | "reconnect-ack" => Channel::WebSocket,
        _ => Channel::Both,
    }
}

impl<'de> Tagged<'de> for ServerMessage {
    fn decode_variant<D: Deserializer<'de>>(tag: &str, d: D) -> Result<Option<Self>, D::Error> {
        let unit = |d: D, m: Self| IgnoredAny::deserialize(d).map(|_| Some(m));
        Ok(Some(match tag {
            "ready" => Self::Ready(Ready::deserialize(d)?),
            "pong" => Self::Pong(Pong::deserialize(d)?),
            "signal" => Self::Signal(Signal::deserialize(d)?),
            "reconnect-ack" => Self::ReconnectAck(ReconnectAck::deserialize(d)?),
            "transcript" => Self::Transcript(Transcript::deserialize(d)?),
            "assistant-transcript" => {
                Self::AssistantTranscript(AssistantTranscript::deserialize(d)?)
            }
            "usage" => Self::Usage(Usage::deserialize(d)?),
            "mode-changed" => Self::ModeChanged(ModeChanged::deserialize(d)?),
            "llm-chunk" => Self::LlmChunk(LlmChunk::deserialize(d)?),
            "llm" => Self::Llm(Llm::deserialize(d)?),
            "tts-start" => return unit(d, Self::TtsStart),
            "tts-chunk" => Self::TtsChunk(TtsChunk::deserialize(d)?),
            "tts" => Self::Tts(Tts::deserialize(d)?),
            "tts-complete" => return unit(d, Self::TtsComplete),
            "tts-cancelled" => return unit(d, Self::TtsCancelled),
            "speech-start" => return unit(d, Self::SpeechStart),
            "speech-end" => return unit(d, Self::SpeechEnd),
            "tool-call-start" => Self::ToolCallStart(ToolCallStart::deserialize(d)?),
            "tool-call-end" => Self::ToolCallEnd(ToolCallEnd::deserialize(d)?),
            "stage-change" => Self::StageChange(StageChange::deserialize(d)?),
            "error" => Self::Error(ErrorMessage::deserialize(d)?),
            _ => {
                IgnoredAny::deserialize(d)?;
                return Ok(None);
            }
        }))
    }
}

from_variant!(
    ServerMessage: Ready,
    Pong,
    Signal,
    ReconnectAck,
    Transcript,
    AssistantTranscript,
    Usage,
    ModeChanged,
    LlmChunk,
    Llm,
    TtsChunk,
    Tts,
    ToolCallStart,
    ToolCallEnd,
    StageChange
);

impl From<ErrorMessage> for ServerMessage {
    fn from(m: ErrorMessage) -> Self {
        Self::Error(m)
    }
}

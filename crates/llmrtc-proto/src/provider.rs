//! What the server asks its providers (STT, LLM, TTS, tools), and how they answer.
//!
//! The machine never calls a provider: it emits a request as a
//! [`ServerEvent`](crate::ServerEvent) with a [`RequestId`], and the application answers
//! through the [`LlmrtcServer`](crate::LlmrtcServer) methods named after the provider
//! (`stt_result`, `llm_chunk`, `tts_chunk`, `tool_result`, ...). A request the machine no
//! longer wants (barge-in, disconnect, timeout) is withdrawn with
//! [`ServerEvent::Cancel`](crate::ServerEvent::Cancel); answers to it are refused with
//! [`CommandError::UnknownRequest`](crate::CommandError::UnknownRequest), which the
//! application may ignore.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ids::{CallId, RequestId, SessionId};
use crate::message::VisionAttachment;
use crate::playbook::ToolSpec;
use crate::wav::{wav_from_samples, WavFormat};

/// Which provider a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// Speech-to-text.
    Stt,
    /// The language model.
    Llm,
    /// Text-to-speech.
    Tts,
    /// A playbook tool.
    Tool,
}

/// A provider's failure, as the application reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProviderError {
    /// The provider failed (`STT_ERROR`, `LLM_ERROR`, `TTS_ERROR`, `TOOL_ERROR`); the text is
    /// the `error` message's `message`.
    Failed(String),
    /// The provider timed out on its own side (`STT_TIMEOUT`, `LLM_TIMEOUT`, `TTS_TIMEOUT`).
    Timeout,
    /// Not the provider's own failure but the application's around it (a provider that
    /// panicked, a worker that died, a bug): `INTERNAL_ERROR` for STT, the LLM and TTS
    /// alike, because the provider's code (`STT_ERROR`, ...) would blame the wrong party.
    /// The text is the `error` message's `message`.
    Internal(String),
}

/// One utterance, as detected by the VAD: 16-bit mono samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpeechSegment {
    /// Sample rate in Hz (the `audio` message's).
    pub sample_rate: u32,
    /// The samples (stereo input is mixed down).
    pub samples: Vec<i16>,
}

impl SpeechSegment {
    /// Duration in milliseconds.
    pub fn duration_ms(&self) -> u64 {
        self.samples.len() as u64 * 1000 / u64::from(self.sample_rate.max(1))
    }

    /// The segment as a mono 16-bit WAV file (what most STT APIs take).
    pub fn to_wav(&self) -> Vec<u8> {
        wav_from_samples(self.sample_rate, &self.samples)
    }

    /// The WAV format of the segment.
    pub fn format(&self) -> WavFormat {
        WavFormat {
            channels: 1,
            sample_rate: self.sample_rate,
        }
    }
}

/// Speak a segment to text: answer with [`stt_partial`](crate::LlmrtcServer::stt_partial)
/// (optional) and then [`stt_result`](crate::LlmrtcServer::stt_result).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SttRequest {
    /// Answer with this id.
    pub request: RequestId,
    /// The session (its `ready.id`).
    pub session: SessionId,
    /// The audio.
    pub segment: SpeechSegment,
}

/// Who said a history entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatRole {
    /// The user (a transcript).
    User,
    /// The assistant (an LLM reply).
    Assistant,
}

/// One entry of a session's conversation history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who.
    pub role: ChatRole,
    /// What.
    pub text: String,
}

/// A tool call of the current turn and its outcome, for the LLM's next round.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRecord {
    /// The call id (as in `tool-call-start`).
    pub call_id: CallId,
    /// The tool's name.
    pub name: String,
    /// Its arguments.
    pub arguments: Map<String, Value>,
    /// `Ok(result)` or `Err(error message)`.
    pub outcome: Result<Value, String>,
}

/// The stage context of an LLM request in playbook mode.
#[derive(Debug, Clone, PartialEq)]
pub struct StageContext {
    /// The stage's name.
    pub name: String,
    /// Its instructions (system prompt).
    pub instructions: String,
    /// The tools the LLM may call now.
    pub tools: Vec<ToolSpec>,
}

/// Reply to the conversation: stream with [`llm_chunk`](crate::LlmrtcServer::llm_chunk),
/// finish with [`llm_done`](crate::LlmrtcServer::llm_done) (or, in playbook mode, call tools
/// with [`llm_tool_call`](crate::LlmrtcServer::llm_tool_call) before `llm_done`).
#[derive(Debug, Clone, PartialEq)]
pub struct LlmRequest {
    /// Answer with this id.
    pub request: RequestId,
    /// The session.
    pub session: SessionId,
    /// The conversation so far, oldest first; the last entry is the user's new message.
    pub history: Vec<ChatMessage>,
    /// Images for this turn (the `audio` message's and the queued `attachments`).
    pub attachments: Vec<VisionAttachment>,
    /// Playbook mode: the current stage.
    pub stage: Option<StageContext>,
    /// Playbook mode: the tool calls of this turn so far (empty in the first round).
    pub tool_results: Vec<ToolRecord>,
}

/// Synthesize speech: answer with [`tts_chunk`](crate::LlmrtcServer::tts_chunk)s or one
/// [`tts_audio`](crate::LlmrtcServer::tts_audio), then [`tts_done`](crate::LlmrtcServer::tts_done).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TtsRequest {
    /// Answer with this id.
    pub request: RequestId,
    /// The session.
    pub session: SessionId,
    /// The text to speak (the LLM's reply).
    pub text: String,
    /// Whether the server streams the audio ([`ServerConfig::streaming_tts`](crate::ServerConfig::streaming_tts)):
    /// `false` asks for the whole audio, which a provider with a non-streaming API answers
    /// with one [`tts_audio`](crate::LlmrtcServer::tts_audio) (chunks are gathered and
    /// sent whole too).
    pub streaming: bool,
}

/// Run a playbook tool: answer with [`tool_result`](crate::LlmrtcServer::tool_result).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallRequest {
    /// Answer with this id.
    pub request: RequestId,
    /// The session.
    pub session: SessionId,
    /// The call id sent in `tool-call-start`.
    pub call_id: CallId,
    /// The tool's name (one of the current stage's tools).
    pub name: String,
    /// The arguments the LLM gave.
    pub arguments: Map<String, Value>,
}

//! Every error of the crate: what a decode, a peer, a command or a configuration got wrong.

use agentwire_core::FrameError;

use crate::client::state::ConnectionState;
use crate::message::ErrorCode;
use crate::playbook::PlaybookError;
use crate::provider::ProviderKind;

/// Why a message body could not be decoded. An unknown `type` is not an error: it is
/// [`Decoded::Unknown`](crate::Decoded::Unknown).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Found before parsing, so no `type` is known yet: an oversize body or a binary frame
    /// that is not UTF-8 (the server answers [`ErrorCode::INVALID_MESSAGE`], as for every
    /// decode error).
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// Not JSON (syntax error, truncation, trailing data, nesting beyond 128 levels).
    #[error("invalid JSON: {0}")]
    InvalidJson(#[source] serde_json::Error),
    /// Valid JSON that is not an object.
    #[error("message is not a JSON object")]
    NotAnObject,
    /// An object without `type`, or whose `type` is not a string.
    #[error("missing or non-string \"type\"")]
    MissingType,
    /// A known type whose fields are missing or of the wrong type.
    #[error("invalid {type_name} message: {source}")]
    InvalidFields {
        /// The message's wire type.
        type_name: &'static str,
        /// What serde found wrong.
        #[source]
        source: serde_json::Error,
    },
}

impl DecodeError {
    /// The code a server answers this with: always [`ErrorCode::INVALID_MESSAGE`] (an
    /// oversize body included: it is refused before anyone knows its type).
    pub fn code(&self) -> ErrorCode {
        ErrorCode::INVALID_MESSAGE
    }
}

/// A bad server message, reported by the client as
/// [`ClientEvent::ProtocolViolation`](crate::ClientEvent::ProtocolViolation); the message is
/// skipped and the connection stays.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The message did not decode.
    #[error("undecodable server message: {0}")]
    Decode(String),
    /// A second `ready` on one connection.
    #[error("a second ready on one connection")]
    SecondReady,
    /// A `tts-chunk` or `tts` whose `data` is not base64.
    #[error("{0} with data that is not base64")]
    BadAudio(&'static str),
    /// Assembled TTS audio passed `max_tts_audio_bytes`; this reply's audio is dropped.
    #[error("tts audio beyond {max} bytes")]
    AudioTooLarge {
        /// The limit.
        max: usize,
    },
    /// The assembled LLM text passed `max_llm_text_bytes`; later chunks are not appended.
    #[error("llm reply beyond {max} bytes")]
    TextTooLarge {
        /// The limit.
        max: usize,
    },
}

impl From<DecodeError> for ProtocolError {
    fn from(e: DecodeError) -> Self {
        Self::Decode(e.to_string())
    }
}

/// Why a command of the [`LlmrtcServer`](crate::LlmrtcServer) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// No such request, or it was cancelled or answered already (safe to ignore).
    #[error("unknown or finished request")]
    UnknownRequest,
    /// The request is for another provider than this method answers.
    #[error("request is a {0:?} request")]
    WrongProvider(ProviderKind),
    /// No such connection.
    #[error("unknown connection")]
    UnknownConnection,
    /// No such session.
    #[error("unknown session")]
    UnknownSession,
    /// Not in playbook mode, or no such stage.
    #[error("unknown stage or not in playbook mode")]
    UnknownStage,
    /// The call breaks an order rule (e.g. a tool call after text in playbook mode, audio
    /// after `tts_done`).
    #[error("not allowed now: {0}")]
    OutOfOrder(&'static str),
    /// Track audio at a sample rate this server does not take: outside the VAD's
    /// ([`VadConfig::supports_rate`](crate::VadConfig::supports_rate)).
    #[error("unsupported sample rate {0} Hz")]
    UnsupportedRate(u32),
}

/// Why a command of the [`LlmrtcClient`](crate::LlmrtcClient) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClientCommandError {
    /// The client is closed.
    #[error("client is closed")]
    Closed,
    /// `start` while already started.
    #[error("client is already {0}")]
    AlreadyStarted(ConnectionState),
    /// The queue for messages sent while not connected is full.
    #[error("send queue full ({0})")]
    QueueFull(&'static str),
    /// The message could not be encoded (an attachment or signal that is not JSON).
    #[error("cannot encode: {0}")]
    Encode(String),
    /// An `offer` before `ready` on the current connection (or without one): a peer
    /// connection belongs to one WebSocket connection, so offers are not queued.
    #[error("not ready (client is {0})")]
    NotReady(ConnectionState),
}

/// Why a server could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The playbook is unusable.
    #[error("invalid playbook: {0}")]
    Playbook(#[from] PlaybookError),
    /// [`ServerConfig::track_sample_rate`](crate::ServerConfig::track_sample_rate) is not a
    /// rate the VAD runs at.
    #[error("track sample rate {0} Hz is outside the VAD's rates")]
    TrackSampleRate(u32),
}

//! The spec's error codes (an open newtype), the error body of type-3 messages, and the
//! codec's decode and encode errors.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::compact::CompactHeaderError;
use crate::gzip::GzipError;
use crate::header::{HeaderError, MessageType};

/// An error code of the spec's table (4000-4008); open, so any integer survives a round trip.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ErrorCode(pub i32);

macro_rules! codes {
    ($($(#[$doc:meta])* $name:ident = $val:expr;)*) => {
        impl ErrorCode {
            $($(#[$doc])* pub const $name: Self = Self($val);)*

            /// The constant's name if this code has one (`"RATE_LIMITED"`).
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($val => Some(stringify!($name)),)*
                    _ => None,
                }
            }
        }
    };
}

codes! {
    /// 4000 Invalid Message: malformed message structure.
    INVALID_MESSAGE = 4000;
    /// 4001 Authentication Failed: invalid credentials or token.
    AUTHENTICATION_FAILED = 4001;
    /// 4002 Rate Limited: too many requests.
    RATE_LIMITED = 4002;
    /// 4003 Server Error: internal server error.
    SERVER_ERROR = 4003;
    /// 4004 Method Not Found: unknown method.
    METHOD_NOT_FOUND = 4004;
    /// 4005 Invalid Params: invalid method parameters.
    INVALID_PARAMS = 4005;
    /// 4006 Operation Cancelled: task or operation cancelled.
    OPERATION_CANCELLED = 4006;
    /// 4007 Context Too Large: message exceeds size limit.
    CONTEXT_TOO_LARGE = 4007;
    /// 4008 Conflict: state conflict detected.
    CONFLICT = 4008;
}

impl ErrorCode {
    /// The spec's name for the code ("Rate Limited"), if it is one of the table's.
    pub fn description(self) -> Option<&'static str> {
        Some(match self.0 {
            4000 => "Invalid Message",
            4001 => "Authentication Failed",
            4002 => "Rate Limited",
            4003 => "Server Error",
            4004 => "Method Not Found",
            4005 => "Invalid Params",
            4006 => "Operation Cancelled",
            4007 => "Context Too Large",
            4008 => "Conflict",
            _ => return None,
        })
    }
}

impl fmt::Debug for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "ErrorCode({})", self.0),
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The `error` object of a type-3 message: `{"code":4005,"message":"...","data":{...}}`.
///
/// In a binary frame it is the whole payload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The code (4000-4008 in the spec).
    pub code: ErrorCode,
    /// A human-readable message.
    pub message: String,
    /// Details, e.g. `{"field": "result.findings", "reason": "Required field missing"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorBody {
    /// An error body without `data`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// This body with `data` set.
    #[must_use]
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
}

/// Why a frame (binary or JSON) could not be decoded into a message.
///
/// [`DecodeError::code`] gives the spec code to answer with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The 24-byte header was refused (bad magic, version, size or reserved field).
    #[error(transparent)]
    Header(#[from] HeaderError),
    /// The frame is shorter than its header says.
    #[error("frame truncated: header says {expected} payload bytes, {actual} present")]
    Truncated {
        /// The header's data size.
        expected: u32,
        /// Payload bytes present.
        actual: usize,
    },
    /// The frame is longer than its header says (one WebSocket message is one frame).
    #[error("{0} bytes after the frame's payload")]
    TrailingBytes(usize),
    /// The compressed payload could not be inflated (corrupt, truncated, over the cap, ...).
    #[error("compressed payload: {0}")]
    Gzip(#[from] GzipError),
    /// The payload is encrypted ([`Flags::ENCRYPTED`](crate::Flags::ENCRYPTED)); the codec does
    /// not decrypt. Use [`Codec::decode_frame`](crate::Codec::decode_frame) for the raw bytes.
    #[error("payload is encrypted")]
    Encrypted,
    /// A JSON text frame above [`Limits::max_text`](crate::Limits::max_text).
    #[error("text frame of {len} bytes exceeds {max}")]
    TextTooLarge {
        /// The frame's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A batch with more messages than [`Limits::max_batch`](crate::Limits::max_batch).
    #[error("batch of {count} messages exceeds {max}")]
    BatchTooLarge {
        /// Messages in the batch (its `count` or its array's length, whichever is larger).
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A batch whose `count` differs from the number of messages, or a batch inside a batch.
    #[error("invalid batch: {0}")]
    InvalidBatch(&'static str),
    /// The message type does not fit what the message carries: type 3 without an `error`
    /// object, an `error` object under another type, or the `BATCH` flag on a type other
    /// than 6. Refused here so that everything the decoder accepts, the encoder can write.
    #[error("message type {kind:?} does not fit a {body} body")]
    KindMismatch {
        /// The message's type.
        kind: MessageType,
        /// What the message carries (`"error"`, `"batch"` or `"call"`).
        body: &'static str,
    },
    /// The real server's 12-byte header was refused (see [`CompactHeaderError`]).
    #[error(transparent)]
    Compact(#[from] CompactHeaderError),
    /// The message nests arrays and objects deeper than
    /// [`Limits::max_json_depth`](crate::Limits::max_json_depth).
    #[error("message nested deeper than {limit} levels")]
    TooDeep {
        /// The limit, in levels of the message's JSON form.
        limit: usize,
    },
    /// Not UTF-8, not JSON, or not the envelope's shape (`id`, `type`, `method`, ...).
    #[error("invalid message: {0}")]
    Json(#[source] serde_json::Error),
    /// The params of a known method do not fit its type.
    #[error("invalid params for '{method}' at '{field}': {error}")]
    InvalidParams {
        /// The method's wire name.
        method: &'static str,
        /// The offending field as a path inside `params` (`capabilities[0].name`; `.` for
        /// `params` itself).
        field: String,
        /// What serde said.
        #[source]
        error: serde_json::Error,
    },
}

impl DecodeError {
    /// The spec code a server answers this with: 4007 for size and nesting limits, 4005
    /// for bad params, 4000 for everything else.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Header(HeaderError::PayloadTooLarge { .. })
            | Self::Compact(CompactHeaderError::PayloadTooLarge { .. })
            | Self::Gzip(GzipError::TooLarge { .. })
            | Self::TextTooLarge { .. }
            | Self::TooDeep { .. }
            | Self::BatchTooLarge { .. } => ErrorCode::CONTEXT_TOO_LARGE,
            Self::InvalidParams { .. } => ErrorCode::INVALID_PARAMS,
            _ => ErrorCode::INVALID_MESSAGE,
        }
    }

    /// The field an [`InvalidParams`](Self::InvalidParams) error names, e.g.
    /// `capabilities[0].name`.
    pub fn field(&self) -> Option<&str> {
        match self {
            Self::InvalidParams { field, .. } => Some(field),
            _ => None,
        }
    }

    /// An [`ErrorBody`] reporting this error with its [`code`](Self::code).
    /// For [`InvalidParams`](Self::InvalidParams), `data` is
    /// `{"field": ..., "reason": ...}` as in the spec's example.
    pub fn to_error_body(&self) -> ErrorBody {
        let body = ErrorBody::new(self.code(), self.to_string());
        match self {
            Self::InvalidParams { field, error, .. } => body.with_data(serde_json::json!({
                "field": field,
                "reason": error.to_string(),
            })),
            _ => body,
        }
    }
}

/// Why a message could not be encoded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The payload (after compression) is larger than a header's data size allows, or than
    /// the configured [`Limits::max_payload`](crate::Limits::max_payload).
    #[error("payload of {size} bytes exceeds {max}")]
    PayloadTooLarge {
        /// The payload's size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// The message type does not fit the body: [`MessageType::ERROR`] goes with
    /// [`Body::Error`](crate::Body::Error) only, [`MessageType::BATCH`] with
    /// [`Body::Batch`](crate::Body::Batch) only.
    #[error("message type {kind:?} does not fit a {body} body")]
    KindMismatch {
        /// The message's type.
        kind: MessageType,
        /// The body's variant.
        body: &'static str,
    },
    /// A batch above the limit, or a batch inside a batch.
    #[error("invalid batch: {0}")]
    InvalidBatch(&'static str),
    /// [`Flags::ENCRYPTED`](crate::Flags::ENCRYPTED) is set: the codec does not encrypt;
    /// encrypt the payload yourself and use [`Codec::encode_frame`](crate::Codec::encode_frame).
    #[error("the codec does not encrypt")]
    Encrypted,
    /// A value could not be serialized (only possible for non-string map keys in `Value`s
    /// built by hand, or floats that are not finite).
    #[error("serialize: {0}")]
    Json(#[from] serde_json::Error),
}

/// A command the [`Agent`](crate::Agent) refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentCommandError {
    /// No connection is open (the agent is between attempts, or stopped).
    #[error("not connected")]
    NotConnected,
    /// The agent does not hold this task: never assigned, completed already, or forgotten
    /// with the connection it came on.
    #[error("unknown task {0:?}")]
    UnknownTask(String),
    /// A `protocol.set_binary` is awaiting its answer already.
    #[error("a protocol.set_binary is pending")]
    SetBinaryPending,
    /// No collaboration request awaits an answer under this id.
    #[error("unknown collaboration request")]
    UnknownCollaboration,
    /// The agent stopped ([`Agent::shutdown`](crate::Agent::shutdown) or
    /// [`Agent::close`](crate::Agent::close)).
    #[error("the agent stopped")]
    Stopped,
    /// The message could not be encoded (a `Value` that cannot be written, or a payload
    /// over the codec's limit).
    #[error("encode: {0}")]
    Encode(String),
}

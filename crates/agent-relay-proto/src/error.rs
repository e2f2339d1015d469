//! Every error type of the crate: decoding ([`DecodeError`]), what a peer did wrong
//! ([`ProtocolError`]), the relay's and the host's commands ([`CommandError`],
//! [`HostCommandError`]), and the host's tools ([`ToolError`], [`ParamError`],
//! [`HistoryFull`]).

use std::borrow::Cow;

use agentwire_core::FrameError;

use crate::message::{ErrorCode, Role};
use crate::texts;

/// Why a message body could not be decoded. Each maps to the error the relay answers with
/// ([`code`](Self::code), [`text`](Self::text)) and keeps the `id` it could recover, which the
/// reply carries as `replyTo`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// A body larger than the configured maximum (answered `LIMIT_EXCEEDED`) or a binary
    /// frame that is not UTF-8, found before parsing.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// Not JSON (or trailing garbage, or a duplicated envelope field).
    #[error("invalid JSON: {0}")]
    Json(String),
    /// Valid JSON that is not an object.
    #[error("message is not a JSON object")]
    NotAnObject,
    /// No `type`, or a `type` that is not a string.
    #[error("missing or non-string \"type\"")]
    MissingType {
        /// The message's `id`, if it had a string one.
        id: Option<String>,
    },
    /// `v` is missing or not `"mvp-0.2"`.
    #[error("\"v\" must be \"mvp-0.2\"")]
    Version {
        /// The message's `id`, if it had a string one.
        id: Option<String>,
    },
    /// `id` or `replyTo` is not a string, or `payload` is missing or not an object.
    #[error("invalid envelope field {field:?}")]
    InvalidField {
        /// `"id"`, `"replyTo"` or `"payload"`.
        field: &'static str,
        /// The message's `id`, if it had a string one.
        id: Option<String>,
    },
    /// A `type` the decoding sender's enum has no variant for (typed decode only).
    #[error("unknown message type {msg_type:?}")]
    UnknownType {
        /// The `type` (at most 128 bytes of it).
        msg_type: String,
        /// The message's `id`, if it had one.
        id: Option<String>,
    },
    /// Arrays and objects nested deeper than the limit (the envelope counts as one level):
    /// neither forwarded nor logged, since no JSON reader would read it back.
    #[error("message nested deeper than {limit} levels")]
    TooDeep {
        /// The limit.
        limit: usize,
        /// The message's `id`, if it had a string one.
        id: Option<String>,
    },
    /// The payload does not fit the type's payload struct (typed decode only).
    #[error("invalid {msg_type} payload: {reason}")]
    InvalidPayload {
        /// The message type.
        msg_type: &'static str,
        /// The message's `id`, if it had one.
        id: Option<String>,
        /// What serde said.
        reason: String,
    },
}

impl DecodeError {
    /// The error code the relay answers this failure with.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Frame(FrameError::TooLarge { .. }) => ErrorCode::LIMIT_EXCEEDED,
            _ => ErrorCode::INVALID_MESSAGE,
        }
    }

    /// The request id recovered from the message, sent back as `replyTo`.
    pub fn reply_to(&self) -> Option<&str> {
        match self {
            Self::MissingType { id }
            | Self::Version { id }
            | Self::InvalidField { id, .. }
            | Self::TooDeep { id, .. }
            | Self::UnknownType { id, .. }
            | Self::InvalidPayload { id, .. } => id.as_deref(),
            _ => None,
        }
    }

    /// The `message` text of the error reply.
    pub fn text(&self) -> Cow<'static, str> {
        match self {
            Self::Frame(FrameError::TooLarge { len, max }) => Cow::Owned(format!(
                "Message of {len} bytes exceeds the limit of {max} bytes."
            )),
            Self::Frame(_) | Self::Json(_) | Self::NotAnObject | Self::MissingType { .. } => {
                Cow::Borrowed(texts::INVALID_JSON)
            }
            Self::Version { .. } => Cow::Borrowed(texts::BAD_VERSION),
            Self::InvalidField { field, .. } => Cow::Borrowed(match *field {
                "id" => texts::BAD_ID,
                "replyTo" => texts::BAD_REPLY_TO,
                _ => texts::BAD_PAYLOAD,
            }),
            Self::TooDeep { limit, .. } => Cow::Owned(format!(
                "Message nested deeper than {limit} levels (the envelope counts as one)."
            )),
            Self::UnknownType { msg_type, .. } => {
                Cow::Owned(format!("Unknown message type: {msg_type}"))
            }
            Self::InvalidPayload {
                msg_type, reason, ..
            } => Cow::Owned(format!("Invalid {msg_type} payload: {reason}")),
        }
    }
}

/// Something a peer did wrong, reported as
/// [`RelayEvent::ProtocolViolation`](crate::RelayEvent::ProtocolViolation) for logs and metrics.
/// The wire reply, if any, has already been queued.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// A message that could not be decoded.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A message other than `relay.join` before joining.
    #[error("{msg_type:?} before relay.join")]
    NotJoined {
        /// Its type (at most 128 bytes of it).
        msg_type: String,
    },
    /// A `type` the connection's role may not send.
    #[error("type {msg_type:?} is not allowed for role {role}")]
    TypeNotAllowed {
        /// The sender's role.
        role: Role,
        /// Its type (at most 128 bytes of it).
        msg_type: String,
    },
    /// A `relay.join` with a bad `role` or `sessionId`.
    #[error("invalid relay.join: {reason}")]
    InvalidJoin {
        /// The text sent back.
        reason: &'static str,
    },
    /// A limit refused the message (the [`Limits`](crate::Limits) field is named).
    #[error("limit reached: {limit}")]
    Limit {
        /// The `Limits` field, e.g. `"max_pending_per_agent"`, or `"rate"`.
        limit: &'static str,
    },
    /// No `relay.join` within [`RelayConfig::join_timeout`](crate::RelayConfig::join_timeout)
    /// (closed 1008).
    #[error("no relay.join within the deadline")]
    JoinTimeout,
}

impl ProtocolError {
    /// The error code the relay answered with (or would have, for [`JoinTimeout`](Self::JoinTimeout)).
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Decode(e) => e.code(),
            Self::NotJoined { .. } | Self::JoinTimeout => ErrorCode::SESSION_NOT_ACTIVE,
            Self::TypeNotAllowed { .. } | Self::InvalidJoin { .. } => ErrorCode::INVALID_MESSAGE,
            Self::Limit { .. } => ErrorCode::LIMIT_EXCEEDED,
        }
    }
}

/// A command the caller gave the relay that it cannot carry out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// The connection is unknown or already closing.
    #[error("no such connection")]
    UnknownConnection,
}

/// A command the caller gave the [`Host`](crate::Host) that it cannot carry out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostCommandError {
    /// No study session is active.
    #[error("no active session")]
    NoSession,
    /// The session is already ending (its log flush is awaited).
    #[error("the session is already ending")]
    Ending,
    /// The ticket is not the one of the session end in progress (it was confirmed, failed,
    /// timed out, or never existed).
    #[error("no session end with this ticket is in progress")]
    UnknownTicket,
    /// The chat timeline is full
    /// ([`HostLimits::max_history_entries`](crate::HostLimits::max_history_entries)).
    #[error("the chat history is full")]
    HistoryFull,
    /// Not joined to the relay and the push queue is full
    /// ([`HostLimits::max_queued_pushes`](crate::HostLimits::max_queued_pushes)).
    #[error("not joined to the relay and the push queue is full")]
    QueueFull,
    /// Not a session id of the form `s-YYYYMMDD-NNN`.
    #[error("not a session id of the form s-YYYYMMDD-NNN")]
    InvalidSessionId,
    /// A participant's action ([`Host::user_action`](crate::Host::user_action)) was refused
    /// as an agent's `tool.call` of it would be: no loaded spec, a tool the stage does not
    /// offer, params that do not fit, or the tool's own [`ToolError`].
    #[error("{code:?}: {message}")]
    ActionRefused {
        /// The code an agent would get.
        code: ErrorCode,
        /// The text an agent would get.
        message: String,
    },
}

/// Why a tool refused or failed; the host answers the agent with an `error` carrying
/// [`code`](Self::code) and the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The params fit the schema but not the state, e.g. an `itemId` that is not on
    /// screen: `INVALID_PARAMS`. Name the parameter in the text.
    #[error("{0}")]
    InvalidParams(String),
    /// The tool ran and failed: `TOOL_EXECUTION_FAILED`.
    #[error("{0}")]
    Failed(String),
}

impl ToolError {
    /// [`ToolError::InvalidParams`] with `message`.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::InvalidParams(message.into())
    }

    /// [`ToolError::Failed`] with `message`.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed(message.into())
    }

    /// The error code the agent gets.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::InvalidParams(_) => ErrorCode::INVALID_PARAMS,
            Self::Failed(_) => ErrorCode::TOOL_EXECUTION_FAILED,
        }
    }
}

/// The chat timeline was full ([`HostLimits::max_history_entries`](crate::HostLimits)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the chat history is full")]
pub struct HistoryFull;

/// Why params do not fit a tool's schema.
///
/// Each names the parameter (`quantity`, `filter.value`, `items[0].itemId`; `params` for the
/// whole object), and `Display` reads as the end of a sentence that starts with the tool's
/// name: the host answers `INVALID_PARAMS` `"setQuantity requires quantity >= 0"`, the spec's
/// own example.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParamError {
    /// A `required` parameter is absent.
    #[error("requires {param}")]
    Missing {
        /// The parameter.
        param: String,
    },
    /// A value of the wrong JSON type (`type`).
    #[error("requires {param} to be {expected}")]
    WrongType {
        /// The parameter.
        param: String,
        /// What the schema allows, e.g. `"an integer"` or `"a string or null"`.
        expected: String,
    },
    /// A value outside the schema's `enum`.
    #[error("requires {param} to be one of {allowed}")]
    NotAllowed {
        /// The parameter.
        param: String,
        /// The allowed values as JSON, comma-separated: `"asc", "desc"`.
        allowed: String,
    },
    /// A number below `minimum`.
    #[error("requires {param} >= {minimum}")]
    BelowMinimum {
        /// The parameter.
        param: String,
        /// The minimum, as written in the schema.
        minimum: String,
    },
    /// A number above `maximum`.
    #[error("requires {param} <= {maximum}")]
    AboveMaximum {
        /// The parameter.
        param: String,
        /// The maximum, as written in the schema.
        maximum: String,
    },
    /// A parameter the schema does not list while it sets `additionalProperties: false`.
    #[error("does not take {param}")]
    Unexpected {
        /// The parameter.
        param: String,
    },
}

impl ParamError {
    /// The parameter at fault (`params` for the whole object).
    pub fn param(&self) -> &str {
        match self {
            Self::Missing { param }
            | Self::WrongType { param, .. }
            | Self::NotAllowed { param, .. }
            | Self::BelowMinimum { param, .. }
            | Self::AboveMaximum { param, .. }
            | Self::Unexpected { param } => param,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_errors_map_to_codes_texts_and_reply_ids() {
        let e = DecodeError::Version {
            id: Some("r1".into()),
        };
        assert_eq!(e.code(), ErrorCode::INVALID_MESSAGE);
        assert_eq!(e.reply_to(), Some("r1"));
        assert_eq!(e.text(), texts::BAD_VERSION);
        let big = DecodeError::Frame(FrameError::TooLarge { len: 10, max: 5 });
        assert_eq!(big.code(), ErrorCode::LIMIT_EXCEEDED);
        assert_eq!(big.reply_to(), None);
        assert_eq!(DecodeError::NotAnObject.text(), texts::INVALID_JSON);
    }
}

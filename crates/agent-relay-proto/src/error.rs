//! Error codes (an open newtype), the exact texts the relay sends, and the crate's error enums.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::message::Role;

/// An error code of the `error` message (`payload.code`).
///
/// Open: a code this crate does not know survives a decode and re-encode unchanged. The
/// spec's six codes and our own [`LIMIT_EXCEEDED`](Self::LIMIT_EXCEEDED) and
/// [`LOG_FLUSH_FAILED`](Self::LOG_FLUSH_FAILED) have named constants, and `Debug` prints a
/// known code bare (`INVALID_MESSAGE`).
#[derive(Clone)]
pub struct ErrorCode(Cow<'static, str>);

macro_rules! codes {
    ($($(#[$doc:meta])* $name:ident;)*) => {
        impl ErrorCode {
            $($(#[$doc])* pub const $name: Self = Self(Cow::Borrowed(stringify!($name)));)*

            /// Every named code, in the spec's order (the relay's own last).
            pub const KNOWN: &'static [ErrorCode] = &[$(Self::$name),*];
        }
    };
}

codes! {
    /// The message is not valid JSON, has no string `type`, a wrong `v`, a malformed envelope,
    /// a `type` the sender's role may not send, or an invalid `relay.join`.
    INVALID_MESSAGE;
    /// There is no session to talk to: not joined yet, no host connected, or the host was
    /// replaced or left before replying.
    SESSION_NOT_ACTIVE;
    /// `tool.call` named a tool the host does not have (sent by the host).
    UNKNOWN_TOOL;
    /// `tool.call` params do not fit the tool's schema (sent by the host).
    INVALID_PARAMS;
    /// No UI spec is loaded, so a tool cannot run (sent by the host).
    NO_ACTIVE_SPEC;
    /// The tool ran and failed (sent by the host).
    TOOL_EXECUTION_FAILED;
    /// Ours, not the spec's: a relay limit (message size, rate, pending requests, sessions,
    /// agents, connections, id length) refused the message. The `message` names the limit.
    /// The [`Host`](crate::Host) sends it too, when the chat timeline is full.
    LIMIT_EXCEEDED;
    /// Ours, not the spec's: the study log of a session was not saved. Sent by the
    /// [`Host`](crate::Host) when `session.end` could not flush the study log (the session
    /// stays active and its state is not reset), and by the reference relay in place of a
    /// `session.ended` whose log could not be written or synced.
    LOG_FLUSH_FAILED;
}

impl ErrorCode {
    /// A code from its wire text (known codes borrow their constant, others are kept as sent).
    pub fn new(code: impl Into<Cow<'static, str>>) -> Self {
        let code = code.into();
        match Self::KNOWN.iter().find(|k| k.as_str() == code.as_ref()) {
            Some(known) => known.clone(),
            None => Self(code),
        }
    }

    /// The wire text, e.g. `"SESSION_NOT_ACTIVE"`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is one of the named codes.
    pub fn is_known(&self) -> bool {
        Self::KNOWN.contains(self)
    }
}

impl PartialEq for ErrorCode {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for ErrorCode {}

impl std::hash::Hash for ErrorCode {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl fmt::Debug for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_known() {
            f.write_str(self.as_str())
        } else {
            write!(f, "ErrorCode({:?})", self.as_str())
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Self::new)
    }
}

/// The exact `message` texts of the errors the relay sends.
///
/// The first five are the reference relay's, word for word (INTEROP.md); the rest are ours.
pub mod texts {
    /// Unparseable input, or no string `type` (INVALID_MESSAGE; the reference's text).
    pub const INVALID_JSON: &str = "Message must be valid JSON with a string \"type\".";
    /// Any message but `relay.join` before joining (SESSION_NOT_ACTIVE; the reference's text).
    pub const NOT_JOINED: &str = "You must send relay.join before other messages.";
    /// An agent message while the session has no host (SESSION_NOT_ACTIVE; the reference's text).
    pub const NO_HOST: &str = "No active host connection for this session.";
    /// To a host replaced by a newer one, before its close 1000 (SESSION_NOT_ACTIVE; the
    /// reference's text).
    pub const HOST_REPLACED: &str = "Host connection replaced by a newer host.";
    /// `relay.join` whose `role` is neither `host` nor `agent` (INVALID_MESSAGE; the reference's
    /// text).
    pub const INVALID_ROLE: &str = "relay.join payload.role must be \"host\" or \"agent\".";
    /// `relay.join` whose `sessionId` is present but not a string (INVALID_MESSAGE; ours, the
    /// reference silently uses `"default"`).
    pub const INVALID_SESSION_ID: &str = "relay.join payload.sessionId must be a string.";
    /// To each agent whose request was outstanding when the host left or was replaced
    /// (SESSION_NOT_ACTIVE, with `replyTo`; ours, the reference never answers these).
    pub const HOST_GONE: &str = "Host disconnected before replying.";
    /// `v` missing or not `"mvp-0.2"` (INVALID_MESSAGE; ours, the reference does not check `v`).
    pub const BAD_VERSION: &str = "Unsupported protocol version: \"v\" must be \"mvp-0.2\".";
    /// `id` present but not a string (INVALID_MESSAGE; ours).
    pub const BAD_ID: &str = "Envelope field \"id\" must be a string.";
    /// `replyTo` present but not a string (INVALID_MESSAGE; ours).
    pub const BAD_REPLY_TO: &str = "Envelope field \"replyTo\" must be a string.";
    /// `payload` missing or not an object (INVALID_MESSAGE; ours).
    pub const BAD_PAYLOAD: &str = "Envelope field \"payload\" must be an object.";
    /// A message over the rate limit (LIMIT_EXCEEDED; ours).
    pub const RATE_LIMITED: &str = "Rate limit exceeded; message dropped.";
    /// An agent request over `max_pending_per_agent` (LIMIT_EXCEEDED; ours).
    pub const TOO_MANY_PENDING: &str = "Too many requests awaiting a reply; message dropped.";
    /// A join that would create one session too many (LIMIT_EXCEEDED; ours).
    pub const TOO_MANY_SESSIONS: &str = "The relay has reached its session limit.";
    /// An agent join into a full session (LIMIT_EXCEEDED; ours).
    pub const TOO_MANY_AGENTS: &str = "This session has reached its agent limit.";
    /// Sent just before closing a connection over `max_connections` (LIMIT_EXCEEDED; ours).
    pub const TOO_MANY_CONNECTIONS: &str = "The relay has reached its connection limit.";
    /// An `id` longer than `max_id_bytes` (LIMIT_EXCEEDED; ours).
    pub const ID_TOO_LONG: &str = "Envelope field \"id\" is too long.";
    /// A `sessionId` longer than `max_session_id_bytes` (LIMIT_EXCEEDED; ours).
    pub const SESSION_ID_TOO_LONG: &str = "relay.join payload.sessionId is too long.";
    /// A message whose study-log records would pass `max_log_bytes_per_session`
    /// (LIMIT_EXCEEDED; ours).
    pub const LOG_FULL: &str =
        "The study log of this session is full; message dropped (it ends at session.ended).";
}

/// Why a message body could not be decoded. Each maps to the error the relay answers with
/// ([`code`](Self::code), [`text`](Self::text)) and keeps the `id` it could recover, which the
/// reply carries as `replyTo`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The body is larger than the configured maximum (checked before parsing).
    #[error("message of {len} bytes exceeds the limit of {max}")]
    TooLarge {
        /// Body length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A binary frame that is not UTF-8.
    #[error("message is not valid UTF-8")]
    NotUtf8,
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
            Self::TooLarge { .. } => ErrorCode::LIMIT_EXCEEDED,
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
            Self::TooLarge { len, max } => Cow::Owned(format!(
                "Message of {len} bytes exceeds the limit of {max} bytes."
            )),
            Self::NotUtf8 | Self::Json(_) | Self::NotAnObject | Self::MissingType { .. } => {
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

/// The exact `message` texts of the errors the [`Host`](crate::Host) sends (all ours: the
/// reference host skips these checks, INTEROP.md).
pub mod host_texts {
    /// A request other than `session.start` outside a session (SESSION_NOT_ACTIVE).
    pub const NO_SESSION: &str = "No active session. Send session.start first.";
    /// `tool.call`, `agent.message` or `session.end` while the session's end is flushing
    /// its logs (SESSION_NOT_ACTIVE).
    pub const SESSION_ENDING: &str = "The session is ending.";
    /// `tool.call` with a missing, non-string or blank `reason` (INVALID_PARAMS).
    pub const REASON_REQUIRED: &str = "tool.call requires a non-empty reason.";
    /// `tool.call` without a string `toolName` (INVALID_MESSAGE).
    pub const TOOL_NAME_REQUIRED: &str = "tool.call requires a string toolName.";
    /// `tool.call` while no UI spec is loaded (NO_ACTIVE_SPEC).
    pub const NO_ACTIVE_SPEC: &str = "No UI spec is loaded.";
    /// `agent.message` when the chat timeline is full (LIMIT_EXCEEDED).
    pub const HISTORY_FULL: &str = "The chat history is full.";
    /// The application did not confirm the log flush in time (LOG_FLUSH_FAILED).
    pub const FLUSH_TIMEOUT: &str = "The study log was not flushed in time.";
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_spec_list_plus_ours() {
        let names: Vec<&str> = ErrorCode::KNOWN.iter().map(ErrorCode::as_str).collect();
        assert_eq!(
            names,
            [
                "INVALID_MESSAGE",
                "SESSION_NOT_ACTIVE",
                "UNKNOWN_TOOL",
                "INVALID_PARAMS",
                "NO_ACTIVE_SPEC",
                "TOOL_EXECUTION_FAILED",
                "LIMIT_EXCEEDED",
                "LOG_FLUSH_FAILED"
            ]
        );
        assert_eq!(format!("{:?}", ErrorCode::UNKNOWN_TOOL), "UNKNOWN_TOOL");
        assert_eq!(format!("{:?}", ErrorCode::new("X_1")), "ErrorCode(\"X_1\")");
        assert!(ErrorCode::new(String::from("NO_ACTIVE_SPEC")).is_known());
    }

    #[test]
    fn unknown_codes_round_trip() {
        let c: ErrorCode = serde_json::from_str("\"RATE_LIMITED_BY_HOST\"").unwrap();
        assert!(!c.is_known());
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            "\"RATE_LIMITED_BY_HOST\""
        );
    }

    #[test]
    fn decode_errors_map_to_codes_texts_and_reply_ids() {
        let e = DecodeError::Version {
            id: Some("r1".into()),
        };
        assert_eq!(e.code(), ErrorCode::INVALID_MESSAGE);
        assert_eq!(e.reply_to(), Some("r1"));
        assert_eq!(e.text(), texts::BAD_VERSION);
        let big = DecodeError::TooLarge { len: 10, max: 5 };
        assert_eq!(big.code(), ErrorCode::LIMIT_EXCEEDED);
        assert_eq!(big.reply_to(), None);
        assert_eq!(DecodeError::NotAnObject.text(), texts::INVALID_JSON);
    }
}

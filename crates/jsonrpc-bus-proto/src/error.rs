//! Error codes (an open newtype), the JSON-RPC error object, and the crate's error enums.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::jsonrpc::Id;

agentwire_core::open_codes! {
    /// A JSON-RPC error code. Open: unknown codes from the wire survive a round trip.
    pub struct ErrorCode(i32) [with_value, serde], text fn message;
    /// -32700: the message is not JSON (or not UTF-8). Always answered with `id: null`.
    PARSE_ERROR = -32700, "Parse error";
    /// -32600: valid JSON that is not a valid request object; the spec also names it for a
    /// missing or empty `topic`.
    INVALID_REQUEST = -32600, "Invalid Request";
    /// -32601: no such method.
    METHOD_NOT_FOUND = -32601, "Method not found";
    /// -32602: params of the wrong shape.
    INVALID_PARAMS = -32602, "Invalid params";
    /// -32603: the bus failed internally.
    INTERNAL_ERROR = -32603, "Internal error";
    /// -32000 (ours): a method other than `initialize` before `initialize`. The reference bus
    /// uses -32001 here, which the spec assigns to "Already initialized"; we keep the two apart.
    NOT_INITIALIZED = -32000, "Not initialized";
    /// -32001: a second `initialize` on one connection.
    ALREADY_INITIALIZED = -32001, "Already initialized";
    /// -32002: `clientInfo` is neither `null` nor an object with string `name`/`version`.
    INVALID_CLIENT_INFO = -32002, "Invalid client info";
    /// -32003: `subscribe` to a topic string this connection already subscribed to.
    ALREADY_SUBSCRIBED = -32003, "Already subscribed";
    /// -32004: `unsubscribe` from a topic string this connection never subscribed to.
    SUBSCRIPTION_NOT_FOUND = -32004, "Subscription not found";
    /// -32005 (ours): a configured limit was reached (message size, batch length,
    /// subscriptions, pending publishes, connections); `data` names the limit.
    LIMIT_EXCEEDED = -32005, "Limit exceeded";
}

/// The JSON-RPC `error` member: `{code, message, data?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// The code.
    pub code: ErrorCode,
    /// A short description.
    pub message: String,
    /// Optional details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

impl ErrorObject {
    /// An error with the code's standard message.
    pub fn new(code: ErrorCode) -> Self {
        Self {
            code,
            message: code.message().unwrap_or("Server error").to_owned(),
            data: None,
        }
    }

    /// An error with the code's standard message and a `data` string.
    pub fn with_data(code: ErrorCode, data: impl Into<String>) -> Self {
        Self {
            data: Some(serde_json::Value::String(data.into())),
            ..Self::new(code)
        }
    }
}

impl fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.code.0, self.message)?;
        if let Some(data) = &self.data {
            write!(f, " ({data})")?;
        }
        Ok(())
    }
}

/// Why a message body could not be decoded; each maps to the JSON-RPC error to answer with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// A binary frame that is not UTF-8 (-32700).
    #[error("message is not valid UTF-8")]
    NotUtf8,
    /// Not JSON (-32700).
    #[error("invalid JSON: {0}")]
    Json(String),
    /// The body is larger than the configured maximum (-32005, id null).
    #[error("message of {len} bytes exceeds the limit of {max}")]
    TooLarge {
        /// Body length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// `[]` (-32600, id null).
    #[error("empty batch")]
    EmptyBatch,
    /// A batch longer than the configured maximum (-32005, id null).
    #[error("batch exceeds the limit of {max} entries")]
    BatchTooLarge {
        /// The limit.
        max: usize,
    },
    /// `jsonrpc` is missing or not `"2.0"` (-32600, id recovered).
    #[error("jsonrpc must be \"2.0\"")]
    Version {
        /// The request's id, when it had a valid one.
        id: Id,
    },
    /// Valid JSON that is not a JSON-RPC request, notification or response (-32600, id
    /// recovered when it can be).
    #[error("invalid request: {reason}")]
    InvalidRequest {
        /// The request's id, when it had a valid one.
        id: Id,
        /// What is wrong.
        reason: &'static str,
    },
}

impl DecodeError {
    /// The JSON-RPC error code this failure is answered with.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::NotUtf8 | Self::Json(_) => ErrorCode::PARSE_ERROR,
            Self::TooLarge { .. } | Self::BatchTooLarge { .. } => ErrorCode::LIMIT_EXCEEDED,
            Self::EmptyBatch | Self::Version { .. } | Self::InvalidRequest { .. } => {
                ErrorCode::INVALID_REQUEST
            }
        }
    }

    /// The id to answer with: the recovered request id, or `null`.
    pub fn id(&self) -> Id {
        match self {
            Self::Version { id } | Self::InvalidRequest { id, .. } => id.clone(),
            _ => Id::Null,
        }
    }

    /// The error object to send back.
    pub fn to_error_object(&self) -> ErrorObject {
        match self {
            Self::Json(_) | Self::NotUtf8 => ErrorObject::new(self.code()),
            _ => ErrorObject::with_data(self.code(), self.to_string()),
        }
    }
}

/// Something a peer did wrong, reported as [`BusEvent::ProtocolViolation`] or
/// [`ClientEvent::ProtocolViolation`] for logs and metrics (the wire reply, if any, has already
/// been sent).
///
/// [`BusEvent::ProtocolViolation`]: crate::BusEvent::ProtocolViolation
/// [`ClientEvent::ProtocolViolation`]: crate::ClientEvent::ProtocolViolation
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// A message that could not be decoded.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A response whose id matches no request this side has outstanding (dropped).
    #[error("response to an unknown request id")]
    UnknownResponse,
    /// A response from a connection other than the one the request went to (dropped).
    #[error("response from a connection the request was not sent to")]
    WrongResponder,
    /// A request answered with an error object.
    #[error("request failed: {0}")]
    ErrorReply(ErrorObject),
    /// A request that the peer should not send in this role or state.
    #[error("unexpected request {method:?}")]
    UnexpectedRequest {
        /// Its method.
        method: String,
    },
    /// No `initialize` within the configured time (connection closed 1008).
    #[error("no initialize within the deadline")]
    InitializeTimeout,
    /// A notification the bus refused; a notification cannot be answered, so this event is
    /// the only trace of the error a request would have got.
    #[error("notification refused: {0}")]
    NotificationRefused(ErrorObject),
    /// A delivery whose payload nests deeper than the client's
    /// [`ClientConfig::max_payload_depth`](crate::ClientConfig::max_payload_depth): answered
    /// -32005 and not surfaced (a bus that forwards anything may send one).
    #[error("delivered payload nested deeper than {limit} levels")]
    PayloadTooDeep {
        /// The limit.
        limit: usize,
    },
}

/// A command the caller gave a machine that it cannot carry out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// The connection is unknown or gone.
    #[error("no such connection")]
    UnknownConnection,
    /// The topic is empty or longer than the limit.
    #[error("invalid topic")]
    InvalidTopic,
    /// A limit in the config was reached (named).
    #[error("limit reached: {0}")]
    Limit(&'static str),
    /// The delivery is unknown or already answered.
    #[error("no such delivery")]
    UnknownDelivery,
    /// The payload did not serialize to JSON, or the bus refuses it (not an object under
    /// [`PayloadRule::Object`](crate::PayloadRule::Object), or nested too deep).
    #[error("payload refused: {0}")]
    Payload(String),
    /// Already subscribed to this exact pattern.
    #[error("already subscribed")]
    AlreadySubscribed,
    /// Not subscribed to this exact pattern.
    #[error("not subscribed")]
    NotSubscribed,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_spec_table() {
        assert_eq!(ErrorCode::PARSE_ERROR.0, -32700);
        assert_eq!(ErrorCode::INVALID_REQUEST.0, -32600);
        assert_eq!(ErrorCode::METHOD_NOT_FOUND.0, -32601);
        assert_eq!(ErrorCode::INVALID_PARAMS.0, -32602);
        assert_eq!(ErrorCode::INTERNAL_ERROR.0, -32603);
        assert_eq!(ErrorCode::ALREADY_INITIALIZED.0, -32001);
        assert_eq!(ErrorCode::INVALID_CLIENT_INFO.0, -32002);
        assert_eq!(ErrorCode::ALREADY_SUBSCRIBED.0, -32003);
        assert_eq!(ErrorCode::SUBSCRIPTION_NOT_FOUND.0, -32004);
        assert_eq!(
            format!("{:?}", ErrorCode(-32003)),
            "ALREADY_SUBSCRIBED(-32003)"
        );
        assert_eq!(format!("{:?}", ErrorCode(7)), "ErrorCode(7)");
        assert_eq!(ErrorCode(7).message(), None);
    }

    #[test]
    fn decode_errors_map_to_codes_and_ids() {
        let e = DecodeError::InvalidRequest {
            id: Id::Number(5.into()),
            reason: "x",
        };
        assert_eq!(e.code(), ErrorCode::INVALID_REQUEST);
        assert_eq!(e.id(), Id::Number(5.into()));
        assert_eq!(DecodeError::Json("x".into()).id(), Id::Null);
        assert_eq!(
            DecodeError::Json("x".into()).to_error_object(),
            ErrorObject::new(ErrorCode::PARSE_ERROR)
        );
    }
}

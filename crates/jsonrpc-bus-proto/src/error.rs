//! Every error enum of the crate: decoding, the peer's protocol errors, the caller's
//! command errors and a client request's failure.

use agentwire_core::FrameError;

use crate::message::{ErrorCode, ErrorObject, Id};

/// Why a message body could not be decoded; each maps to the JSON-RPC error to answer with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// A body larger than the configured maximum (-32005, id null) or a binary frame that
    /// is not UTF-8 (-32700), found before parsing.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// Not JSON (-32700).
    #[error("invalid JSON: {0}")]
    Json(String),
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
            Self::Frame(FrameError::TooLarge { .. }) | Self::BatchTooLarge { .. } => {
                ErrorCode::LIMIT_EXCEEDED
            }
            Self::Frame(_) | Self::Json(_) => ErrorCode::PARSE_ERROR,
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
            Self::Json(_) | Self::Frame(FrameError::NotUtf8) => ErrorObject::new(self.code()),
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

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// The bus answered with an error.
    #[error("rejected: {0}")]
    Rejected(ErrorObject),
    /// No answer within the request timeout.
    #[error("timed out")]
    TimedOut,
    /// The connection ended before the answer.
    #[error("disconnected")]
    Disconnected,
    /// The caller withdrew it (an `unsubscribe` before the `subscribe` was sent).
    #[error("cancelled")]
    Cancelled,
    /// The answer did not have the expected shape.
    #[error("malformed result")]
    Malformed,
}

#[cfg(test)]
mod tests {
    use super::*;

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

//! Error types: decode errors, protocol errors and command errors.

use agentwire_core::{CloseCode, FrameError};

use crate::message::Hello;
use crate::texts;

/// Longest JSON text of a wrong-typed field kept in [`InvalidHello::found`] (longer is cut).
const MAX_FOUND: usize = 64;

/// A `hello` with a field of the wrong type: what decoded, and the first wrong field.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InvalidHello {
    /// The hello's well-typed fields; each wrong-typed one reads as absent (or its default).
    pub hello: Hello,
    /// The first wrong-typed field, as the wire spells it (`agentId`, `protocolVersion` or
    /// the version alias that was sent, `botUserId`, `tag`, `ready`, `guildIds`, `poolId`,
    /// `runnerSecret`, in that order).
    pub field: &'static str,
    /// What the spec says the field holds: `"a string"`, `"a boolean"`, ...
    pub expected: &'static str,
    /// The JSON text the field held, cut to 64 bytes at a character boundary.
    pub found: String,
}

impl InvalidHello {
    pub(crate) fn new(
        hello: Hello,
        field: &'static str,
        expected: &'static str,
        found: &str,
    ) -> Self {
        let mut end = found.len().min(MAX_FOUND);
        while !found.is_char_boundary(end) {
            end -= 1;
        }
        Self {
            hello,
            field,
            expected,
            found: found[..end].to_owned(),
        }
    }

    /// Whether the wrong-typed field is the protocol version (under any of its names).
    pub fn is_version(&self) -> bool {
        matches!(
            self.field,
            "protocolVersion" | "protocol_version" | "protocolversion" | "version"
        )
    }
}

/// Why one message body could not be decoded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Found before parsing: the controller answers a body over its limit with `error`
    /// "Frame too large" and a binary frame that is not UTF-8 as "Invalid JSON".
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// Not JSON (syntax error, truncation, nesting beyond 128 levels).
    #[error("invalid JSON: {0}")]
    InvalidJson(#[source] serde_json::Error),
    /// Valid JSON that is not an object.
    #[error("message is not a JSON object")]
    NotAnObject,
    /// An object whose `type` is missing, not a string, or not one this sender sends.
    #[error("unknown message type")]
    UnknownType,
    /// A known type whose fields are missing or of the wrong type.
    #[error("invalid message fields: {0}")]
    InvalidFields(#[source] serde_json::Error),
    /// A `hello` with a field present but of the wrong type (the controller answers it with
    /// `error` and close 1008; see the crate docs' "Spec decisions").
    #[error("invalid hello: {} must be {}, found {}", .0.field, .0.expected, .0.found)]
    InvalidHello(Box<InvalidHello>),
}

impl DecodeError {
    /// The `error` message text the controller answers with, per INTEROP.md; `None` where
    /// the spec says the message is ignored silently (invalid fields).
    pub fn reply_text(&self) -> Option<&'static str> {
        match self {
            Self::Frame(FrameError::TooLarge { .. }) => Some(texts::ERR_FRAME_TOO_LARGE),
            Self::Frame(_) | Self::InvalidJson(_) => Some(texts::ERR_INVALID_JSON),
            Self::NotAnObject | Self::UnknownType => Some(texts::ERR_UNKNOWN_TYPE),
            Self::InvalidFields(_) | Self::InvalidHello(_) => None,
        }
    }
}

/// A rule of the protocol that a peer broke, reported in `ProtocolViolation` events.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The body did not decode.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// `hello` without a protocol version.
    #[error("hello without protocolVersion")]
    MissingVersion,
    /// `hello` with a version outside the supported set.
    #[error("incompatible protocol version {0}")]
    IncompatibleVersion(String),
    /// Wrong or missing runner secret.
    #[error("unauthorized runner secret")]
    Unauthorized,
    /// `hello` with a field of the wrong type (other than the version, which counts as an
    /// incompatible version).
    #[error("hello field {field} must be {expected}")]
    InvalidHello {
        /// The field, as the wire spells it.
        field: &'static str,
        /// What it must hold.
        expected: &'static str,
    },
    /// `hello` without `agentId` (ignored).
    #[error("hello without agentId")]
    MissingAgentId,
    /// No valid `hello` before the deadline.
    #[error("no hello before the deadline")]
    HelloRequired,
    /// A message other than `hello` before the connection registered.
    #[error("{0} before hello")]
    BeforeHello(&'static str),
    /// More messages per second than allowed; the excess is dropped.
    #[error("rate limit exceeded")]
    RateLimited,
    /// A `resp` from an agent for a request that went to another agent.
    #[error("resp for request {id} from the wrong agent")]
    WrongResponder {
        /// The request id.
        id: String,
    },
    /// Too many connections from one IP address.
    #[error("too many connections from one address")]
    TooManyConnectionsPerIp,
    /// Too many connections in total.
    #[error("server full")]
    ServerFull,
    /// A collection limit was reached (guilds, sessions, pending requests).
    #[error("limit reached: {0}")]
    Limit(&'static str),
    /// No message or pong within the stale-agent window.
    #[error("agent stale")]
    Stale,
}

impl ProtocolError {
    /// The close code and reason the controller closes with, if this error closes.
    pub fn close(&self) -> Option<(CloseCode, &'static str)> {
        match self {
            Self::MissingVersion => Some((CloseCode::POLICY, texts::CLOSE_MISSING_VERSION)),
            Self::IncompatibleVersion(_) => {
                Some((CloseCode::POLICY, texts::CLOSE_INCOMPATIBLE_VERSION))
            }
            Self::Unauthorized => Some((CloseCode::POLICY, texts::CLOSE_UNAUTHORIZED)),
            Self::InvalidHello { .. } => Some((CloseCode::POLICY, texts::CLOSE_INVALID_HELLO)),
            Self::HelloRequired => Some((CloseCode::POLICY, texts::CLOSE_HELLO_REQUIRED)),
            Self::Stale => Some((CloseCode::POLICY, texts::CLOSE_STALE)),
            Self::TooManyConnectionsPerIp => {
                Some((CloseCode::POLICY, texts::CLOSE_TOO_MANY_CONNECTIONS))
            }
            Self::ServerFull => Some((CloseCode::POLICY, texts::CLOSE_SERVER_FULL)),
            Self::Decode(DecodeError::UnknownType | DecodeError::NotAnObject) => {
                Some((CloseCode::POLICY, texts::CLOSE_PROTOCOL_ERROR))
            }
            _ => None,
        }
    }
}

/// Why a command (a call such as `Controller::request`) was refused at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// No live agent with that id (`agent-offline`).
    #[error("agent-offline")]
    AgentOffline,
    /// No agent lists the guild (`no-agents-in-guild`).
    #[error("no-agents-in-guild")]
    NoAgentsInGuild,
    /// Agents list the guild, but none is ready and idle (`no-free-agents`).
    #[error("no-free-agents")]
    NoFreeAgents,
    /// Too many requests pending for that agent.
    #[error("too many pending requests")]
    TooManyPending,
    /// An op that needs an existing session (not one that starts it) for a voice channel
    /// with no bound agent (`no-session`).
    #[error("no-session")]
    NoSession,
    /// Binding one more session would pass [`Limits::max_sessions`](crate::Limits::max_sessions).
    #[error("too many sessions")]
    TooManySessions,
    /// The client is not connected.
    #[error("not connected")]
    NotConnected,
    /// The request data could not be encoded as JSON (e.g. a map with non-string keys).
    #[error("request data is not JSON: {0}")]
    InvalidData(String),
}

impl CommandError {
    /// The error string used on the wire and in events for this refusal.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::AgentOffline => texts::AGENT_OFFLINE,
            Self::NoAgentsInGuild => "no-agents-in-guild",
            Self::NoFreeAgents => "no-free-agents",
            Self::TooManyPending => "too-many-pending",
            Self::NoSession => "no-session",
            Self::TooManySessions => "too-many-sessions",
            Self::NotConnected => "not-connected",
            Self::InvalidData(_) => "invalid-data",
        }
    }
}

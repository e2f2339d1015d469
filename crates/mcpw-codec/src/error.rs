//! The spec's error codes (an open newtype), the error body of type-3 messages, and the
//! codec's decode and encode errors.
//!
//! Longer than the workspace's 700 lines because the crate's anatomy keeps every error
//! enum here, each with its one mapping to the wire (`code`, `data`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::codes::MessageType;

agentwire_core::open_codes! {
    /// An error code of the spec's table (4000-4008); open, so any integer survives a round
    /// trip. [`ErrorCode::description`] is the spec's name for a code of the table.
    pub struct ErrorCode(i32) [serde], text fn description;
    /// 4000 Invalid Message: malformed message structure.
    INVALID_MESSAGE = 4000, "Invalid Message";
    /// 4001 Authentication Failed: invalid credentials or token.
    AUTHENTICATION_FAILED = 4001, "Authentication Failed";
    /// 4002 Rate Limited: too many requests.
    RATE_LIMITED = 4002, "Rate Limited";
    /// 4003 Server Error: internal server error.
    SERVER_ERROR = 4003, "Server Error";
    /// 4004 Method Not Found: unknown method.
    METHOD_NOT_FOUND = 4004, "Method Not Found";
    /// 4005 Invalid Params: invalid method parameters.
    INVALID_PARAMS = 4005, "Invalid Params";
    /// 4006 Operation Cancelled: task or operation cancelled.
    OPERATION_CANCELLED = 4006, "Operation Cancelled";
    /// 4007 Context Too Large: message exceeds size limit.
    CONTEXT_TOO_LARGE = 4007, "Context Too Large";
    /// 4008 Conflict: state conflict detected.
    CONFLICT = 4008, "Conflict";
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

/// A params field that is missing or out of bounds (error 4005), named by its path so the
/// reply's `data` says which (`capabilities[1].confidence`), as the spec's error example does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ParamError {
    /// The field's path, e.g. `result.findings` or `capabilities[0].name`.
    pub field: String,
    /// What is wrong: `Required field missing`, `Out of range`, `Too long`, `Too many`,
    /// `Not this connection's agent`.
    pub reason: &'static str,
    /// What was expected (`string`, `number in range`, ...).
    pub expected: &'static str,
    /// What was received (`null`, `string`, ...).
    pub received: &'static str,
}

impl ParamError {
    /// A `reason` at `field`: `expected` was wanted, `received` came.
    pub fn new(
        field: impl Into<String>,
        reason: &'static str,
        expected: &'static str,
        received: &'static str,
    ) -> Self {
        Self {
            field: field.into(),
            reason,
            expected,
            received,
        }
    }

    /// The spec's `error.data` object: `{field, reason, expected, received}`.
    pub fn to_data(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// Why the [`Orchestrator`](crate::orchestrator::Orchestrator) refused a message: each is
/// answered with a type-3 error ([`ProtocolError::to_error_body`]) and reported as
/// [`OrchestratorEvent::ProtocolViolation`](crate::orchestrator::OrchestratorEvent::ProtocolViolation).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The codec refused the frame or batch entry ([`DecodeError::to_error_body`]).
    #[error("{message}")]
    Undecodable {
        /// [`DecodeError::code`].
        code: ErrorCode,
        /// The decode error's text.
        message: String,
        /// `{"field", "reason"}` for params of the wrong shape.
        data: Option<Value>,
    },
    /// A message type the orchestrator does not take (not 0-7). 4000.
    #[error("unsupported message type")]
    UnsupportedType,
    /// A request, notification or progress message without a method. 4000.
    #[error("method required")]
    MethodRequired,
    /// A binary method code this side has no name for. 4004.
    #[error("method not found: code {0}")]
    UnknownMethodCode(u16),
    /// A method the orchestrator does not handle. 4004.
    #[error("method not found: {0}")]
    MethodNotFound(String),
    /// Any method but `agent.register`, `ping` and `protocol.set_binary` before
    /// `agent.register`. 4001.
    #[error("agent.register required first")]
    RegisterFirst,
    /// Params that decoded but break a bound or a rule of the server. 4005.
    #[error("Invalid parameters: {} ({})", .0.field, .0.reason)]
    InvalidParams(ParamError),
    /// `agent.register` of another agent id on a registered connection. 4008.
    #[error("this connection is registered as {0:?}")]
    RegisteredAs(String),
    /// [`OrchestratorLimits::max_agents`](crate::OrchestratorLimits::max_agents) agents are
    /// registered already. 4003.
    #[error("too many agents")]
    TooManyAgents,
    /// The connection's agent is gone from the registry. 4003.
    #[error("agent vanished")]
    AgentVanished,
    /// `agent.capability.update` removes a capability the agent does not have. 4008.
    #[error("no capability {0:?} to remove")]
    NoSuchCapability(String),
    /// `task.progress` or `task.complete` for a task assigned to another agent. 4008.
    #[error("task {task_id:?} is not assigned to {agent_id:?}")]
    NotAssigned {
        /// The task.
        task_id: String,
        /// The agent that reported it.
        agent_id: String,
    },
    /// `task.progress` or `task.complete` for a task the orchestrator does not hold. 4008.
    #[error("unknown task {0:?}")]
    UnknownTask(String),
    /// [`OrchestratorLimits::max_collaborations`](crate::OrchestratorLimits::max_collaborations)
    /// collaborations are in flight already. 4003.
    #[error("too many collaborations")]
    TooManyCollaborations,
    /// `state.sync` the store refused: 4008 for a key of two kinds, 4007 for a limit, else
    /// 4005.
    #[error("{0}")]
    Store(StoreError),
    /// A `collaboration.request` names a `coordination_pattern` this side does not know.
    /// 4000.
    #[error("unknown coordination_pattern {0:?}")]
    UnknownPattern(String),
    /// A collaboration answer too deep to forward in the requester's result. 4007.
    #[error("collaboration response nested deeper than {limit} levels")]
    AnswerTooDeep {
        /// The deepest nesting allowed for it.
        limit: usize,
    },
    /// `task.progress` or `task.complete` about a task cancelled within the last
    /// [`cancel_grace`](crate::OrchestratorConfig::cancel_grace) (sent before the agent
    /// learnt of it). 4006, naming the task in `data.task_id`.
    #[error("task {task_id:?} was cancelled")]
    Cancelled {
        /// The task.
        task_id: String,
    },
    /// `agent.register` names another agent than the connection's `X-Agent-ID` upgrade
    /// header. 4001.
    #[error("agent_id {agent_id:?} does not match the X-Agent-ID header {header:?}")]
    AgentIdMismatch {
        /// The header's agent id.
        header: String,
        /// The `agent_id` of `agent.register`.
        agent_id: String,
    },
    /// An `idempotency_key` seen before, within its TTL, with other params. 4008.
    #[error("idempotency key {0:?} was used with other params")]
    IdempotencyConflict(String),
    /// The connection's message rate was exceeded. 4002.
    #[error("rate limit exceeded")]
    RateLimited {
        /// When a message will be taken again (not given for batch entries).
        retry_after_ms: Option<u64>,
    },
    /// A frame over [`OrchestratorLimits::max_message_bytes`](crate::OrchestratorLimits::max_message_bytes). 4007.
    #[error("message too large")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// HMAC authentication is on and the frame carries no tag or a wrong one. 4001.
    #[error("{0}")]
    BadSignature(SignatureError),
    /// A part of a streamed message was refused ([`StreamError::code`]).
    #[error("{0}")]
    Stream(StreamError),
}

impl ProtocolError {
    /// The spec code the error is answered with.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Undecodable { code, .. } => *code,
            Self::UnsupportedType | Self::MethodRequired | Self::UnknownPattern(_) => {
                ErrorCode::INVALID_MESSAGE
            }
            Self::UnknownMethodCode(_) | Self::MethodNotFound(_) => ErrorCode::METHOD_NOT_FOUND,
            Self::RegisterFirst | Self::BadSignature(_) => ErrorCode::AUTHENTICATION_FAILED,
            Self::Stream(e) => e.code(),
            Self::InvalidParams(_) => ErrorCode::INVALID_PARAMS,
            Self::Cancelled { .. } => ErrorCode::OPERATION_CANCELLED,
            Self::AgentIdMismatch { .. } => ErrorCode::AUTHENTICATION_FAILED,
            Self::RegisteredAs(_)
            | Self::IdempotencyConflict(_)
            | Self::NoSuchCapability(_)
            | Self::NotAssigned { .. }
            | Self::UnknownTask(_) => ErrorCode::CONFLICT,
            Self::TooManyAgents | Self::AgentVanished | Self::TooManyCollaborations => {
                ErrorCode::SERVER_ERROR
            }
            Self::Store(StoreError::KindConflict(_)) => ErrorCode::CONFLICT,
            Self::Store(StoreError::Limit(_))
            | Self::AnswerTooDeep { .. }
            | Self::TooLarge { .. } => ErrorCode::CONTEXT_TOO_LARGE,
            Self::Store(_) => ErrorCode::INVALID_PARAMS,
            Self::RateLimited { .. } => ErrorCode::RATE_LIMITED,
        }
    }

    /// The error's `data`: the spec's `{field, reason, expected, received}` where they
    /// apply (the field the error is about, what was wanted, what came), a `reason` alone
    /// for the server's own limits, plus what a peer acts on (`retry_after_ms` of 4002,
    /// `task_id` of 4006, `limit` of 4007).
    pub fn data(&self) -> Option<Value> {
        use serde_json::json;
        let at = |field: &str, reason: &str, expected: &str, received: &str| json!({"field": field, "reason": reason, "expected": expected, "received": received});
        Some(match self {
            Self::Undecodable { data, .. } => return data.clone(),
            Self::UnsupportedType => at("type", "Unsupported message type", "0-7", "another type"),
            Self::MethodRequired => at("method", "Required field missing", "string", "null"),
            Self::UnknownMethodCode(code) => at(
                "method",
                "Unknown method code",
                "a method code this server knows",
                &code.to_string(),
            ),
            Self::MethodNotFound(m) => at(
                "method",
                "Method not found",
                "a method this server handles",
                m,
            ),
            Self::RegisterFirst => at(
                "method",
                "agent.register required first",
                "agent.register",
                "another method",
            ),
            Self::InvalidParams(e) => e.to_data(),
            Self::UnknownPattern(name) => at(
                "coordination_pattern",
                "Unknown value",
                crate::params::CoordinationPattern::NAMES,
                name,
            ),
            Self::RegisteredAs(current) => at(
                "agent_id",
                "Connection registered as another agent",
                current,
                "another agent_id",
            ),
            Self::AgentIdMismatch { header, agent_id } => at(
                "agent_id",
                "Does not match the X-Agent-ID header",
                header,
                agent_id,
            ),
            Self::TooManyAgents => json!({"reason": "Too many agents registered"}),
            Self::AgentVanished => json!({"reason": "Agent no longer registered"}),
            Self::TooManyCollaborations => json!({"reason": "Too many collaborations in flight"}),
            Self::NoSuchCapability(name) => at(
                "capability.name",
                "No such capability",
                "a capability of this agent",
                name,
            ),
            Self::NotAssigned { task_id, .. } => at(
                "task_id",
                "Task assigned to another agent",
                "a task assigned to this agent",
                task_id,
            ),
            Self::UnknownTask(task_id) => at(
                "task_id",
                "Unknown task",
                "a task assigned to this agent",
                task_id,
            ),
            Self::Cancelled { task_id } => {
                let mut d = at(
                    "task_id",
                    "Task cancelled",
                    "a task assigned to this agent",
                    task_id,
                );
                d["task_id"] = json!(task_id);
                d
            }
            Self::IdempotencyConflict(_) => at(
                "idempotency_key",
                "Key reused with other params",
                "the params first sent with this key",
                "other params",
            ),
            Self::Store(e) => json!({"field": e.field(), "reason": e.to_string()}),
            Self::AnswerTooDeep { limit } => at(
                "result",
                "Nested too deep",
                &format!("at most {limit} levels"),
                "deeper",
            ),
            Self::RateLimited { retry_after_ms } => match retry_after_ms {
                Some(ms) => json!({"reason": "Rate limit exceeded", "retry_after_ms": ms}),
                None => json!({"reason": "Rate limit exceeded"}),
            },
            Self::TooLarge { limit } => {
                let mut d = at(
                    "message",
                    "Message too large",
                    &format!("at most {limit} bytes"),
                    "more bytes",
                );
                d["limit"] = json!(limit);
                d
            }
            #[allow(unreachable_patterns)] // variants added later answer without data
            _ => return None,
        })
    }

    /// The type-3 error body that answers it.
    pub fn to_error_body(&self) -> ErrorBody {
        let body = ErrorBody::new(self.code(), self.to_string());
        match self.data() {
            Some(data) => body.with_data(data),
            None => body,
        }
    }
}

impl From<&DecodeError> for ProtocolError {
    fn from(e: &DecodeError) -> Self {
        let body = e.to_error_body();
        Self::Undecodable {
            code: body.code,
            message: body.message,
            data: body.data,
        }
    }
}

/// A command the [`Orchestrator`](crate::orchestrator::Orchestrator) refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// [`OrchestratorLimits::max_tasks`](crate::OrchestratorLimits::max_tasks) tasks are
    /// held already.
    #[error("too many tasks")]
    TooManyTasks,
    /// A task with this id is held already.
    #[error("duplicate task id {0:?}")]
    DuplicateTask(String),
    /// No task with this id is held (never submitted, finished, or failed).
    #[error("unknown task {0:?}")]
    UnknownTask(String),
    /// The task's `context` or `requirements` nests deeper than
    /// [`OrchestratorLimits::max_json_depth`](crate::OrchestratorLimits::max_json_depth)
    /// allows in `task.assigned`.
    #[error("task {field} nested deeper than {limit} levels")]
    TooDeep {
        /// `context` or `requirements`.
        field: &'static str,
        /// The deepest nesting allowed for it.
        limit: usize,
    },
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

    /// An [`ErrorBody`] reporting this error with its [`code`](Self::code). A size or
    /// nesting limit's `data` is `{"field", "reason", "expected", "received"}` (`at most
    /// 1048576 bytes`, `1048577 bytes`). For [`InvalidParams`](Self::InvalidParams), `data` is
    /// `{"field", "reason", "expected", "received"}` as in the spec's example (`expected`
    /// and `received` as serde names them: `a string`, `null`; a missing field received
    /// `null`).
    pub fn to_error_body(&self) -> ErrorBody {
        let body = ErrorBody::new(self.code(), self.to_string());
        match self {
            Self::InvalidParams { field, error, .. } => {
                let reason = error.to_string();
                let mut data = serde_json::json!({"field": field, "reason": reason});
                if let Some((expected, received)) = serde_expected_received(&reason) {
                    data["expected"] = expected.into();
                    data["received"] = received.into();
                }
                body.with_data(data)
            }
            _ => match self.limit_data() {
                Some(data) => body.with_data(data),
                None => body,
            },
        }
    }

    /// The spec's `data` of a size or nesting limit: the field (`message`, `messages`),
    /// the reason, the limit expected and what came.
    fn limit_data(&self) -> Option<Value> {
        let (field, reason, expected, received) = match self {
            Self::Header(HeaderError::PayloadTooLarge { size, max })
            | Self::Compact(CompactHeaderError::PayloadTooLarge { size, max }) => (
                "message",
                "Message too large",
                format!("at most {max} bytes"),
                format!("{size} bytes"),
            ),
            Self::TextTooLarge { len, max } => (
                "message",
                "Message too large",
                format!("at most {max} bytes"),
                format!("{len} bytes"),
            ),
            Self::Gzip(GzipError::TooLarge { cap }) => (
                "message",
                "Decompressed message too large",
                format!("at most {cap} bytes"),
                "more bytes".to_owned(),
            ),
            Self::BatchTooLarge { count, max } => (
                "messages",
                "Batch too large",
                format!("at most {max} messages"),
                format!("{count} messages"),
            ),
            Self::TooDeep { limit } => (
                "message",
                "Nested too deep",
                format!("at most {limit} levels"),
                "deeper".to_owned(),
            ),
            _ => return None,
        };
        Some(serde_json::json!({
            "field": field, "reason": reason, "expected": expected, "received": received,
        }))
    }
}

/// What serde's message says was expected and received: `invalid type: null, expected a
/// string at line 1 column 9` gives (`a string`, `null`), `missing field `x`` gives
/// (`a value`, `null`).
fn serde_expected_received(message: &str) -> Option<(String, String)> {
    let message = message.split(" at line ").next().unwrap_or(message);
    if message.starts_with("missing field") {
        return Some(("a value".to_owned(), "null".to_owned()));
    }
    let rest = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))
        .or_else(|| message.strip_prefix("unknown variant "))?;
    let (received, expected) = rest.split_once(", expected ")?;
    Some((expected.to_owned(), received.to_owned()))
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
    /// The task was cancelled (the server's 4006 naming it) or handed over to other agents
    /// by [`Agent::shutdown`](crate::Agent::shutdown): nothing more is sent about it.
    #[error("task {0:?} was cancelled or handed over")]
    Cancelled(String),
    /// [`AgentConfig::max_pending`](crate::AgentConfig::max_pending) requests await an
    /// answer already.
    #[error("too many requests awaiting an answer")]
    TooManyPending,
    /// The agent stopped ([`Agent::shutdown`](crate::Agent::shutdown) or
    /// [`Agent::close`](crate::Agent::close)).
    #[error("the agent stopped")]
    Stopped,
    /// The message could not be encoded (a `Value` that cannot be written, or a payload
    /// over the codec's limit).
    #[error("encode: {0}")]
    Encode(String),
    /// A state change without [`AgentConfig::shared_state`](crate::AgentConfig::shared_state),
    /// or before the server's full sync arrived on this connection.
    #[error("the shared state is not ready")]
    StateNotReady,
    /// The replica refused a state change (a limit, or a key of the other kind).
    #[error("state: {0}")]
    State(StoreError),
}

/// A gzip member that could not be inflated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GzipError {
    /// The input ends inside the member (header, deflate data or trailer).
    #[error("gzip member truncated")]
    Truncated,
    /// Not a gzip header: wrong magic, a method other than deflate (8), or reserved flag bits.
    #[error("bad gzip header: {0}")]
    BadHeader(&'static str),
    /// The header's own CRC-16 (flag FHCRC) does not match.
    #[error("gzip header crc mismatch")]
    HeaderCrc,
    /// The deflate data is invalid.
    #[error("corrupt deflate data")]
    Corrupt,
    /// Inflating went past the cap; stopped at `cap + 1` bytes.
    #[error("decompressed payload exceeds {cap} bytes")]
    TooLarge {
        /// The cap in force.
        cap: usize,
    },
    /// The trailer's CRC-32 does not match the inflated data.
    #[error("gzip crc mismatch: trailer {expected:#010x}, data {actual:#010x}")]
    Crc {
        /// The trailer's value.
        expected: u32,
        /// The inflated data's CRC-32.
        actual: u32,
    },
    /// The trailer's ISIZE does not match the inflated length (mod 2^32).
    #[error("gzip size mismatch: trailer {expected}, data {actual}")]
    Isize {
        /// The trailer's value.
        expected: u32,
        /// The inflated length mod 2^32.
        actual: u32,
    },
    /// A second gzip member follows the first (we accept exactly one per payload).
    #[error("more than one gzip member")]
    MultiMember,
    /// Bytes that are not a gzip member follow the member.
    #[error("{0} bytes of trailing garbage after the gzip member")]
    TrailingGarbage(usize),
}

/// Why a header was refused, in the order [`Header::parse`](crate::Header::parse) checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// The first four bytes are not "MCPW" (the reference's "invalid magic number").
    #[error("invalid magic number {0:02x?}")]
    BadMagic([u8; 4]),
    /// The version byte is not 1 (the reference's "unsupported protocol version").
    #[error("unsupported protocol version {0}")]
    UnsupportedVersion(u8),
    /// The data size is above the limit (the reference's "payload too large").
    #[error("payload too large: {size} bytes, limit {max}")]
    PayloadTooLarge {
        /// The header's data size.
        size: u32,
        /// The limit in force ([`Limits::max_payload`](crate::Limits::max_payload)).
        max: u32,
    },
    /// The reserved field is not zero and [`Limits::reserved`](crate::Limits::reserved) is [`ReservedPolicy::Reject`](crate::ReservedPolicy::Reject).
    #[error("reserved header field is {0:#06x}, not 0")]
    ReservedNotZero(u16),
    /// Fewer than 24 bytes (only from [`Header::parse_slice`](crate::Header::parse_slice)).
    #[error("header truncated: {0} of 24 bytes")]
    Truncated(usize),
}

/// Why a part of a streamed message was refused (see the crate's spec decision 50); the
/// stream is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// A part out of order (parts of a stream are numbered from 0, one after another). 4000.
    #[error("stream part {received} out of order, {expected} was due")]
    OutOfOrder {
        /// The index that was due.
        expected: u32,
        /// The index that came.
        received: u32,
    },
    /// The connection's streams would hold more than the limit. 4007.
    #[error("streamed message exceeds {limit} bytes")]
    TooLarge {
        /// [`OrchestratorLimits::max_stream_bytes`](crate::OrchestratorLimits::max_stream_bytes).
        limit: usize,
    },
    /// A new stream while the connection has the most it may. 4003.
    #[error("more than {limit} streams at once")]
    TooMany {
        /// [`OrchestratorLimits::max_streams`](crate::OrchestratorLimits::max_streams).
        limit: usize,
    },
    /// What the parts joined to is a batch or another part. 4000.
    #[error("a stream carries one message")]
    Nested,
}

impl StreamError {
    /// The spec code it is answered with.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::OutOfOrder { .. } | Self::Nested => ErrorCode::INVALID_MESSAGE,
            Self::TooLarge { .. } => ErrorCode::CONTEXT_TOO_LARGE,
            Self::TooMany { .. } => ErrorCode::SERVER_ERROR,
        }
    }
}

/// Why a frame's HMAC tag was refused (see [`signing`](crate::signing)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignatureError {
    /// The frame carries no tag: a binary frame shorter than one, a text frame that does
    /// not start with the `"hmac"` member.
    #[error("message signature missing")]
    Missing,
    /// The tag is not the HMAC-SHA256 of the frame under the shared secret.
    #[error("message signature invalid")]
    Invalid,
}

/// Why a 12-byte header was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompactHeaderError {
    /// Fewer than 12 bytes.
    #[error("12-byte header truncated: {0} bytes")]
    Truncated(usize),
    /// The version byte is not 1.
    #[error("unsupported 12-byte form version {0}")]
    UnsupportedVersion(u8),
    /// Flag bits other than gzip and encrypted (the reference defines no others).
    #[error("unknown flags {0:#04x} in a 12-byte header")]
    UnknownFlags(u8),
    /// The type does not fit a byte (the reference refuses it too).
    #[error("message type {0} exceeds 255")]
    TypeOutOfRange(u16),
    /// The payload length is above [`Limits::max_payload`](crate::Limits::max_payload).
    #[error("payload of {size} bytes exceeds {max}")]
    PayloadTooLarge {
        /// The header's payload length.
        size: u32,
        /// The limit.
        max: u32,
    },
    /// A non-zero reserved field under [`ReservedPolicy::Reject`](crate::ReservedPolicy::Reject).
    #[error("reserved field is {0:#010x}, not 0")]
    ReservedNotZero(u32),
}

/// Why a sync was refused (nothing of it was applied).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The sync's vector clock has no (non-zero) entry for its sender, which identifies the
    /// sync for deduplication.
    #[error("vector_clock has no entry for the sender {0:?}")]
    MissingOwnEntry(String),
    /// The same key is a G-Counter in one place and an OR-Set in another.
    #[error("key {0:?} is used as both a g-counter and an or-set")]
    KindConflict(String),
    /// A string is longer than [`CrdtLimits::max_string_bytes`](crate::crdt::CrdtLimits::max_string_bytes).
    #[error("{0} is longer than the limit")]
    TooLong(&'static str),
    /// A limit of [`CrdtLimits`](crate::crdt::CrdtLimits) would be exceeded (the field is named).
    #[error("limit {0} reached")]
    Limit(&'static str),
    /// A full sync's `merkle_root` is not the root of the state it carries.
    #[error("merkle_root does not match the state")]
    RootMismatch,
}

impl StoreError {
    /// The message field the error is about (for the 4005/4007/4008 error's `data.field`).
    pub fn field(&self) -> &'static str {
        match self {
            Self::MissingOwnEntry(_) => "vector_clock",
            Self::KindConflict(_) => "operations.type",
            Self::TooLong(f) => f,
            Self::Limit("max_clock_actors") => "vector_clock",
            Self::Limit(_) => "operations",
            Self::RootMismatch => "merkle_root",
        }
    }
}

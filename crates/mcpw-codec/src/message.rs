//! [`Message`]: one MCPW message, the same value in the binary and the JSON form, and its
//! [`Body`] (typed params per method, an error, a batch, or any other method's raw params).

use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use crate::error::{DecodeError, ErrorBody};
use crate::header::{Flags, MessageType, Method};
use crate::params::{
    AgentHeartbeat, AgentRegister, AgentShutdown, CapabilityUpdate, CollaborationRequest,
    RegistrationConfirmed, StateSync, TaskAssigned, TaskComplete, TaskProgress,
};

/// The method name a batch travels under (`"method": "batch"`, code 0), as the reference's
/// `BatchMessages` writes it.
pub const BATCH_METHOD: &str = "batch";

agentwire_core::string_id! {
    /// An agent's id (`agent_id` on the wire), as the orchestrator's events and tables name
    /// agents.
    pub struct AgentId [serde];
}

agentwire_core::string_id! {
    /// A task's id (`task_id` on the wire), as the orchestrator's events and tables name
    /// tasks.
    pub struct TaskId [serde];
}

/// One MCPW message.
///
/// The two forms carry different envelope fields: the JSON form (text frames) carries `id`,
/// the binary form carries `seq` and `flags` in its header. Encoding ignores the fields the
/// form does not carry, and decoding leaves them at their defaults (`None`, 0,
/// [`Flags::NONE`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// JSON form: the message id (a UUID in the spec); a response echoes its request's.
    pub id: Option<String>,
    /// Binary form: the header's sequence id; a response echoes its request's.
    pub seq: u64,
    /// The message type. [`MessageType::ERROR`] goes with [`Body::Error`] and
    /// [`MessageType::BATCH`] with [`Body::Batch`], and only with them.
    pub kind: MessageType,
    /// Binary form: header flags that describe the message ([`Flags::PRIORITY`],
    /// [`Flags::STREAMING`], unknown bits). [`Flags::COMPRESSED`] and [`Flags::BATCH`] are
    /// framing, set by the encoder and cleared by the decoder; [`Flags::ENCRYPTED`] is
    /// refused by the typed codec.
    pub flags: Flags,
    /// What the message says.
    pub body: Body,
}

/// What a message says: typed params for every method of the spec, an error, a batch, or
/// the raw params of any other method.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    /// `agent.register`.
    AgentRegister(AgentRegister),
    /// `registration.confirmed`.
    RegistrationConfirmed(RegistrationConfirmed),
    /// `agent.heartbeat`.
    AgentHeartbeat(AgentHeartbeat),
    /// `task.assigned`.
    TaskAssigned(TaskAssigned),
    /// `task.progress`.
    TaskProgress(TaskProgress),
    /// `task.complete`.
    TaskComplete(TaskComplete),
    /// `agent.capability.update`.
    CapabilityUpdate(CapabilityUpdate),
    /// `collaboration.request`.
    CollaborationRequest(CollaborationRequest),
    /// `state.sync`.
    StateSync(StateSync),
    /// `agent.shutdown`.
    AgentShutdown(AgentShutdown),
    /// An error (type 3): `"error": {...}` in JSON, the whole payload in binary.
    Error(ErrorBody),
    /// A batch (type 6): `"params": {"messages": [...], "count": n}`, each message in its
    /// JSON form. Batches do not nest.
    Batch(Vec<Message>),
    /// Any other method, e.g. the reference's `tool.execute`, with its params as JSON.
    Other(OtherCall),
}

/// A method this crate has no type for, with its raw params.
#[derive(Clone, Debug, PartialEq)]
pub struct OtherCall {
    /// The method name (empty when a binary frame carried an unknown code, or a JSON message
    /// had no `method`).
    pub method: String,
    /// The binary method code: [`Method::from_name`] of the name, or the unknown code a
    /// binary frame carried.
    pub code: Method,
    /// The params (or a response's `result`); [`Value::Null`] when there are none.
    pub params: Value,
}

impl OtherCall {
    /// A call of `method` (its code looked up by name) with `params`.
    pub fn new(method: impl Into<String>, params: Value) -> Self {
        let method = method.into();
        Self {
            code: Method::from_name(&method),
            method,
            params,
        }
    }
}

impl Message {
    /// A message of type `kind` with no id, sequence 0 and no flags.
    pub fn new(kind: MessageType, body: Body) -> Self {
        Self {
            id: None,
            seq: 0,
            kind,
            flags: Flags::NONE,
            body,
        }
    }

    /// A request (type 0) with `id`.
    pub fn request(id: impl Into<String>, body: Body) -> Self {
        Self::new(MessageType::REQUEST, body).with_id(id)
    }

    /// A notification (type 2) with `id`.
    pub fn notification(id: impl Into<String>, body: Body) -> Self {
        Self::new(MessageType::NOTIFICATION, body).with_id(id)
    }

    /// An error message (type 3).
    pub fn error(error: ErrorBody) -> Self {
        Self::new(MessageType::ERROR, Body::Error(error))
    }

    /// A batch message (type 6).
    pub fn batch(messages: Vec<Self>) -> Self {
        Self::new(MessageType::BATCH, Body::Batch(messages))
    }

    /// This message with its JSON-form id set.
    #[must_use]
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// This message with its binary-form sequence id set.
    #[must_use]
    pub fn with_seq(mut self, seq: u64) -> Self {
        self.seq = seq;
        self
    }

    /// This message with flags set (see [`Message::flags`]).
    #[must_use]
    pub fn with_flags(mut self, flags: Flags) -> Self {
        self.flags = flags;
        self
    }

    /// The method's wire name (`None` for an error).
    pub fn method(&self) -> Option<&str> {
        self.body.method()
    }
}

impl Body {
    /// The method's wire name (`None` for an error, `"batch"` for a batch).
    pub fn method(&self) -> Option<&str> {
        Some(match self {
            Self::Error(_) => return None,
            Self::Batch(_) => BATCH_METHOD,
            Self::Other(c) => &c.method,
            typed => typed.code().as_str().unwrap_or_default(),
        })
    }

    /// The binary method code (0 for errors and batches).
    pub fn code(&self) -> Method {
        match self {
            Self::AgentRegister(_) => Method::AGENT_REGISTER,
            Self::RegistrationConfirmed(_) => Method::REGISTRATION_CONFIRMED,
            Self::AgentHeartbeat(_) => Method::AGENT_HEARTBEAT,
            Self::TaskAssigned(_) => Method::TASK_ASSIGNED,
            Self::TaskProgress(_) => Method::TASK_PROGRESS,
            Self::TaskComplete(_) => Method::TASK_COMPLETE,
            Self::CapabilityUpdate(_) => Method::AGENT_CAPABILITY_UPDATE,
            Self::CollaborationRequest(_) => Method::COLLABORATION_REQUEST,
            Self::StateSync(_) => Method::STATE_SYNC,
            Self::AgentShutdown(_) => Method::AGENT_SHUTDOWN,
            Self::Error(_) | Self::Batch(_) => Method::UNKNOWN,
            Self::Other(c) => c.code,
        }
    }

    /// The variant's name, for errors.
    pub(crate) fn variant(&self) -> &'static str {
        match self {
            Self::Error(_) => "error",
            Self::Batch(_) => "batch",
            _ => "call",
        }
    }

    /// Decodes the params of the typed method `code` (10-19) from JSON text; `None` when
    /// `code` is not one of them.
    pub(crate) fn typed_from_json(code: Method, json: &str) -> Option<Result<Self, DecodeError>> {
        fn parse<'a, T: Deserialize<'a>>(
            method: Method,
            json: &'a str,
            wrap: fn(T) -> Body,
        ) -> Result<Body, DecodeError> {
            match serde_json::from_str::<T>(json) {
                Ok(v) => Ok(wrap(v)),
                // Not JSON at all is an invalid message (4000), not invalid params (4005).
                // (On this error path only, check the whole text: serde may report a missing
                // field before it reaches a syntax error further on.)
                Err(error) if !error.is_data() => Err(DecodeError::Json(error)),
                Err(error) => match serde_json::from_str::<serde::de::IgnoredAny>(json) {
                    Err(syntax) => Err(DecodeError::Json(syntax)),
                    Ok(_) => Err(invalid_params(method, json, error)),
                },
            }
        }
        Some(match code {
            Method::AGENT_REGISTER => parse(code, json, Self::AgentRegister),
            Method::REGISTRATION_CONFIRMED => parse(code, json, Self::RegistrationConfirmed),
            Method::AGENT_HEARTBEAT => parse(code, json, Self::AgentHeartbeat),
            Method::TASK_ASSIGNED => parse(code, json, Self::TaskAssigned),
            Method::TASK_PROGRESS => parse(code, json, Self::TaskProgress),
            Method::TASK_COMPLETE => parse(code, json, Self::TaskComplete),
            Method::AGENT_CAPABILITY_UPDATE => parse(code, json, Self::CapabilityUpdate),
            Method::COLLABORATION_REQUEST => parse(code, json, Self::CollaborationRequest),
            Method::STATE_SYNC => parse(code, json, Self::StateSync),
            Method::AGENT_SHUTDOWN => parse(code, json, Self::AgentShutdown),
            _ => return None,
        })
    }
}

/// Builds [`DecodeError::InvalidParams`], finding the field's path with a second, slower
/// parse (only on this error path).
fn invalid_params(method: Method, json: &str, error: serde_json::Error) -> DecodeError {
    fn path_of<T: for<'de> Deserialize<'de>>(json: &str) -> Option<(String, String)> {
        let de = &mut serde_json::Deserializer::from_str(json);
        match serde_path_to_error::deserialize::<_, T>(de) {
            Ok(_) => None,
            Err(e) => Some((e.path().to_string(), e.inner().to_string())),
        }
    }
    let found = match method {
        Method::AGENT_REGISTER => path_of::<AgentRegister>(json),
        Method::REGISTRATION_CONFIRMED => path_of::<RegistrationConfirmed>(json),
        Method::AGENT_HEARTBEAT => path_of::<AgentHeartbeat>(json),
        Method::TASK_ASSIGNED => path_of::<TaskAssigned>(json),
        Method::TASK_PROGRESS => path_of::<TaskProgress>(json),
        Method::TASK_COMPLETE => path_of::<TaskComplete>(json),
        Method::AGENT_CAPABILITY_UPDATE => path_of::<CapabilityUpdate>(json),
        Method::COLLABORATION_REQUEST => path_of::<CollaborationRequest>(json),
        Method::STATE_SYNC => path_of::<StateSync>(json),
        Method::AGENT_SHUTDOWN => path_of::<AgentShutdown>(json),
        _ => None,
    };
    let field = match found {
        Some((path, inner)) => missing_field(&inner)
            .map(|f| {
                if path == "." {
                    f.to_owned()
                } else {
                    format!("{path}.{f}")
                }
            })
            .unwrap_or(path),
        None => ".".to_owned(),
    };
    DecodeError::InvalidParams {
        method: method.as_str().unwrap_or("unknown"),
        field,
        error,
    }
}

/// `x` of serde's "missing field `x`".
fn missing_field(msg: &str) -> Option<&str> {
    let rest = msg.strip_prefix("missing field `")?;
    rest.split('`').next()
}

/// Serializes a body's params: the typed struct, a batch's `{"messages", "count"}`, or an
/// other method's raw value. Errors have none.
pub(crate) struct ParamsRef<'a>(pub(crate) &'a Body);

impl Serialize for ParamsRef<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Body::AgentRegister(p) => p.serialize(s),
            Body::RegistrationConfirmed(p) => p.serialize(s),
            Body::AgentHeartbeat(p) => p.serialize(s),
            Body::TaskAssigned(p) => p.serialize(s),
            Body::TaskProgress(p) => p.serialize(s),
            Body::TaskComplete(p) => p.serialize(s),
            Body::CapabilityUpdate(p) => p.serialize(s),
            Body::CollaborationRequest(p) => p.serialize(s),
            Body::StateSync(p) => p.serialize(s),
            Body::AgentShutdown(p) => p.serialize(s),
            Body::Error(e) => e.serialize(s),
            Body::Batch(messages) => {
                let mut st = s.serialize_struct("Batch", 2)?;
                st.serialize_field("messages", messages)?;
                st.serialize_field("count", &messages.len())?;
                st.end()
            }
            Body::Other(c) => c.params.serialize(s),
        }
    }
}

/// The JSON form: `{"id", "type", "method", "params"}`, or `{"id", "type", "error"}`.
///
/// `id` is omitted when `None`, `method` for errors and for other calls with an empty name,
/// `params` for other calls whose params are `null`.
impl Serialize for Message {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        if let Some(id) = &self.id {
            map.serialize_entry("id", id)?;
        }
        map.serialize_entry("type", &self.kind.0)?;
        match &self.body {
            Body::Error(e) => map.serialize_entry("error", e)?,
            Body::Other(c) => {
                if !c.method.is_empty() {
                    map.serialize_entry("method", &c.method)?;
                }
                if !c.params.is_null() {
                    map.serialize_entry("params", &c.params)?;
                }
            }
            body => {
                map.serialize_entry("method", &body.method())?;
                map.serialize_entry("params", &ParamsRef(body))?;
            }
        }
        map.end()
    }
}

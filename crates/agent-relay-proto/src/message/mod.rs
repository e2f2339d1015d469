//! Wire types: the payload of every message type, and one enum per sender.
//!
//! A message is an [`Envelope`](crate::Envelope) `{v, type, id?, replyTo?, payload}` whose
//! `type` and `payload` come from one of the sender enums:
//!
//! | enum | sender | types |
//! |---|---|---|
//! | [`AgentMessage`] | external agent | `relay.join`, `session.start`, `snapshot.get`, `tool.call`, `agent.message`, `session.end` |
//! | [`HostMessage`] | host (the UI) | `relay.join`, `session.started`, `snapshot.state`, `tool.result`, `state.updated`, `user.message`, `session.ended`, `error` |
//! | [`RelayMessage`] | the relay itself | `relay.hello`, `relay.joined`, `relay.presence`, `error` |
//!
//! `uiSpec`, `messageHistory` and tool `params` stay raw JSON ([`RawJson`]): the relay and
//! the agents forward or inspect them without a fixed schema. No snapshot type has a
//! `backendData` field, so backend payloads cannot reach an agent through these types.

use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::envelope::{sealed, Body};
use crate::error::ErrorCode;

/// Every message `type` of the spec, plus the reference relay's own.
pub mod types {
    /// Relay → peer on connect (the reference relay's; not in the spec).
    pub const RELAY_HELLO: &str = "relay.hello";
    /// Host or agent → relay: join a session in a role.
    pub const RELAY_JOIN: &str = "relay.join";
    /// Relay → host or agent: the join succeeded (`replyTo` the join).
    pub const RELAY_JOINED: &str = "relay.joined";
    /// Relay → host: the agents of its session changed (the reference relay's; not in the spec).
    pub const RELAY_PRESENCE: &str = "relay.presence";
    /// Study-log only: a member's connection ended (the reference relay's record type).
    pub const RELAY_DISCONNECT: &str = "relay.disconnect";
    /// Agent → host: start a study session.
    pub const SESSION_START: &str = "session.start";
    /// Agent → host: ask for the visible state.
    pub const SNAPSHOT_GET: &str = "snapshot.get";
    /// Agent → host: run one UI tool.
    pub const TOOL_CALL: &str = "tool.call";
    /// Agent → host: text for the chat timeline (not a tool call).
    pub const AGENT_MESSAGE: &str = "agent.message";
    /// Agent → host: end the session.
    pub const SESSION_END: &str = "session.end";
    /// Host → agent: reply to `session.start`.
    pub const SESSION_STARTED: &str = "session.started";
    /// Host → agent: reply to `snapshot.get`.
    pub const SNAPSHOT_STATE: &str = "snapshot.state";
    /// Host → agent: reply to `tool.call`.
    pub const TOOL_RESULT: &str = "tool.result";
    /// Host → agents: pushed when the host state changes.
    pub const STATE_UPDATED: &str = "state.updated";
    /// Host → agents: the participant typed in the chat.
    pub const USER_MESSAGE: &str = "user.message";
    /// Host → agent: reply to `session.end`.
    pub const SESSION_ENDED: &str = "session.ended";
    /// Host or relay → agent (relay → host too): a failure, usually `replyTo` a request.
    pub const ERROR: &str = "error";

    /// The types the relay forwards from an agent to its session's host (INTEROP.md).
    pub const AGENT_TO_HOST: [&str; 5] = [
        SESSION_START,
        SNAPSHOT_GET,
        TOOL_CALL,
        AGENT_MESSAGE,
        SESSION_END,
    ];
    /// The types the relay forwards from a host to its session's agents (INTEROP.md).
    pub const HOST_TO_AGENT: [&str; 7] = [
        SESSION_STARTED,
        SNAPSHOT_STATE,
        TOOL_RESULT,
        STATE_UPDATED,
        ERROR,
        SESSION_ENDED,
        USER_MESSAGE,
    ];

    /// The `'static` name of `t` if an agent may send it to the host.
    pub fn agent_to_host(t: &str) -> Option<&'static str> {
        AGENT_TO_HOST.iter().copied().find(|k| *k == t)
    }

    /// The `'static` name of `t` if a host may send it to agents.
    pub fn host_to_agent(t: &str) -> Option<&'static str> {
        HOST_TO_AGENT.iter().copied().find(|k| *k == t)
    }
}

/// Raw JSON kept as text, compared by its text: `uiSpec`, `messageHistory`, tool `params`
/// and tool `parameters` schemas travel without being parsed into a tree.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RawJson(pub Box<RawValue>);

impl RawJson {
    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// Parses the JSON into `T`.
    pub fn parse<'a, T: Deserialize<'a>>(&'a self) -> serde_json::Result<T> {
        serde_json::from_str(self.0.get())
    }

    /// Wraps already-encoded JSON text; `None` if it is not valid JSON.
    pub fn from_text(text: &str) -> Option<Self> {
        RawValue::from_string(text.to_owned()).ok().map(Self)
    }

    /// Encodes `value`.
    pub fn from_value<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Self> {
        serde_json::value::to_raw_value(value).map(Self)
    }

    /// `{}`.
    pub fn empty_object() -> Self {
        Self::from_text("{}").unwrap_or_else(|| Self(Box::<RawValue>::default()))
    }

    /// `[]`.
    pub fn empty_array() -> Self {
        Self::from_text("[]").unwrap_or_else(|| Self(Box::<RawValue>::default()))
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl std::fmt::Display for RawJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.get())
    }
}

/// The role a connection joins a session in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The UI host: one per session; it answers every request.
    Host,
    /// An external agent: many per session.
    Agent,
}

impl Role {
    /// `"host"` or `"agent"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Host => "host",
            Self::Agent => "agent",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

// ---- relay-level payloads ----------------------------------------------------------------

/// `relay.join` payload: join session `sessionId` (default `"default"`) as `role`.
///
/// The reference relay names an agent after the first non-blank of `agentName`,
/// `clientName` and `name`; all three are kept so they round-trip.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RelayJoin {
    /// `host` or `agent`.
    pub role: Role,
    /// The relay session; absent or blank means `"default"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The agent's display name (first choice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_name: Option<String>,
    /// The agent's display name (second choice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_name: Option<String>,
    /// The agent's display name (third choice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl RelayJoin {
    /// A join in `role` to `session_id`.
    pub fn new(role: Role, session_id: impl Into<String>) -> Self {
        Self {
            role,
            session_id: Some(session_id.into()),
            agent_name: None,
            client_name: None,
            name: None,
        }
    }
}

/// `relay.joined` payload: the role and session joined (`clientName` for agents).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RelayJoined {
    /// The role joined.
    pub role: Role,
    /// The session joined (after defaulting and trimming).
    pub session_id: String,
    /// The agent's display name (agents only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_name: Option<String>,
}

/// `relay.hello` payload, sent on connect (the reference relay's greeting).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelayHello {
    /// A human hint, `"Send relay.join with role=host|agent"` in the reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Default for RelayHello {
    fn default() -> Self {
        Self {
            message: Some("Send relay.join with role=host|agent".to_owned()),
        }
    }
}

/// One agent in a [`RelayPresence`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PresenceAgent {
    /// The relay's id for the agent's connection.
    pub id: String,
    /// Its display name.
    pub name: String,
}

/// `relay.presence` payload, sent to the host when its session's agents change (the
/// reference relay's; not in the spec).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RelayPresence {
    /// The relay session.
    pub session_id: String,
    /// `agents.len()`.
    pub agent_count: u32,
    /// The agents, in join order.
    pub agents: Vec<PresenceAgent>,
}

// ---- agent → host payloads ----------------------------------------------------------------

/// `session.start` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionStart {
    /// The study, e.g. `"pilot-01"`.
    pub study_id: String,
    /// The participant, e.g. `"P07"`.
    pub participant_id: String,
}

/// `snapshot.get` payload (`{}`; unknown fields are ignored).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SnapshotGet {}

/// `tool.call` payload. `reason` is required by the spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The tool, e.g. `"select"`.
    pub tool_name: String,
    /// Its params, raw (checked by the host against the tool's schema).
    pub params: RawJson,
    /// Why the agent calls it (logged for the study).
    pub reason: String,
}

/// `agent.message` payload: text for the host's chat timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentText {
    /// The text.
    pub text: String,
}

/// `session.end` payload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionEnd {
    /// Why, e.g. `"study-complete"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

// ---- host → agent payloads ----------------------------------------------------------------

/// `session.started` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionStarted {
    /// The study session, e.g. `"s-20260213-001"`.
    pub session_id: String,
}

/// One entry of `toolSchema`: a tool the agent may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSchema {
    /// Its name, the `toolName` of `tool.call`.
    pub name: String,
    /// What it does.
    pub description: String,
    /// A JSON Schema of its params, raw.
    pub parameters: RawJson,
}

/// `snapshot.state` payload: only the allowed read surfaces.
///
/// There is no `backendData` field: a host snapshot decoded from JSON that has one drops it,
/// so it can never be encoded to an agent through this type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotState {
    /// The study session.
    pub session_id: String,
    /// The visible UI state, raw.
    pub ui_spec: RawJson,
    /// The chat timeline, raw.
    pub message_history: RawJson,
    /// The tools the agent may call.
    pub tool_schema: Vec<ToolSchema>,
}

/// `tool.result` payload. On success the host includes the new `uiSpec` and
/// `messageHistory`; no `backendData` field exists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    /// Whether the tool ran.
    pub ok: bool,
    /// The tool that ran.
    pub tool_name: String,
    /// The visible UI state after the tool, raw (an explicit `null` is kept as `null`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_raw"
    )]
    pub ui_spec: Option<RawJson>,
    /// The chat timeline after the tool, raw (an explicit `null` is kept as `null`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_raw"
    )]
    pub message_history: Option<RawJson>,
}

/// An optional raw field that is `Some` whenever it is present, `null` included, so that
/// `"uiSpec": null` round-trips (serde's `Option` would read `null` as absent).
fn present_raw<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<RawJson>, D::Error> {
    RawJson::deserialize(d).map(Some)
}

/// `state.updated` payload, pushed when the host state changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateUpdated {
    /// What changed it: `"user"`, a stage load, a tool application.
    pub source: String,
    /// The visible UI state, raw.
    pub ui_spec: RawJson,
    /// The chat timeline, raw.
    pub message_history: RawJson,
}

/// `user.message` payload: the participant's chat input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserText {
    /// The text.
    pub text: String,
    /// The booking stage it was typed in (`movie`, `theater`, `date`, `time`, `seat`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
}

/// `session.ended` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionEnded {
    /// The study session.
    pub session_id: String,
    /// Where its log was written, e.g. `"logs/study/s-20260213-001.jsonl"`.
    pub log_file: String,
    /// Whether the UI state was reset.
    pub state_reset: bool,
}

/// `error` payload (from the host, or from the relay itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorPayload {
    /// The code.
    pub code: ErrorCode,
    /// A human-readable description.
    pub message: String,
}

impl ErrorPayload {
    /// An error with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

// ---- the sender enums ---------------------------------------------------------------------

/// Declares a sender enum and its [`Body`] impl from `Variant(Payload) = types::NAME` lines.
macro_rules! sender_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident($payload:ty) = $wire:path, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub enum $name {
            $( $(#[$vmeta])* $variant($payload), )*
        }

        impl $name {
            /// Every wire `type` of this sender.
            pub const TYPES: &'static [&'static str] = &[$($wire),*];
        }

        impl sealed::Sealed for $name {}

        impl Body for $name {
            fn msg_type(&self) -> &'static str {
                match self {
                    $( Self::$variant(_) => $wire, )*
                }
            }

            fn from_payload(msg_type: &str, payload: &str) -> Option<serde_json::Result<Self>> {
                $(
                    if msg_type == $wire {
                        return Some(serde_json::from_str(payload).map(Self::$variant));
                    }
                )*
                None
            }

            fn serialize_payload<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    $( Self::$variant(p) => p.serialize(s), )*
                }
            }
        }
    };
}

sender_enum! {
    /// Everything an external agent sends (to the relay, or through it to the host).
    pub enum AgentMessage {
        /// `relay.join` (role `agent`).
        Join(RelayJoin) = types::RELAY_JOIN,
        /// `session.start`.
        SessionStart(SessionStart) = types::SESSION_START,
        /// `snapshot.get`.
        SnapshotGet(SnapshotGet) = types::SNAPSHOT_GET,
        /// `tool.call`.
        ToolCall(ToolCall) = types::TOOL_CALL,
        /// `agent.message`.
        Message(AgentText) = types::AGENT_MESSAGE,
        /// `session.end`.
        SessionEnd(SessionEnd) = types::SESSION_END,
    }
}

sender_enum! {
    /// Everything a host sends (to the relay, or through it to agents).
    pub enum HostMessage {
        /// `relay.join` (role `host`).
        Join(RelayJoin) = types::RELAY_JOIN,
        /// `session.started`.
        SessionStarted(SessionStarted) = types::SESSION_STARTED,
        /// `snapshot.state`.
        SnapshotState(SnapshotState) = types::SNAPSHOT_STATE,
        /// `tool.result`.
        ToolResult(ToolResult) = types::TOOL_RESULT,
        /// `state.updated`.
        StateUpdated(StateUpdated) = types::STATE_UPDATED,
        /// `user.message`.
        UserMessage(UserText) = types::USER_MESSAGE,
        /// `session.ended`.
        SessionEnded(SessionEnded) = types::SESSION_ENDED,
        /// `error`.
        Error(ErrorPayload) = types::ERROR,
    }
}

sender_enum! {
    /// Everything the relay itself sends.
    pub enum RelayMessage {
        /// `relay.hello`, on connect.
        Hello(RelayHello) = types::RELAY_HELLO,
        /// `relay.joined`, `replyTo` a join.
        Joined(RelayJoined) = types::RELAY_JOINED,
        /// `relay.presence`, to a host.
        Presence(RelayPresence) = types::RELAY_PRESENCE,
        /// `error`.
        Error(ErrorPayload) = types::ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_sets_are_interop_lists() {
        assert_eq!(types::agent_to_host("tool.call"), Some("tool.call"));
        assert_eq!(types::agent_to_host("state.updated"), None);
        assert_eq!(types::host_to_agent("error"), Some("error"));
        assert_eq!(types::host_to_agent("relay.join"), None);
        // Every forwardable type has a variant in its sender's enum.
        for t in types::AGENT_TO_HOST {
            assert!(AgentMessage::TYPES.contains(&t), "{t}");
        }
        for t in types::HOST_TO_AGENT {
            assert!(HostMessage::TYPES.contains(&t), "{t}");
        }
    }

    #[test]
    fn unknown_payload_fields_are_ignored() {
        let m = AgentMessage::from_payload("snapshot.get", r#"{"extra":1}"#);
        assert!(matches!(m, Some(Ok(AgentMessage::SnapshotGet(_)))));
        assert!(AgentMessage::from_payload("state.updated", "{}").is_none());
    }
}

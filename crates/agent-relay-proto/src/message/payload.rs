//! The payload of every message type, and the [`Role`] a connection joins in.

use serde::{Deserialize, Serialize};

use agentwire_core::json::RawJson;

use super::code::ErrorCode;

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

//! Agent → controller messages: `hello`, `guilds`, `event`, `resp`.

use serde::{Deserialize, Deserializer, Serialize};

use agentwire_core::json::{RawJson, Tagged};

/// A message an agent sends to the controller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum AgentMessage {
    /// Handshake and ~30 s heartbeat.
    Hello(Hello),
    /// Guild membership update (~30 s heartbeat).
    Guilds(Guilds),
    /// Voice-channel lifecycle event (`released`, `add`).
    Event(Event),
    /// Reply to a controller `req`.
    Resp(Resp),
}

/// `hello`: the handshake, repeated every ~30 s as a heartbeat.
///
/// Decoding accepts the version under `protocolVersion` and, as the real controller does,
/// under the aliases `protocol_version`, `protocolversion` and `version` (first present
/// wins, in that order); encoding always writes `protocolVersion`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "HelloWire")]
pub struct Hello {
    /// Protocol version, e.g. `"1.0.0"`. Missing → the controller closes with 1008.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// Unique agent identifier. Missing → the controller ignores the hello.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Discord bot user id (`string | null`).
    pub bot_user_id: Option<String>,
    /// Discord bot tag (`string | null`).
    pub tag: Option<String>,
    /// Whether the agent's audio node (Lavalink) is ready.
    pub ready: bool,
    /// Guilds the agent is in.
    pub guild_ids: Vec<String>,
    /// Agent pool identifier.
    pub pool_id: String,
    /// Optional runner authentication secret (`runnerSecret?`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runner_secret: Option<String>,
    /// Runner id the real agent adds to every message (not in the spec).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runner_id: Option<String>,
}

/// The lenient decode shape of [`Hello`]: version aliases, defaults for missing fields.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HelloWire {
    protocol_version: Option<String>,
    #[serde(rename = "protocol_version")]
    protocol_version_snake: Option<String>,
    #[serde(rename = "protocolversion")]
    protocol_version_lower: Option<String>,
    version: Option<String>,
    agent_id: Option<String>,
    #[serde(default)]
    bot_user_id: Option<String>,
    #[serde(default)]
    tag: Option<String>,
    #[serde(default)]
    ready: bool,
    #[serde(default)]
    guild_ids: Vec<String>,
    #[serde(default)]
    pool_id: String,
    runner_secret: Option<String>,
    runner_id: Option<String>,
}

impl From<HelloWire> for Hello {
    fn from(w: HelloWire) -> Self {
        Self {
            protocol_version: w
                .protocol_version
                .or(w.protocol_version_snake)
                .or(w.protocol_version_lower)
                .or(w.version),
            agent_id: w.agent_id,
            bot_user_id: w.bot_user_id,
            tag: w.tag,
            ready: w.ready,
            guild_ids: w.guild_ids,
            pool_id: w.pool_id,
            runner_secret: w.runner_secret,
            runner_id: w.runner_id,
        }
    }
}

/// `guilds`: the agent's current guild list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Guilds {
    /// Guilds the agent is in now (replaces the previous list).
    pub guild_ids: Vec<String>,
    /// Sender's agent id, which the real agent adds (not in the spec).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Sender's runner id, which the real agent adds (not in the spec).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_id: Option<String>,
}

/// `event`: a voice-channel lifecycle event, tagged by its `event` field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "lowercase")]
pub enum Event {
    /// The agent left a voice channel.
    Released(Released),
    /// The agent joined (or failed to join) a voice channel.
    Add(Add),
}

/// Session kind of an `event`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum SessionKind {
    /// A music session (the default when `kind` is missing).
    #[default]
    Music,
    /// An assistant session.
    Assistant,
}

impl SessionKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Music => "music",
            Self::Assistant => "assistant",
        }
    }
}

/// `event: "released"`: the agent disconnected from a voice channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Released {
    /// Sending agent.
    pub agent_id: String,
    /// Guild of the voice channel.
    pub guild_id: String,
    /// The voice channel left.
    pub voice_channel_id: String,
    /// Why, e.g. `"USER_LEFT"`, `"TIMEOUT"`.
    #[serde(default)]
    pub reason: String,
    /// Session kind (default `music`).
    #[serde(default)]
    pub kind: SessionKind,
    /// Runner id the real agent adds (not in the spec).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_id: Option<String>,
}

/// `event: "add"`: the agent joined a voice channel (`ok`), or failed to (`error`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Add {
    /// Sending agent.
    pub agent_id: String,
    /// Guild of the voice channel.
    pub guild_id: String,
    /// The voice channel joined.
    pub voice_channel_id: String,
    /// Optional text channel bound to the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_channel_id: Option<String>,
    /// Same as `voiceChannelId` (redundant in the spec; defaults to it when missing).
    #[serde(default)]
    pub channel_id: String,
    /// Session kind (default `music`).
    #[serde(default)]
    pub kind: SessionKind,
    /// Optional session owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_user_id: Option<String>,
    /// Whether the join succeeded.
    pub ok: bool,
    /// Error message when `ok` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Runner id the real agent adds (not in the spec).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_id: Option<String>,
}

/// `resp`: the agent's reply to a `req`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resp {
    /// The `req` id this answers.
    pub id: String,
    /// Success flag.
    pub ok: bool,
    /// Result data when `ok` (kept as raw JSON). A present `"data": null` is kept as
    /// `Some(null)`, so that it re-encodes as sent; `None` means the field was absent.
    #[serde(
        default,
        deserialize_with = "present_raw",
        skip_serializing_if = "Option::is_none"
    )]
    pub data: Option<RawJson>,
    /// Error text when not `ok` (e.g. `"no-session"`, `"unknown-op"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Sender's agent id, which the real agent adds (not in the spec).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Sender's runner id, which the real agent adds (not in the spec).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_id: Option<String>,
}

/// Decodes a present field as `Some`, JSON `null` included (serde's `Option` would map
/// `null` to `None` and lose it on re-encode).
fn present_raw<'de, D: Deserializer<'de>>(d: D) -> Result<Option<RawJson>, D::Error> {
    RawJson::deserialize(d).map(Some)
}

impl Resp {
    /// A success reply.
    pub fn ok(id: impl Into<String>, data: impl Into<RawJson>) -> Self {
        Self {
            id: id.into(),
            ok: true,
            data: Some(data.into()),
            error: None,
            agent_id: None,
            runner_id: None,
        }
    }

    /// A failure reply.
    pub fn err(id: impl Into<String>, error: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            ok: false,
            data: None,
            error: Some(error.into()),
            agent_id: None,
            runner_id: None,
        }
    }

    /// The outcome: `Ok(data)` (JSON `null` when absent) or `Err(error)` (empty when absent).
    pub fn result(&self) -> Result<&str, &str> {
        if self.ok {
            Ok(self.data.as_ref().map_or("null", RawJson::get))
        } else {
            Err(self.error.as_deref().unwrap_or(""))
        }
    }
}

impl<'de> Tagged<'de> for AgentMessage {
    fn decode_variant<D: Deserializer<'de>>(tag: &str, d: D) -> Result<Option<Self>, D::Error> {
        Ok(Some(match tag {
            "hello" => Self::Hello(Hello::deserialize(d)?),
            "guilds" => Self::Guilds(Guilds::deserialize(d)?),
            "event" => Self::Event(Event::deserialize(d)?),
            "resp" => Self::Resp(Resp::deserialize(d)?),
            _ => return Ok(None),
        }))
    }
}

impl AgentMessage {
    /// The wire `type`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Hello(_) => "hello",
            Self::Guilds(_) => "guilds",
            Self::Event(_) => "event",
            Self::Resp(_) => "resp",
        }
    }
}

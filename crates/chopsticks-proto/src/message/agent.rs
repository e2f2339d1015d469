//! Agent → controller messages: `hello`, `guilds`, `event`, `resp`.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

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
/// wins, in that order); encoding always writes `protocolVersion`. A field present with
/// the wrong type (a number for `protocolVersion`, a string for `ready`, ...) fails the
/// decode with [`DecodeError::InvalidHello`](crate::DecodeError::InvalidHello), which names
/// it; `null` counts as absent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", try_from = "HelloWire")]
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
    /// Runner id the real agent adds to every message (not in the spec; a value that is not
    /// a string is dropped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runner_id: Option<String>,
}

/// A `hello` field as sent: a value of the type the spec gives it, or a value of another
/// type, kept as its JSON text so the controller can name it.
#[derive(Debug)]
enum Field<T> {
    Typed(T),
    Wrong(RawJson),
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Field<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Borrowed from the frame's text (no copy); only a wrong value is copied out.
        let raw = <&'de RawValue>::deserialize(d)?;
        Ok(match serde_json::from_str::<T>(raw.get()) {
            Ok(v) => Self::Typed(v),
            Err(_) => Self::Wrong(RawJson::from_raw(raw)),
        })
    }
}

/// The first wrong-typed field of a `hello`: its wire name, what it must hold, and the JSON
/// it held.
pub(crate) type WrongField = (&'static str, &'static str, RawJson);

/// The lenient decode shape of [`Hello`]: version aliases, defaults for missing fields, and
/// wrong-typed fields kept apart (see [`HelloWire::split`]).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HelloWire {
    #[serde(default)]
    protocol_version: Option<Field<String>>,
    #[serde(default, rename = "protocol_version")]
    protocol_version_snake: Option<Field<String>>,
    #[serde(default, rename = "protocolversion")]
    protocol_version_lower: Option<Field<String>>,
    #[serde(default)]
    version: Option<Field<String>>,
    #[serde(default)]
    agent_id: Option<Field<String>>,
    #[serde(default)]
    bot_user_id: Option<Field<String>>,
    #[serde(default)]
    tag: Option<Field<String>>,
    #[serde(default)]
    ready: Option<Field<bool>>,
    #[serde(default)]
    guild_ids: Option<Field<Vec<String>>>,
    #[serde(default)]
    pool_id: Option<Field<String>>,
    #[serde(default)]
    runner_secret: Option<Field<String>>,
    #[serde(default)]
    runner_id: Option<Field<String>>,
}

const A_STRING: &str = "a string";
const A_STRING_OR_NULL: &str = "a string or null";

impl HelloWire {
    /// The hello with every well-typed field (a wrong-typed one reads as absent, or as its
    /// default), and the first wrong-typed field in the spec's field order: `agentId`, the
    /// version (the first key present), `botUserId`, `tag`, `ready`, `guildIds`, `poolId`,
    /// `runnerSecret`.
    pub(crate) fn split(self) -> (Hello, Option<WrongField>) {
        let mut wrong = None;
        let agent_id = typed(self.agent_id, &mut wrong, "agentId", A_STRING);
        let (key, version) = [
            ("protocolVersion", self.protocol_version),
            ("protocol_version", self.protocol_version_snake),
            ("protocolversion", self.protocol_version_lower),
            ("version", self.version),
        ]
        .into_iter()
        .find(|(_, v)| v.is_some())
        .unwrap_or(("protocolVersion", None));
        let protocol_version = typed(version, &mut wrong, key, A_STRING);
        let bot_user_id = typed(self.bot_user_id, &mut wrong, "botUserId", A_STRING_OR_NULL);
        let tag = typed(self.tag, &mut wrong, "tag", A_STRING_OR_NULL);
        let ready = typed(self.ready, &mut wrong, "ready", "a boolean").unwrap_or(false);
        let guild_ids = typed(
            self.guild_ids,
            &mut wrong,
            "guildIds",
            "an array of strings",
        )
        .unwrap_or_default();
        let pool_id = typed(self.pool_id, &mut wrong, "poolId", A_STRING).unwrap_or_default();
        let runner_secret = typed(self.runner_secret, &mut wrong, "runnerSecret", A_STRING);
        let runner_id = match self.runner_id {
            Some(Field::Typed(r)) => Some(r),
            _ => None,
        };
        let hello = Hello {
            protocol_version,
            agent_id,
            bot_user_id,
            tag,
            ready,
            guild_ids,
            pool_id,
            runner_secret,
            runner_id,
        };
        (hello, wrong)
    }
}

/// The value of `f` if it has its type; else `None`, recording `f` in `wrong` unless an
/// earlier field is there already.
fn typed<T>(
    f: Option<Field<T>>,
    wrong: &mut Option<WrongField>,
    name: &'static str,
    expected: &'static str,
) -> Option<T> {
    match f {
        Some(Field::Typed(v)) => Some(v),
        Some(Field::Wrong(raw)) => {
            wrong.get_or_insert((name, expected, raw));
            None
        }
        None => None,
    }
}

impl TryFrom<HelloWire> for Hello {
    type Error = String;

    fn try_from(w: HelloWire) -> Result<Self, String> {
        match w.split() {
            (hello, None) => Ok(hello),
            (_, Some((field, expected, _))) => Err(format!("hello: {field} must be {expected}")),
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

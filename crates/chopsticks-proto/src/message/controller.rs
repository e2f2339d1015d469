//! Controller → agent messages: `req`, `error`.

use serde::{Deserialize, Deserializer, Serialize};

use agentwire_core::json::{RawJson, Tagged};

/// A message the controller sends to an agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ControllerMessage {
    /// An RPC request; the agent must answer with a `resp` carrying the same `id`.
    Req(Req),
    /// A protocol error notice (the connection may be closed after it).
    Error(ErrorMessage),
}

/// `req`: an RPC-style command to an agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Req {
    /// Request id (a UUID) that the `resp` echoes.
    pub id: String,
    /// Operation name (`play`, `pause`, `queue`, ...).
    pub op: String,
    /// Operation payload (kept as raw JSON; `null` when missing).
    #[serde(default)]
    pub data: RawJson,
    /// Target agent.
    pub agent_id: String,
}

/// A `req` borrowed from its parts, for encoding without building an owned [`Req`].
///
/// Encodes exactly as `ControllerMessage::Req(Req { .. })` does (pinned by a unit test).
#[derive(Serialize)]
#[serde(tag = "type", rename = "req", rename_all = "camelCase")]
pub(crate) struct ReqRef<'a, D: Serialize> {
    pub(crate) id: &'a str,
    pub(crate) op: &'a str,
    pub(crate) data: D,
    pub(crate) agent_id: &'a str,
}

/// `error`: a human-readable protocol error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorMessage {
    /// The error text, e.g. `"Incompatible protocol version 0.9.0. Controller expects 1.0.0."`.
    pub error: String,
}

impl ErrorMessage {
    /// An error message with `text`.
    pub fn new(text: impl Into<String>) -> Self {
        Self { error: text.into() }
    }
}

impl<'de> Tagged<'de> for ControllerMessage {
    fn decode_variant<D: Deserializer<'de>>(tag: &str, d: D) -> Result<Option<Self>, D::Error> {
        Ok(Some(match tag {
            "req" => Self::Req(Req::deserialize(d)?),
            "error" => Self::Error(ErrorMessage::deserialize(d)?),
            _ => return Ok(None),
        }))
    }
}

impl ControllerMessage {
    /// The wire `type`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Req(_) => "req",
            Self::Error(_) => "error",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn req_ref_encodes_like_req() {
        let data = RawJson::from_text(r#"{"q": "x"}"#).expect("json");
        let owned = ControllerMessage::Req(Req {
            id: "i".into(),
            op: "play".into(),
            data: data.clone(),
            agent_id: "a".into(),
        });
        let borrowed = ReqRef {
            id: "i",
            op: "play",
            data: &data,
            agent_id: "a",
        };
        assert_eq!(
            serde_json::to_string(&owned).expect("json"),
            serde_json::to_string(&borrowed).expect("json")
        );
    }
}

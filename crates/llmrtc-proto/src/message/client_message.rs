//! Client → server messages.

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer, Serialize};

use super::common::{Timestamp, VisionAttachment};
use agentwire_core::json::RawJson;
use agentwire_core::json::Tagged;

/// Every message a client sends (`type` in kebab-case, fields in camelCase).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ClientMessage {
    /// `ping`: heartbeat, every 15 s.
    Ping(Ping),
    /// `offer`: WebRTC SDP offer.
    Offer(Offer),
    /// `reconnect`: recover a previous session after a disconnect.
    Reconnect(Reconnect),
    /// `audio`: a base64 WAV utterance (fallback when there is no WebRTC audio track).
    Audio(Audio),
    /// `attachments`: vision attachments queued for the next speech segment.
    Attachments(Attachments),
}

/// `{"type":"ping","timestamp":number}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ping {
    /// `Date.now()` of the client, echoed in `pong` for RTT.
    pub timestamp: Timestamp,
}

impl Ping {
    /// A ping carrying `timestamp` (milliseconds since the epoch, by convention).
    pub fn new(timestamp: u64) -> Self {
        Self {
            timestamp: timestamp.into(),
        }
    }
}

/// `{"type":"offer","signal":RTCSessionDescriptionInit}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offer {
    /// The SDP offer, opaque JSON (`{"type":"offer","sdp":"..."}` from a browser).
    pub signal: RawJson,
}

/// `{"type":"reconnect","sessionId":string}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reconnect {
    /// The previous session's id (its `ready.id`).
    pub session_id: String,
}

/// `{"type":"audio","data":string,"attachments"?:VisionAttachment[]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Audio {
    /// Base64-encoded WAV (see [`crate::wav`]).
    pub data: String,
    /// Images for this utterance's LLM turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachments: Option<Vec<VisionAttachment>>,
}

/// `{"type":"attachments","attachments":VisionAttachment[]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attachments {
    /// Images queued for the next speech segment.
    pub attachments: Vec<VisionAttachment>,
}

impl ClientMessage {
    /// Every wire `type` a client sends.
    pub const TYPES: [&'static str; 5] = ["ping", "offer", "reconnect", "audio", "attachments"];

    /// The wire `type`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Ping(_) => "ping",
            Self::Offer(_) => "offer",
            Self::Reconnect(_) => "reconnect",
            Self::Audio(_) => "audio",
            Self::Attachments(_) => "attachments",
        }
    }
}

impl<'de> Tagged<'de> for ClientMessage {
    fn decode_variant<D: Deserializer<'de>>(tag: &str, d: D) -> Result<Option<Self>, D::Error> {
        Ok(Some(match tag {
            "ping" => Self::Ping(Ping::deserialize(d)?),
            "offer" => Self::Offer(Offer::deserialize(d)?),
            "reconnect" => Self::Reconnect(Reconnect::deserialize(d)?),
            "audio" => Self::Audio(Audio::deserialize(d)?),
            "attachments" => Self::Attachments(Attachments::deserialize(d)?),
            _ => {
                IgnoredAny::deserialize(d)?;
                return Ok(None);
            }
        }))
    }
}

/// A client message whose `audio.data` may borrow from the frame it was decoded from
/// ([`ClientMessageRef::decode`]); what the server decodes, so an utterance is never copied.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientMessageRef<'a> {
    /// `ping`.
    Ping(Ping),
    /// `offer`.
    Offer(Offer),
    /// `reconnect`.
    Reconnect(Reconnect),
    /// `audio`, borrowed.
    Audio(AudioRef<'a>),
    /// `attachments`.
    Attachments(Attachments),
}

/// `audio` with its base64 `data` borrowed when possible.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AudioRef<'a> {
    /// Base64-encoded WAV.
    #[serde(borrow)]
    pub data: Cow<'a, str>,
    /// Images for this utterance's LLM turn.
    #[serde(default)]
    pub attachments: Option<Vec<VisionAttachment>>,
}

impl ClientMessageRef<'_> {
    /// The wire `type`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Ping(_) => "ping",
            Self::Offer(_) => "offer",
            Self::Reconnect(_) => "reconnect",
            Self::Audio(_) => "audio",
            Self::Attachments(_) => "attachments",
        }
    }

    /// The owned message (copies `audio.data` if it was borrowed).
    pub fn into_owned(self) -> ClientMessage {
        match self {
            Self::Ping(m) => ClientMessage::Ping(m),
            Self::Offer(m) => ClientMessage::Offer(m),
            Self::Reconnect(m) => ClientMessage::Reconnect(m),
            Self::Audio(a) => ClientMessage::Audio(Audio {
                data: a.data.into_owned(),
                attachments: a.attachments,
            }),
            Self::Attachments(m) => ClientMessage::Attachments(m),
        }
    }
}

impl<'de> Tagged<'de> for ClientMessageRef<'de> {
    fn decode_variant<D: Deserializer<'de>>(tag: &str, d: D) -> Result<Option<Self>, D::Error> {
        Ok(Some(match tag {
            "ping" => Self::Ping(Ping::deserialize(d)?),
            "offer" => Self::Offer(Offer::deserialize(d)?),
            "reconnect" => Self::Reconnect(Reconnect::deserialize(d)?),
            "audio" => Self::Audio(AudioRef::deserialize(d)?),
            "attachments" => Self::Attachments(Attachments::deserialize(d)?),
            _ => {
                IgnoredAny::deserialize(d)?;
                return Ok(None);
            }
        }))
    }
}

macro_rules! from_variant {
    ($enum:ident: $($ty:ident),*) => {
        $(impl From<$ty> for $enum {
            fn from(m: $ty) -> Self {
                Self::$ty(m)
            }
        })*
    };
}
pub(crate) use from_variant;

from_variant!(ClientMessage: Ping, Offer, Reconnect, Audio, Attachments);

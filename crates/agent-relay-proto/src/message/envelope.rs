//! The envelope `{v, type, id?, replyTo?, payload}`: the `"mvp-0.2"` marker, the [`Body`] a
//! sender enum implements, and the typed [`Envelope`] (decoded and encoded in
//! [`codec`](crate::Route)).

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;

/// The protocol version literal, `"mvp-0.2"`.
pub const VERSION: &str = "mvp-0.2";

/// The `v` field: serializes as `"mvp-0.2"` and accepts nothing else, so a wrong version is a
/// decode error of its own ([`DecodeError::Version`](crate::DecodeError::Version)), not a vague "missing field".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Mvp02;

impl Serialize for Mvp02 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(VERSION)
    }
}

impl<'de> Deserialize<'de> for Mvp02 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Mvp02;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("the string \"mvp-0.2\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Mvp02, E> {
                if v == VERSION {
                    Ok(Mvp02)
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(v), &self))
                }
            }
        }
        d.deserialize_str(V)
    }
}

pub(crate) mod sealed {
    /// Only this crate's sender enums are [`Body`](super::Body)s.
    pub trait Sealed {}
}

/// The `type` + `payload` half of a message: implemented by the sender enums
/// [`AgentMessage`](crate::AgentMessage), [`HostMessage`](crate::HostMessage) and
/// [`RelayMessage`](crate::RelayMessage). Sealed.
pub trait Body: Sized + sealed::Sealed {
    /// The wire `type`, e.g. `"tool.call"`.
    fn msg_type(&self) -> &'static str;

    /// Decodes the payload of a message of type `msg_type`; `None` if this sender has no such
    /// type.
    fn from_payload(msg_type: &str, payload: &str) -> Option<serde_json::Result<Self>>;

    /// Serializes the payload alone.
    fn serialize_payload<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error>;
}

/// One message: `{"v":"mvp-0.2","type":..,"id"?:..,"replyTo"?:..,"payload":{..}}`.
///
/// `B` is the sender enum, which supplies `type` and `payload`. `serde` support is written by
/// hand rather than derived as `#[serde(flatten)]` over an adjacently tagged enum: serde
/// buffers flattened and out-of-order tagged content, and `RawValue` (kept for `uiSpec`,
/// `messageHistory` and `params`) cannot be read back from that buffer. Decoding reads
/// `type` and `payload` first, then the payload straight from its text. Encoding writes the
/// spec's field order: `v`, `type`, `id`, `replyTo`, `payload`.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope<B> {
    /// Always `"mvp-0.2"`.
    pub v: Mvp02,
    /// The sender's request id, for requests.
    pub id: Option<String>,
    /// The request id answered, for replies.
    pub reply_to: Option<String>,
    /// `type` and `payload`.
    pub body: B,
}

impl<B: Body> Envelope<B> {
    /// A message with no `id` and no `replyTo` (a push).
    pub fn new(body: B) -> Self {
        Self {
            v: Mvp02,
            id: None,
            reply_to: None,
            body,
        }
    }

    /// A request with `id`.
    pub fn request(id: impl Into<String>, body: B) -> Self {
        Self {
            id: Some(id.into()),
            ..Self::new(body)
        }
    }

    /// A reply to request `reply_to`.
    pub fn reply(reply_to: impl Into<String>, body: B) -> Self {
        Self {
            reply_to: Some(reply_to.into()),
            ..Self::new(body)
        }
    }

    /// The wire `type`.
    pub fn msg_type(&self) -> &'static str {
        self.body.msg_type()
    }
}

/// Serializes a body's payload alone.
struct PayloadOf<'a, B>(&'a B);

impl<B: Body> Serialize for PayloadOf<'_, B> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize_payload(s)
    }
}

impl<B: Body> Serialize for Envelope<B> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let len = 3 + usize::from(self.id.is_some()) + usize::from(self.reply_to.is_some());
        let mut m = s.serialize_map(Some(len))?;
        m.serialize_entry("v", &self.v)?;
        m.serialize_entry("type", self.body.msg_type())?;
        if let Some(id) = &self.id {
            m.serialize_entry("id", id)?;
        }
        if let Some(r) = &self.reply_to {
            m.serialize_entry("replyTo", r)?;
        }
        m.serialize_entry("payload", &PayloadOf(&self.body))?;
        m.end()
    }
}

impl<'de, B: Body> Deserialize<'de> for Envelope<B> {
    /// Works with deserializers that do not buffer (`serde_json::from_str`, `from_slice`,
    /// `from_reader`); inside `#[serde(flatten)]` or an untagged enum the payload's raw JSON
    /// cannot be read back.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Parts {
            v: Mvp02,
            #[serde(rename = "type")]
            ty: String,
            #[serde(default)]
            id: Option<String>,
            #[serde(default, rename = "replyTo")]
            reply_to: Option<String>,
            payload: Box<RawValue>,
        }
        let p = Parts::deserialize(d)?;
        let body = match B::from_payload(&p.ty, p.payload.get()) {
            Some(Ok(body)) => body,
            Some(Err(e)) => return Err(de::Error::custom(e)),
            None => return Err(de::Error::custom(format_args!("unknown type {:?}", p.ty))),
        };
        Ok(Self {
            v: p.v,
            id: p.id,
            reply_to: p.reply_to,
            body,
        })
    }
}

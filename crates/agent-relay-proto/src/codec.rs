//! The envelope `{v, type, id?, replyTo?, payload}`: the `"mvp-0.2"` marker, the typed
//! [`Envelope`], and the borrowed [`Route`] the relay forwards by.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use agentwire_core::{Frame, FrameBuf};
use serde::de::{self, Deserializer, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::error::DecodeError;

/// The protocol version literal, `"mvp-0.2"`.
pub const VERSION: &str = "mvp-0.2";

/// The `v` field: serializes as `"mvp-0.2"` and accepts nothing else, so a wrong version is a
/// decode error of its own ([`DecodeError::Version`]), not a vague "missing field".
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

    /// Decodes one WebSocket message body of at most `max_len` bytes. Never panics; the size
    /// is checked before parsing. Binary frames must hold UTF-8 JSON.
    pub fn decode(frame: Frame<'_>, max_len: usize) -> Result<Self, DecodeError> {
        let route = Route::decode(frame, max_len, VersionRule::Required)?;
        route.into_typed()
    }

    /// Appends the JSON encoding to `out` (a caller-owned, reusable buffer).
    pub fn encode(&self, out: &mut Vec<u8>) {
        // Writing to a Vec cannot fail and every key is a string, so neither can serializing.
        let _ = serde_json::to_writer(out, self);
    }

    /// Encodes into a text frame.
    pub fn to_frame(&self) -> FrameBuf {
        let mut out = Vec::with_capacity(128);
        self.encode(&mut out);
        FrameBuf::json_from_vec(out)
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

/// Whether [`Route::decode`] accepts a message without `v`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VersionRule {
    /// `v` must be present and `"mvp-0.2"` (the spec: "always `mvp-0.2`").
    #[default]
    Required,
    /// `v` may be absent; when present it must still be `"mvp-0.2"`.
    MayBeMissing,
}

/// The envelope of a message, borrowed from its body: what the relay needs to route it.
///
/// Decoding reads the five envelope fields as raw JSON, unescapes only `type`, `id` and
/// `replyTo`, and leaves `payload` unparsed, so the relay can forward the original bytes
/// (and log the payload as a slice of them) without building a tree.
#[derive(Debug, Clone)]
pub struct Route<'a> {
    /// The whole message text.
    pub text: &'a str,
    /// `type`.
    pub msg_type: Cow<'a, str>,
    /// `id`, if present (`null` counts as absent).
    pub id: Option<Cow<'a, str>>,
    /// `replyTo`, if present (`null` counts as absent).
    pub reply_to: Option<Cow<'a, str>>,
    /// `payload`, a JSON object, raw.
    pub payload: &'a RawValue,
}

#[derive(Deserialize)]
struct RawEnvelope<'a> {
    #[serde(borrow, default)]
    v: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "type")]
    ty: Option<&'a RawValue>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "replyTo")]
    reply_to: Option<&'a RawValue>,
    #[serde(borrow, default)]
    payload: Option<&'a RawValue>,
}

/// The string a raw JSON value holds, borrowed when it has no escapes; `None` if it is not a
/// string.
pub(crate) fn raw_str(raw: &RawValue) -> Option<Cow<'_, str>> {
    let t = raw.get();
    let inner = t.strip_prefix('"')?.strip_suffix('"')?;
    if inner.contains('\\') {
        serde_json::from_str::<String>(t).ok().map(Cow::Owned)
    } else {
        Some(Cow::Borrowed(inner))
    }
}

/// The text of a frame: text frames as they are, binary frames if they are UTF-8.
pub(crate) fn frame_text(frame: Frame<'_>) -> Result<&str, DecodeError> {
    match frame {
        Frame::Text(t) => Ok(t),
        Frame::Binary(b) => std::str::from_utf8(b).map_err(|_| DecodeError::NotUtf8),
    }
}

impl<'a> Route<'a> {
    /// Decodes the envelope of one WebSocket message body of at most `max_len` bytes.
    ///
    /// Never panics; the size is checked before parsing. Checks, in order: UTF-8, JSON, an
    /// object, a string `type`, `id`/`replyTo` strings when present, `v`, and `payload` an
    /// object. Every error after the `type` check carries the `id`, when it was a string.
    pub fn decode(
        frame: Frame<'a>,
        max_len: usize,
        version: VersionRule,
    ) -> Result<Self, DecodeError> {
        let len = frame.len();
        if len > max_len {
            return Err(DecodeError::TooLarge { len, max: max_len });
        }
        Self::parse(frame_text(frame)?, version)
    }

    /// [`decode`](Self::decode) of a text already in hand, without a size check.
    pub fn parse(text: &'a str, version: VersionRule) -> Result<Self, DecodeError> {
        // serde reads a struct from an array too, so look at the first byte ourselves.
        if !text.trim_start().starts_with('{') {
            return Err(match serde_json::from_str::<de::IgnoredAny>(text) {
                Ok(_) => DecodeError::NotAnObject,
                Err(e) => DecodeError::Json(e.to_string()),
            });
        }
        let raw: RawEnvelope<'a> =
            serde_json::from_str(text).map_err(|e| DecodeError::Json(e.to_string()))?;
        // Recover the id first, so that every later error can be answered with `replyTo`.
        let id = match raw.id {
            None => None,
            Some(r) => match raw_str(r) {
                Some(s) => Some(s),
                None => {
                    let msg_type = raw.ty.and_then(raw_str);
                    return Err(match msg_type {
                        None => DecodeError::MissingType { id: None },
                        Some(_) => DecodeError::InvalidField {
                            field: "id",
                            id: None,
                        },
                    });
                }
            },
        };
        let owned_id = || id.as_deref().map(str::to_owned);
        let Some(msg_type) = raw.ty.and_then(raw_str) else {
            return Err(DecodeError::MissingType { id: owned_id() });
        };
        let reply_to = match raw.reply_to {
            None => None,
            Some(r) => Some(raw_str(r).ok_or_else(|| DecodeError::InvalidField {
                field: "replyTo",
                id: owned_id(),
            })?),
        };
        match raw.v {
            Some(v) if raw_str(v).as_deref() == Some(VERSION) => {}
            None if version == VersionRule::MayBeMissing => {}
            _ => return Err(DecodeError::Version { id: owned_id() }),
        }
        let payload = match raw.payload {
            Some(p) if p.get().starts_with('{') => p,
            _ => {
                return Err(DecodeError::InvalidField {
                    field: "payload",
                    id: owned_id(),
                })
            }
        };
        Ok(Self {
            text,
            msg_type,
            id,
            reply_to,
            payload,
        })
    }

    /// Where `payload` sits in [`text`](Self::text), as a byte range.
    pub fn payload_range(&self) -> Range<usize> {
        let p = self.payload.get();
        // A borrowed RawValue is a slice of the text it was parsed from; the fallback is
        // never taken, it only keeps this function total.
        let start = (p.as_ptr() as usize).wrapping_sub(self.text.as_ptr() as usize);
        match self.text.get(start..start.saturating_add(p.len())) {
            Some(s) if s.as_ptr() == p.as_ptr() => start..start + p.len(),
            _ => self.text.find(p).map_or(0..0, |s| s..s + p.len()),
        }
    }

    /// Decodes the payload with sender enum `B` into a typed [`Envelope`].
    pub fn into_typed<B: Body>(self) -> Result<Envelope<B>, DecodeError> {
        let id = self.id.map(Cow::into_owned);
        let body = match B::from_payload(&self.msg_type, self.payload.get()) {
            Some(Ok(body)) => body,
            Some(Err(e)) => {
                return Err(DecodeError::InvalidPayload {
                    msg_type: static_type(&self.msg_type),
                    id,
                    reason: e.to_string(),
                });
            }
            None => {
                return Err(DecodeError::UnknownType {
                    msg_type: truncate(&self.msg_type, 128).to_owned(),
                    id,
                })
            }
        };
        Ok(Envelope {
            v: Mvp02,
            id,
            reply_to: self.reply_to.map(Cow::into_owned),
            body,
        })
    }
}

/// The `'static` spelling of a known message type.
fn static_type(t: &str) -> &'static str {
    crate::message::types::AGENT_TO_HOST
        .iter()
        .chain(crate::message::types::HOST_TO_AGENT.iter())
        .chain(
            [
                crate::message::types::RELAY_JOIN,
                crate::message::types::RELAY_JOINED,
                crate::message::types::RELAY_HELLO,
                crate::message::types::RELAY_PRESENCE,
            ]
            .iter(),
        )
        .copied()
        .find(|k| *k == t)
        .unwrap_or("message")
}

/// At most `max` bytes of `s`, cut at a character boundary.
pub(crate) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Writes `{"v":"mvp-0.2","type":T,"replyTo"?:R,"payload":P}` to `out` and returns where the
/// payload sits in it (the relay logs it as a slice of the frame).
pub(crate) fn write_envelope<P: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    msg_type: &str,
    reply_to: Option<&str>,
    payload: &P,
) -> Range<usize> {
    out.extend_from_slice(b"{\"v\":\"mvp-0.2\",\"type\":");
    // Strings and the crate's payload types always serialize.
    let _ = serde_json::to_writer(&mut *out, msg_type);
    if let Some(r) = reply_to {
        out.extend_from_slice(b",\"replyTo\":");
        let _ = serde_json::to_writer(&mut *out, r);
    }
    out.extend_from_slice(b",\"payload\":");
    let start = out.len();
    let _ = serde_json::to_writer(&mut *out, payload);
    let end = out.len();
    out.push(b'}');
    start..end
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{AgentMessage, ToolCall};

    fn route(text: &str) -> Result<Route<'_>, DecodeError> {
        Route::parse(text, VersionRule::Required)
    }

    #[test]
    fn route_borrows_and_finds_the_payload() {
        let text =
            r#"{"v":"mvp-0.2","type":"tool.call","id":"req-003","payload":{"toolName":"select"}}"#;
        let r = route(text).unwrap();
        assert!(matches!(r.msg_type, Cow::Borrowed("tool.call")));
        assert_eq!(r.id.as_deref(), Some("req-003"));
        assert_eq!(&text[r.payload_range()], r#"{"toolName":"select"}"#);
    }

    #[test]
    fn escaped_strings_are_unescaped() {
        let r =
            route(r#"{"v":"mvp-0.2","type":"tool\u002ecall","id":"a\"b","payload":{}}"#).unwrap();
        assert_eq!(r.msg_type, "tool.call");
        assert_eq!(r.id.as_deref(), Some("a\"b"));
    }

    #[test]
    fn errors_in_order_with_the_id_recovered() {
        assert!(matches!(route("nope"), Err(DecodeError::Json(_))));
        assert!(matches!(route("[1]"), Err(DecodeError::NotAnObject)));
        assert!(matches!(
            route(r#"{"type":"a","type":"b","v":"mvp-0.2","payload":{}}"#),
            Err(DecodeError::Json(_))
        ));
        assert_eq!(
            route(r#"{"id":"x","type":5}"#).unwrap_err(),
            DecodeError::MissingType {
                id: Some("x".into())
            }
        );
        assert_eq!(
            route(r#"{"id":"x","type":"tool.call","v":"mvp-0.1","payload":{}}"#).unwrap_err(),
            DecodeError::Version {
                id: Some("x".into())
            }
        );
        assert_eq!(
            route(r#"{"id":"x","type":"tool.call","payload":{}}"#).unwrap_err(),
            DecodeError::Version {
                id: Some("x".into())
            }
        );
        assert!(Route::parse(
            r#"{"id":"x","type":"tool.call","payload":{}}"#,
            VersionRule::MayBeMissing
        )
        .is_ok());
        assert_eq!(
            route(r#"{"id":"x","type":"t","v":"mvp-0.2","payload":[]}"#).unwrap_err(),
            DecodeError::InvalidField {
                field: "payload",
                id: Some("x".into())
            }
        );
        assert_eq!(
            route(r#"{"id":7,"type":"t","v":"mvp-0.2","payload":{}}"#).unwrap_err(),
            DecodeError::InvalidField {
                field: "id",
                id: None
            }
        );
    }

    #[test]
    fn typed_decode_and_encode() {
        let text = r#"{"v":"mvp-0.2","type":"tool.call","id":"r","payload":{"toolName":"next","params":{},"reason":"go"}}"#;
        let env = Envelope::<AgentMessage>::decode(Frame::Text(text), 1 << 20).unwrap();
        assert!(
            matches!(&env.body, AgentMessage::ToolCall(ToolCall { tool_name, .. }) if tool_name == "next")
        );
        let mut out = Vec::new();
        env.encode(&mut out);
        assert_eq!(std::str::from_utf8(&out).unwrap(), text);
        let missing_reason = r#"{"v":"mvp-0.2","type":"tool.call","id":"r","payload":{"toolName":"next","params":{}}}"#;
        assert!(matches!(
            Envelope::<AgentMessage>::decode(Frame::Text(missing_reason), 1 << 20),
            Err(DecodeError::InvalidPayload {
                msg_type: "tool.call",
                ..
            })
        ));
    }

    #[test]
    fn write_envelope_reports_the_payload_range() {
        let mut out = Vec::new();
        let r = write_envelope(
            &mut out,
            "error",
            Some("q\"1"),
            &serde_json::json!({"a": 1}),
        );
        let text = std::str::from_utf8(&out).unwrap();
        assert_eq!(&text[r], r#"{"a":1}"#);
        assert_eq!(
            text,
            r#"{"v":"mvp-0.2","type":"error","replyTo":"q\"1","payload":{"a":1}}"#
        );
    }

    #[test]
    fn truncate_cuts_at_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("abc", 10), "abc");
    }
}

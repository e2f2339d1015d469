//! Decoding and encoding: the borrowed [`Route`] the relay forwards by (size checked before
//! parsing, payload left raw), the typed [`Envelope`] decode and encode, and the writers the
//! relay and the host encode their own messages with.

use std::borrow::Cow;
use std::ops::Range;

use agentwire_core::{Frame, FrameBuf};
use serde::de;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::error::DecodeError;
use crate::message::{types, Body, Envelope, ErrorCode, Mvp02, VERSION};

impl<B: Body> Envelope<B> {
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
        Self::parse(frame.text_within(max_len)?, version)
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
    types::AGENT_TO_HOST
        .iter()
        .chain(types::HOST_TO_AGENT.iter())
        .chain(
            [
                types::RELAY_JOIN,
                types::RELAY_JOINED,
                types::RELAY_HELLO,
                types::RELAY_PRESENCE,
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

/// `error` payload, borrowed (what the relay and the host encode).
#[derive(Serialize)]
pub(crate) struct ErrorRef<'a> {
    pub(crate) code: &'a ErrorCode,
    pub(crate) message: &'a str,
}

/// Writes `{"v":"mvp-0.2","type":T,"id":I,"payload":P}` to `out` (the host's `relay.join`,
/// and an agent request the relay gives an id) and returns where the payload sits in it.
pub(crate) fn write_request<P: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    msg_type: &str,
    id: &str,
    payload: &P,
) -> Range<usize> {
    out.extend_from_slice(b"{\"v\":\"mvp-0.2\",\"type\":");
    // Strings and the crate's payload types always serialize.
    let _ = serde_json::to_writer(&mut *out, msg_type);
    out.extend_from_slice(b",\"id\":");
    let _ = serde_json::to_writer(&mut *out, id);
    out.extend_from_slice(b",\"payload\":");
    let start = out.len();
    let _ = serde_json::to_writer(&mut *out, payload);
    let end = out.len();
    out.push(b'}');
    start..end
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

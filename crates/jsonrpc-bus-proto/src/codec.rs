//! Decoding and encoding JSON-RPC 2.0 bodies: the borrowed decoder that splits a body into
//! messages and classifies each without parsing its params, and the writers that append
//! requests and responses to a caller's buffer.
//!
//! Classification follows jsonrpsee: an object with `method` is a request (with `id`) or a
//! notification (without); otherwise an object with `result` or `error` and an `id` is a
//! response; anything else is an invalid request, answered with the `id` recovered when it
//! had a valid one. `params`, `result` and `error` stay raw JSON ([`RawValue`]) until the
//! method is known.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use agentwire_core::Frame;

use crate::error::DecodeError;
use crate::message::{raw_number, raw_str, write_json_str, ErrorObject, Id};

/// A request or notification, borrowed from the message body.
///
/// `P` is how the params were read: raw JSON by default ([`classify`]).
#[derive(Debug, Clone)]
pub struct Call<'a, P = &'a RawValue> {
    /// `Some` for a request, `None` for a notification.
    pub id: Option<Id>,
    /// Method name.
    pub method: Cow<'a, str>,
    /// Params (as raw JSON by default: an object or an array), if present.
    pub params: Option<P>,
}

/// A response, borrowed from the message body.
#[derive(Debug, Clone)]
pub struct Reply<'a> {
    /// The id of the request answered, raw (already checked to be a string, number or null).
    /// [`Reply::id`] gives it owned; [`Reply::id_str`] borrows a string id without copying.
    pub raw_id: &'a RawValue,
    /// `Ok(result)` as raw JSON, or the error object.
    pub outcome: Result<&'a RawValue, ErrorObject>,
}

impl<'a> Reply<'a> {
    /// The id of the request answered, owned.
    pub fn id(&self) -> Id {
        Id::from_raw(self.raw_id).unwrap_or(Id::Null)
    }

    /// The id as a string, borrowed when it has no escapes; `None` for a number or null.
    pub fn id_str(&self) -> Option<Cow<'a, str>> {
        if self.raw_id.get().starts_with('"') {
            raw_str(self.raw_id)
        } else {
            None
        }
    }
}

/// One classified JSON-RPC message, borrowed from the body (`P`: how a call's params were
/// read, raw JSON by default).
#[derive(Debug, Clone)]
pub enum Incoming<'a, P = &'a RawValue> {
    /// A request or notification.
    Call(Call<'a, P>),
    /// A response to a request this side sent.
    Reply(Reply<'a>),
}

/// A message body: one message, or a batch (a JSON array) of raw entries.
#[derive(Debug)]
pub enum Body<'a> {
    /// One object's text, not yet parsed (classify it with [`classify`]).
    Single(&'a str),
    /// A batch: every entry raw, in order (classify each with [`classify`]).
    Batch(Vec<&'a RawValue>),
}

/// Splits a message body into one message or a batch, checking size and batch limits before
/// anything is allocated for the entries.
///
/// Binary frames are accepted as UTF-8 JSON, as the reference bus does.
pub fn split_body(body: &[u8], max_len: usize, max_batch: usize) -> Result<Body<'_>, DecodeError> {
    let text = Frame::Binary(body).text_within(max_len)?;
    split_text(text, max_len, max_batch)
}

/// [`split_body`] for a body already known to be UTF-8 (a WebSocket text frame), without
/// checking it again.
pub fn split_text(text: &str, max_len: usize, max_batch: usize) -> Result<Body<'_>, DecodeError> {
    let text = Frame::Text(text).text_within(max_len)?;
    // JSON whitespace only (RFC 8259): a form feed before the body is a parse error.
    let start = text.bytes().position(|b| !is_json_space(b));
    match start.map(|at| (at, text.as_bytes()[at])) {
        // Not validated here: `classify` parses the object once and reports its syntax
        // errors as -32700 itself.
        // `at` is the index of an ASCII byte, so a character boundary.
        Some((at, b'{')) => Ok(Body::Single(&text[at..])),
        Some((_, b'[')) => split_batch(text, max_batch),
        _ => Err(not_a_message(text)),
    }
}

/// The entries of a batch (`text` starts with `[` after whitespace). Out of line: the
/// single message is the common case, and keeping this apart keeps its path compact.
#[cold]
fn split_batch(text: &str, max_batch: usize) -> Result<Body<'_>, DecodeError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let entries = de
        .deserialize_seq(BatchVisitor { max: max_batch })
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| batch_error(text, &e, max_batch))?;
    if entries.is_empty() {
        return Err(DecodeError::EmptyBatch);
    }
    Ok(Body::Batch(entries))
}

/// The error for a body that is neither an object nor an array.
#[cold]
fn not_a_message(text: &str) -> DecodeError {
    match serde_json::from_str::<IgnoredAny>(text) {
        Ok(_) => DecodeError::InvalidRequest {
            id: Id::Null,
            reason: "a message must be an object or an array",
        },
        Err(e) => DecodeError::Json(e.to_string()),
    }
}

/// JSON's four whitespace bytes (RFC 8259): space, tab, line feed, carriage return.
pub(crate) fn is_json_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

const BATCH_TOO_LARGE: &str = "\u{0}batch-too-large";

fn batch_error(text: &str, e: &serde_json::Error, max: usize) -> DecodeError {
    if e.is_data() && e.to_string().starts_with(BATCH_TOO_LARGE) {
        // Only a syntax error anywhere in the body outranks the limit: -32700 wins.
        if serde_json::from_str::<IgnoredAny>(text).is_err() {
            return DecodeError::Json("invalid JSON".to_owned());
        }
        return DecodeError::BatchTooLarge { max };
    }
    DecodeError::Json(e.to_string())
}

struct BatchVisitor {
    max: usize,
}

impl<'de> Visitor<'de> for BatchVisitor {
    type Value = Vec<&'de RawValue>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC batch")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(self.max));
        while let Some(entry) = seq.next_element::<&'de RawValue>()? {
            if out.len() == self.max {
                return Err(de::Error::custom(BATCH_TOO_LARGE));
            }
            out.push(entry);
        }
        Ok(out)
    }
}

/// The members of a message object, each kept raw but `params` (read as `P`); `Some` when
/// present (even as `null`).
#[derive(Deserialize)]
#[serde(bound(deserialize = "P: Deserialize<'de>"))]
struct Members<'a, P> {
    #[serde(default, borrow, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present_as")]
    params: Option<P>,
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&'de RawValue>::deserialize(d).map(Some)
}

fn present_as<'de, D: Deserializer<'de>, P: Deserialize<'de>>(d: D) -> Result<Option<P>, D::Error> {
    P::deserialize(d).map(Some)
}

/// How a call's params were read: [`classify_as`] asks them whether they are an object or
/// an array, as JSON-RPC requires.
pub(crate) trait Params {
    /// Whether the params are an object or an array.
    fn structured(&self) -> bool;
}

impl Params for &RawValue {
    fn structured(&self) -> bool {
        matches!(self.get().as_bytes().first(), Some(b'{' | b'['))
    }
}

/// Classifies one message object: a [`Body::Single`], or one batch entry's text
/// (`entry.get()`).
pub fn classify(text: &str) -> Result<Incoming<'_>, DecodeError> {
    classify_as(text)
}

/// [`classify`], reading a call's params as `P` in the same pass (the bus reads the members
/// it needs straight away).
pub(crate) fn classify_as<'a, P: Params + Deserialize<'a>>(
    text: &'a str,
) -> Result<Incoming<'a, P>, DecodeError> {
    if !text.starts_with('{') {
        return Err(DecodeError::InvalidRequest {
            id: Id::Null,
            reason: "a message must be an object",
        });
    }
    let m: Members<'_, P> = serde_json::from_str(text).map_err(|e| {
        if e.is_data() {
            DecodeError::InvalidRequest {
                id: Id::Null,
                reason: "duplicate or malformed member",
            }
        } else {
            DecodeError::Json(e.to_string())
        }
    })?;
    if let Some(raw) = m.id {
        if !valid_id(raw) {
            return Err(DecodeError::InvalidRequest {
                id: Id::Null,
                reason: "id must be a string, a number or null",
            });
        }
    }
    // Owned only where needed: calls keep their id, replies borrow theirs.
    let recovered = || m.id.and_then(Id::from_raw).unwrap_or(Id::Null);
    let version_ok = m
        .jsonrpc
        .is_some_and(|v| v.get() == "\"2.0\"" || raw_str(v).is_some_and(|s| s == "2.0"));
    if !version_ok {
        return Err(DecodeError::Version { id: recovered() });
    }
    if let Some(method) = m.method {
        let Some(method) = raw_str(method) else {
            return Err(DecodeError::InvalidRequest {
                id: recovered(),
                reason: "method must be a string",
            });
        };
        if let Some(params) = &m.params {
            if !params.structured() {
                return Err(DecodeError::InvalidRequest {
                    id: recovered(),
                    reason: "params must be an object or an array",
                });
            }
        }
        return Ok(Incoming::Call(Call {
            id: m.id.and_then(Id::from_raw),
            method,
            params: m.params,
        }));
    }
    let outcome = match (m.result, m.error) {
        (Some(result), None) => Ok(result),
        (None, Some(error)) => match serde_json::from_str::<ErrorObject>(error.get()) {
            Ok(obj) => Err(obj),
            Err(_) => {
                return Err(DecodeError::InvalidRequest {
                    id: recovered(),
                    reason: "error must be an object with an integer code and a message",
                })
            }
        },
        (Some(_), Some(_)) => {
            return Err(DecodeError::InvalidRequest {
                id: recovered(),
                reason: "a response has result or error, not both",
            })
        }
        (None, None) => {
            return Err(DecodeError::InvalidRequest {
                id: recovered(),
                reason: "neither a request nor a response",
            })
        }
    };
    let Some(raw_id) = m.id else {
        return Err(DecodeError::InvalidRequest {
            id: Id::Null,
            reason: "a response needs an id",
        });
    };
    Ok(Incoming::Reply(Reply { raw_id, outcome }))
}

/// Whether a raw id is a string, a number or null (what [`Id::from_raw`] accepts), without
/// allocating for escape-free strings.
fn valid_id(raw: &RawValue) -> bool {
    let text = raw.get();
    match text.as_bytes().first() {
        Some(b'"') => raw_str(raw).is_some(),
        Some(b'n') => true,
        Some(b'-' | b'0'..=b'9') => raw_number(text).is_some(),
        _ => false,
    }
}

/// Appends `{"jsonrpc":"2.0","result":<result>,"id":<id>}` where `result` is raw JSON.
pub fn write_result_raw(out: &mut Vec<u8>, id: &Id, result: &[u8]) {
    write_result_with(out, id, |out| out.extend_from_slice(result));
}

/// Appends a success response whose result is `result` serialized.
pub fn write_result<R: Serialize>(out: &mut Vec<u8>, id: &Id, result: &R) {
    write_result_with(out, id, |out| {
        if serde_json::to_writer(&mut *out, result).is_err() {
            out.extend_from_slice(b"null");
        }
    });
}

/// Appends a success response whose result `write` appends (its JSON, exactly one value).
pub fn write_result_with(out: &mut Vec<u8>, id: &Id, write: impl FnOnce(&mut Vec<u8>)) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"result\":");
    write(out);
    out.extend_from_slice(b",\"id\":");
    id.write_json(out);
    out.push(b'}');
}

/// Appends an error response.
pub fn write_error(out: &mut Vec<u8>, id: &Id, error: &ErrorObject) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"error\":");
    if serde_json::to_writer(&mut *out, error).is_err() {
        out.extend_from_slice(b"null");
    }
    out.extend_from_slice(b",\"id\":");
    id.write_json(out);
    out.push(b'}');
}

/// Appends a request (or, with `id: None`, a notification) whose params are raw JSON.
pub fn write_call_raw(out: &mut Vec<u8>, id: Option<&Id>, method: &str, params: &[u8]) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":");
    write_json_str(out, method);
    out.extend_from_slice(b",\"params\":");
    out.extend_from_slice(params);
    if let Some(id) = id {
        out.extend_from_slice(b",\"id\":");
        id.write_json(out);
    }
    out.push(b'}');
}

/// Encodes a command's payload once, for [`Bus::publish`](crate::Bus::publish) and
/// [`BusClient::publish`](crate::BusClient::publish): a payload that does not serialize is the
/// caller's [`CommandError::Payload`](crate::CommandError::Payload).
pub(crate) fn payload_to_raw<T: Serialize + ?Sized>(
    payload: &T,
) -> Result<Box<RawValue>, crate::CommandError> {
    serde_json::value::to_raw_value(payload)
        .map_err(|e| crate::CommandError::Payload(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ErrorCode, JsonRpc2, Response};
    use agentwire_core::FrameError;
    use serde_json::Number;

    /// The shortcuts for plain strings and plain integers read what serde_json reads.
    #[test]
    fn raw_shortcuts_agree_with_serde() {
        let numbers = [
            "0",
            "7",
            "1234567890123456789",
            "9999999999999999999",
            "18446744073709551615",
            "18446744073709551616",
            "-0",
            "-1",
            "1.5",
            "1e3",
            "-9223372036854775809",
        ];
        for text in numbers {
            let raw = RawValue::from_string(text.to_owned()).unwrap();
            let serde = serde_json::from_str::<Number>(text).ok();
            assert_eq!(raw_number(raw.get()), serde, "{text}");
            assert_eq!(Id::from_raw(&raw), serde.map(Id::Number), "{text}");
        }
        let strings = [
            r#""""#,
            r#""sendMessage""#,
            r#""d\u00e9j\u00e0 \"q\"""#,
            "\"d\u{e9}j\u{e0}\"",
            r#""\\""#,
        ];
        for text in strings {
            let raw = RawValue::from_string(text.to_owned()).unwrap();
            let serde = serde_json::from_str::<String>(text).unwrap();
            assert_eq!(raw_str(&raw).as_deref(), Some(serde.as_str()), "{text}");
        }
        for text in ["1", "null", "{}", r#"["a"]"#] {
            let raw = RawValue::from_string(text.to_owned()).unwrap();
            assert_eq!(raw_str(&raw), None, "{text}");
        }
    }

    /// Only JSON's whitespace may come before a body: a form feed (which Rust's
    /// `is_ascii_whitespace` includes) is a parse error, as serde_json has it.
    #[test]
    fn only_json_whitespace_leads_a_body() {
        let ping = r#"{"jsonrpc":"2.0","method":"ping","id":1}"#;
        for lead in [" ", "\t", "\r\n", " \n\t"] {
            let text = format!("{lead}{ping}");
            assert!(matches!(split_text(&text, 1 << 20, 10), Ok(Body::Single(s)) if s == ping));
        }
        for lead in ["\u{c}", " \u{c}"] {
            let text = format!("{lead}{ping}");
            assert!(
                matches!(split_text(&text, 1 << 20, 10), Err(DecodeError::Json(_))),
                "{text:?}"
            );
            let text = format!("{lead}[{ping}]");
            assert!(
                matches!(split_text(&text, 1 << 20, 10), Err(DecodeError::Json(_))),
                "{text:?}"
            );
        }
    }

    fn one(text: &str) -> Result<Incoming<'_>, DecodeError> {
        match split_body(text.as_bytes(), 1 << 20, 10)? {
            Body::Single(raw) => classify(raw),
            Body::Batch(_) => panic!("batch"),
        }
    }

    #[test]
    fn classifies_request_notification_and_responses() {
        let Incoming::Call(c) =
            one(r#"{"jsonrpc":"2.0","method":"ping","params":{},"id":100}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(c.id, Some(Id::from(100)));
        assert_eq!(c.method, "ping");
        assert_eq!(c.params.map(RawValue::get), Some("{}"));

        let Incoming::Call(n) = one(r#"{"jsonrpc":"2.0","method":"x"}"#).unwrap() else {
            panic!()
        };
        assert_eq!(n.id, None);

        let Incoming::Call(null_id) = one(r#"{"jsonrpc":"2.0","method":"x","id":null}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            null_id.id,
            Some(Id::Null),
            "id null is a request, not a notification"
        );

        let Incoming::Reply(r) = one(r#"{"jsonrpc":"2.0","result":{"a":1},"id":"u-1"}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(r.id(), Id::from("u-1"));
        assert_eq!(r.outcome.map(RawValue::get), Ok(r#"{"a":1}"#));

        let Incoming::Reply(e) =
            one(r#"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request","data":"d"},"id":1}"#)
                .unwrap()
        else {
            panic!()
        };
        assert_eq!(e.outcome.unwrap_err().code, ErrorCode::INVALID_REQUEST);
    }

    #[test]
    fn method_with_escapes_is_decoded() {
        let Incoming::Call(c) = one(r#"{"jsonrpc":"2.0","method":"pi\u006eg","id":1}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(c.method, "ping");
    }

    #[test]
    fn parse_errors_and_invalid_requests() {
        assert!(matches!(one("{"), Err(DecodeError::Json(_))));
        assert!(matches!(one("nope"), Err(DecodeError::Json(_))));
        assert!(matches!(
            one("5"),
            Err(DecodeError::InvalidRequest { id: Id::Null, .. })
        ));
        assert_eq!(
            one(r#"{"jsonrpc":"1.0","method":"x","id":7}"#).unwrap_err(),
            DecodeError::Version { id: Id::from(7) }
        );
        assert_eq!(
            one(r#"{"method":"x","id":"a"}"#).unwrap_err(),
            DecodeError::Version { id: Id::from("a") }
        );
        let e = one(r#"{"jsonrpc":"2.0","method":1,"id":3}"#).unwrap_err();
        assert_eq!(
            (e.code(), e.id()),
            (ErrorCode::INVALID_REQUEST, Id::from(3))
        );
        let e = one(r#"{"jsonrpc":"2.0","method":"x","params":"s","id":3}"#).unwrap_err();
        assert_eq!(
            (e.code(), e.id()),
            (ErrorCode::INVALID_REQUEST, Id::from(3))
        );
        let e = one(r#"{"jsonrpc":"2.0","method":"x","id":{}}"#).unwrap_err();
        assert_eq!((e.code(), e.id()), (ErrorCode::INVALID_REQUEST, Id::Null));
        let e = one(r#"{"jsonrpc":"2.0","id":4}"#).unwrap_err();
        assert_eq!(
            (e.code(), e.id()),
            (ErrorCode::INVALID_REQUEST, Id::from(4))
        );
        let e = one(r#"{"jsonrpc":"2.0","method":"a","method":"b","id":4}"#).unwrap_err();
        assert_eq!(e.code(), ErrorCode::INVALID_REQUEST);
    }

    #[test]
    fn batches_and_limits() {
        let Body::Batch(b) = split_body(br#" [{"a":1}, 2, "x"]"#, 100, 10).unwrap() else {
            panic!()
        };
        assert_eq!(b.len(), 3);
        assert_eq!(
            split_body(b"[]", 100, 10).unwrap_err(),
            DecodeError::EmptyBatch
        );
        assert_eq!(
            split_body(b"[1,2,3]", 100, 2).unwrap_err(),
            DecodeError::BatchTooLarge { max: 2 }
        );
        assert!(matches!(
            split_body(b"[1,2,3", 100, 2).unwrap_err(),
            DecodeError::Json(_)
        ));
        assert!(matches!(
            split_body(b"[1,2,", 100, 10).unwrap_err(),
            DecodeError::Json(_)
        ));
        assert_eq!(
            split_body(&[b' '; 101], 100, 10).unwrap_err(),
            DecodeError::Frame(FrameError::TooLarge { len: 101, max: 100 })
        );
        assert_eq!(
            split_body(&[0xff, b'{'], 100, 10).unwrap_err(),
            DecodeError::Frame(FrameError::NotUtf8)
        );
    }

    #[test]
    fn writers_produce_the_spec_shapes() {
        let mut out = Vec::new();
        write_result_raw(&mut out, &Id::from(2), br#"{"success":true}"#);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"jsonrpc":"2.0","result":{"success":true},"id":2}"#
        );
        out.clear();
        write_error(
            &mut out,
            &Id::Null,
            &ErrorObject::new(ErrorCode::PARSE_ERROR),
        );
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}"#
        );
        out.clear();
        write_call_raw(&mut out, Some(&Id::from("q\"")), "sendMessage", b"{}");
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{},"id":"q\""}"#
        );
        let owned: Response<serde_json::Value> =
            Response::result(Id::from(1), serde_json::json!({"x": 1}));
        assert_eq!(
            serde_json::to_string(&owned).unwrap(),
            r#"{"jsonrpc":"2.0","result":{"x":1},"id":1}"#
        );
    }

    #[test]
    fn marker_accepts_only_2_0() {
        assert!(serde_json::from_str::<JsonRpc2>(r#""2.0""#).is_ok());
        assert!(serde_json::from_str::<JsonRpc2>(r#""2""#).is_err());
        assert!(serde_json::from_str::<JsonRpc2>("2.0").is_err());
    }
}

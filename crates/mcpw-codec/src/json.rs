//! The JSON form (text frames): `{"id", "type", "method", "params"}` and
//! `{"id", "type", "error"}`, and the batch params shared with the binary form.
//!
//! Decoding is two-step: the envelope is read with `params` kept as borrowed raw JSON, then
//! the params are parsed into the method's type. No `serde_json::Value` tree is built for
//! typed methods.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::config::{BatchForm, Limits};
use crate::error::{DecodeError, EncodeError, ErrorBody};
use crate::header::{Flags, MessageType, Method};
use crate::message::{Body, Message, OtherCall};

/// Decodes one JSON-form message (a text frame's bytes).
///
/// Checks `limits.max_text` before parsing and `limits.max_batch` while parsing a batch.
pub fn decode(text: &[u8], limits: &Limits) -> Result<Message, DecodeError> {
    if text.len() > limits.max_text {
        return Err(DecodeError::TextTooLarge {
            len: text.len(),
            max: limits.max_text,
        });
    }
    let text = std::str::from_utf8(text).map_err(|e| DecodeError::Json(de::Error::custom(e)))?;
    decode_str(text, limits, true, None)
}

/// Decodes the whole-message JSON of a 12-byte frame, whose header's type `kind` overrides
/// the JSON's `type`. Its size was bounded by the frame's limits already.
pub(crate) fn decode_compact(
    payload: &[u8],
    limits: &Limits,
    kind: MessageType,
) -> Result<Message, DecodeError> {
    decode_str(utf8(payload)?, limits, true, Some(kind))
}

/// Decodes one entry of a batch (a message in its JSON form; batches do not nest).
pub(crate) fn decode_entry(text: &str, limits: &Limits) -> Result<Message, DecodeError> {
    decode_str(text, limits, false, None)
}

fn utf8(bytes: &[u8]) -> Result<&str, DecodeError> {
    std::str::from_utf8(bytes).map_err(|e| DecodeError::Json(de::Error::custom(e)))
}

/// A message read without decoding a batch's entries: the orchestrator answers each entry
/// of a batch as if it came alone, so one bad entry does not sink the others.
pub(crate) enum Shallow<'a> {
    /// Any message but a batch, fully decoded.
    One(Box<Message>),
    /// A batch: its id (JSON form) or sequence id (24-byte form), its body's form, and its
    /// entries' JSON, in order.
    Batch {
        /// The batch's own `id`.
        id: Option<String>,
        /// The batch's sequence id (24-byte form; else 0).
        seq: u64,
        /// The body it came in (always [`BatchForm::Json`] outside 24-byte frames).
        form: BatchForm,
        /// Each entry's JSON text.
        entries: Vec<&'a str>,
    },
}

/// [`decode`] (or, with `kind`, the 12-byte form's payload), leaving a batch's entries
/// undecoded.
pub(crate) fn decode_shallow<'a>(
    text: &'a [u8],
    limits: &Limits,
    kind: Option<MessageType>,
) -> Result<Shallow<'a>, DecodeError> {
    if kind.is_none() && text.len() > limits.max_text {
        return Err(DecodeError::TextTooLarge {
            len: text.len(),
            max: limits.max_text,
        });
    }
    let text = utf8(text)?;
    let env: Envelope<'_> = serde_json::from_str(text).map_err(DecodeError::Json)?;
    if kind.or(env.kind.map(MessageType)) == Some(MessageType::BATCH) && env.error.is_none() {
        let raw = env.params.or(env.result).map_or("null", RawValue::get);
        let entries = split_json_batch(raw, limits)?;
        return Ok(Shallow::Batch {
            id: env.id.map(Cow::into_owned),
            seq: 0,
            form: BatchForm::Json,
            entries,
        });
    }
    decode_str(text, limits, true, kind).map(|m| Shallow::One(Box::new(m)))
}

/// Appends the JSON form of `msg` to `out`.
///
/// Fails only when the type does not fit the body (see [`Message::kind`]), for a nested or
/// oversize batch, or for a `Value` serde_json cannot write.
pub fn encode(msg: &Message, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    check_kind(msg, usize::MAX)?;
    serde_json::to_writer(out, msg)?;
    Ok(())
}

/// Checks that `msg.kind` fits its body, and that a batch is flat and at most `max_batch`.
pub(crate) fn check_kind(msg: &Message, max_batch: usize) -> Result<(), EncodeError> {
    let is_error = matches!(msg.body, Body::Error(_));
    let is_batch = matches!(msg.body, Body::Batch(_));
    if (msg.kind == MessageType::ERROR) != is_error || (msg.kind == MessageType::BATCH) != is_batch
    {
        return Err(EncodeError::KindMismatch {
            kind: msg.kind,
            body: msg.body.variant(),
        });
    }
    if let Body::Batch(messages) = &msg.body {
        if messages.len() > max_batch {
            return Err(EncodeError::InvalidBatch("more messages than max_batch"));
        }
        for m in messages {
            if matches!(m.body, Body::Batch(_)) {
                return Err(EncodeError::InvalidBatch("a batch inside a batch"));
            }
            check_kind(m, max_batch)?;
        }
    }
    Ok(())
}

/// The envelope, with params borrowed as raw JSON.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    /// Absent: a request (type 0) if a method is named, else invalid.
    #[serde(rename = "type", default)]
    kind: Option<u8>,
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    #[serde(default, borrow)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<ErrorBody>,
}

fn decode_str(
    text: &str,
    limits: &Limits,
    top: bool,
    header_kind: Option<MessageType>,
) -> Result<Message, DecodeError> {
    // Nothing deeper than the limit is parsed, stored or forwarded (a batch entry is
    // checked again on its own; the scan is linear and allocates nothing).
    agentwire_core::check_json_depth(text.as_bytes(), limits.max_json_depth)
        .map_err(|e| DecodeError::TooDeep { limit: e.limit })?;
    let env: Envelope<'_> = serde_json::from_str(text).map_err(DecodeError::Json)?;
    let kind = match (header_kind, env.kind, &env.method) {
        (Some(k), _, _) => k,
        (None, Some(k), _) => MessageType(k),
        (None, None, Some(_)) => MessageType::REQUEST,
        (None, None, None) => {
            let missing = <serde_json::Error as de::Error>::missing_field("type");
            return Err(DecodeError::Json(missing));
        }
    };
    // Type and body agree, as the encoder requires (type 3 is exactly an error).
    match (&env.error, kind == MessageType::ERROR) {
        (Some(_), false) => {
            return Err(DecodeError::KindMismatch {
                kind,
                body: "error",
            })
        }
        (None, true) => return Err(DecodeError::KindMismatch { kind, body: "call" }),
        _ => {}
    }
    let params = env.params.or(env.result);
    let body = if let Some(error) = env.error {
        Body::Error(error)
    } else if kind == MessageType::BATCH {
        if !top {
            return Err(DecodeError::InvalidBatch("a batch inside a batch"));
        }
        let raw = params.map_or("null", RawValue::get);
        Body::Batch(decode_entries(split_json_batch(raw, limits)?, limits)?)
    } else {
        let method = env.method.unwrap_or_default();
        let code = Method::from_name(&method);
        let raw = params.map_or("null", RawValue::get);
        match Body::typed_from_json(code, raw) {
            Some(body) => body?,
            None => Body::Other(OtherCall {
                params: serde_json::from_str(raw).map_err(DecodeError::Json)?,
                method: method.into_owned(),
                code,
            }),
        }
    };
    Ok(Message {
        id: env.id.map(Cow::into_owned),
        seq: 0,
        kind,
        flags: Flags::NONE,
        body,
    })
}

/// Decodes a batch body, in either form ([`split_batch`]); each entry is a message in its
/// JSON form, and no entry may be a batch.
pub(crate) fn decode_batch(payload: &[u8], limits: &Limits) -> Result<Vec<Message>, DecodeError> {
    decode_entries(split_batch(payload, limits)?.0, &entry_limits(limits))
}

/// The limits a batch entry is decoded under: it sits three levels down in the batch's
/// JSON form (envelope, `params`, `messages`), so its depth bound is three less. An entry
/// of a binary batch body is then never too deep to be written in the JSON form.
pub(crate) fn entry_limits(limits: &Limits) -> Limits {
    Limits {
        max_json_depth: limits.max_json_depth.saturating_sub(3),
        ..limits.clone()
    }
}

fn decode_entries(entries: Vec<&str>, limits: &Limits) -> Result<Vec<Message>, DecodeError> {
    entries
        .into_iter()
        .map(|raw| decode_entry(raw, limits))
        .collect()
}

/// Splits a batch body into its entries' JSON texts, without decoding them: the spec's JSON
/// params `{"messages": [...], "count": n}` when the body's first non-space byte is `{`,
/// else the real code's binary body (u32 BE count, then per message a u32 BE length and the
/// message's JSON). At most `limits.max_batch` entries in either form, checked before
/// anything is allocated for them.
pub(crate) fn split_batch<'a>(
    payload: &'a [u8],
    limits: &Limits,
) -> Result<(Vec<&'a str>, BatchForm), DecodeError> {
    let first = payload
        .iter()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
    if first == Some(&b'{') || first.is_none() {
        let raw = utf8(payload)?;
        return split_json_batch(raw, limits).map(|e| (e, BatchForm::Json));
    }
    split_binary_batch(payload, limits).map(|e| (e, BatchForm::Binary))
}

/// The binary batch body: u32 BE count, then `count` times (u32 BE length, JSON).
fn split_binary_batch<'a>(payload: &'a [u8], limits: &Limits) -> Result<Vec<&'a str>, DecodeError> {
    fn take<'a>(rest: &mut &'a [u8], n: usize) -> Result<&'a [u8], DecodeError> {
        if rest.len() < n {
            return Err(DecodeError::InvalidBatch("binary batch body truncated"));
        }
        let (head, tail) = rest.split_at(n);
        *rest = tail;
        Ok(head)
    }
    fn u32_at(rest: &mut &[u8]) -> Result<u32, DecodeError> {
        let b = take(rest, 4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    let mut rest = payload;
    let count = u32_at(&mut rest)? as usize;
    if count > limits.max_batch {
        return Err(DecodeError::BatchTooLarge {
            count,
            max: limits.max_batch,
        });
    }
    let mut entries = Vec::with_capacity(count);
    for _ in 0..count {
        let len = u32_at(&mut rest)? as usize;
        entries.push(utf8(take(&mut rest, len)?)?);
    }
    if !rest.is_empty() {
        return Err(DecodeError::InvalidBatch("bytes after the last message"));
    }
    Ok(entries)
}

/// Batch params `{"messages": [...], "count": n}`: at most `limits.max_batch`
/// messages (counted while parsing, so nothing is allocated for the excess), `count`
/// optional but equal to the array's length when present.
fn split_json_batch<'a>(raw: &'a str, limits: &Limits) -> Result<Vec<&'a str>, DecodeError> {
    let mut de = serde_json::Deserializer::from_str(raw);
    let parsed = BatchSeed {
        max: limits.max_batch,
    }
    .deserialize(&mut de)
    .and_then(|b| de.end().map(|()| b));
    let (entries, count) = match parsed {
        Ok(b) => b,
        Err(e) => {
            return Err(match e.to_string() {
                s if s.starts_with(TOO_MANY) => DecodeError::BatchTooLarge {
                    count: s[TOO_MANY.len()..]
                        .split_whitespace()
                        .next()
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(limits.max_batch + 1),
                    max: limits.max_batch,
                },
                _ => DecodeError::Json(e),
            })
        }
    };
    if let Some(count) = count {
        if count > limits.max_batch {
            return Err(DecodeError::BatchTooLarge {
                count,
                max: limits.max_batch,
            });
        }
        if count != entries.len() {
            return Err(DecodeError::InvalidBatch("count differs from the messages"));
        }
    }
    Ok(entries.into_iter().map(RawValue::get).collect())
}

const TOO_MANY: &str = "batch too large: ";

struct BatchSeed {
    max: usize,
}

impl<'de> DeserializeSeed<'de> for BatchSeed {
    type Value = (Vec<&'de RawValue>, Option<usize>);

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for BatchSeed {
    type Value = (Vec<&'de RawValue>, Option<usize>);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("batch params {\"messages\": [...], \"count\": n}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut messages = None;
        let mut count = None;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match key.as_ref() {
                "messages" if messages.is_none() => {
                    messages = Some(map.next_value_seed(EntriesSeed { max: self.max })?);
                }
                "count" if count.is_none() => count = Some(map.next_value::<usize>()?),
                "messages" | "count" => return Err(de::Error::custom("duplicate batch field")),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let messages = messages.ok_or_else(|| de::Error::missing_field("messages"))?;
        Ok((messages, count))
    }
}

struct EntriesSeed {
    max: usize,
}

impl<'de> DeserializeSeed<'de> for EntriesSeed {
    type Value = Vec<&'de RawValue>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EntriesSeed {
    type Value = Vec<&'de RawValue>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of messages")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(raw) = seq.next_element::<&'de RawValue>()? {
            if out.len() == self.max {
                // Over the limit: count the rest without keeping it, so the error reports
                // the real size ("batch of 1000 messages exceeds 100").
                let mut count = out.len() + 1;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    count += 1;
                }
                return Err(de::Error::custom(format_args!(
                    "{TOO_MANY}{count} messages"
                )));
            }
            out.push(raw);
        }
        Ok(out)
    }
}

/// Parses raw params of a method this crate has no type for ([`Value::Null`] when empty).
pub(crate) fn other_params(raw: &[u8]) -> Result<Value, DecodeError> {
    if raw.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(raw).map_err(DecodeError::Json)
}

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

use crate::config::Limits;
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
    decode_str(text, limits, true)
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

fn decode_str(text: &str, limits: &Limits, top: bool) -> Result<Message, DecodeError> {
    // Nothing deeper than the limit is parsed, stored or forwarded (a batch entry is
    // checked again on its own; the scan is linear and allocates nothing).
    agentwire_core::check_json_depth(text.as_bytes(), limits.max_json_depth)
        .map_err(|e| DecodeError::TooDeep { limit: e.limit })?;
    let env: Envelope<'_> = serde_json::from_str(text).map_err(DecodeError::Json)?;
    let kind = match (env.kind, &env.method) {
        (Some(k), _) => MessageType(k),
        (None, Some(_)) => MessageType::REQUEST,
        (None, None) => {
            let missing = <serde_json::Error as de::Error>::missing_field("type");
            return Err(DecodeError::Json(missing));
        }
    };
    let params = env.params.or(env.result);
    let body = if let Some(error) = env.error {
        Body::Error(error)
    } else if kind == MessageType::BATCH {
        if !top {
            return Err(DecodeError::InvalidBatch("a batch inside a batch"));
        }
        let raw = params.map_or("null", RawValue::get);
        Body::Batch(decode_batch(raw, limits)?)
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

/// Decodes batch params `{"messages": [...], "count": n}`: at most `limits.max_batch`
/// messages (counted while parsing, so nothing is allocated for the excess), `count`
/// optional but equal to the array's length when present, no nested batch.
pub(crate) fn decode_batch(raw: &str, limits: &Limits) -> Result<Vec<Message>, DecodeError> {
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
    entries
        .into_iter()
        .map(|raw| decode_str(raw.get(), limits, false))
        .collect()
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

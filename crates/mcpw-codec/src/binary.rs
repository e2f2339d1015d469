//! The binary form's payload: what JSON a message's frame carries, and back.
//!
//! | message | header type / method | payload |
//! |---|---|---|
//! | typed method | its type / code 10-19 | the params |
//! | reference method (1-9) or unknown code | its type / that code | the params (`null` if none) |
//! | method without a code | its type / 0 | `{"method": name, "params": ...}` |
//! | error | 3 / 0 | the error object |
//! | batch | 6 (flag `BATCH`) / 0 | `{"messages": [JSON form, ...], "count": n}` |

use serde::de::Error as _;
use serde_json::{Map, Value};

use crate::config::Limits;
use crate::error::{DecodeError, EncodeError};
use crate::header::{Flags, Header, MessageType, Method};
use crate::json;
use crate::message::{Body, Message, OtherCall, ParamsRef};

/// Appends the payload JSON of `msg` to `out`; returns the header's method code.
pub(crate) fn write_payload(msg: &Message, out: &mut Vec<u8>) -> Result<Method, EncodeError> {
    match &msg.body {
        Body::Other(c) => {
            let code = if c.code == Method::UNKNOWN {
                Method::from_name(&c.method)
            } else {
                c.code
            };
            if code == Method::UNKNOWN && !c.method.is_empty() {
                let mut wrapper = Map::new();
                wrapper.insert("method".into(), Value::String(c.method.clone()));
                if !c.params.is_null() {
                    wrapper.insert("params".into(), c.params.clone());
                }
                serde_json::to_writer(&mut *out, &wrapper)?;
            } else {
                serde_json::to_writer(&mut *out, &c.params)?;
            }
            Ok(code)
        }
        body => {
            serde_json::to_writer(&mut *out, &ParamsRef(body))?;
            Ok(body.code())
        }
    }
}

/// The flags a frame of `msg` is sent with (before compression is decided).
pub(crate) fn frame_flags(msg: &Message) -> Flags {
    let flags = msg.flags.without(Flags::COMPRESSED.with(Flags::BATCH));
    if matches!(msg.body, Body::Batch(_)) {
        flags.with(Flags::BATCH)
    } else {
        flags
    }
}

/// The message a frame with `header` and (inflated) `payload` carries.
pub(crate) fn read_payload(
    header: &Header,
    payload: &[u8],
    limits: &Limits,
) -> Result<Message, DecodeError> {
    if header.flags.contains(Flags::ENCRYPTED) {
        return Err(DecodeError::Encrypted);
    }
    // The payload sits one level deeper in the JSON form (under `params` or `error`). A
    // batch body may be binary (length prefixes are not JSON): its entries are checked one
    // by one as they are decoded.
    let batch = header.kind == MessageType::BATCH || header.flags.contains(Flags::BATCH);
    let limit = limits.max_json_depth.saturating_sub(1);
    if !batch && agentwire_core::check_json_depth(payload, limit).is_err() {
        return Err(DecodeError::TooDeep {
            limit: limits.max_json_depth,
        });
    }
    let text = || {
        std::str::from_utf8(payload).map_err(|e| DecodeError::Json(serde_json::Error::custom(e)))
    };
    let body = if header.kind == MessageType::ERROR {
        Body::Error(serde_json::from_slice(payload).map_err(DecodeError::Json)?)
    } else if header.kind == MessageType::BATCH || header.flags.contains(Flags::BATCH) {
        Body::Batch(json::decode_batch(text()?, limits)?)
    } else if let Some(body) = Body::typed_from_json(header.method, text()?) {
        body?
    } else if header.method == Method::UNKNOWN {
        unwrap_named(json::other_params(payload)?)
    } else {
        Body::Other(OtherCall {
            method: header.method.as_str().unwrap_or_default().to_owned(),
            code: header.method,
            params: json::other_params(payload)?,
        })
    };
    Ok(Message {
        id: None,
        seq: header.seq,
        kind: header.kind,
        flags: header.flags.without(Flags::COMPRESSED.with(Flags::BATCH)),
        body,
    })
}

/// A code-0 payload: `{"method": name, "params": ...}` names its method; anything else is
/// the params of a method whose name the sender did not give (the reference sends unknown
/// methods this way).
fn unwrap_named(value: Value) -> Body {
    let value = match value {
        Value::Object(mut map) => {
            let named = matches!(map.get("method"), Some(Value::String(m)) if !m.is_empty());
            if named && map.keys().all(|k| k == "method" || k == "params") {
                if let Some(Value::String(method)) = map.remove("method") {
                    return Body::Other(OtherCall {
                        method,
                        code: Method::UNKNOWN,
                        params: map.remove("params").unwrap_or(Value::Null),
                    });
                }
            }
            Value::Object(map)
        }
        other => other,
    };
    Body::Other(OtherCall {
        method: String::new(),
        code: Method::UNKNOWN,
        params: value,
    })
}

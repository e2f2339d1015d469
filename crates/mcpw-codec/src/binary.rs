//! The binary form's payload: what JSON a message's frame carries, and back.
//!
//! | message | header type / method | payload |
//! |---|---|---|
//! | typed method | its type / code 10-19 | the params |
//! | reference method (1-9) or unknown code | its type / that code | the params (`null` if none) |
//! | method without a code | its type / 0 | `{"method": name, "params": ...}` |
//! | error | 3 / 0 | the error object |
//! | batch | 6, flag `BATCH` / 0 | [`BatchForm::Json`]: `{"messages": [JSON form, ...], "count": n}`; [`BatchForm::Binary`]: u32 BE count, then per message u32 BE length + JSON form |

use serde::de::Error as _;
use serde_json::{Map, Value};

use crate::config::{BatchForm, Limits};
use crate::error::{DecodeError, EncodeError};
use crate::header::{Flags, Header, MessageType, Method};
use crate::json;
use crate::message::{Body, Message, OtherCall, ParamsRef};

/// Appends the payload of `msg` to `out` (a batch's body in form `batch`); returns the
/// header's method code.
pub(crate) fn write_payload(
    msg: &Message,
    batch: BatchForm,
    out: &mut Vec<u8>,
) -> Result<Method, EncodeError> {
    match &msg.body {
        Body::Batch(messages) if batch == BatchForm::Binary => {
            let count = u32::try_from(messages.len())
                .map_err(|_| EncodeError::InvalidBatch("more messages than max_batch"))?;
            out.extend_from_slice(&count.to_be_bytes());
            for m in messages {
                let at = out.len();
                out.extend_from_slice(&[0; 4]);
                serde_json::to_writer(&mut *out, m)?;
                let len = u32::try_from(out.len() - at - 4).map_err(|_| {
                    EncodeError::PayloadTooLarge {
                        size: out.len() - at - 4,
                        max: u32::MAX as usize,
                    }
                })?;
                out[at..at + 4].copy_from_slice(&len.to_be_bytes());
            }
            Ok(Method::UNKNOWN)
        }
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
    if header.flags.contains(Flags::BATCH) && header.kind != MessageType::BATCH {
        return Err(DecodeError::KindMismatch {
            kind: header.kind,
            body: "batch",
        });
    }
    let body = if header.kind == MessageType::ERROR {
        Body::Error(serde_json::from_slice(payload).map_err(DecodeError::Json)?)
    } else if header.kind == MessageType::BATCH {
        Body::Batch(json::decode_batch(payload, limits)?)
    } else if let Some(body) = Body::typed_from_json(header.method, text()?) {
        body?
    } else if header.method == Method::UNKNOWN {
        unwrap_named(json::other_params(payload)?)?
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

/// A code-0 payload: `{"method": name, "params": ...}` names its method (a method with a
/// typed body, e.g. `task.assigned`, gets its typed body as if its code had been sent);
/// anything else is the params of a method whose name the sender did not give (the
/// reference sends unknown methods this way).
fn unwrap_named(value: Value) -> Result<Body, DecodeError> {
    let value = match value {
        Value::Object(mut map) => {
            let named = matches!(map.get("method"), Some(Value::String(m)) if !m.is_empty());
            if named && map.keys().all(|k| k == "method" || k == "params") {
                if let Some(Value::String(method)) = map.remove("method") {
                    let params = map.remove("params").unwrap_or(Value::Null);
                    let code = Method::from_name(&method);
                    if code != Method::UNKNOWN {
                        // Serializing a parsed `Value` cannot fail.
                        let text = serde_json::to_string(&params).map_err(DecodeError::Json)?;
                        if let Some(body) = Body::typed_from_json(code, &text) {
                            return body;
                        }
                        return Ok(Body::Other(OtherCall {
                            method,
                            code,
                            params,
                        }));
                    }
                    return Ok(Body::Other(OtherCall {
                        method,
                        code: Method::UNKNOWN,
                        params,
                    }));
                }
            }
            Value::Object(map)
        }
        other => other,
    };
    Ok(Body::Other(OtherCall {
        method: String::new(),
        code: Method::UNKNOWN,
        params: value,
    }))
}

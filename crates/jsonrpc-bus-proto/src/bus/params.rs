//! Reading the bus methods' params the general way, and encoding the answers.

use std::borrow::Cow;

use agentwire_core::check_json_depth;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::batch::Handled;
use crate::codec::{self, write_error};
use crate::config::PayloadRule;
use crate::message::{raw_str, write_json_str, ClientInfo, ErrorCode, ErrorObject, Id};
use crate::texts;

/// A call's params as the bus has them: raw, or read in the message's one pass.
#[derive(Debug, Clone)]
pub(super) enum Params<'a> {
    /// Raw JSON (`None`: no params), read by each method's reader.
    Raw(Option<&'a RawValue>),
    /// An object whose members the bus reads, read already.
    Read(Members<'a>),
}

/// The members of an object of params that any bus method reads, each raw (`None` when
/// absent or `null`), read in the message's one pass ([`classify_as`](crate::codec)).
///
/// Only an object without a duplicate of these members reads this way; anything else fails,
/// and the bus reads that message the general way ([`classify`](crate::codec::classify),
/// then each method's reader), which gives it its answer. So both ways give the same answer.
#[derive(Debug, Clone, Default)]
pub(super) struct Members<'a> {
    topic: Option<&'a RawValue>,
    payload: Option<&'a RawValue>,
    client_id: Option<&'a RawValue>,
    client_info: Option<&'a RawValue>,
}

impl codec::Params for Members<'_> {
    fn structured(&self) -> bool {
        true
    }
}

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        /// The member names, matched as serde's derive matches the method readers' fields.
        #[derive(Deserialize)]
        #[serde(field_identifier, rename_all = "camelCase")]
        enum Key {
            Topic,
            Payload,
            ClientId,
            ClientInfo,
            #[serde(other)]
            Other,
        }

        struct V;

        impl<'de> Visitor<'de> for V {
            type Value = Members<'de>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of params")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut m = Members::default();
                let mut seen = [false; 4];
                while let Some(key) = map.next_key::<Key>()? {
                    let (i, slot) = match key {
                        Key::Topic => (0, &mut m.topic),
                        Key::Payload => (1, &mut m.payload),
                        Key::ClientId => (2, &mut m.client_id),
                        Key::ClientInfo => (3, &mut m.client_info),
                        Key::Other => {
                            map.next_value::<IgnoredAny>()?;
                            continue;
                        }
                    };
                    if std::mem::replace(&mut seen[i], true) {
                        return Err(de::Error::custom("duplicate member"));
                    }
                    *slot = map.next_value::<Option<&'de RawValue>>()?;
                }
                Ok(m)
            }
        }

        d.deserialize_map(V)
    }
}

/// Reads `initialize`'s `{clientId?, clientInfo?}`: a `clientId` that is not a string is
/// -32602, a `clientInfo` that is neither `null` nor an object with string `name` and
/// `version` -32002.
pub(super) fn initialize_params(
    params: Params<'_>,
) -> Result<(Option<String>, Option<ClientInfo>), ErrorObject> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Raw<'a> {
        #[serde(default, borrow)]
        client_id: Option<&'a RawValue>,
        #[serde(default, borrow)]
        client_info: Option<&'a RawValue>,
    }
    let raw: Raw<'_> = match params {
        Params::Raw(None) => Raw {
            client_id: None,
            client_info: None,
        },
        Params::Raw(Some(p)) => serde_json::from_str(p.get()).map_err(|_| {
            ErrorObject::with_data(ErrorCode::INVALID_PARAMS, texts::PARAMS_NOT_AN_OBJECT)
        })?,
        Params::Read(m) => Raw {
            client_id: m.client_id,
            client_info: m.client_info,
        },
    };
    let client_id = match raw.client_id.filter(|v| v.get() != "null") {
        None => None,
        Some(v) => Some(
            raw_str(v)
                .ok_or_else(|| {
                    ErrorObject::with_data(ErrorCode::INVALID_PARAMS, texts::CLIENT_ID_NOT_A_STRING)
                })?
                .into_owned(),
        ),
    };
    let client_info = match raw.client_info.filter(|v| v.get() != "null") {
        None => None,
        Some(v) => Some(serde_json::from_str::<ClientInfo>(v.get()).map_err(|_| {
            ErrorObject::with_data(ErrorCode::INVALID_CLIENT_INFO, texts::INVALID_CLIENT_INFO)
        })?),
    };
    Ok((client_id, client_info))
}

/// A topic (or pattern) must not be empty (-32600) nor longer than `max` bytes (-32005).
pub(super) fn check_topic(topic: &str, max: usize) -> Result<(), ErrorObject> {
    if topic.is_empty() {
        return Err(missing_topic());
    }
    if topic.len() > max {
        return Err(ErrorObject::with_data(
            ErrorCode::LIMIT_EXCEEDED,
            texts::MAX_TOPIC_BYTES,
        ));
    }
    Ok(())
}

/// `{"topic":..,"payload":..}`: a publish's params, encoded once for every subscriber (a
/// missing payload is `null`, the payload's bytes as they came), appended to `params`.
pub(super) fn send_message_params(params: &mut Vec<u8>, topic: &str, payload: Option<&RawValue>) {
    params.reserve(topic.len() + payload.map_or(4, |p| p.get().len()) + 24);
    params.extend_from_slice(b"{\"topic\":");
    write_json_str(params, topic);
    params.extend_from_slice(b",\"payload\":");
    params.extend_from_slice(payload.map_or("null", RawValue::get).as_bytes());
    params.push(b'}');
}

/// The payload rules: an object unless [`PayloadRule::Any`] (-32602), nested at most
/// `max_depth` levels (-32005). One check for both read paths.
pub(super) fn check_payload(
    payload: Option<&RawValue>,
    rule: PayloadRule,
    max_depth: usize,
) -> Result<(), ErrorObject> {
    if rule == PayloadRule::Object {
        let first = payload.and_then(|p| p.get().bytes().find(|b| !codec::is_json_space(*b)));
        if first != Some(b'{') {
            return Err(not_an_object(first));
        }
    }
    if let Some(p) = payload {
        let bytes = p.get().as_bytes();
        // Valid JSON (serde_json read it) of n bytes nests at most n / 2 levels.
        if bytes.len() / 2 > max_depth && check_json_depth(bytes, max_depth).is_err() {
            return Err(ErrorObject::with_data(
                ErrorCode::LIMIT_EXCEEDED,
                texts::MAX_PAYLOAD_DEPTH,
            ));
        }
    }
    Ok(())
}

/// Reads `{topic, payload?}` the general way: a missing, `null` or empty topic is -32600
/// (the spec's table), params that are not an object or a topic that is not a string -32602.
pub(super) fn topic_params(
    params: Params<'_>,
) -> Result<(Cow<'_, str>, Option<&RawValue>), ErrorObject> {
    let raw = match params {
        Params::Read(m) => Raw {
            topic: m.topic,
            payload: m.payload,
        },
        Params::Raw(None) => return Err(missing_topic()),
        Params::Raw(Some(params)) => raw_topic_params(params)?,
    };
    let Some(topic) = raw.topic.filter(|t| t.get() != "null") else {
        return Err(missing_topic());
    };
    let Some(topic) = raw_str(topic) else {
        return Err(ErrorObject::with_data(
            ErrorCode::INVALID_PARAMS,
            texts::TOPIC_NOT_A_STRING,
        ));
    };
    if topic.is_empty() {
        return Err(missing_topic());
    }
    Ok((topic, raw.payload))
}

/// A publish's params as [`topic_params`] reads them, each member kept raw.
#[derive(Deserialize)]
struct Raw<'a> {
    #[serde(default, borrow)]
    topic: Option<&'a RawValue>,
    #[serde(default, borrow)]
    payload: Option<&'a RawValue>,
}

/// Reads params that the message's own pass did not ([`Params::Raw`]); out of line, as the
/// one pass reads a publish's params in the common case.
#[cold]
fn raw_topic_params(params: &RawValue) -> Result<Raw<'_>, ErrorObject> {
    serde_json::from_str(params.get())
        .map_err(|_| ErrorObject::with_data(ErrorCode::INVALID_PARAMS, texts::PARAMS_NOT_AN_OBJECT))
}

/// A success result, encoded.
pub(super) struct Encoded(Vec<u8>);

impl Encoded {
    pub(super) fn encode<T: Serialize>(value: &T) -> Self {
        Self(serde_json::to_vec(value).unwrap_or_else(|_| b"null".to_vec()))
    }

    pub(super) fn ping(timestamp: String) -> Self {
        Self::encode(&crate::message::PingResult { timestamp })
    }
}

#[cold]
pub(super) fn respond(id: Option<&Id>, result: Result<Encoded, ErrorObject>) -> Handled {
    let Some(id) = id else {
        return Handled::Nothing;
    };
    let mut out = Vec::with_capacity(128);
    match result {
        Ok(Encoded(bytes)) => codec::write_result_raw(&mut out, id, &bytes),
        Err(e) => write_error(&mut out, id, &e),
    }
    Handled::Now(out)
}

#[cold]
pub(super) fn method_not_found(method: &str) -> ErrorObject {
    ErrorObject::with_data(ErrorCode::METHOD_NOT_FOUND, method.to_owned())
}

/// -32602 for a payload that is not an object; `first` is its first byte (`None`: absent).
#[cold]
fn not_an_object(first: Option<u8>) -> ErrorObject {
    let got = match first {
        // The general path reads `"payload": null` as no payload; both say the same.
        None | Some(b'n') => "it is missing or null",
        Some(b'[') => "got an array",
        Some(b'"') => "got a string",
        Some(b't' | b'f') => "got a boolean",
        Some(_) => "got a number",
    };
    ErrorObject {
        message: texts::PAYLOAD_NOT_AN_OBJECT.to_owned(),
        ..ErrorObject::with_data(ErrorCode::INVALID_PARAMS, got)
    }
}

#[cold]
pub(super) fn missing_topic() -> ErrorObject {
    ErrorObject::with_data(ErrorCode::INVALID_REQUEST, texts::MISSING_TOPIC)
}

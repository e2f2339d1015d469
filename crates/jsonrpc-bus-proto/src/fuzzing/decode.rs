//! The decoder target: splitting, classifying, params, results, writers, and the one-pass
//! reader against the general path.

use std::borrow::Cow;

use agentwire_core::{FrameError, Id128};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Number, Value};

use crate::codec::{
    classify, split_body, write_call_raw, write_error, write_result_raw, Body, Incoming,
};
use crate::error::DecodeError;
use crate::fast;
use crate::message::{
    method, write_json_str, Ack, ErrorCode, ErrorObject, Id, InitializeParams, InitializeResult,
    PingResult, SendMessageParams, SendMessageRef, SendMessageResult, SubscribeResult, TopicParams,
    UnsubscribeResult,
};
use crate::topic::{MatchMode, Pattern, TopicIndex};

/// A body limit well above anything a fuzzer produces, so that parsing always runs.
const FUZZ_MAX: usize = 1 << 20;
/// The batch limit of [`decode`] (the bus's default).
const FUZZ_BATCH: usize = 100;
/// Topics longer than this are not matched (the bus's default `max_topic_bytes`), which
/// keeps the O(pattern × topic) matcher cheap.
const MAX_MATCHED_TOPIC: usize = 1024;

/// Splits `data` into messages, classifies every entry and parses the params and results
/// of the bus methods, as the `Bus` and `BusClient` do.
///
/// Checks: no panic; the body limit is checked first (one byte less is `TooLarge`); a
/// batch of `n` entries is refused as `BatchTooLarge` under a limit of `n - 1`; every
/// error maps to a spec code, and its error reply re-decodes as a response with the same id
/// and error object; every request, notification and response re-encoded with the crate's
/// writers classifies to the same id, method, params, result or error; the borrowed and
/// owned `sendMessage` params agree; typed results round-trip; and a topic compiled as a
/// pattern gives the same answers from [`Pattern::matches`] and [`TopicIndex`]; and a hop
/// reply that the bus's one-pass reader (`fast::read`) takes is read the same way by the
/// general path.
pub fn decode(data: &[u8]) {
    match split_body(data, FUZZ_MAX, FUZZ_BATCH) {
        Ok(Body::Single(raw)) => {
            hop_ack_agrees(raw);
            entry(raw);
        }
        Ok(Body::Batch(entries)) => {
            let n = entries.len();
            assert!(n > 0 && n <= FUZZ_BATCH, "batch of {n} entries accepted");
            for raw in entries {
                entry(raw.get());
            }
            assert_eq!(
                split_body(data, FUZZ_MAX, n - 1).err(),
                Some(DecodeError::BatchTooLarge { max: n - 1 }),
                "a batch of {n} under a limit of {}",
                n - 1
            );
        }
        Err(e) => check_error_reply(&e),
    }
    if let Some(max) = data.len().checked_sub(1) {
        assert_eq!(
            split_body(data, max, FUZZ_BATCH).err(),
            Some(DecodeError::Frame(FrameError::TooLarge {
                len: data.len(),
                max
            })),
            "the size limit is checked first"
        );
    }
}

/// The bus's one-pass hop-reply reader accepts only what the general path reads the same
/// way (the same request id and `stopPropagation`).
fn hop_ack_agrees(text: &str) {
    let Some((id, ack)) = fast::read(text) else {
        return;
    };
    let Ok(Incoming::Reply(reply)) = classify(text) else {
        panic!("the fast path took a non-reply: {text}");
    };
    let general = reply.id_str().and_then(|s| Id128::parse(&s));
    assert_eq!(general, Some(id), "request id of {text}");
    let result = reply.outcome.expect("the fast path took an error reply");
    let general = serde_json::from_str::<Ack>(result.get()).expect("the general path refuses");
    assert_eq!(general.stop, ack.stop, "stopPropagation of {text}");
}

/// One message object (or batch entry).
fn entry(text: &str) {
    match classify(text) {
        Err(e) => check_error_reply(&e),
        Ok(Incoming::Call(call)) => {
            let mut out = Vec::new();
            match call.params {
                Some(p) => {
                    write_call_raw(&mut out, call.id.as_ref(), &call.method, p.get().as_bytes())
                }
                None => {
                    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":");
                    write_json_str(&mut out, &call.method);
                    if let Some(id) = &call.id {
                        out.extend_from_slice(b",\"id\":");
                        id.write_json(&mut out);
                    }
                    out.push(b'}');
                }
            }
            match reclassify(&out) {
                Incoming::Call(again) => {
                    assert_eq!(again.method, call.method, "method round trip");
                    assert!(
                        same_opt_id(again.id.as_ref(), call.id.as_ref()),
                        "id round trip: {:?} vs {:?}",
                        again.id,
                        call.id
                    );
                    assert_eq!(
                        again.params.map(RawValue::get),
                        call.params.map(RawValue::get),
                        "params round trip"
                    );
                }
                Incoming::Reply(_) => panic!("a call re-encoded as a reply: {}", lossy(&out)),
            }
            params(&call.method, call.params);
        }
        Ok(Incoming::Reply(reply)) => {
            let mut out = Vec::new();
            match &reply.outcome {
                Ok(result) => write_result_raw(&mut out, &reply.id(), result.get().as_bytes()),
                Err(error) => write_error(&mut out, &reply.id(), error),
            }
            let Incoming::Reply(again) = reclassify(&out) else {
                panic!("a reply re-encoded as a call: {}", lossy(&out));
            };
            assert!(same_id(&again.id(), &reply.id()), "reply id round trip");
            match (&again.outcome, &reply.outcome) {
                (Ok(a), Ok(b)) => assert_eq!(a.get(), b.get(), "result round trip"),
                (Err(a), Err(b)) => assert!(same_error(a, b), "error round trip: {a:?} vs {b:?}"),
                _ => panic!("outcome changed in a round trip: {}", lossy(&out)),
            }
            if let Ok(result) = reply.outcome {
                results(result.get());
            }
        }
    }
}

/// Parses `out` (one message the crate wrote) back.
fn reclassify(out: &[u8]) -> Incoming<'_> {
    match split_body(out, usize::MAX, usize::MAX) {
        Ok(Body::Single(raw)) => classify(raw)
            .unwrap_or_else(|e| panic!("re-encoded message rejected: {e}: {}", lossy(out))),
        Ok(Body::Batch(_)) => panic!("re-encoded message is a batch: {}", lossy(out)),
        Err(e) => panic!("re-encoded message rejected: {e}: {}", lossy(out)),
    }
}

/// The error reply to `e` must carry a spec code and re-decode with the same id and object.
fn check_error_reply(e: &DecodeError) {
    let code = e.code();
    assert!(
        [
            ErrorCode::PARSE_ERROR,
            ErrorCode::INVALID_REQUEST,
            ErrorCode::LIMIT_EXCEEDED
        ]
        .contains(&code),
        "decode error {e:?} maps to {code:?}"
    );
    if code == ErrorCode::PARSE_ERROR {
        assert_eq!(e.id(), Id::Null, "a parse error is answered with id null");
    }
    let obj = e.to_error_object();
    assert_eq!(obj.code, code);
    let mut out = Vec::new();
    write_error(&mut out, &e.id(), &obj);
    let Incoming::Reply(reply) = reclassify(&out) else {
        panic!("error reply classified as a call: {}", lossy(&out));
    };
    assert!(same_id(&reply.id(), &e.id()), "error reply id");
    match reply.outcome {
        Err(again) => assert!(same_error(&again, &obj), "error object round trip"),
        Ok(_) => panic!("error reply decoded as a result: {}", lossy(&out)),
    }
}

/// Parses the params of the bus's methods as the machines do.
fn params(m: &str, params: Option<&RawValue>) {
    let Some(p) = params else { return };
    let text = p.get();
    match m {
        method::SEND_MESSAGE => {
            let borrowed = serde_json::from_str::<SendMessageRef<'_>>(text);
            let owned = serde_json::from_str::<SendMessageParams>(text);
            if let Ok(o) = &owned {
                let b = borrowed
                    .as_ref()
                    .unwrap_or_else(|e| panic!("owned params parse, borrowed fail: {e}: {text}"));
                assert_eq!(b.topic, o.topic, "sendMessage topic");
                assert_eq!(
                    b.payload.map_or("null", RawValue::get),
                    o.payload.get(),
                    "sendMessage payload"
                );
            }
            if let Ok(b) = &borrowed {
                check_topic(&b.topic);
                if let Some(payload) = b.payload {
                    // Valid JSON, though maybe nested deeper than `Value`'s recursion limit.
                    let any = serde_json::from_str::<serde::de::IgnoredAny>(payload.get());
                    assert!(any.is_ok(), "a raw payload is valid JSON");
                }
            }
        }
        method::SUBSCRIBE | method::UNSUBSCRIBE => {
            if let Ok(t) = serde_json::from_str::<TopicParams>(text) {
                check_topic(&t.topic);
                round_trip(&t);
            }
        }
        method::INITIALIZE => {
            if let Ok(i) = serde_json::from_str::<InitializeParams>(text) {
                round_trip(&i);
            }
        }
        _ => {}
    }
}

/// Parses a result as each bus result type; whatever parses must round-trip.
fn results(text: &str) {
    if let Ok(r) = serde_json::from_str::<SendMessageResult>(text) {
        round_trip(&r);
    }
    if let Ok(r) = serde_json::from_str::<InitializeResult>(text) {
        round_trip(&r);
    }
    if let Ok(r) = serde_json::from_str::<SubscribeResult>(text) {
        round_trip(&r);
    }
    if let Ok(r) = serde_json::from_str::<UnsubscribeResult>(text) {
        round_trip(&r);
    }
    if let Ok(r) = serde_json::from_str::<PingResult>(text) {
        round_trip(&r);
    }
}

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(v: &T) {
    let text = serde_json::to_string(v).unwrap_or_else(|e| panic!("encode {v:?}: {e}"));
    let again: T = serde_json::from_str(&text).unwrap_or_else(|e| panic!("re-decode {text}: {e}"));
    assert_eq!(&again, v, "round trip through {text}");
}

/// Probe topics for the pattern checks.
const PROBES: [&str; 6] = [
    "inbound:chat-1",
    "inbound:",
    "agent:x",
    "",
    "a",
    "\u{e9}t\u{e9}",
];

/// `topic` used as a pattern: [`Pattern::matches`] and [`TopicIndex::matches_into`] agree on
/// the topic itself and a few probes, in both modes; a literal pattern matches itself and
/// every match starts with the literal prefix.
fn check_topic(topic: &str) {
    if topic.len() > MAX_MATCHED_TOPIC {
        return;
    }
    for mode in [MatchMode::Glob, MatchMode::GlobOrPrefix] {
        let p = Pattern::new(topic, mode);
        let mut index = TopicIndex::new(mode);
        index.insert(topic, 1u8);
        let mut hits = Vec::new();
        for probe in std::iter::once(topic).chain(PROBES) {
            let m = p.matches(probe);
            index.matches_into(probe, &mut hits);
            assert_eq!(
                !hits.is_empty(),
                m,
                "pattern {topic:?} ({mode:?}) on {probe:?}: index and matcher disagree"
            );
            if m {
                assert!(
                    probe.starts_with(p.literal_prefix()),
                    "{probe:?} matched {topic:?} without its literal prefix"
                );
            }
        }
        if p.is_literal() {
            assert!(
                p.matches(topic),
                "literal pattern {topic:?} does not match itself"
            );
        }
        assert!(index.remove(topic, 1));
        assert!(index.is_empty());
    }
}

fn lossy(b: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(b)
}

/// Ids compare equal, floats within a relative 1e-15 (serde_json's default float parser
/// may be one ulp off on a re-parse).
fn same_id(a: &Id, b: &Id) -> bool {
    match (a, b) {
        (Id::Number(x), Id::Number(y)) => same_number(x, y),
        _ => a == b,
    }
}

fn same_opt_id(a: Option<&Id>, b: Option<&Id>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => same_id(a, b),
        (None, None) => true,
        _ => false,
    }
}

fn same_number(x: &Number, y: &Number) -> bool {
    if x == y {
        return true;
    }
    match (x.as_f64(), y.as_f64()) {
        (Some(a), Some(b)) => a == b || (a - b).abs() <= 1e-15 * a.abs().max(b.abs()),
        _ => false,
    }
}

fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => same_number(x, y),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_value(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((ka, va), (kb, vb))| ka == kb && same_value(va, vb))
        }
        _ => a == b,
    }
}

fn same_error(a: &ErrorObject, b: &ErrorObject) -> bool {
    a.code == b.code
        && a.message == b.message
        && match (&a.data, &b.data) {
            (Some(x), Some(y)) => same_value(x, y),
            (None, None) => true,
            _ => false,
        }
}

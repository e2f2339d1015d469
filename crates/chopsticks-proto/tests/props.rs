//! Property tests of the wire types: `decode(encode(m)) == m` for every message type and
//! variant, decoding never panics, and the position of `type` in the object never changes
//! the result.

use agentwire_core::Frame;
use chopsticks_proto::{
    Add, AgentMessage, ControllerMessage, ErrorMessage, Event, Guilds, Hello, RawJson, Released,
    Req, Resp, SessionKind,
};
use proptest::prelude::*;
use serde_json::{Map, Number, Value};

const MAX: usize = usize::MAX;

// ---------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------

/// Strings that stress the JSON writer: any unicode, JSON escapes, quotes, controls,
/// the line/paragraph separators, astral-plane characters.
fn text() -> BoxedStrategy<String> {
    prop_oneof![
        any::<String>(),
        "[\"\\\\/\\x00-\\x1f\\x7f\u{2028}\u{2029}a-z0-9 éß😀\u{fffd}]{0,16}",
        Just(String::new()),
        Just("\"}{,:[]".to_owned()),
        Just("\\u0000\\\"".to_owned()),
    ]
    .boxed()
}

fn opt_text() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(text())
}

fn texts() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(text(), 0..5)
}

fn kind() -> impl Strategy<Value = SessionKind> {
    prop_oneof![Just(SessionKind::Music), Just(SessionKind::Assistant)]
}

/// Floats whose shortest decimal form parses back exactly with serde_json's default
/// (not `float_roundtrip`) parser, so re-parsing a `Value` cannot move them by one ULP.
fn exact_float() -> BoxedStrategy<f64> {
    prop_oneof![
        (-1_000_000i32..1_000_000).prop_map(|i| f64::from(i) / 1000.0),
        (-1_000_000i32..1_000_000).prop_map(|i| f64::from(i) / 8.0),
        Just(-0.0),
        Just(1e300),
    ]
    .boxed()
}

/// Any finite float.
fn any_float() -> BoxedStrategy<f64> {
    any::<f64>()
        .prop_filter("finite", |f| f.is_finite())
        .boxed()
}

/// Small arbitrary JSON values (depth ≤ 3), with floats drawn from `float`.
fn json_value(float: BoxedStrategy<f64>) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        float.prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec((text(), inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// `RawJson` from arbitrary small values: compact text, and pretty-printed text (which the
/// fast decode path must keep byte for byte).
fn raw_json() -> impl Strategy<Value = RawJson> {
    prop_oneof![
        json_value(any_float()).prop_map(|v| RawJson::from_value(&v)),
        json_value(any_float()).prop_map(|v| {
            let pretty = serde_json::to_string_pretty(&v).expect("value encodes");
            RawJson::from_text(&pretty).expect("pretty JSON is JSON")
        }),
    ]
}

/// `RawJson` in the canonical compact form, which survives a trip through `Value`.
fn canonical_raw_json() -> impl Strategy<Value = RawJson> {
    json_value(exact_float()).prop_map(|v| RawJson::from_value(&v))
}

fn hello() -> BoxedStrategy<Hello> {
    (
        (opt_text(), opt_text(), opt_text(), opt_text()),
        (any::<bool>(), texts(), text(), opt_text(), opt_text()),
    )
        .prop_map(
            |(
                (protocol_version, agent_id, bot_user_id, tag),
                (ready, guild_ids, pool_id, runner_secret, runner_id),
            )| {
                Hello {
                    protocol_version,
                    agent_id,
                    bot_user_id,
                    tag,
                    ready,
                    guild_ids,
                    pool_id,
                    runner_secret,
                    runner_id,
                }
            },
        )
        .boxed()
}

fn guilds() -> BoxedStrategy<Guilds> {
    (texts(), opt_text(), opt_text())
        .prop_map(|(guild_ids, agent_id, runner_id)| Guilds {
            guild_ids,
            agent_id,
            runner_id,
        })
        .boxed()
}

fn released() -> BoxedStrategy<Released> {
    (text(), text(), text(), text(), kind(), opt_text())
        .prop_map(
            |(agent_id, guild_id, voice_channel_id, reason, kind, runner_id)| Released {
                agent_id,
                guild_id,
                voice_channel_id,
                reason,
                kind,
                runner_id,
            },
        )
        .boxed()
}

fn add() -> BoxedStrategy<Add> {
    (
        (text(), text(), text(), opt_text(), text()),
        (kind(), opt_text(), any::<bool>(), opt_text(), opt_text()),
    )
        .prop_map(
            |(
                (agent_id, guild_id, voice_channel_id, text_channel_id, channel_id),
                (kind, owner_user_id, ok, error, runner_id),
            )| Add {
                agent_id,
                guild_id,
                voice_channel_id,
                text_channel_id,
                channel_id,
                kind,
                owner_user_id,
                ok,
                error,
                runner_id,
            },
        )
        .boxed()
}

fn resp_with(data: BoxedStrategy<RawJson>) -> BoxedStrategy<Resp> {
    (
        text(),
        any::<bool>(),
        proptest::option::of(data),
        opt_text(),
        opt_text(),
        opt_text(),
    )
        .prop_map(|(id, ok, data, error, agent_id, runner_id)| Resp {
            id,
            ok,
            data,
            error,
            agent_id,
            runner_id,
        })
        .boxed()
}

fn req_with(data: BoxedStrategy<RawJson>) -> BoxedStrategy<Req> {
    (text(), text(), data, text())
        .prop_map(|(id, op, data, agent_id)| Req {
            id,
            op,
            data,
            agent_id,
        })
        .boxed()
}

fn agent_message_with(data: BoxedStrategy<RawJson>) -> impl Strategy<Value = AgentMessage> {
    prop_oneof![
        hello().prop_map(AgentMessage::Hello),
        guilds().prop_map(AgentMessage::Guilds),
        released().prop_map(|r| AgentMessage::Event(Event::Released(r))),
        add().prop_map(|a| AgentMessage::Event(Event::Add(a))),
        resp_with(data).prop_map(AgentMessage::Resp),
    ]
}

fn controller_message_with(
    data: BoxedStrategy<RawJson>,
) -> impl Strategy<Value = ControllerMessage> {
    prop_oneof![
        req_with(data).prop_map(ControllerMessage::Req),
        text().prop_map(|t| ControllerMessage::Error(ErrorMessage::new(t))),
    ]
}

fn agent_message() -> impl Strategy<Value = AgentMessage> {
    agent_message_with(raw_json().boxed())
}

fn controller_message() -> impl Strategy<Value = ControllerMessage> {
    controller_message_with(raw_json().boxed())
}

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn enc_agent(m: &AgentMessage) -> Vec<u8> {
    let mut out = Vec::new();
    m.encode(&mut out);
    out
}

fn enc_controller(m: &ControllerMessage) -> Vec<u8> {
    let mut out = Vec::new();
    m.encode(&mut out);
    out
}

/// Re-serializes a JSON object with its keys in `order` (a permutation seed), `type` last.
fn type_last(encoded: &[u8], rotate: usize) -> String {
    let v: Value = serde_json::from_slice(encoded).expect("encoder writes JSON");
    let Value::Object(obj) = v else {
        panic!("messages are objects")
    };
    let mut entries: Vec<(String, Value)> = obj.into_iter().filter(|(k, _)| k != "type").collect();
    let ty = serde_json::from_slice::<Value>(encoded).expect("json")["type"].clone();
    if !entries.is_empty() {
        let n = rotate % entries.len();
        entries.rotate_left(n);
    }
    entries.push(("type".to_owned(), ty));
    let mut s = String::from("{");
    for (i, (k, v)) in entries.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&serde_json::to_string(k).expect("key"));
        s.push(':');
        s.push_str(&serde_json::to_string(v).expect("value"));
    }
    s.push('}');
    s
}

/// Near-JSON strings: the alphabet of the protocol, so that the fuzzing reaches past the
/// first byte far more often than random unicode does.
fn jsonish() -> impl Strategy<Value = String> {
    prop_oneof![
        "[{}\\[\\]\",:\\\\ a-z0-9.eE+\\-]{0,64}",
        "\\{\"type\":\"(hello|guilds|event|resp|req|error)\"[,\"a-zA-Z:0-9\\[\\]{}]{0,48}\\}?",
        any::<String>(),
    ]
}

// ---------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------

proptest! {
    #[test]
    fn agent_message_round_trips(m in agent_message()) {
        let bytes = enc_agent(&m);
        let text = std::str::from_utf8(&bytes).expect("encoder writes UTF-8");
        prop_assert_eq!(AgentMessage::decode(Frame::Text(text), MAX).ok(), Some(m.clone()));
        prop_assert_eq!(AgentMessage::decode(Frame::Binary(&bytes), MAX).ok(), Some(m.clone()));
        // `to_frame` writes the same bytes as `encode`, into a reused buffer.
        let mut scratch = b"garbage from last time".to_vec();
        let frame = m.to_frame(&mut scratch);
        prop_assert_eq!(frame.as_text(), Some(text));
        // `encode` appends: a second message after the first leaves the first intact.
        let mut out = bytes.clone();
        m.encode(&mut out);
        prop_assert_eq!(&out[..bytes.len()], &bytes[..]);
        prop_assert_eq!(&out[bytes.len()..], &bytes[..]);
    }

    #[test]
    fn controller_message_round_trips(m in controller_message()) {
        let bytes = enc_controller(&m);
        let text = std::str::from_utf8(&bytes).expect("encoder writes UTF-8");
        prop_assert_eq!(ControllerMessage::decode(Frame::Text(text), MAX).ok(), Some(m.clone()));
        prop_assert_eq!(ControllerMessage::decode(Frame::Binary(&bytes), MAX).ok(), Some(m.clone()));
        let mut scratch = Vec::new();
        let frame = m.to_frame(&mut scratch);
        prop_assert_eq!(frame.as_text(), Some(text));
    }

    #[test]
    fn encoding_is_a_json_object_with_the_type_first(m in agent_message(), c in controller_message()) {
        for (bytes, ty) in [
            (enc_agent(&m), m.type_name()),
            (enc_controller(&c), c.type_name()),
        ] {
            let prefix = format!("{{\"type\":\"{ty}\"");
            prop_assert!(bytes.starts_with(prefix.as_bytes()), "{}", String::from_utf8_lossy(&bytes));
            let v: Value = serde_json::from_slice(&bytes).expect("JSON");
            prop_assert!(v.is_object());
        }
    }

    #[test]
    fn senders_do_not_accept_each_others_messages(m in agent_message(), c in controller_message()) {
        let a = enc_agent(&m);
        let b = enc_controller(&c);
        prop_assert!(ControllerMessage::decode(Frame::Binary(&a), MAX).is_err());
        prop_assert!(AgentMessage::decode(Frame::Binary(&b), MAX).is_err());
    }

    #[test]
    fn agent_decode_ignores_field_order(
        m in agent_message_with(canonical_raw_json().boxed()),
        rotate in any::<usize>(),
    ) {
        let reordered = type_last(&enc_agent(&m), rotate);
        prop_assert_eq!(AgentMessage::decode(Frame::Text(&reordered), MAX).ok(), Some(m), "{}", reordered);
    }

    #[test]
    fn controller_decode_ignores_field_order(
        m in controller_message_with(canonical_raw_json().boxed()),
        rotate in any::<usize>(),
    ) {
        let reordered = type_last(&enc_controller(&m), rotate);
        prop_assert_eq!(ControllerMessage::decode(Frame::Text(&reordered), MAX).ok(), Some(m), "{}", reordered);
    }

    #[test]
    fn decode_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..256), max in 0usize..512) {
        let _ = AgentMessage::decode(Frame::Binary(&bytes), max);
        let _ = ControllerMessage::decode(Frame::Binary(&bytes), max);
        if let Ok(s) = std::str::from_utf8(&bytes) {
            let _ = AgentMessage::decode(Frame::Text(s), max);
            let _ = ControllerMessage::decode(Frame::Text(s), max);
        }
    }

    #[test]
    fn decode_never_panics_on_strings(s in jsonish()) {
        for frame in [Frame::Text(&s), Frame::Binary(s.as_bytes())] {
            let a = AgentMessage::decode(frame, MAX);
            let c = ControllerMessage::decode(frame, MAX);
            // Whatever decodes, re-encodes and decodes to itself.
            if let Ok(m) = a {
                prop_assert_eq!(AgentMessage::decode(Frame::Binary(&enc_agent(&m)), MAX).ok(), Some(m));
            }
            if let Ok(m) = c {
                prop_assert_eq!(ControllerMessage::decode(Frame::Binary(&enc_controller(&m)), MAX).ok(), Some(m));
            }
        }
    }

    #[test]
    fn decode_never_panics_on_damaged_messages(
        m in agent_message(),
        c in controller_message(),
        cut in any::<prop::sample::Index>(),
        flip in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        for bytes in [enc_agent(&m), enc_controller(&c)] {
            let truncated = &bytes[..cut.index(bytes.len() + 1).min(bytes.len())];
            let _ = AgentMessage::decode(Frame::Binary(truncated), MAX);
            let _ = ControllerMessage::decode(Frame::Binary(truncated), MAX);
            let mut flipped = bytes.clone();
            let i = flip.index(flipped.len());
            flipped[i] = byte;
            let _ = AgentMessage::decode(Frame::Binary(&flipped), MAX);
            let _ = ControllerMessage::decode(Frame::Binary(&flipped), MAX);
        }
    }

    #[test]
    fn frame_limit_is_exact(m in agent_message()) {
        let bytes = enc_agent(&m);
        prop_assert!(AgentMessage::decode(Frame::Binary(&bytes), bytes.len()).is_ok());
        let over = AgentMessage::decode(Frame::Binary(&bytes), bytes.len() - 1);
        prop_assert!(
            matches!(
                over,
                Err(chopsticks_proto::DecodeError::Frame(
                    agentwire_core::FrameError::TooLarge { .. }
                ))
            ),
            "{:?}",
            over
        );
    }
}

/// Pins the cases that the strategies reach only by chance.
#[test]
fn resp_keeps_an_explicit_null_data() {
    let m = AgentMessage::Resp(Resp {
        data: Some(RawJson::null()),
        ..Resp::err("x", "y")
    });
    let bytes = enc_agent(&m);
    assert_eq!(
        std::str::from_utf8(&bytes).expect("utf8"),
        r#"{"type":"resp","id":"x","ok":false,"data":null,"error":"y"}"#
    );
    assert_eq!(
        AgentMessage::decode(Frame::Binary(&bytes), MAX).ok(),
        Some(m)
    );
    // An absent `data` stays absent.
    let absent = AgentMessage::Resp(Resp::err("x", "y"));
    assert_eq!(
        AgentMessage::decode(Frame::Binary(&enc_agent(&absent)), MAX).ok(),
        Some(absent)
    );
}

#[test]
fn unknown_type_with_more_fields_is_unknown_type_not_invalid_json() {
    for body in [
        r#"{"type":"nope","a":1,"b":[2,{"c":null}]}"#,
        r#"{"type":"req","id":"x","op":"o","agentId":"a","data":{}}"#,
    ] {
        assert!(
            matches!(
                AgentMessage::decode(Frame::Text(body), MAX),
                Err(chopsticks_proto::DecodeError::UnknownType)
            ),
            "{body}"
        );
    }
    assert!(matches!(
        ControllerMessage::decode(
            Frame::Text(r#"{"type":"hello","agentId":"a","protocolVersion":"1.0.0"}"#),
            MAX
        ),
        Err(chopsticks_proto::DecodeError::UnknownType)
    ));
}

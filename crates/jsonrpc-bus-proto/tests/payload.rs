//! What a `sendMessage` payload may be: a JSON object by default (the spec's shape, and what
//! reference subscribers require), any JSON value under `PayloadRule::Any`, and never nested
//! deeper than `max_payload_depth`. Every check holds on both read paths (the one-pass reader
//! of plain publishes and the general one) and for batch entries and notifications.

mod common;

use agentwire_core::{ConnId, SequentialIds};
use common::{error_code, t0, Harness, UNIX_MS};
use jsonrpc_bus_proto::{
    Bus, BusConfig, BusEvent, CommandError, Limits, PayloadRule, ProtocolError,
};
use serde_json::{json, Value};

/// A publish of `payload` (raw JSON text, `None`: no payload member) in four shapes: plain
/// (the one-pass reader), with an extra params member (the general path), as a batch entry,
/// and as a notification. Returns their texts.
fn shapes(payload: Option<&str>) -> [String; 4] {
    let member = payload.map_or(String::new(), |p| format!(r#","payload":{p}"#));
    [
        format!(
            r#"{{"jsonrpc":"2.0","method":"sendMessage","params":{{"topic":"t"{member}}},"id":1}}"#
        ),
        format!(
            r#"{{"jsonrpc":"2.0","method":"sendMessage","params":{{"topic":"t"{member},"extra":0}},"id":2}}"#
        ),
        format!(
            r#"[{{"jsonrpc":"2.0","method":"sendMessage","params":{{"topic":"t"{member}}},"id":3}}]"#
        ),
        format!(r#"{{"jsonrpc":"2.0","method":"sendMessage","params":{{"topic":"t"{member}}}}}"#),
    ]
}

/// Sends every shape of `payload` from a publisher to a bus with one subscriber on `t`;
/// returns the publisher's replies (the batch's one entry unwrapped), what the subscriber
/// received, and the events.
fn publish_all_shapes(
    cfg: BusConfig,
    payload: Option<&str>,
) -> (Vec<Value>, Vec<Value>, Vec<BusEvent>) {
    let mut h = Harness::new(cfg);
    let s = h.client();
    h.subscribe(s, "t");
    let p = h.client();
    h.take_events();
    for text in shapes(payload) {
        h.send_text(p, &text);
    }
    let replies = h
        .take(p)
        .into_iter()
        .map(|r| match r {
            Value::Array(mut a) if a.len() == 1 => a.remove(0),
            other => other,
        })
        .collect();
    let delivered = h.take(s);
    (replies, delivered, h.take_events())
}

fn refused_notification(events: &[BusEvent]) -> Option<i32> {
    events.iter().find_map(|e| match e {
        BusEvent::ProtocolViolation {
            error: ProtocolError::NotificationRefused(err),
            ..
        } => Some(err.code.0),
        _ => None,
    })
}

#[test]
fn a_payload_that_is_not_an_object_is_32602_by_default() {
    for (payload, got) in [
        (Some("[1,\"two\",null]"), "got an array"),
        (Some("\"text\""), "got a string"),
        (Some("42"), "got a number"),
        (Some("-1.5"), "got a number"),
        (Some("null"), "it is missing or null"),
        (Some("true"), "got a boolean"),
        (None, "it is missing or null"),
    ] {
        let (replies, delivered, events) = publish_all_shapes(BusConfig::default(), payload);
        assert_eq!(
            replies.len(),
            3,
            "three requests, one notification: {replies:?}"
        );
        for r in &replies {
            assert_eq!(error_code(r), -32602, "{payload:?}: {r}");
            assert_eq!(
                r["error"]["message"], "Invalid params: payload must be a JSON object",
                "{r}"
            );
            assert_eq!(r["error"]["data"], got, "{r}");
        }
        assert!(
            delivered.is_empty(),
            "{payload:?} was forwarded: {delivered:?}"
        );
        assert_eq!(
            refused_notification(&events),
            Some(-32602),
            "a refused notification is reported: {events:?}"
        );
    }
    // Whitespace before the object is still an object.
    let (replies, delivered, _) = publish_all_shapes(BusConfig::default(), Some(" \n{\"a\":1}"));
    assert_eq!(delivered.len(), 4, "{replies:?}");
}

#[test]
fn payload_rule_any_accepts_every_json_value() {
    let any = BusConfig::default().with_payload(PayloadRule::Any);
    for payload in ["[1,\"two\",null]", "\"text\"", "42", "null", "true", "{}"] {
        let (replies, delivered, _) = publish_all_shapes(any.clone(), Some(payload));
        assert_eq!(delivered.len(), 4, "{payload}: {replies:?}");
        for d in &delivered {
            let sent: Value = serde_json::from_str(payload).unwrap();
            assert_eq!(d["params"]["payload"], sent);
        }
    }
    let (_, delivered, _) = publish_all_shapes(any, None);
    assert_eq!(delivered.len(), 4);
    assert!(delivered.iter().all(|d| d["params"]["payload"].is_null()));
}

/// `{"a":{"a":...{}...}}`, `depth` objects deep.
fn nested_objects(depth: usize) -> String {
    let mut s = String::with_capacity(depth * 6);
    for _ in 1..depth {
        s.push_str(r#"{"a":"#);
    }
    s.push_str("{}");
    s.push_str(&"}".repeat(depth.saturating_sub(1)));
    s
}

#[test]
fn a_payload_nested_deeper_than_the_limit_is_refused_never_forwarded() {
    // 100,000 levels: what killed Python subscribers when it was forwarded.
    let deep = format!(r#"{{"a":{}1{}}}"#, "[".repeat(100_000), "]".repeat(100_000));
    let mut cfg = BusConfig::default();
    cfg.limits.max_message_bytes = 1 << 20;
    let (replies, delivered, events) = publish_all_shapes(cfg, Some(&deep));
    assert!(delivered.is_empty(), "a deep payload was forwarded");
    assert_eq!(replies.len(), 3);
    for r in &replies {
        assert_eq!(error_code(r), -32005, "{r}");
        assert_eq!(r["error"]["data"], "max_payload_depth", "{r}");
    }
    assert_eq!(refused_notification(&events), Some(-32005));

    // The default limit is 128 levels, exactly: 128 passes, forwarded as sent; 129 does not.
    assert_eq!(Limits::default().max_payload_depth, 128);
    let at_128 = nested_objects(128);
    let frames = deliveries_of(&at_128);
    assert_eq!(
        frames.len(),
        4,
        "every shape of a 128-deep payload is forwarded"
    );
    for f in &frames {
        assert!(f.contains(&format!(r#""payload":{at_128}}}"#)), "{f}");
    }
    assert!(deliveries_of(&nested_objects(129)).is_empty());

    // The limit is a setting; arrays and objects count alike.
    let mut cfg = BusConfig::default();
    cfg.limits.max_payload_depth = 3;
    let (_, delivered, _) = publish_all_shapes(cfg.clone(), Some(r#"{"a":[{"b":1}]}"#));
    assert_eq!(delivered.len(), 4);
    let (replies, delivered, _) = publish_all_shapes(cfg, Some(r#"{"a":[{"b":[1]}]}"#));
    assert!(delivered.is_empty());
    assert!(replies.iter().all(|r| error_code(r) == -32005));
}

/// The delivery frames (as text) a subscriber on `t` gets when every shape of `payload` is
/// published; read from the machine itself, since a test harness parsing whole frames would
/// meet the delivery's two extra levels.
fn deliveries_of(payload: &str) -> Vec<String> {
    use agentwire_core::{Frame, Machine, Output, PeerInfo};
    let now = t0();
    let mut bus = Bus::new(BusConfig::default(), SequentialIds::new(1), now, UNIX_MS);
    let (s, p) = (ConnId::new(1), ConnId::new(2));
    for c in [s, p] {
        bus.handle_connect(c, &PeerInfo::new(None), now);
        let init = r#"{"jsonrpc":"2.0","method":"initialize","params":{},"id":0}"#;
        bus.handle_frame(c, Frame::Text(init), now);
    }
    let sub = r#"{"jsonrpc":"2.0","method":"subscribe","params":{"topic":"t"},"id":1}"#;
    bus.handle_frame(s, Frame::Text(sub), now);
    while bus.poll_output().is_some() {}
    for text in shapes(Some(payload)) {
        bus.handle_frame(p, Frame::Text(&text), now);
    }
    let mut frames = Vec::new();
    while let Some(out) = bus.poll_output() {
        if let Output::Send { conn, frame } = out {
            if conn == s {
                frames.push(frame.as_text().unwrap_or_default().to_owned());
            }
        }
    }
    frames
}

#[test]
fn the_applications_own_publish_follows_the_same_payload_rules() {
    let now = t0();
    let mut bus = Bus::new(BusConfig::default(), SequentialIds::new(1), now, UNIX_MS);
    let refused = bus.publish("t", &json!([1, 2]), now);
    assert!(
        matches!(&refused, Err(CommandError::Payload(m)) if m.contains("payload must be a JSON object")),
        "{refused:?}"
    );
    let raw = serde_json::value::RawValue::from_string(nested_objects(129)).unwrap();
    assert!(matches!(
        bus.publish_raw("t", &raw, now),
        Err(CommandError::Payload(m)) if m.contains("max_payload_depth")
    ));
    assert!(bus.publish("t", &json!({"ok": true}), now).is_ok());
}

/// A bus that forwards anything (the reference does) may deliver a 100,000-deep payload: the
/// client answers it -32005 and never hands it to the application.
#[test]
fn a_client_refuses_a_delivered_payload_deeper_than_its_limit() {
    use agentwire_core::{Frame, Machine, Output, PeerInfo};
    use jsonrpc_bus_proto::{BusClient, ClientConfig, ClientEvent};
    let now = t0();
    let mut client = BusClient::new(ClientConfig::new("c"), SequentialIds::new(1));
    let conn = ConnId::new(1);
    client.handle_connect(conn, &PeerInfo::new(None), now);
    let init: Value = match client.poll_output() {
        Some(Output::Send { frame, .. }) => serde_json::from_slice(frame.as_bytes()).unwrap(),
        other => panic!("expected initialize, got {other:?}"),
    };
    let result = json!({"jsonrpc":"2.0","id":init["id"],"result":{
        "serverId":"bus-1","serverInfo":{"name":"bub-bus","version":"0.2.0"},
        "capabilities":{"subscribe":true,"publish":true,"topics":[]}}});
    client.handle_frame(conn, Frame::Text(&result.to_string()), now);
    while client.poll_output().is_some() {}

    let deliver = |payload: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"sendMessage","params":{{"topic":"t","payload":{payload}}},"id":"d"}}"#
        )
    };
    let deep = format!(r#"{{"a":{}1{}}}"#, "[".repeat(100_000), "]".repeat(100_000));
    client.handle_frame(conn, Frame::Text(&deliver(&deep)), now);
    let mut sent = Vec::new();
    let mut events = Vec::new();
    while let Some(out) = client.poll_output() {
        match out {
            Output::Send { frame, .. } => sent.push(frame.as_text().unwrap_or_default().to_owned()),
            Output::Event(e) => events.push(e),
            Output::Close { .. } => panic!("closed"),
        }
    }
    assert_eq!(sent.len(), 1);
    let reply: Value = serde_json::from_str(&sent[0]).unwrap();
    assert_eq!(
        (error_code(&reply), reply["id"].clone()),
        (-32005, json!("d"))
    );
    assert_eq!(reply["error"]["data"], "max_payload_depth");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, ClientEvent::Delivery { .. })),
        "{events:?}"
    );
    assert!(events.iter().any(|e| matches!(
        e,
        ClientEvent::ProtocolViolation(ProtocolError::PayloadTooDeep { limit: 128 })
    )));
    // A payload within the limit is delivered as usual.
    client.handle_frame(conn, Frame::Text(&deliver(r#"{"ok":[1]}"#)), now);
    let delivered = std::iter::from_fn(|| client.poll_output())
        .any(|o| matches!(o, Output::Event(ClientEvent::Delivery { .. })));
    assert!(delivered);
}

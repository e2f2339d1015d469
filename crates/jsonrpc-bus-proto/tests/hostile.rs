//! Hostile input: truncated, oversize, wrong-type and garbage frames get the spec's reply,
//! never a panic, and never disturb another connection.

mod common;

use agentwire_core::{Frame, Machine};
use common::{error_code, Harness};
use jsonrpc_bus_proto::{BusConfig, BusEvent, Limits};
use serde_json::json;

#[test]
fn garbage_gets_parse_error_with_null_id_and_the_connection_stays() {
    let mut h = Harness::default_config();
    let c = h.client();
    for bad in [
        "",
        "{",
        "nope",
        "{\"jsonrpc\":\"2.0\",",
        "[{\"a\":1},",
        "\u{0}",
        "{}}",
    ] {
        h.send_text(c, bad);
        let r = h.one(c);
        assert_eq!(
            (error_code(&r), &r["id"]),
            (-32700, &json!(null)),
            "{bad:?}: {r}"
        );
    }
    assert!(h.closes.is_empty());
    assert!(h.request(c, 1, "ping", json!({}))["result"].is_object());
}

#[test]
fn non_utf8_binary_is_a_parse_error_and_utf8_binary_json_works() {
    let mut h = Harness::default_config();
    let c = h.client();
    let now = h.now;
    h.bus
        .handle_frame(c, Frame::Binary(&[0xff, 0xfe, b'{']), now);
    h.drain();
    assert_eq!(error_code(&h.one(c)), -32700);
    h.bus.handle_frame(
        c,
        Frame::Binary(br#"{"jsonrpc":"2.0","method":"ping","params":{},"id":1}"#),
        now,
    );
    h.drain();
    assert!(h.one(c)["result"]["timestamp"].is_string());
}

#[test]
fn wrong_shapes_are_invalid_requests_with_the_id_recovered() {
    let mut h = Harness::default_config();
    let c = h.client();
    h.take_events();
    let cases = [
        (json!(5), json!(null)),
        (json!("str"), json!(null)),
        (json!({"method":"ping","id":1}), json!(1)),
        (
            json!({"jsonrpc":"1.0","method":"ping","id":"a"}),
            json!("a"),
        ),
        (json!({"jsonrpc":2.0,"method":"ping","id":2}), json!(2)),
        (json!({"jsonrpc":"2.0","method":["x"],"id":3}), json!(3)),
        (
            json!({"jsonrpc":"2.0","method":"ping","params":"x","id":4}),
            json!(4),
        ),
        (
            json!({"jsonrpc":"2.0","method":"ping","id":{"x":1}}),
            json!(null),
        ),
        (
            json!({"jsonrpc":"2.0","method":"ping","id":[1]}),
            json!(null),
        ),
        (json!({"jsonrpc":"2.0","id":5}), json!(5)),
    ];
    for (msg, id) in cases {
        h.send(c, msg.clone());
        let r = h.one(c);
        assert_eq!((error_code(&r), &r["id"]), (-32600, &id), "{msg}: {r}");
    }
    assert!(h
        .take_events()
        .iter()
        .all(|e| matches!(e, BusEvent::ProtocolViolation { .. })));
}

#[test]
fn oversize_messages_get_32005_before_parsing() {
    let mut limits = Limits::default();
    limits.max_message_bytes = 80;
    let mut h = Harness::new(BusConfig::default().with_limits(limits));
    let c = h.client();
    let exactly = format!(
        r#"{{"jsonrpc":"2.0","method":"ping","params":{{}},"id":"{}"}}"#,
        "x".repeat(27)
    );
    assert_eq!(exactly.len(), 80);
    h.send_text(c, &exactly);
    assert!(h.one(c)["result"].is_object());
    h.send_text(c, &format!("{exactly} "));
    let r = h.one(c);
    assert_eq!((error_code(&r), &r["id"]), (-32005, &json!(null)));
}

#[test]
fn unknown_and_misrouted_responses_are_dropped() {
    let mut h = Harness::default_config();
    let (a, b) = (h.client(), h.client());
    h.subscribe(a, "t");
    let p = h.client();
    h.publish(p, 1, "t", json!({"n": 1}));
    let req = h.one(a);
    // b answers a's delivery: ignored, reported, no reply.
    h.answer(b, &req, true);
    assert!(h.take(b).is_empty());
    assert!(h.take(p).is_empty());
    // Unknown ids and non-UUID ids: ignored.
    for id in [
        json!("nope"),
        json!(7),
        json!("00000000-0000-4000-8000-00000000ffff"),
    ] {
        h.send(
            b,
            json!({"jsonrpc":"2.0","result":{"stopPropagation":true},"id":id}),
        );
        assert!(h.take(b).is_empty());
    }
    // a's real answer still works.
    h.answer(a, &req, false);
    assert_eq!(h.one(p)["result"]["delivered"], 1);
}

#[test]
fn malformed_subscriber_results_count_as_continue() {
    let mut h = Harness::default_config();
    let (a, b) = (h.client(), h.client());
    h.subscribe(a, "t");
    h.subscribe(b, "t");
    let p = h.client();
    h.publish(p, 1, "t", json!({"n": 1}));
    let req = h.one(a);
    h.send(a, json!({"jsonrpc":"2.0","result":"yes","id":req["id"]}));
    let req = h.one(b);
    h.send(
        b,
        json!({"jsonrpc":"2.0","result":{"success":true},"id":req["id"]}),
    );
    assert_eq!(h.one(p)["result"]["delivered"], 2);
}

#[test]
fn a_flood_of_garbage_from_one_connection_leaves_others_untouched() {
    let mut h = Harness::default_config();
    let (good, evil) = (h.client(), h.client());
    h.subscribe(good, "t");
    let p = h.client();
    h.publish(p, 1, "t", json!({"n": "keep"}));
    let req = h.one(good);
    for i in 0..2000u32 {
        let junk = match i % 5 {
            0 => "[".repeat(i as usize % 300),
            1 => format!("{{\"jsonrpc\":\"2.0\",\"method\":\"sendMessage\",\"params\":{{\"topic\":{i}}},\"id\":{i}}}"),
            2 => "[1,2,3]".to_owned(),
            3 => format!("{{\"jsonrpc\":\"2.0\",\"result\":{{}},\"id\":\"{i}\"}}"),
            _ => "\"\\uD800\"".to_owned(),
        };
        h.send_text(evil, &junk);
    }
    h.take(evil);
    h.answer(good, &req, false);
    assert_eq!(h.one(p)["result"]["delivered"], 1);
    assert_eq!(h.bus.deliveries_in_flight(), 0);
    assert!(h.closes.is_empty());
}

#[test]
fn deep_nesting_and_huge_batches_are_bounded() {
    let mut h = Harness::default_config();
    let c = h.client();
    // The bus never builds a tree of a payload: deep nesting is scanned iteratively (no
    // stack overflow) and refused (it is never forwarded: see `tests/payload.rs`).
    let deep = format!(
        r#"{{"jsonrpc":"2.0","method":"sendMessage","params":{{"topic":"t","payload":{{"a":{}1{}}}}},"id":1}}"#,
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    h.send_text(c, &deep);
    let r = h.one(c);
    assert_eq!(error_code(&r), -32005, "{r}");
    assert_eq!(r["error"]["data"], "max_payload_depth", "{r}");
    // A 100,000-entry batch is refused at entry 101 with one error.
    let big = format!("[{}1]", "1,".repeat(100_000));
    h.send_text(c, &big);
    let r = h.one(c);
    assert_eq!(error_code(&r), -32005);
}

#[test]
fn unknown_connections_are_a_no_op() {
    let mut h = Harness::default_config();
    let ghost = agentwire_core::ConnId::new(4242);
    let now = h.now;
    h.bus.handle_frame(ghost, Frame::Text("{}"), now);
    h.bus.handle_disconnect(ghost, now);
    h.drain();
    assert!(h.frames.is_empty() && h.events.is_empty());
}

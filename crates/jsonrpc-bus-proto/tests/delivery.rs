//! The interceptor chain: order, stopPropagation, skips, concurrency and the reference's
//! deadlocks proven absent.

mod common;

use std::time::Duration;

use agentwire_core::Machine;
use common::{error_code, Harness};
use jsonrpc_bus_proto::{BusConfig, BusEvent, HopOutcome, Limits, MatchMode};
use serde_json::{json, Value};

fn counts(r: &Value) -> (Value, Value, Value, Value, Value, Value) {
    let x = &r["result"];
    (
        x["stopPropagation"].clone(),
        x["delivered"].clone(),
        x["errors"].clone(),
        x["timeouts"].clone(),
        x["disconnected"].clone(),
        x["overloaded"].clone(),
    )
}

#[test]
fn chain_runs_in_subscription_order_one_at_a_time() {
    let mut h = Harness::default_config();
    let (a, b, c) = (h.client(), h.client(), h.client());
    // Subscription order: b, then c, then a (connection order does not matter).
    h.subscribe(b, "inbound:*");
    h.subscribe(c, "inbound:chat-?");
    h.subscribe(a, "*");
    let p = h.client();
    h.publish(
        p,
        4,
        "inbound:chat-1",
        json!({"chat_id":"chat-1","text":"hello","from":"user-1"}),
    );
    // Only b has it; nobody else yet.
    let req = h.one(b);
    assert!(h.take(c).is_empty() && h.take(a).is_empty());
    assert_eq!(
        req["params"],
        json!({"topic":"inbound:chat-1","payload":{"chat_id":"chat-1","text":"hello","from":"user-1"}})
    );
    assert!(
        req["id"].is_string(),
        "bus request ids are UUID strings: {req}"
    );
    h.answer(b, &req, false);
    let req = h.one(c);
    assert!(h.take(a).is_empty());
    h.answer(c, &req, false);
    let req = h.one(a);
    assert!(
        h.take(p).is_empty(),
        "the publisher waits for the whole chain"
    );
    h.answer(a, &req, false);
    let r = h.one(p);
    assert_eq!(r["id"], 4);
    assert_eq!(r["result"]["success"], true);
    assert_eq!(
        counts(&r),
        (
            json!(false),
            json!(3),
            json!(0),
            json!(0),
            json!(0),
            json!(0)
        )
    );
}

#[test]
fn stop_propagation_ends_the_chain() {
    let mut h = Harness::default_config();
    let (auth, logger) = (h.client(), h.client());
    h.subscribe(auth, "inbound:*");
    h.subscribe(logger, "inbound:*");
    let p = h.client();
    h.publish(p, 1, "inbound:x", json!({"token": null}));
    let req = h.one(auth);
    h.answer(auth, &req, true);
    assert!(h.take(logger).is_empty(), "stopped before the logger");
    let r = h.one(p);
    assert_eq!(
        counts(&r),
        (
            json!(true),
            json!(1),
            json!(0),
            json!(0),
            json!(0),
            json!(0)
        )
    );
    assert_eq!(h.bus.deliveries_in_flight(), 0);
}

#[test]
fn one_delivery_per_connection_however_many_patterns_match() {
    let mut h = Harness::default_config();
    let s = h.client();
    h.subscribe(s, "inbound:*");
    h.subscribe(s, "inbound:chat-1");
    h.subscribe(s, "*");
    let p = h.client();
    h.publish(p, 1, "inbound:chat-1", json!({"n": 1}));
    let req = h.one(s);
    h.answer(s, &req, false);
    assert_eq!(h.one(p)["result"]["delivered"], 1);
}

#[test]
fn error_reply_skips_to_the_next_and_is_counted() {
    let mut h = Harness::default_config();
    let (a, b) = (h.client(), h.client());
    h.subscribe(a, "t");
    h.subscribe(b, "t");
    let p = h.client();
    h.publish(p, 1, "t", json!({"n": 1}));
    let req = h.one(a);
    h.send(
        a,
        json!({"jsonrpc":"2.0","error":{"code":-32603,"message":"boom"},"id":req["id"]}),
    );
    let req = h.one(b);
    h.answer(b, &req, false);
    let r = h.one(p);
    assert_eq!(
        counts(&r),
        (
            json!(false),
            json!(1),
            json!(1),
            json!(0),
            json!(0),
            json!(0)
        )
    );
    assert!(h.take_events().iter().any(|e| matches!(e,
        BusEvent::Hop { subscriber, outcome: HopOutcome::Error(err), .. }
            if *subscriber == a && err.message == "boom")));
}

#[test]
fn a_silent_subscriber_times_out_and_the_chain_goes_on() {
    let mut h = Harness::new(BusConfig::default().with_delivery_timeout(Duration::from_secs(5)));
    let (slow, b) = (h.client(), h.client());
    h.subscribe(slow, "t");
    h.subscribe(b, "t");
    let p = h.client();
    h.publish(p, 1, "t", json!({"n": 1}));
    let late = h.one(slow);
    h.advance(Duration::from_millis(4999));
    assert!(h.take(b).is_empty());
    h.advance(Duration::from_millis(1));
    let req = h.one(b);
    h.answer(b, &req, false);
    let r = h.one(p);
    assert_eq!(
        counts(&r),
        (
            json!(false),
            json!(1),
            json!(0),
            json!(1),
            json!(0),
            json!(0)
        )
    );
    // The late answer is dropped (reported, not applied).
    h.answer(slow, &late, true);
    assert!(h.take(p).is_empty());
    assert!(h
        .take_events()
        .iter()
        .any(|e| matches!(e, BusEvent::ProtocolViolation { .. })));
}

#[test]
fn default_delivery_timeout_is_30_seconds() {
    let mut h = Harness::default_config();
    let s = h.client();
    h.subscribe(s, "t");
    let p = h.client();
    h.publish(p, 1, "t", json!({"n": 1}));
    h.take(s);
    h.advance(Duration::from_millis(29_999));
    assert!(h.take(p).is_empty());
    h.advance(Duration::from_millis(1));
    assert_eq!(h.one(p)["result"]["timeouts"], 1);
}

#[test]
fn a_subscriber_disconnecting_mid_delivery_is_skipped() {
    let mut h = Harness::default_config();
    let (a, b) = (h.client(), h.client());
    h.subscribe(a, "t");
    h.subscribe(b, "t");
    let p = h.client();
    h.publish(p, 1, "t", json!({"n": 1}));
    h.take(a);
    h.disconnect(a);
    let req = h.one(b);
    h.answer(b, &req, false);
    let r = h.one(p);
    assert_eq!(
        counts(&r),
        (
            json!(false),
            json!(1),
            json!(0),
            json!(0),
            json!(1),
            json!(0)
        )
    );
}

#[test]
fn a_later_subscriber_vanishing_before_its_turn_is_skipped() {
    let mut h = Harness::default_config();
    let (a, b, c) = (h.client(), h.client(), h.client());
    for s in [a, b, c] {
        h.subscribe(s, "t");
    }
    let p = h.client();
    h.publish(p, 1, "t", json!({"n": 1}));
    let req = h.one(a);
    h.disconnect(b);
    h.answer(a, &req, false);
    let req = h.one(c);
    h.answer(c, &req, false);
    let r = h.one(p);
    assert_eq!(
        counts(&r),
        (
            json!(false),
            json!(2),
            json!(0),
            json!(0),
            json!(1),
            json!(0)
        )
    );
}

#[test]
fn publisher_subscribed_to_its_own_topic_gets_it_without_deadlock() {
    let mut h = Harness::default_config();
    let p = h.client();
    h.subscribe(p, "agent:*");
    h.publish(p, 1, "agent:spawn", json!({"id": 1}));
    // The bus asks the publisher itself while its own request is pending.
    let req = h.one(p);
    assert_eq!(req["method"], "sendMessage");
    h.answer(p, &req, false);
    let r = h.one(p);
    assert_eq!(
        (r["id"].clone(), r["result"]["delivered"].clone()),
        (json!(1), json!(1))
    );
}

#[test]
fn deliver_to_publisher_false_skips_it() {
    let mut cfg = BusConfig::default();
    cfg.deliver_to_publisher = false;
    let mut h = Harness::new(cfg);
    let p = h.client();
    h.subscribe(p, "agent:*");
    h.publish(p, 1, "agent:spawn", json!({"n": 1}));
    assert_eq!(h.one(p)["result"]["delivered"], 0);
}

#[test]
fn two_clients_publishing_to_each_other_at_once_both_complete() {
    let mut h = Harness::default_config();
    let (a, b) = (h.client(), h.client());
    h.subscribe(a, "to-a");
    h.subscribe(b, "to-b");
    h.publish(a, 1, "to-b", json!({"n": "from a"}));
    h.publish(b, 2, "to-a", json!({"n": "from b"}));
    let req_at_b = h.one(b);
    let req_at_a = h.one(a);
    h.answer(a, &req_at_a, false);
    h.answer(b, &req_at_b, false);
    assert_eq!(h.one(a)["id"], 1);
    assert_eq!(h.one(b)["id"], 2);
}

#[test]
fn connects_and_disconnects_during_a_delivery_are_safe() {
    let mut h = Harness::default_config();
    let (a, b) = (h.client(), h.client());
    h.subscribe(a, "t");
    h.subscribe(b, "t");
    let p = h.client();
    h.publish(p, 1, "t", json!({"n": 1}));
    let req = h.one(a);
    // Churn while a holds the delivery: new subscribers come (not part of this chain),
    // others go.
    let mut newcomers = Vec::new();
    for _ in 0..20 {
        let n = h.client();
        h.subscribe(n, "t");
        newcomers.push(n);
    }
    for n in newcomers.iter().step_by(2) {
        h.disconnect(*n);
    }
    h.answer(a, &req, false);
    let req = h.one(b);
    h.answer(b, &req, false);
    let r = h.one(p);
    assert_eq!(
        r["result"]["delivered"], 2,
        "the chain is fixed at publish time"
    );
    for n in newcomers {
        assert!(h.take(n).is_empty());
    }
}

#[test]
fn the_publisher_disconnecting_does_not_stop_the_chain() {
    let mut h = Harness::default_config();
    let (a, b) = (h.client(), h.client());
    h.subscribe(a, "t");
    h.subscribe(b, "t");
    let p = h.client();
    h.publish(p, 1, "t", json!({"n": 1}));
    let req = h.one(a);
    h.disconnect(p);
    h.answer(a, &req, false);
    let req = h.one(b);
    h.answer(b, &req, false);
    assert_eq!(h.bus.deliveries_in_flight(), 0);
    assert!(h.take_events().iter().any(|e| matches!(e,
        BusEvent::Completed { publisher: Some(pp), result, .. } if *pp == p && result.delivered == Some(2))));
}

#[test]
fn many_deliveries_in_flight_and_each_publishers_order_is_kept() {
    let mut h = Harness::default_config();
    let (a, b) = (h.client(), h.client());
    h.subscribe(a, "x:*");
    h.subscribe(b, "*");
    let (p, q) = (h.client(), h.client());
    // p's first message goes a then b; its second matches only b. b must still see p's
    // first message before its second.
    h.publish(p, 1, "x:1", json!({"n": "p1"}));
    h.publish(p, 2, "y:2", json!({"n": "p2"}));
    // q's message (only b) is not held up by p's.
    h.publish(q, 3, "y:3", json!({"n": "q1"}));
    let at_b: Vec<Value> = h.take(b);
    assert_eq!(at_b.len(), 1, "{at_b:?}");
    assert_eq!(at_b[0]["params"]["payload"]["n"], "q1");
    let at_a = h.one(a);
    assert_eq!(at_a["params"]["payload"]["n"], "p1");
    h.answer(b, &at_b[0], false);
    assert_eq!(h.one(q)["id"], 3);
    h.answer(a, &at_a, false);
    // Now b gets p1 and, right behind it (window 8), p2: in publish order.
    let at_b = h.take(b);
    let payloads: Vec<&Value> = at_b.iter().map(|r| &r["params"]["payload"]["n"]).collect();
    assert_eq!(payloads, [&json!("p1"), &json!("p2")]);
    h.answer(b, &at_b[1], false);
    h.answer(b, &at_b[0], false);
    let mut ids: Vec<Value> = h.take(p).into_iter().map(|r| r["id"].clone()).collect();
    ids.sort_by_key(|v| v.as_i64());
    assert_eq!(ids, [json!(1), json!(2)]);
}

#[test]
fn window_of_one_is_strictly_one_at_a_time() {
    let mut cfg = BusConfig::default();
    cfg.max_in_flight_per_subscriber = 1;
    let mut h = Harness::new(cfg);
    let s = h.client();
    h.subscribe(s, "t");
    let p = h.client();
    for i in 0..3 {
        h.publish(p, i, "t", json!({"n": i}));
    }
    for i in 0..3 {
        let req = h.one(s);
        assert_eq!(req["params"]["payload"]["n"], i);
        h.answer(s, &req, false);
    }
    assert_eq!(h.take(p).len(), 3);
}

#[test]
fn full_subscriber_queue_is_skipped_as_overloaded() {
    let mut limits = Limits::default();
    limits.max_pending_per_subscriber = 2;
    let mut cfg = BusConfig::default().with_limits(limits);
    cfg.max_in_flight_per_subscriber = 1;
    let mut h = Harness::new(cfg);
    let s = h.client();
    h.subscribe(s, "t");
    let p = h.client();
    for i in 0..3 {
        h.publish(p, i, "t", json!({"n": i}));
    }
    // The third found s's queue full: answered at once, counted.
    let r = h.one(p);
    assert_eq!(
        (r["id"].clone(), r["result"]["overloaded"].clone()),
        (json!(2), json!(1))
    );
}

#[test]
fn publisher_pending_limit_is_32005() {
    let mut limits = Limits::default();
    limits.max_pending_per_publisher = 2;
    let mut h = Harness::new(BusConfig::default().with_limits(limits));
    let s = h.client();
    h.subscribe(s, "t");
    let p = h.client();
    h.publish(p, 1, "t", json!({"n": 1}));
    h.publish(p, 2, "t", json!({"n": 2}));
    h.publish(p, 3, "t", json!({"n": 3}));
    let r = h.one(p);
    assert_eq!((error_code(&r), r["id"].clone()), (-32005, json!(3)));
    // Another publisher is unaffected.
    let q = h.client();
    h.publish(q, 4, "t", json!({"n": 4}));
    assert!(h.take(q).is_empty());
}

#[test]
fn glob_mode_is_the_default_and_prefix_mode_is_the_spec_rule() {
    let mut h = Harness::default_config();
    let s = h.client();
    h.subscribe(s, "inbound:chat-");
    let p = h.client();
    h.publish(p, 1, "inbound:chat-1", json!({"n": 1}));
    assert_eq!(h.one(p)["result"]["delivered"], 0, "glob: no prefix rule");

    let mut h = Harness::new(BusConfig::default().with_match_mode(MatchMode::GlobOrPrefix));
    let s = h.client();
    h.subscribe(s, "inbound:chat-");
    let p = h.client();
    h.publish(p, 1, "inbound:chat-1", json!({"n": 1}));
    let req = h.one(s);
    h.answer(s, &req, false);
    assert_eq!(h.one(p)["result"]["delivered"], 1);
}

#[test]
fn glob_patterns_are_case_sensitive_and_anchored() {
    let mut h = Harness::default_config();
    let s = h.client();
    h.subscribe(s, "inbound:[!x]?");
    let p = h.client();
    for (id, topic, hit) in [
        (1, "inbound:ab", true),
        (2, "inbound:xb", false),
        (3, "Inbound:ab", false),
        (4, "inbound:abc", false),
    ] {
        h.publish(p, id, topic, json!({"n": 1}));
        if hit {
            let req = h.one(s);
            h.answer(s, &req, false);
        }
        assert_eq!(h.one(p)["result"]["delivered"], u64::from(hit), "{topic}");
    }
}

#[test]
fn the_application_can_publish_and_sees_the_result_as_an_event() {
    let mut h = Harness::default_config();
    let s = h.client();
    h.subscribe(s, "outbound:*");
    let now = h.now;
    let id = h
        .bus
        .publish("outbound:chat-9", &json!({"text":"hi"}), now)
        .unwrap();
    h.drain();
    let req = h.one(s);
    assert_eq!(req["params"]["payload"], json!({"text":"hi"}));
    h.answer(s, &req, true);
    assert!(h.take_events().iter().any(|e| matches!(e,
        BusEvent::Completed { delivery, publisher: None, result } if *delivery == id && result.stop_propagation)));
}

#[test]
fn a_payload_is_forwarded_byte_for_byte() {
    let mut h = Harness::default_config();
    let s = h.client();
    h.subscribe(s, "t");
    let p = h.client();
    let payload = r#"{"b":1.50,"a":"\u00e9\n","z":[1e3, true ,null]}"#;
    h.send_text(
        p,
        &format!(
            r#"{{"jsonrpc":"2.0","method":"sendMessage","params":{{"topic":"t","payload":{payload}}},"id":1}}"#
        ),
    );
    assert!(h.take(s).len() == 1);
    // Byte-level check on the machine's output itself: the payload text is kept as sent,
    // not re-serialized.
    let mut h2 = Harness::default_config();
    let s2 = h2.client();
    h2.subscribe(s2, "t");
    let p2 = h2.client();
    let text = format!(
        r#"{{"jsonrpc":"2.0","method":"sendMessage","params":{{"topic":"t","payload":{payload}}},"id":1}}"#
    );
    let now = h2.now;
    h2.bus
        .handle_frame(p2, agentwire_core::Frame::Text(&text), now);
    let mut found = false;
    while let Some(out) = h2.bus.poll_output() {
        if let agentwire_core::Output::Send { frame, .. } = out {
            let body = std::str::from_utf8(frame.as_bytes()).unwrap();
            if body.contains("sendMessage") {
                assert!(
                    body.contains(&format!(r#""payload":{payload}}}"#)),
                    "{body}"
                );
                found = true;
            }
        }
    }
    assert!(found);
}

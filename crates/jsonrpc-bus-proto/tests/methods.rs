//! initialize, subscribe, unsubscribe, ping and the JSON-RPC envelope rules.

mod common;

use std::time::Duration;

use common::{error_code, Harness};
use jsonrpc_bus_proto::{BusConfig, BusEvent, Limits, PayloadRule};
use serde_json::json;

#[test]
fn initialize_result_is_exactly_the_reference_shape() {
    let mut h = Harness::default_config();
    let c = h.connect();
    let r = h.request(
        c,
        1,
        "initialize",
        json!({"clientId":"agent-1","clientInfo":{"name":"bub","version":"0.2.0"}}),
    );
    let server_id = r["result"]["serverId"].as_str().unwrap().to_owned();
    assert!(
        server_id.starts_with("bus-") && server_id.len() == 16,
        "{server_id}"
    );
    assert!(server_id[4..].bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(
        r,
        json!({"jsonrpc":"2.0","result":{
            "serverId": server_id,
            "serverInfo":{"name":"bub-bus","version":"0.2.0"},
            "capabilities":{"subscribe":true,"publish":true,"topics":["inbound:*","outbound:*","agent:*"]}
        },"id":1})
    );
    assert!(h.take_events().iter().any(|e| matches!(e,
        BusEvent::Initialized { client_id: Some(id), client_info: Some(info), .. }
            if id == "agent-1" && info.name.as_deref() == Some("bub"))));
}

#[test]
fn client_info_null_is_valid_and_invalid_client_info_is_32002() {
    let mut h = Harness::default_config();
    let a = h.connect();
    let r = h.request(
        a,
        1,
        "initialize",
        json!({"clientId":"x","clientInfo":null}),
    );
    assert!(r["result"]["serverId"].is_string(), "{r}");
    let b = h.connect();
    for (i, bad) in [json!("bub"), json!(5), json!({"name": 5}), json!([1])]
        .into_iter()
        .enumerate()
    {
        let r = h.request(b, i as u64, "initialize", json!({"clientInfo": bad}));
        assert_eq!(error_code(&r), -32002, "{r}");
    }
    // Still uninitialized, so a valid initialize now works.
    let r = h.request(b, 9, "initialize", json!({}));
    assert!(r["result"].is_object(), "{r}");
    // No params at all is also fine.
    let c = h.connect();
    h.send(c, json!({"jsonrpc":"2.0","method":"initialize","id":"u"}));
    assert!(h.one(c)["result"].is_object());
}

#[test]
fn second_initialize_is_32001() {
    let mut h = Harness::default_config();
    let c = h.client();
    let r = h.request(c, 2, "initialize", json!({}));
    assert_eq!(r["error"]["code"], -32001);
    assert_eq!(r["error"]["message"], "Already initialized");
    assert_eq!(r["id"], 2);
}

#[test]
fn methods_before_initialize_get_not_initialized_32000() {
    let mut h = Harness::default_config();
    let c = h.connect();
    for (i, m) in ["subscribe", "unsubscribe", "sendMessage", "ping"]
        .iter()
        .enumerate()
    {
        let r = h.request(c, i as u64, m, json!({"topic":"a"}));
        assert_eq!(error_code(&r), -32000, "{m}: {r}");
        assert_eq!(r["error"]["message"], "Not initialized");
    }
    // Unknown methods are -32601 whatever the state.
    let r = h.request(c, 7, "frobnicate", json!({}));
    assert_eq!(error_code(&r), -32601);
    // Notifications before initialize get nothing.
    h.send(c, json!({"jsonrpc":"2.0","method":"ping"}));
    assert!(h.take(c).is_empty());
}

#[test]
fn subscribe_returns_a_subscription_id_and_rejects_duplicates() {
    let mut h = Harness::default_config();
    let c = h.client();
    let r = h.request(c, 2, "subscribe", json!({"topic":"inbound:chat-*"}));
    let sid = r["result"]["subscriptionId"].as_str().unwrap();
    assert!(sid.starts_with("sub_") && sid.len() == 12, "{sid}");
    assert!(sid[4..].bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(r["result"]["success"], true);
    let r = h.request(c, 3, "subscribe", json!({"topic":"inbound:chat-*"}));
    assert_eq!(error_code(&r), -32003);
    // Same pattern from another connection is fine.
    let d = h.client();
    let r = h.request(d, 3, "subscribe", json!({"topic":"inbound:chat-*"}));
    assert_eq!(r["result"]["success"], true);
    assert_eq!(h.bus.subscriptions(c), vec!["inbound:chat-*"]);
}

#[test]
fn missing_or_empty_topic_is_32600_and_wrong_type_32602() {
    let mut h = Harness::default_config();
    let c = h.client();
    for (i, params) in [json!({}), json!({"topic":""}), json!({"topic":null})]
        .into_iter()
        .enumerate()
    {
        for m in ["subscribe", "unsubscribe", "sendMessage"] {
            let r = h.request(c, i as u64, m, params.clone());
            assert_eq!(error_code(&r), -32600, "{m} {params}: {r}");
        }
    }
    h.send(c, json!({"jsonrpc":"2.0","method":"subscribe","id":4}));
    assert_eq!(error_code(&h.one(c)), -32600);
    for params in [json!({"topic":5}), json!([5])] {
        let r = h.request(c, 5, "subscribe", params.clone());
        assert_eq!(error_code(&r), -32602, "{params}: {r}");
    }
}

#[test]
fn params_by_position_are_accepted_as_json_rpc_allows() {
    let mut h = Harness::default_config();
    let c = h.connect();
    let r = h.request(c, 1, "initialize", json!(["agent-1", null]));
    assert!(r["result"]["serverId"].is_string(), "{r}");
    let r = h.request(c, 2, "subscribe", json!(["inbound:*"]));
    assert_eq!(r["result"]["success"], true, "{r}");
    let p = h.client();
    h.send(
        p,
        json!({"jsonrpc":"2.0","method":"sendMessage","params":["inbound:x", {"a":1}],"id":3}),
    );
    let req = h.one(c);
    assert_eq!(
        req["params"],
        json!({"topic":"inbound:x","payload":{"a":1}})
    );
}

#[test]
fn unsubscribe_by_the_same_string() {
    let mut h = Harness::default_config();
    let c = h.client();
    h.subscribe(c, "inbound:*");
    let r = h.request(c, 2, "unsubscribe", json!({"topic":"inbound:chat-1"}));
    assert_eq!(error_code(&r), -32004);
    let r = h.request(c, 3, "unsubscribe", json!({"topic":"inbound:*"}));
    assert_eq!(r, json!({"jsonrpc":"2.0","result":{"success":true},"id":3}));
    let r = h.request(c, 4, "unsubscribe", json!({"topic":"inbound:*"}));
    assert_eq!(error_code(&r), -32004);
    // Unsubscribed: a publish reaches nobody.
    let p = h.client();
    h.publish(p, 5, "inbound:x", json!({"n": 1}));
    assert_eq!(h.one(p)["result"]["delivered"], 0);
    assert!(h.take(c).is_empty());
}

#[test]
fn ping_answers_with_the_wall_clock_in_rfc3339_utc() {
    let mut h = Harness::default_config();
    let c = h.client();
    let r = h.request(c, 100, "ping", json!({}));
    assert_eq!(
        r,
        json!({"jsonrpc":"2.0","result":{"timestamp":"2025-02-14T12:00:00Z"},"id":100})
    );
    h.advance(Duration::from_secs(61));
    let r = h.request(c, 101, "ping", json!({}));
    assert_eq!(r["result"]["timestamp"], "2025-02-14T12:01:01Z");
    h.bus.set_wall_clock(h.now, 0);
    let r = h.request(c, 102, "ping", json!({}));
    assert_eq!(r["result"]["timestamp"], "1970-01-01T00:00:00Z");
}

#[test]
fn ids_are_echoed_exactly_string_number_null() {
    let mut h = Harness::default_config();
    let c = h.client();
    for id in [
        json!("3f1e2a4c-0000-4000-8000-000000000001"),
        json!(42),
        json!(-7),
        json!(1.5),
        json!(null),
    ] {
        h.send(
            c,
            json!({"jsonrpc":"2.0","method":"ping","params":{},"id":id}),
        );
        assert_eq!(h.one(c)["id"], id);
    }
}

#[test]
fn notifications_run_but_are_never_answered() {
    let mut h = Harness::default_config();
    let c = h.client();
    h.send(
        c,
        json!({"jsonrpc":"2.0","method":"subscribe","params":{"topic":"a"}}),
    );
    assert!(h.take(c).is_empty());
    assert_eq!(h.bus.subscriptions(c), vec!["a"]);
    h.send(c, json!({"jsonrpc":"2.0","method":"nope"}));
    assert!(h.take(c).is_empty());
    // A published notification is delivered; the publisher gets nothing back.
    let p = h.client();
    h.send(
        p,
        json!({"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"a","payload":{"k":1}}}),
    );
    let req = h.one(c);
    assert_eq!(req["params"], json!({"topic":"a","payload":{"k":1}}));
    h.answer(c, &req, false);
    assert!(h.take(p).is_empty());
    assert_eq!(h.bus.deliveries_in_flight(), 0);
}

#[test]
fn batches_answer_in_order_and_skip_notifications() {
    let mut h = Harness::default_config();
    let c = h.client();
    h.send_text(
        c,
        r#"[{"jsonrpc":"2.0","method":"ping","params":{},"id":1},
            {"jsonrpc":"2.0","method":"subscribe","params":{"topic":"t"}},
            {"jsonrpc":"2.0","method":"nope","id":2},
            5,
            {"jsonrpc":"2.0","method":"subscribe","params":{"topic":"u"},"id":3}]"#,
    );
    let r = h.one(c);
    let arr = r.as_array().unwrap();
    assert_eq!(arr.len(), 4, "{r}");
    assert_eq!(arr[0]["id"], 1);
    assert!(arr[0]["result"]["timestamp"].is_string());
    assert_eq!((error_code(&arr[1]), &arr[1]["id"]), (-32601, &json!(2)));
    assert_eq!((error_code(&arr[2]), &arr[2]["id"]), (-32600, &json!(null)));
    assert_eq!(arr[3]["id"], 3);
    assert_eq!(h.bus.subscriptions(c), vec!["t", "u"]);
    // Only notifications: nothing at all.
    h.send_text(
        c,
        r#"[{"jsonrpc":"2.0","method":"ping"},{"jsonrpc":"2.0","method":"ping"}]"#,
    );
    assert!(h.take(c).is_empty());
    // Empty batch: one -32600, not an array.
    h.send_text(c, "[]");
    let r = h.one(c);
    assert_eq!((error_code(&r), &r["id"]), (-32600, &json!(null)));
}

#[test]
fn a_batch_with_a_publish_waits_for_its_chain() {
    let mut h = Harness::default_config();
    let s = h.client();
    h.subscribe(s, "t");
    let p = h.client();
    h.send_text(
        p,
        r#"[{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t","payload":{"n":1}},"id":"a"},
            {"jsonrpc":"2.0","method":"ping","params":{},"id":"b"}]"#,
    );
    assert!(
        h.take(p).is_empty(),
        "the batch answer waits for the delivery"
    );
    let req = h.one(s);
    h.answer(s, &req, true);
    let r = h.one(p);
    let arr = r.as_array().unwrap();
    assert_eq!(arr[0]["id"], "a");
    assert_eq!(arr[0]["result"]["stopPropagation"], true);
    assert_eq!(arr[1]["id"], "b");
}

#[test]
fn batch_length_limit_is_one_32005() {
    let mut limits = Limits::default();
    limits.max_batch_len = 2;
    let mut h = Harness::new(BusConfig::default().with_limits(limits));
    let c = h.client();
    let one = r#"{"jsonrpc":"2.0","method":"ping","params":{},"id":1}"#;
    h.send_text(c, &format!("[{one},{one}]"));
    assert_eq!(h.one(c).as_array().unwrap().len(), 2);
    h.send_text(c, &format!("[{one},{one},{one}]"));
    let r = h.one(c);
    assert_eq!((error_code(&r), &r["id"]), (-32005, &json!(null)));
}

#[test]
fn subscription_limit_is_32005() {
    let mut limits = Limits::default();
    limits.max_subscriptions_per_conn = 2;
    limits.max_topic_bytes = 8;
    let mut h = Harness::new(BusConfig::default().with_limits(limits));
    let c = h.client();
    h.subscribe(c, "a");
    h.subscribe(c, "b");
    let r = h.request(c, 1, "subscribe", json!({"topic":"c"}));
    assert_eq!(error_code(&r), -32005);
    assert_eq!(r["error"]["data"], "max_subscriptions_per_conn");
    let r = h.request(c, 2, "unsubscribe", json!({"topic":"123456789"}));
    assert_eq!(
        (error_code(&r), &r["error"]["data"]),
        (-32005, &json!("max_topic_bytes"))
    );
}

#[test]
fn connection_limit_sends_32005_and_closes_1013() {
    let mut limits = Limits::default();
    limits.max_connections = 2;
    let mut h = Harness::new(BusConfig::default().with_limits(limits));
    let a = h.client();
    let _b = h.client();
    let c = h.connect();
    let r = h.one(c);
    assert_eq!((error_code(&r), &r["id"]), (-32005, &json!(null)));
    assert_eq!(
        h.closes.last().map(|(conn, code, _)| (*conn, code.0)),
        Some((c, 1013))
    );
    assert_eq!(h.bus.connection_count(), 2);
    // The others keep working.
    assert!(h.request(a, 1, "ping", json!({}))["result"].is_object());
    h.disconnect(a);
    let d = h.connect();
    assert!(h.take(d).is_empty());
    assert_eq!(h.bus.connection_count(), 2);
}

#[test]
fn initialize_deadline_closes_1008() {
    let mut h = Harness::default_config();
    let slow = h.connect();
    let fine = h.client();
    h.advance(Duration::from_secs(29));
    assert!(h.closes.is_empty());
    h.advance(Duration::from_secs(1));
    assert_eq!(
        h.closes,
        vec![(
            slow,
            agentwire_core::CloseCode::POLICY,
            "initialize-required".to_owned()
        )]
    );
    let _ = fine;
    // None disables it.
    let mut cfg = BusConfig::default();
    cfg.initialize_timeout = None;
    let mut h = Harness::new(cfg);
    h.connect();
    h.advance(Duration::from_secs(3600));
    assert!(h.closes.is_empty());
    assert_eq!(agentwire_core::Machine::poll_timeout(&h.bus), None);
}

#[test]
fn subscriptions_are_per_connection_and_dropped_on_disconnect() {
    let mut h = Harness::default_config();
    let a = h.client();
    h.subscribe(a, "t");
    h.disconnect(a);
    assert!(h.take_events().iter().any(|e| matches!(e,
        BusEvent::Disconnected { conn, subscriptions: 1 } if *conn == a)));
    let p = h.client();
    h.publish(p, 1, "t", json!({}));
    assert_eq!(h.one(p)["result"]["delivered"], 0);
}

#[test]
fn a_missing_payload_is_forwarded_as_null_under_payload_rule_any() {
    // By default it is -32602 (`tests/payload.rs`).
    let mut h = Harness::new(BusConfig::default().with_payload(PayloadRule::Any));
    let s = h.client();
    h.subscribe(s, "t");
    let p = h.client();
    h.send(
        p,
        json!({"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t"},"id":1}),
    );
    let req = h.one(s);
    assert_eq!(req["params"], json!({"topic":"t","payload":null}));
}

#[test]
fn a_batched_publish_with_no_subscriber_is_answered_in_place() {
    let mut h = Harness::default_config();
    let c = h.client();
    h.send_text(
        c,
        r#"[{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"outbound:none","payload":{"n":1}},"id":1},
            {"jsonrpc":"2.0","method":"ping"},
            {"jsonrpc":"2.0","method":"ping","params":{},"id":2}]"#,
    );
    let r = h.one(c);
    let arr = r.as_array().unwrap();
    assert_eq!(arr.len(), 2, "{r}");
    assert_eq!(
        (arr[0]["id"].clone(), arr[0]["result"]["delivered"].clone()),
        (json!(1), json!(0))
    );
    assert_eq!(arr[1]["id"], 2);
}

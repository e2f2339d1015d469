//! End to end over 127.0.0.1: the reference bus and clients (the examples' library code) with
//! real sockets, a raw tokio-tungstenite peer speaking the spec's messages verbatim, slow,
//! vanishing and self-subscribed subscribers, reconnects, and a Python `websockets` client.

#[path = "support/interop.rs"]
mod interop;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use agentwire::core::{CloseCode, ConnId};
use agentwire::jsonrpc_bus::message::SendMessageResult;
use agentwire::jsonrpc_bus::{
    BusConfig, BusEvent, ClientConfig, ClientEvent, ErrorCode, HopOutcome, MatchMode,
};
use agentwire::tokio::{Backoff, ClientConfig as TransportClientConfig};
use agentwire_server::bus;
use bus::client_app::{BusClientApp, Delivery, DELIVERY_QUEUE};
use bus::server_app::BusApp;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// Every await in these tests is bounded.
async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// Starts the reference bus on `addr`; returns it and a copy of every event.
async fn bus_on(addr: &str, cfg: BusConfig) -> (BusApp, mpsc::UnboundedReceiver<BusEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = bus::server_app::start(addr, cfg, move |ev| {
        let _ = tx.send(ev.clone());
    })
    .await
    .expect("bind");
    (app, rx)
}

async fn bus(cfg: BusConfig) -> (BusApp, mpsc::UnboundedReceiver<BusEvent>) {
    bus_on("127.0.0.1:0", cfg).await
}

/// Reconnects within milliseconds, so reconnect tests stay fast.
fn fast_reconnect() -> TransportClientConfig {
    TransportClientConfig::default().with_backoff(
        Backoff::new(Duration::from_millis(10), Duration::from_millis(200))
            .with_jitter(Duration::from_millis(10)),
    )
}

struct TestClient {
    app: BusClientApp,
    deliveries: mpsc::Receiver<Delivery>,
    events: mpsc::UnboundedReceiver<ClientEvent>,
}

/// Connects `id` (an interceptor if `intercept`) and subscribes it to `patterns` in order.
async fn client(url: &str, id: &str, intercept: bool, patterns: &[&str]) -> TestClient {
    let mut cfg = ClientConfig::new(id);
    if intercept {
        cfg = cfg.intercepting();
    }
    client_with(url, cfg, fast_reconnect(), patterns).await
}

async fn client_with(
    url: &str,
    cfg: ClientConfig,
    transport: TransportClientConfig,
    patterns: &[&str],
) -> TestClient {
    let (tx, events) = mpsc::unbounded_channel();
    let (app, deliveries) = bus::client_app::connect(url, cfg, transport, move |ev| {
        let _ = tx.send(ev.clone());
    })
    .expect("client");
    for p in patterns {
        within("subscribe", app.subscribe(p))
            .await
            .expect("subscribed");
    }
    TestClient {
        app,
        deliveries,
        events,
    }
}

/// Answers every delivery of `c` with `stop`, forwarding each `(topic, payload)`.
fn answer_all(
    mut deliveries: mpsc::Receiver<Delivery>,
    stop: bool,
) -> mpsc::UnboundedReceiver<(String, Value)> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(d) = deliveries.recv().await {
            let _ = tx.send((d.topic.clone(), d.payload_value()));
            d.answer(stop).await;
        }
    });
    rx
}

async fn publish(c: &BusClientApp, topic: &str, payload: Value) -> SendMessageResult {
    within("publish", c.publish(topic, &payload))
        .await
        .expect("published")
}

/// `count` concurrent publishes of `{"n": 0..count}` on `topic`.
async fn publish_many(
    c: &BusClientApp,
    topic: &str,
    count: u64,
) -> Vec<Result<SendMessageResult, bus::client_app::Failure>> {
    futures_util::future::join_all(
        (0..count).map(|n| async move { c.publish(topic, &json!({"n": n})).await }),
    )
    .await
}

/// The next bus event matching `pick`.
async fn next_bus_event<T>(
    events: &mut mpsc::UnboundedReceiver<BusEvent>,
    mut pick: impl FnMut(BusEvent) -> Option<T>,
) -> T {
    loop {
        let ev = within("bus event", events.recv())
            .await
            .expect("bus running");
        if let Some(t) = pick(ev) {
            return t;
        }
    }
}

/// The next client event matching `pick`.
async fn next_client_event<T>(
    events: &mut mpsc::UnboundedReceiver<ClientEvent>,
    mut pick: impl FnMut(ClientEvent) -> Option<T>,
) -> T {
    loop {
        let ev = within("client event", events.recv())
            .await
            .expect("client running");
        if let Some(t) = pick(ev) {
            return t;
        }
    }
}

/// The connection id of the client that initialized with `client_id`.
async fn conn_of(events: &mut mpsc::UnboundedReceiver<BusEvent>, client_id: &str) -> ConnId {
    next_bus_event(events, |ev| match ev {
        BusEvent::Initialized {
            conn,
            client_id: Some(id),
            ..
        } if id == client_id => Some(conn),
        _ => None,
    })
    .await
}

// ---- a raw peer ----------------------------------------------------------------------------

/// A plain tokio-tungstenite peer speaking JSON text.
struct Raw {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl Raw {
    async fn connect(url: &str) -> Self {
        let (ws, _) = within("connect", tokio_tungstenite::connect_async(url))
            .await
            .expect("upgrade");
        Self { ws }
    }

    async fn send(&mut self, text: &str) {
        within("send", self.ws.send(Message::text(text.to_owned())))
            .await
            .expect("send");
    }

    /// The next text message, parsed.
    async fn recv(&mut self) -> Value {
        loop {
            match within("recv", self.ws.next()).await {
                Some(Ok(Message::Text(t))) => return serde_json::from_str(&t).expect("json"),
                Some(Ok(Message::Close(f))) => panic!("closed: {f:?}"),
                Some(Ok(_)) => {}
                Some(Err(e)) => panic!("ws error: {e}"),
                None => panic!("stream ended"),
            }
        }
    }

    /// Closes with 1000 and reads until the bus has answered the close.
    async fn close(mut self) {
        within("close", self.ws.close(None)).await.expect("close");
        while let Some(Ok(_)) = within("close reply", self.ws.next()).await {}
    }

    /// Sends `text` and returns the next message.
    async fn call(&mut self, text: &str) -> Value {
        self.send(text).await;
        self.recv().await
    }
}

fn error_code(reply: &Value) -> i64 {
    reply["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {reply}"))
}

fn is_rfc3339_utc(ts: &str) -> bool {
    let b = ts.as_bytes();
    b.len() >= 20
        && ts.ends_with('Z')
        && [4, 7].iter().all(|&i| b[i] == b'-')
        && b[10] == b'T'
        && [13, 16].iter().all(|&i| b[i] == b':')
        && [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18]
            .iter()
            .all(|&i| b[i].is_ascii_digit())
}

// The spec's example messages (specs/jsonrpc-bus.md), verbatim.
const SPEC_INITIALIZE: &str = r#"{
  "jsonrpc": "2.0",
  "method": "initialize",
  "params": {
    "clientId": "agent-1",
    "clientInfo": {
      "name": "bub",
      "version": "0.2.0"
    }
  },
  "id": 1
}"#;
const SPEC_SUBSCRIBE: &str = r#"{
  "jsonrpc": "2.0",
  "method": "subscribe",
  "params": {
    "topic": "inbound:chat-*"
  },
  "id": 2
}"#;
const SPEC_UNSUBSCRIBE: &str = r#"{
  "jsonrpc": "2.0",
  "method": "unsubscribe",
  "params": {
    "topic": "inbound:chat-*"
  },
  "id": 3
}"#;
const SPEC_SEND_MESSAGE: &str = r#"{
  "jsonrpc": "2.0",
  "method": "sendMessage",
  "params": {
    "topic": "inbound:chat-1",
    "payload": {
      "chat_id": "chat-1",
      "text": "hello",
      "from": "user-1"
    }
  },
  "id": 4
}"#;
const SPEC_PING: &str = r#"{
  "jsonrpc": "2.0",
  "method": "ping",
  "params": {},
  "id": 100
}"#;

// ---- tests ---------------------------------------------------------------------------------

#[tokio::test]
async fn initialize_subscribe_publish_and_stop_propagation_over_the_wire() {
    let (app, _events) = bus(BusConfig::default().with_server_id("bus-e2e")).await;
    let url = app.url();
    let mut gate = client(&url, "gate", true, &["inbound:*"]).await;
    let init = next_client_event(&mut gate.events, |ev| match ev {
        ClientEvent::Initialized(init) => Some(init),
        _ => None,
    })
    .await;
    assert_eq!(init.server_id, "bus-e2e");
    assert_eq!(init.server_info.name, "bub-bus");
    assert!(init.capabilities.subscribe && init.capabilities.publish);
    assert_eq!(
        init.capabilities.topics,
        ["inbound:*", "outbound:*", "agent:*"]
    );
    let observer = client(&url, "observer", false, &["inbound:chat-*"]).await;
    let publisher = client(&url, "publisher", false, &[]).await;

    // The gate lets only `{"pass":true}` through.
    let mut gate_rx = gate.deliveries;
    tokio::spawn(async move {
        while let Some(d) = gate_rx.recv().await {
            let pass = d.payload_value()["pass"] == true;
            d.answer(!pass).await;
        }
    });
    let mut seen = observer.deliveries;

    let stopped = publish(
        &publisher.app,
        "inbound:chat-1",
        json!({"pass": false, "n": 1}),
    )
    .await;
    assert!(stopped.success && stopped.stop_propagation);
    assert_eq!(stopped.delivered, Some(1), "only the gate saw it");

    let passed = publish(
        &publisher.app,
        "inbound:chat-1",
        json!({"pass": true, "n": 2}),
    )
    .await;
    assert!(passed.success && !passed.stop_propagation);
    assert_eq!(passed.delivered, Some(2));
    // The observer's first delivery is the second message: the first never reached it.
    let d = within("delivery", seen.recv()).await.expect("delivery");
    assert_eq!(d.topic, "inbound:chat-1");
    assert_eq!(d.payload_value(), json!({"pass": true, "n": 2}));
    assert_eq!(
        d.to_json_line(),
        r#"{"topic":"inbound:chat-1","payload":{"n":2,"pass":true}}"#
    );

    // No subscriber: success, nobody delivered.
    let none = publish(&publisher.app, "agent:nobody", json!({})).await;
    assert_eq!((none.stop_propagation, none.delivered), (false, Some(0)));

    let ts = within("ping", publisher.app.ping()).await.expect("pong");
    assert!(is_rfc3339_utc(&ts), "{ts}");

    // Unsubscribe: the gate is out of the chain.
    within("unsubscribe", gate.app.unsubscribe("inbound:*"))
        .await
        .expect("unsubscribed");
    let after = publish(&publisher.app, "inbound:chat-1", json!({"pass": false})).await;
    assert_eq!((after.stop_propagation, after.delivered), (false, Some(1)));

    for c in [&gate.app, &observer.app, &publisher.app] {
        within("client shutdown", c.shutdown()).await;
    }
    within("shutdown", app.server.shutdown()).await;
}

#[tokio::test]
async fn a_raw_peer_speaking_the_spec_examples_verbatim() {
    let (app, _events) = bus(BusConfig::default()).await;
    let url = app.url();
    let mut peer = Raw::connect(&url).await;

    // Before initialize: rejected (ours -32000; the spec's -32001 means "already initialized").
    let early = peer.call(SPEC_PING).await;
    assert_eq!(error_code(&early), i64::from(ErrorCode::NOT_INITIALIZED.0));
    assert_eq!(early["id"], 100);

    let init = peer.call(SPEC_INITIALIZE).await;
    assert_eq!(init["jsonrpc"], "2.0");
    assert_eq!(init["id"], 1);
    let result = &init["result"];
    assert!(result["serverId"]
        .as_str()
        .is_some_and(|s| s.starts_with("bus-")));
    assert_eq!(
        result["serverInfo"],
        json!({"name": "bub-bus", "version": "0.2.0"})
    );
    assert_eq!(
        result["capabilities"],
        json!({"subscribe": true, "publish": true, "topics": ["inbound:*", "outbound:*", "agent:*"]})
    );
    let again = peer.call(SPEC_INITIALIZE).await;
    assert_eq!(error_code(&again), -32001, "already initialized");

    let sub = peer.call(SPEC_SUBSCRIBE).await;
    assert_eq!(sub["id"], 2);
    assert_eq!(sub["result"]["success"], true);
    let sub_id = sub["result"]["subscriptionId"]
        .as_str()
        .expect("subscriptionId");
    assert!(sub_id.starts_with("sub_") && sub_id.len() == 12, "{sub_id}");
    assert_eq!(error_code(&peer.call(SPEC_SUBSCRIBE).await), -32003);

    // The peer is subscribed to inbound:chat-*, so its own message comes back to it as a
    // bus-originated request, which it answers with the spec's response.
    peer.send(SPEC_SEND_MESSAGE).await;
    let delivery = peer.recv().await;
    assert_eq!(delivery["jsonrpc"], "2.0");
    assert_eq!(delivery["method"], "sendMessage");
    assert_eq!(
        delivery["params"],
        json!({"topic": "inbound:chat-1", "payload": {"chat_id": "chat-1", "text": "hello", "from": "user-1"}})
    );
    let bus_id = delivery["id"]
        .as_str()
        .expect("the bus's request ids are UUID strings");
    assert_eq!(bus_id.len(), 36);
    let answer = format!(
        r#"{{
  "jsonrpc": "2.0",
  "result": {{
    "success": true,
    "stopPropagation": false
  }},
  "id": "{bus_id}"
}}"#
    );
    let done = peer.call(&answer).await;
    assert_eq!(done["id"], 4);
    assert_eq!(done["result"]["success"], true);
    assert_eq!(done["result"]["stopPropagation"], false);
    assert_eq!(done["result"]["delivered"], 1);

    let pong = peer.call(SPEC_PING).await;
    assert_eq!(pong["id"], 100);
    assert!(is_rfc3339_utc(
        pong["result"]["timestamp"].as_str().expect("timestamp")
    ));

    let unsub = peer.call(SPEC_UNSUBSCRIBE).await;
    assert_eq!(
        unsub,
        json!({"jsonrpc": "2.0", "result": {"success": true}, "id": 3})
    );
    assert_eq!(error_code(&peer.call(SPEC_UNSUBSCRIBE).await), -32004);

    // A batch: two requests, a publish (its result waits for its chain, here through another
    // client) and a notification (no answer); one array comes back, in request order.
    let observer = client(&url, "observer", false, &["outbound:*"]).await;
    let batch = peer
        .call(
            r#"[{"jsonrpc":"2.0","method":"ping","params":{},"id":101},
                {"jsonrpc":"2.0","method":"subscribe","params":{"topic":"agent:*"},"id":"102"},
                {"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"outbound:one","payload":{"n":1}},"id":103},
                {"jsonrpc":"2.0","method":"ping","params":{}}]"#,
        )
        .await;
    let entries = batch.as_array().expect("a batch answer is an array");
    assert_eq!(entries.len(), 3, "{batch}");
    assert_eq!(entries[0]["id"], 101);
    assert!(entries[0]["result"]["timestamp"].is_string());
    assert_eq!(entries[1]["id"], "102");
    assert_eq!(entries[1]["result"]["success"], true);
    assert_eq!(entries[2]["id"], 103);
    assert_eq!(entries[2]["result"]["delivered"], 1);
    within("client shutdown", observer.app.shutdown()).await;

    // Malformed JSON: -32700 with id null, and the connection keeps working.
    let parse = peer.call(r#"{"jsonrpc": "2.0", "method": "ping", "#).await;
    assert_eq!(error_code(&parse), -32700);
    assert_eq!(parse["id"], Value::Null);
    assert_eq!(error_code(&peer.call("[]").await), -32600, "empty batch");
    assert_eq!(
        error_code(
            &peer
                .call(r#"{"jsonrpc":"2.0","method":"subscribe","params":{},"id":7}"#)
                .await
        ),
        -32600,
        "missing topic (the spec's table)"
    );
    assert_eq!(
        error_code(
            &peer
                .call(r#"{"jsonrpc":"2.0","method":"frobnicate","id":8}"#)
                .await
        ),
        -32601
    );
    let pong = peer.call(SPEC_PING).await;
    assert!(pong["result"]["timestamp"].is_string());

    peer.close().await;
    within("shutdown", app.server.shutdown()).await;
}

#[tokio::test]
async fn a_batched_publish_with_no_subscriber_is_answered() {
    let (app, _events) = bus(BusConfig::default()).await;
    let mut peer = Raw::connect(&app.url()).await;
    peer.call(SPEC_INITIALIZE).await;
    let batch = peer
        .call(
            r#"[{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"outbound:none","payload":{"n":1}},"id":1},
                {"jsonrpc":"2.0","method":"ping","params":{},"id":2}]"#,
        )
        .await;
    let entries = batch.as_array().expect("a batch answer is an array");
    assert_eq!(entries.len(), 2, "{batch}");
    assert_eq!(entries[0]["result"]["delivered"], 0);
    peer.close().await;
    within("shutdown", app.server.shutdown()).await;
}

#[tokio::test]
async fn a_subscriber_that_never_answers_times_out_without_hanging_the_publisher() {
    let timeout = Duration::from_secs(1);
    let (app, _events) = bus(BusConfig::default().with_delivery_timeout(timeout)).await;
    let url = app.url();
    let mut silent = client(&url, "silent", true, &["agent:*"]).await;
    let observer = client(&url, "observer", false, &["agent:*"]).await;
    let publisher = client(&url, "publisher", false, &[]).await;

    let started = tokio::time::Instant::now();
    // While the chain waits on the silent subscriber, the publisher's other requests are
    // answered at once.
    let (pong_at, (result, done_at)) = tokio::join!(
        async {
            let d = within("silent delivery", silent.deliveries.recv())
                .await
                .expect("delivered");
            assert_eq!(d.topic, "agent:spawn");
            within("ping", publisher.app.ping()).await.expect("pong");
            let at = started.elapsed();
            drop(d); // never answered
            at
        },
        async {
            let r = publish(&publisher.app, "agent:spawn", json!({"id": 7})).await;
            (r, started.elapsed())
        }
    );
    assert_eq!(result.timeouts, Some(1));
    assert_eq!(result.delivered, Some(1), "the observer still got it");
    assert!(!result.stop_propagation);
    assert!(
        done_at >= timeout,
        "completed after the timeout: {done_at:?}"
    );
    assert!(pong_at < timeout, "ping answered mid-chain: {pong_at:?}");

    // The silent subscriber is still subscribed and times out again; nothing is wedged.
    let again = publish(&publisher.app, "agent:spawn", json!({"id": 8})).await;
    assert_eq!((again.timeouts, again.delivered), (Some(1), Some(1)));

    for c in [&silent.app, &observer.app, &publisher.app] {
        within("client shutdown", c.shutdown()).await;
    }
    within("shutdown", app.server.shutdown()).await;
}

#[tokio::test]
async fn a_subscriber_disconnecting_mid_delivery_is_skipped_at_once() {
    // The default 30 s delivery timeout: a result within the test's 10 s bound can only come
    // from the disconnect.
    let (app, mut events) = bus(BusConfig::default()).await;
    let url = app.url();
    let mut vanishing = Raw::connect(&url).await;
    vanishing
        .call(r#"{"jsonrpc":"2.0","method":"initialize","params":{"clientId":"vanishing"},"id":1}"#)
        .await;
    vanishing
        .call(r#"{"jsonrpc":"2.0","method":"subscribe","params":{"topic":"outbound:*"},"id":2}"#)
        .await;
    let observer = client(&url, "observer", false, &["outbound:*"]).await;
    let publisher = client(&url, "publisher", false, &[]).await;

    let (_, result) = tokio::join!(
        async {
            let d = vanishing.recv().await;
            assert_eq!(d["method"], "sendMessage");
            drop(vanishing); // no answer, no close frame: the socket just goes away
        },
        publish(&publisher.app, "outbound:chat-1", json!({"text": "bye"}))
    );
    assert_eq!(result.disconnected, Some(1));
    assert_eq!(result.timeouts, Some(0));
    assert_eq!(
        result.delivered,
        Some(1),
        "the observer got it after the skip"
    );
    let hop = next_bus_event(&mut events, |ev| match ev {
        BusEvent::Hop { outcome, .. } if outcome != HopOutcome::Continued => Some(outcome),
        _ => None,
    })
    .await;
    assert_eq!(hop, HopOutcome::Disconnected);

    for c in [&observer.app, &publisher.app] {
        within("client shutdown", c.shutdown()).await;
    }
    within("shutdown", app.server.shutdown()).await;
}

#[tokio::test]
async fn a_publisher_subscribed_to_its_own_topic_gets_its_own_message() {
    let (app, _events) = bus(BusConfig::default()).await;
    let url = app.url();

    // An interceptor that stops its own message: its publish waits on its own answer.
    let me = client(&url, "me", true, &["agent:*"]).await;
    let mut seen = answer_all(me.deliveries, true);
    let r = publish(&me.app, "agent:spawn", json!({"self": true})).await;
    assert!(r.stop_propagation);
    assert_eq!(r.delivered, Some(1));
    let (topic, payload) = within("own delivery", seen.recv()).await.expect("delivery");
    assert_eq!(
        (topic.as_str(), payload),
        ("agent:spawn", json!({"self": true}))
    );

    // A plain client (auto-answer) sees its own message too.
    let mut plain = client(&url, "plain", false, &["outbound:*"]).await;
    let r = publish(&plain.app, "outbound:x", json!({"n": 1})).await;
    assert_eq!((r.stop_propagation, r.delivered), (false, Some(1)));
    let d = within("own delivery", plain.deliveries.recv())
        .await
        .expect("delivery");
    assert!(!d.needs_answer());
    within("shutdown", app.server.shutdown()).await;

    // With deliver_to_publisher off, the publisher is left out of its own chain.
    let mut cfg = BusConfig::default();
    cfg.deliver_to_publisher = false;
    let (app, _events) = bus(cfg).await;
    let solo = client(&app.url(), "solo", true, &["agent:*"]).await;
    let r = publish(&solo.app, "agent:spawn", json!({})).await;
    assert_eq!(r.delivered, Some(0));
    for c in [&me.app, &plain.app, &solo.app] {
        within("client shutdown", c.shutdown()).await;
    }
    within("shutdown", app.server.shutdown()).await;
}

#[tokio::test]
async fn two_clients_publishing_to_each_other_at_once_both_complete() {
    let (app, _events) = bus(BusConfig::default()).await;
    let url = app.url();
    let a = client(&url, "a", true, &["agent:a"]).await;
    let b = client(&url, "b", true, &["agent:b"]).await;
    let _seen_by_a = answer_all(a.deliveries, false);
    let _seen_by_b = answer_all(b.deliveries, false);

    // Each client has 50 publishes to the other in flight while it answers the other's 50:
    // the reference bus deadlocks on the first pair.
    const EACH: u64 = 50;
    let from_a = publish_many(&a.app, "agent:b", EACH);
    let from_b = publish_many(&b.app, "agent:a", EACH);
    let (ra, rb) = within("cross publishes", async { tokio::join!(from_a, from_b) }).await;
    for r in ra.into_iter().chain(rb) {
        let r = r.expect("published");
        assert_eq!((r.delivered, r.timeouts), (Some(1), Some(0)));
    }
    a.app.shutdown().await;
    b.app.shutdown().await;
    within("shutdown", app.server.shutdown()).await;
}

#[tokio::test]
async fn an_interceptor_may_publish_and_await_before_it_answers() {
    let (app, _events) = bus(BusConfig::default()).await;
    let url = app.url();
    let a = client(&url, "a", true, &["agent:a"]).await;
    let b = client(&url, "b", true, &["agent:b"]).await;
    let (a_app, b_app) = (Arc::new(a.app), Arc::new(b.app));

    // Each interceptor answers a request only after publishing a reply to the other one and
    // receiving its result, while requests to it keep arriving.
    for (mut rx, me, other) in [
        (a.deliveries, a_app.clone(), "agent:b"),
        (b.deliveries, b_app.clone(), "agent:a"),
    ] {
        tokio::spawn(async move {
            while let Some(d) = rx.recv().await {
                let payload = d.payload_value();
                if payload["reply"] == true {
                    d.answer(false).await;
                    continue;
                }
                // In its own task, so this interceptor keeps taking deliveries (the reply to
                // its own request among them).
                let me = me.clone();
                let other = other.to_owned();
                tokio::spawn(async move {
                    let r = me
                        .publish(&other, &json!({"reply": true, "to": payload["n"]}))
                        .await;
                    d.answer(r.is_err()).await;
                });
            }
        });
    }

    // Fewer than `max_in_flight_per_subscriber` (8) each: the replies need a free slot in
    // the window of a subscriber whose in-flight requests wait for them.
    const EACH: u64 = 4;
    let from_a = publish_many(&a_app, "agent:b", EACH);
    let from_b = publish_many(&b_app, "agent:a", EACH);
    let (ra, rb) = within("nested publishes", async { tokio::join!(from_a, from_b) }).await;
    for r in ra.into_iter().chain(rb) {
        let r = r.expect("published");
        assert_eq!(
            (r.delivered, r.stop_propagation, r.timeouts),
            (Some(1), false, Some(0))
        );
    }
    a_app.shutdown().await;
    b_app.shutdown().await;
    within("shutdown", app.server.shutdown()).await;
}

#[tokio::test]
async fn a_client_closed_by_the_bus_reconnects_reinitializes_and_resubscribes() {
    let (app, mut events) = bus(BusConfig::default()).await;
    let url = app.url();
    let mut c = client(&url, "comeback", false, &["inbound:*", "agent:*"]).await;
    let first = conn_of(&mut events, "comeback").await;
    let publisher = client(&url, "publisher", false, &[]).await;

    assert!(app.close(first, CloseCode::GOING_AWAY, "maintenance").await);
    next_client_event(&mut c.events, |ev| {
        matches!(ev, ClientEvent::Disconnected).then_some(())
    })
    .await;
    // Every connect re-initializes...
    next_client_event(&mut c.events, |ev| {
        matches!(ev, ClientEvent::Initialized(_)).then_some(())
    })
    .await;
    let second = conn_of(&mut events, "comeback").await;
    assert_ne!(first, second);
    // ...and restores the subscriptions, in order.
    let mut restored = Vec::new();
    while restored.len() < 2 {
        restored.push(
            next_bus_event(&mut events, |ev| match ev {
                BusEvent::Subscribed { conn, topic, .. } if conn == second => Some(topic),
                _ => None,
            })
            .await,
        );
    }
    assert_eq!(restored, ["inbound:*", "agent:*"]);
    let subs = within(
        "subs",
        app.handle.call(move |b, _| {
            b.subscriptions(second)
                .into_iter()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        }),
    )
    .await
    .expect("bus running");
    assert_eq!(subs, ["inbound:*", "agent:*"]);

    let r = publish(&publisher.app, "agent:spawn", json!({"after": "reconnect"})).await;
    assert_eq!(r.delivered, Some(1));
    let d = within("delivery", c.deliveries.recv())
        .await
        .expect("delivery");
    assert_eq!(d.payload_value(), json!({"after": "reconnect"}));

    for c in [&c.app, &publisher.app] {
        within("client shutdown", c.shutdown()).await;
    }
    within("shutdown", app.server.shutdown()).await;
}

#[tokio::test]
async fn a_client_survives_a_bus_restart_on_the_same_port() {
    let (app, _events) = bus(BusConfig::default().with_server_id("bus-old")).await;
    let addr = app.local_addr().to_string();
    let url = app.url();
    let mut c = client(&url, "survivor", false, &["outbound:*"]).await;
    within("shutdown", app.server.shutdown()).await;
    next_client_event(&mut c.events, |ev| {
        matches!(ev, ClientEvent::Disconnected).then_some(())
    })
    .await;

    let (app, mut events) = bus_on(&addr, BusConfig::default().with_server_id("bus-new")).await;
    let init = next_client_event(&mut c.events, |ev| match ev {
        ClientEvent::Initialized(init) => Some(init),
        _ => None,
    })
    .await;
    assert_eq!(init.server_id, "bus-new");
    let conn = conn_of(&mut events, "survivor").await;
    let topic = next_bus_event(&mut events, |ev| match ev {
        BusEvent::Subscribed { conn: c, topic, .. } if c == conn => Some(topic),
        _ => None,
    })
    .await;
    assert_eq!(topic, "outbound:*");

    let r = within(
        "bus publish",
        app.publish("outbound:chat-9", &json!({"text": "hi"})),
    )
    .await
    .expect("published");
    assert_eq!(r.delivered, Some(1));
    let d = within("delivery", c.deliveries.recv())
        .await
        .expect("delivery");
    assert_eq!(
        (d.topic.as_str(), d.payload_value()),
        ("outbound:chat-9", json!({"text": "hi"}))
    );
    within("client shutdown", c.app.shutdown()).await;
    within("shutdown", app.server.shutdown()).await;
}

#[tokio::test]
async fn prefix_patterns_match_only_in_prefix_mode() {
    for (mode, expected) in [(MatchMode::Glob, 0), (MatchMode::GlobOrPrefix, 1)] {
        let (app, _events) = bus(BusConfig::default().with_match_mode(mode)).await;
        let url = app.url();
        let sub = client(&url, "sub", false, &["inbound:chat-"]).await;
        let publisher = client(&url, "pub", false, &[]).await;
        let r = publish(&publisher.app, "inbound:chat-1", json!({})).await;
        assert_eq!(r.delivered, Some(expected), "{mode:?}");
        let exact = publish(&publisher.app, "inbound:chat-", json!({})).await;
        assert_eq!(
            exact.delivered,
            Some(1),
            "{mode:?}: an exact topic always matches"
        );
        for c in [&sub.app, &publisher.app] {
            within("client shutdown", c.shutdown()).await;
        }
        within("shutdown", app.server.shutdown()).await;
    }
}

/// The issue's burst over real sockets: one raw publisher writes 8,000 notifications as fast
/// as TCP takes them, ten subscribers get every one, in order; the bus paused the publisher
/// (its reader stopped, TCP pushed back) instead of queueing or dropping, so at most
/// `max_backlog_per_publisher` deliveries were ever in flight.
#[tokio::test]
async fn an_unpaced_burst_reaches_every_subscriber_in_full_over_the_wire() {
    const MESSAGES: u64 = 8_000;
    const SUBSCRIBERS: usize = 10;
    let (app, _events) = bus(BusConfig::default()).await;
    let url = app.url();
    let mut subscribers = Vec::new();
    for i in 0..SUBSCRIBERS {
        subscribers.push(client(&url, &format!("sub-{i}"), false, &["inbound:*"]).await);
    }
    let mut publisher = Raw::connect(&url).await;
    let init = publisher
        .call(r#"{"jsonrpc":"2.0","method":"initialize","params":{"clientId":"burst"},"id":0}"#)
        .await;
    assert!(init["result"]["serverId"].is_string(), "{init}");
    let writer = tokio::spawn(async move {
        for n in 0..MESSAGES {
            let text = format!(
                r#"{{"jsonrpc":"2.0","method":"sendMessage","params":{{"topic":"inbound:burst","payload":{{"n":{n}}}}}}}"#
            );
            publisher.ws.feed(Message::text(text)).await.expect("feed");
        }
        publisher.ws.flush().await.expect("flush");
        publisher
    });
    // Every subscriber's deliveries, in order (bounded: the whole burst, not a timing).
    for (i, s) in subscribers.iter_mut().enumerate() {
        let mut next = 0u64;
        tokio::time::timeout(Duration::from_secs(300), async {
            while next < MESSAGES {
                match s.events.recv().await.expect("client running") {
                    ClientEvent::Delivery { topic, payload, .. } if topic == "inbound:burst" => {
                        let v: Value = serde_json::from_str(payload.get()).expect("json");
                        assert_eq!(v["n"], next, "subscriber {i}: out of order");
                        next += 1;
                    }
                    _ => {}
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("subscriber {i} got {next} of {MESSAGES}"));
    }
    let publisher = within("writer", writer).await.expect("writer");
    let stats = app
        .handle
        .call(|b, _| b.stats())
        .await
        .expect("bus running");
    assert_eq!(stats.publishes, MESSAGES);
    assert_eq!(stats.dropped_subscriber_overloaded, 0, "{stats:?}");
    assert_eq!(stats.dropped_publisher_overloaded, 0, "{stats:?}");
    assert!(stats.pauses > 0, "the publisher was paused: {stats:?}");
    let backlog = agentwire::jsonrpc_bus::Limits::default().max_backlog_per_publisher;
    assert!(stats.peak_deliveries <= backlog, "{stats:?}");
    publisher.close().await;
    for s in subscribers {
        within("client shutdown", s.app.shutdown()).await;
    }
    within("shutdown", app.server.shutdown()).await;
}

/// The reference's object-only payloads: a list is -32602 over the wire, and a 100,000-deep
/// payload is refused, never forwarded (it killed Python subscribers).
#[tokio::test]
async fn non_object_and_too_deep_payloads_are_refused_over_the_wire() {
    let (app, _events) = bus(BusConfig::default()).await;
    let url = app.url();
    let mut sub = client(&url, "sub", false, &["inbound:*"]).await;
    let mut peer = Raw::connect(&url).await;
    peer.call(r#"{"jsonrpc":"2.0","method":"initialize","params":{},"id":0}"#)
        .await;
    let list = peer
        .call(r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"inbound:x","payload":[1,"two",null]},"id":1}"#)
        .await;
    assert_eq!(error_code(&list), -32602, "{list}");
    assert_eq!(
        list["error"]["message"],
        "Invalid params: payload must be a JSON object"
    );
    let deep = format!(
        r#"{{"jsonrpc":"2.0","method":"sendMessage","params":{{"topic":"inbound:x","payload":{{"a":{}{}}}}},"id":2}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let r = peer.call(&deep).await;
    assert_eq!(error_code(&r), -32005, "{r}");
    assert_eq!(r["error"]["data"], "max_payload_depth");
    // The subscriber got nothing of either; the next good publish reaches it.
    let ok = peer
        .call(r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"inbound:x","payload":{"fine":true}},"id":3}"#)
        .await;
    assert_eq!(ok["result"]["delivered"], 1, "{ok}");
    let d = within("delivery", sub.deliveries.recv())
        .await
        .expect("delivery");
    assert_eq!(d.payload_value(), json!({"fine": true}));
    peer.close().await;
    within("client shutdown", sub.app.shutdown()).await;
    within("shutdown", app.server.shutdown()).await;
}

#[tokio::test]
async fn python_client_interop() {
    let Some(python) = interop::peer_from_env("AGENTWIRE_PYTHON", "python_client_interop") else {
        return;
    };
    let (app, _events) = bus(BusConfig::default()).await;
    let url = app.url();
    interop::run_peer(
        "python client",
        python,
        "bus_client.py",
        url,
        Vec::new(),
        "python interop ok",
    )
    .await;
    within("shutdown", app.server.shutdown()).await;
}

/// The example client never drops a delivery silently: one the application has no room for
/// is counted (and logged), here the ones past its queue of `DELIVERY_QUEUE` that nobody reads.
#[tokio::test]
async fn deliveries_the_application_has_no_room_for_are_counted() {
    const EXTRA: u64 = 5;
    let total = DELIVERY_QUEUE as u64 + EXTRA;
    let (app, _events) = bus(BusConfig::default()).await;
    let url = app.url();
    // Nobody reads this subscriber's deliveries; its events are read below.
    let mut sub = client(&url, "unread", false, &["inbound:*"]).await;
    let mut publisher = Raw::connect(&url).await;
    publisher
        .call(r#"{"jsonrpc":"2.0","method":"initialize","params":{"clientId":"p"},"id":0}"#)
        .await;
    for n in 0..total {
        let text = format!(
            r#"{{"jsonrpc":"2.0","method":"sendMessage","params":{{"topic":"inbound:x","payload":{{"n":{n}}}}}}}"#
        );
        publisher.ws.feed(Message::text(text)).await.expect("feed");
    }
    publisher.ws.flush().await.expect("flush");
    let mut seen = 0u64;
    within("every delivery", async {
        while seen < total {
            if let ClientEvent::Delivery { .. } = sub.events.recv().await.expect("client running") {
                seen += 1;
            }
        }
    })
    .await;
    // The event task counts a drop right after it sees the delivery: await the count.
    within("the drops counted", async {
        while sub.app.dropped_deliveries() < EXTRA {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert_eq!(sub.app.dropped_deliveries(), EXTRA);
    assert_eq!(sub.deliveries.len(), DELIVERY_QUEUE);
    publisher.close().await;
    within("client shutdown", sub.app.shutdown()).await;
    within("shutdown", app.server.shutdown()).await;
}

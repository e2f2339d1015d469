//! `BusClient` requests against the `Bus`, in simulated time: publish through an observer
//! and an interceptor, ping and unsubscribe, request and delivery timeouts, and unknown methods
//! answered with -32601.

mod common;

use std::time::Duration;

use agentwire_core::{Machine, PeerInfo, SequentialIds};
use common::client::*;
use jsonrpc_bus_proto::{BusClient, BusConfig, BusEvent, ClientConfig, ClientEvent, RequestError};
use serde_json::json;

#[test]
fn publish_through_an_observer_and_an_interceptor() {
    let mut sim = sim_with(BusConfig::default());
    let logger = client(&mut sim, ClientConfig::new("logger"), 100);
    let auth = client(&mut sim, ClientConfig::new("auth").intercepting(), 200);
    let publisher = client(&mut sim, ClientConfig::new("pub"), 300);
    subscribe(&mut sim, logger, "inbound:*");
    subscribe(&mut sim, auth, "inbound:*");

    let req = sim
        .call_client(publisher, |c, now| {
            c.publish("inbound:chat-1", &json!({"text":"hello"}), now)
        })
        .unwrap();
    sim.settle();
    // The logger saw it and answered at once; the interceptor holds it.
    let seen = sim.take_client_events(logger);
    assert!(
        matches!(&seen[..], [ClientEvent::Delivery { topic, payload, answered: true, .. }]
        if topic == "inbound:chat-1" && payload.get() == r#"{"text":"hello"}"#),
        "{seen:?}"
    );
    let held = sim.take_client_events(auth);
    let [ClientEvent::Delivery {
        id,
        answered: false,
        ..
    }] = held[..]
    else {
        panic!("{held:?}")
    };
    assert!(sim.take_client_events(publisher).is_empty());
    sim.call_client(auth, |c, _| c.answer(id, true)).unwrap();
    sim.settle();
    let done = sim.take_client_events(publisher);
    let [ClientEvent::Published { request, result }] = &done[..] else {
        panic!("{done:?}")
    };
    assert_eq!(*request, req);
    assert!(result.stop_propagation);
    assert_eq!(result.delivered, Some(2));
    // Answering twice is a caller error, not a wire message.
    assert!(sim.call_client(auth, |c, _| c.answer(id, false)).is_err());
}

#[test]
fn ping_answers_with_the_bus_time_and_unsubscribe_forgets_the_pattern() {
    let mut sim = sim_with(BusConfig::default());
    let c = client(&mut sim, ClientConfig::new("c"), 100);
    let id = sim.call_client(c, |m, now| m.ping(now)).unwrap();
    sim.settle();
    let events = sim.take_client_events(c);
    assert!(
        matches!(&events[..], [ClientEvent::Pong { request, timestamp }]
        if *request == id && timestamp.starts_with("2025-02-14T12:00:00")),
        "{events:?}"
    );
    subscribe(&mut sim, c, "a:*");
    let id = sim
        .call_client(c, |m, now| m.unsubscribe("a:*", now))
        .unwrap();
    sim.settle();
    let events = sim.take_client_events(c);
    assert!(
        matches!(&events[..], [ClientEvent::Unsubscribed { request, topic }] if *request == id && topic == "a:*")
    );
    assert!(sim.client(c).subscriptions().is_empty());
    assert!(sim
        .call_client(c, |m, now| m.unsubscribe("a:*", now))
        .is_err());
}

#[test]
fn requests_time_out() {
    let mut sim = sim_with(BusConfig::default());
    let holder = client(&mut sim, ClientConfig::new("h").intercepting(), 100);
    subscribe(&mut sim, holder, "t");
    let p = client(
        &mut sim,
        ClientConfig::new("p").with_request_timeout(Duration::from_secs(5)),
        200,
    );
    let id = sim
        .call_client(p, |c, now| c.publish("t", &json!({"n": 1}), now))
        .unwrap();
    sim.run_for(Duration::from_secs(6));
    let events = sim.take_client_events(p);
    assert!(events.iter().any(|e| matches!(e, ClientEvent::RequestFailed { request, error: RequestError::TimedOut, .. } if *request == id)), "{events:?}");
}

#[test]
fn a_silent_interceptor_never_hangs_the_publisher() {
    let mut sim = sim_with(BusConfig::default().with_delivery_timeout(Duration::from_secs(2)));
    let silent = client(&mut sim, ClientConfig::new("silent").intercepting(), 100);
    let after = client(&mut sim, ClientConfig::new("after"), 200);
    subscribe(&mut sim, silent, "t");
    subscribe(&mut sim, after, "t");
    let p = client(&mut sim, ClientConfig::new("p"), 300);
    sim.call_client(p, |c, now| c.publish("t", &json!({"n": 1}), now))
        .unwrap();
    sim.run_for(Duration::from_secs(3));
    let events = sim.take_client_events(p);
    let [ClientEvent::Published { result, .. }] = &events[..] else {
        panic!("{events:?}")
    };
    assert_eq!((result.timeouts, result.delivered), (Some(1), Some(1)));
    assert!(sim
        .take_server_events()
        .iter()
        .any(|e| matches!(e, BusEvent::Completed { .. })));
}

#[test]
fn the_client_answers_unknown_methods_with_32601() {
    let mut sim = sim_with(BusConfig::default());
    let c = client(&mut sim, ClientConfig::new("c"), 100);
    // Drive the client machine directly with a frame a bus would not send.
    let conn = agentwire_core::ConnId::new(999);
    let mut m = BusClient::new(ClientConfig::new("x"), SequentialIds::new(1));
    let now = sim.now();
    m.handle_connect(conn, &PeerInfo::new(None), now);
    while m.poll_output().is_some() {}
    m.handle_frame(
        conn,
        agentwire_core::Frame::Text(r#"{"jsonrpc":"2.0","method":"reboot","id":"z"}"#),
        now,
    );
    let mut replies = Vec::new();
    while let Some(out) = m.poll_output() {
        if let agentwire_core::Output::Send { frame, .. } = out {
            replies.push(serde_json::from_slice::<serde_json::Value>(frame.as_bytes()).unwrap());
        }
    }
    assert_eq!(replies[0]["error"]["code"], -32601);
    assert_eq!(replies[0]["id"], "z");
    let _ = c;
}

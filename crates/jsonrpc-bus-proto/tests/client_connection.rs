//! `BusClient` across its connection's life, in simulated time: commands queued until the
//! connection is ready, re-initialization and resubscription after a reconnect, and publishes
//! in flight failed on disconnect and not sent again.

mod common;

use agentwire_core::SequentialIds;
use common::client::*;
use jsonrpc_bus_proto::{
    BusClient, BusConfig, ClientConfig, ClientEvent, RequestError, RequestKind,
};
use serde_json::json;

#[test]
fn commands_before_the_connection_is_ready_are_queued() {
    let mut sim = sim_with(BusConfig::default());
    let idx = sim.add_client(BusClient::new(
        ClientConfig::new("early"),
        SequentialIds::new(5),
    ));
    let sub = sim
        .call_client(idx, |c, now| c.subscribe("t", now))
        .unwrap();
    let ping = sim.call_client(idx, |c, now| c.ping(now)).unwrap();
    sim.connect(idx);
    sim.settle();
    let events = sim.take_client_events(idx);
    assert!(matches!(events[0], ClientEvent::Initialized(_)));
    assert!(events
        .iter()
        .any(|e| matches!(e, ClientEvent::Subscribed { request, .. } if *request == sub)));
    assert!(events
        .iter()
        .any(|e| matches!(e, ClientEvent::Pong { request, .. } if *request == ping)));
}

#[test]
fn reconnect_reinitializes_and_resubscribes() {
    let mut sim = sim_with(BusConfig::default());
    let sub = client(&mut sim, ClientConfig::new("sub"), 100);
    subscribe(&mut sim, sub, "agent:*");
    subscribe(&mut sim, sub, "inbound:*");
    let old = sim.server_conn_of(sub).unwrap();
    sim.disconnect(sub);
    assert!(sim
        .take_client_events(sub)
        .contains(&ClientEvent::Disconnected));
    assert!(sim.server().subscriptions(old).is_empty());
    sim.connect(sub);
    sim.settle();
    let new = sim.server_conn_of(sub).unwrap();
    assert_ne!(old, new);
    assert_eq!(
        sim.server().subscriptions(new),
        vec!["agent:*", "inbound:*"]
    );
    let events = sim.take_client_events(sub);
    assert!(
        matches!(events[0], ClientEvent::Initialized(_)),
        "{events:?}"
    );
    // And deliveries flow again.
    let p = client(&mut sim, ClientConfig::new("p"), 200);
    sim.call_client(p, |c, now| c.publish("agent:spawn", &json!({"n": 1}), now))
        .unwrap();
    sim.settle();
    assert!(sim
        .take_client_events(sub)
        .iter()
        .any(|e| matches!(e, ClientEvent::Delivery { topic, .. } if topic == "agent:spawn")));
}

#[test]
fn a_publish_in_flight_fails_on_disconnect_and_is_not_resent() {
    let mut sim = sim_with(BusConfig::default());
    let holder = client(&mut sim, ClientConfig::new("h").intercepting(), 100);
    subscribe(&mut sim, holder, "t");
    let p = client(&mut sim, ClientConfig::new("p"), 200);
    let id = sim
        .call_client(p, |c, now| c.publish("t", &json!({"n": 1}), now))
        .unwrap();
    sim.settle();
    sim.disconnect(p);
    let events = sim.take_client_events(p);
    assert!(events.iter().any(|e| matches!(e, ClientEvent::RequestFailed { request, kind: RequestKind::Publish(_), error: RequestError::Disconnected } if *request == id)), "{events:?}");
    sim.connect(p);
    sim.settle();
    assert_eq!(
        sim.client(holder).unanswered(),
        1,
        "delivered once, not twice"
    );
}

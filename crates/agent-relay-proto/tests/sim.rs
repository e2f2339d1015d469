//! The relay under the shared `sim` harness: raw host and agent peers over links with
//! latency, simulated time, and a livelock bound.

use std::time::{Duration, Instant};

use agent_relay_proto::{Relay, RelayConfig, RelayEvent, ENDPOINT_PATH};
use agentwire_core::sim::{Sim, SimConfig};
use agentwire_core::{
    CloseCode, ConnId, Frame, FrameBuf, Machine, Output, PeerInfo, SequentialIds,
};
use serde_json::{json, Value};

/// No client machine is needed: every peer here is a raw one driven by the test.
struct NoClient;

impl Machine for NoClient {
    type Event = ();
    fn handle_connect(&mut self, _: ConnId, _: &PeerInfo, _: Instant) {}
    fn handle_frame(&mut self, _: ConnId, _: Frame<'_>, _: Instant) {}
    fn handle_disconnect(&mut self, _: ConnId, _: Instant) {}
    fn handle_timeout(&mut self, _: Instant) {}
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn poll_output(&mut self) -> Option<Output<()>> {
        None
    }
}

#[allow(clippy::disallowed_methods)] // the one base time of a test
fn t0() -> Instant {
    Instant::now()
}

fn frames(sim: &mut Sim<Relay, NoClient>, peer: usize) -> Vec<Value> {
    sim.raw_take(peer)
        .iter()
        .map(|f| serde_json::from_slice(f.as_bytes()).unwrap())
        .collect()
}

fn send(sim: &mut Sim<Relay, NoClient>, peer: usize, v: Value) {
    sim.raw_send(peer, FrameBuf::text(v.to_string()));
}

#[test]
fn a_request_and_its_reply_cross_the_relay_over_links_with_latency() {
    let start = t0();
    let cfg = SimConfig::default().with_latency(Duration::from_millis(20));
    let relay = Relay::new(RelayConfig::default(), SequentialIds::new(0), start, 0);
    let mut sim: Sim<Relay, NoClient> = Sim::new(relay, start, cfg);
    let peer = PeerInfo::new(None).with_path(ENDPOINT_PATH);
    let host = sim.connect_raw(peer.clone());
    let agent = sim.connect_raw(peer);
    send(
        &mut sim,
        host,
        json!({"v":"mvp-0.2","type":"relay.join","id":"h","payload":{"role":"host"}}),
    );
    send(
        &mut sim,
        agent,
        json!({"v":"mvp-0.2","type":"relay.join","id":"a","payload":{"role":"agent"}}),
    );
    sim.settle();
    let types = |v: &[Value]| {
        v.iter()
            .map(|m| m["type"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        types(&frames(&mut sim, agent)),
        ["relay.hello", "relay.joined"]
    );
    assert_eq!(
        types(&frames(&mut sim, host)),
        [
            "relay.hello",
            "relay.joined",
            "relay.presence",
            "relay.presence"
        ]
    );

    let sent_at = sim.now();
    send(
        &mut sim,
        agent,
        json!({"v":"mvp-0.2","type":"snapshot.get","id":"req-002","payload":{}}),
    );
    sim.settle();
    let got = frames(&mut sim, host);
    assert_eq!(got[0]["id"], "req-002");
    send(
        &mut sim,
        host,
        json!({"v":"mvp-0.2","type":"snapshot.state","replyTo":"req-002",
        "payload":{"sessionId":"s","uiSpec":{},"messageHistory":[],"toolSchema":[]}}),
    );
    sim.settle();
    let got = frames(&mut sim, agent);
    assert_eq!(got[0]["replyTo"], "req-002");
    // Four one-way hops of 20 ms each.
    assert_eq!(sim.now() - sent_at, Duration::from_millis(80));
    let events = sim.take_server_events();
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, RelayEvent::Forwarded { .. }))
            .count(),
        2
    );
}

#[test]
fn an_idle_connection_is_closed_at_its_join_deadline_in_simulated_time() {
    let start = t0();
    let relay = Relay::new(RelayConfig::default(), SequentialIds::new(0), start, 0);
    let mut sim: Sim<Relay, NoClient> = Sim::new(relay, start, SimConfig::default());
    let idle = sim.connect_raw(PeerInfo::new(None).with_path(ENDPOINT_PATH));
    let wrong = sim.connect_raw(PeerInfo::new(None).with_path("/ws"));
    sim.settle();
    assert_eq!(
        sim.raw_closed(wrong),
        Some((CloseCode::POLICY, "unknown-path"))
    );
    sim.run_for(Duration::from_secs(29));
    assert!(sim.raw_is_open(idle));
    sim.run_for(Duration::from_secs(2));
    assert_eq!(
        sim.raw_closed(idle),
        Some((CloseCode::POLICY, "join-required"))
    );
    assert_eq!(
        sim.server().connection_count(),
        0,
        "the sim reported the disconnect"
    );
}

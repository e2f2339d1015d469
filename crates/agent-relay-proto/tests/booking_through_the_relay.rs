//! A Host and a raw agent through a Relay under the shared `sim` harness: a whole booking,
//! and a host reconnect that keeps the study session.

mod common;

use std::time::Duration;

use agent_relay_proto::{
    study_log_path, texts, Host, HostConfig, HostEvent, Relay, RelayConfig, RelayEvent,
    ENDPOINT_PATH,
};
use agentwire_core::sim::{Sim, SimConfig};
use agentwire_core::{FrameBuf, PeerInfo, SequentialIds};
use serde_json::{json, Value};

use common::host::*;
use common::{error_of, t0, UNIX_MS};

type RelaySim = Sim<Relay, Host<Booking>>;

fn relay_sim(latency: Duration) -> (RelaySim, usize, usize) {
    let start = t0();
    let relay = Relay::new(
        RelayConfig::default().with_hello(true),
        SequentialIds::new(0),
        start,
        UNIX_MS,
    );
    let mut sim: RelaySim = Sim::new(relay, start, SimConfig::default().with_latency(latency));
    let host = sim.add_client(Host::new(
        HostConfig::default(),
        Booking::new(),
        start,
        UNIX_MS,
    ));
    let peer = PeerInfo::new(None).with_path(ENDPOINT_PATH);
    sim.connect_with(host, peer.clone());
    let agent = sim.connect_raw(peer);
    agent_send(
        &mut sim,
        agent,
        json!({"v":"mvp-0.2","type":"relay.join","id":"join-001","payload":{"role":"agent","sessionId":"default"}}),
    );
    sim.settle();
    assert!(sim.client(host).is_joined());
    let got = agent_take(&mut sim, agent);
    assert_eq!(got.last().unwrap()["type"], "relay.joined");
    (sim, host, agent)
}

fn agent_send(sim: &mut RelaySim, agent: usize, v: Value) {
    sim.raw_send(agent, FrameBuf::text(v.to_string()));
}

fn agent_take(sim: &mut RelaySim, agent: usize) -> Vec<Value> {
    sim.raw_take(agent)
        .iter()
        .map(|f| serde_json::from_slice(f.as_bytes()).unwrap())
        .collect()
}

fn ask(sim: &mut RelaySim, agent: usize, t: &str, id: &str, payload: Value) -> Vec<Value> {
    agent_send(
        sim,
        agent,
        json!({"v":"mvp-0.2","type":t,"id":id,"payload":payload}),
    );
    sim.settle();
    agent_take(sim, agent)
}

#[test]
fn an_agent_books_through_the_relay_with_a_real_host() {
    let (mut sim, host, agent) = relay_sim(Duration::from_millis(5));
    let got = ask(
        &mut sim,
        agent,
        "session.start",
        "req-001",
        json!({"studyId":"pilot-01","participantId":"P07"}),
    );
    assert_eq!(got, [fixture("session_started")]);

    let got = ask(&mut sim, agent, "snapshot.get", "req-002", json!({}));
    assert_eq!(got[0]["payload"]["toolSchema"][0]["name"], "select");

    let got = ask(
        &mut sim,
        agent,
        "tool.call",
        "req-003",
        json!({"toolName":"select",
        "params":{"itemId":"m1"},"reason":"Pick the first available movie option to continue the flow."}),
    );
    let types: Vec<&str> = got.iter().map(|v| v["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["tool.result", "state.updated"]);
    assert_eq!(got[0]["replyTo"], "req-003");

    let got = ask(
        &mut sim,
        agent,
        "tool.call",
        "req-004",
        json!({"toolName":"select",
        "params":{"itemId":7},"reason":"r"}),
    );
    assert_eq!(
        error_of(&got[0]),
        err(
            "INVALID_PARAMS",
            "select requires itemId to be a string",
            "req-004"
        )
    );

    sim.call_client(host, |h, now| {
        h.user_message("I prefer evening showtimes.", now)
    })
    .unwrap();
    sim.settle();
    let got = agent_take(&mut sim, agent);
    assert_eq!(got[0]["type"], "user.message");
    assert_eq!(got[0]["payload"]["stage"], "movie");

    let got = ask(
        &mut sim,
        agent,
        "session.end",
        "req-999",
        json!({"reason":"study-complete"}),
    );
    assert!(got.is_empty(), "the host waits for the flush");
    let ticket = sim
        .take_client_events(host)
        .into_iter()
        .find_map(|e| match e {
            HostEvent::SessionEnding { ticket, .. } => Some(ticket),
            _ => None,
        })
        .unwrap();
    // The relay logged the request before the host saw it: the flush covers it. Every
    // record since session.started carries the study session's id (spec §6).
    let records: Vec<_> = sim
        .take_server_events()
        .into_iter()
        .filter_map(|e| match e {
            RelayEvent::Log(r) => Some(r),
            _ => None,
        })
        .collect();
    let since_start: Vec<_> = records
        .iter()
        .skip_while(|r| r.msg_type != "session.started")
        .collect();
    assert!(since_start.len() > 10, "{records:?}");
    assert!(since_start
        .iter()
        .all(|r| r.session_id == "s-20260213-001" && r.relay_session == "default"));
    assert!(records
        .iter()
        .take_while(|r| r.msg_type != "session.started")
        .all(|r| r.session_id == "default"));
    let logs: Vec<String> = records.iter().map(|r| r.msg_type.to_owned()).collect();
    assert!(
        logs.ends_with(&["session.end".to_owned(), "session.end".to_owned()]),
        "{logs:?}"
    );
    sim.call_client(host, |h, now| {
        h.confirm_flush(ticket, &study_log_path("s-20260213-001"), now)
    })
    .unwrap();
    sim.settle();
    let got = agent_take(&mut sim, agent);
    assert_eq!(got[0], fixture("session_ended"));
    assert_eq!(got[1]["payload"]["source"], "reset");
}

#[test]
fn a_host_reconnect_through_the_relay_keeps_the_session() {
    let (mut sim, host, agent) = relay_sim(Duration::from_millis(5));
    ask(
        &mut sim,
        agent,
        "session.start",
        "req-001",
        json!({"studyId":"pilot-01","participantId":"P07"}),
    );
    ask(
        &mut sim,
        agent,
        "tool.call",
        "t1",
        json!({"toolName":"next","params":{},"reason":"go"}),
    );

    // The host drops with the agent's request in flight: the relay fails it.
    agent_send(
        &mut sim,
        agent,
        json!({"v":"mvp-0.2","type":"snapshot.get","id":"lost","payload":{}}),
    );
    sim.run_for(Duration::from_millis(5)); // delivered to the relay, not yet to the host
    sim.disconnect(host);
    sim.settle();
    let got = agent_take(&mut sim, agent);
    assert_eq!(
        error_of(&got[0]),
        err("SESSION_NOT_ACTIVE", texts::HOST_GONE, "lost")
    );
    let got = ask(&mut sim, agent, "snapshot.get", "none", json!({}));
    assert_eq!(error_of(&got[0]).1, texts::NO_HOST);

    sim.connect_with(host, PeerInfo::new(None).with_path(ENDPOINT_PATH));
    sim.settle();
    assert!(sim.client(host).is_joined());
    // A retried session.start is the same session; the state is where it was.
    let got = ask(
        &mut sim,
        agent,
        "session.start",
        "req-001b",
        json!({"studyId":"pilot-01","participantId":"P07"}),
    );
    assert_eq!(got[0]["payload"]["sessionId"], "s-20260213-001");
    let got = ask(&mut sim, agent, "snapshot.get", "again", json!({}));
    assert_eq!(got[0]["payload"]["uiSpec"]["stage"], "theater");
}

#[test]
fn an_agent_polling_snapshots_from_its_join_gets_them_before_session_start() {
    let (mut sim, _host, agent) = relay_sim(Duration::from_millis(5));
    // The reference agent polls every 2 s from the moment it joins.
    for n in 0..3 {
        let got = ask(
            &mut sim,
            agent,
            "snapshot.get",
            &format!("poll-{n}"),
            json!({}),
        );
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0]["type"], "snapshot.state", "{got:?}");
        assert_eq!(got[0]["replyTo"], format!("poll-{n}").as_str());
        assert_eq!(got[0]["payload"]["sessionId"], "default");
        assert_eq!(got[0]["payload"]["uiSpec"]["stage"], "movie");
        sim.run_for(Duration::from_secs(2));
    }
    // The other requests keep the session gate.
    let got = ask(
        &mut sim,
        agent,
        "tool.call",
        "t-0",
        json!({"toolName":"next","params":{},"reason":"go"}),
    );
    assert_eq!(
        error_of(&got[0]),
        err(
            "SESSION_NOT_ACTIVE",
            agent_relay_proto::host_texts::NO_SESSION,
            "t-0"
        )
    );
    let got = ask(
        &mut sim,
        agent,
        "session.start",
        "req-001",
        json!({"studyId":"pilot-01","participantId":"P07"}),
    );
    assert_eq!(got, [fixture("session_started")]);
    let got = ask(&mut sim, agent, "snapshot.get", "poll-3", json!({}));
    assert_eq!(got[0]["payload"]["sessionId"], "s-20260213-001");
}

/// Connects and joins one more raw agent to `sim`'s default session.
fn add_agent(sim: &mut RelaySim) -> usize {
    let agent = sim.connect_raw(PeerInfo::new(None).with_path(ENDPOINT_PATH));
    agent_send(
        sim,
        agent,
        json!({"v":"mvp-0.2","type":"relay.join","id":"join-b","payload":{"role":"agent"}}),
    );
    sim.settle();
    let got = agent_take(sim, agent);
    assert_eq!(got.last().unwrap()["type"], "relay.joined");
    agent
}

#[test]
fn requests_without_id_are_answered_to_their_sender_only() {
    let (mut sim, _host, a) = relay_sim(Duration::from_millis(5));
    let b = add_agent(&mut sim);
    let no_id = |t: &str, payload: Value| json!({"v":"mvp-0.2","type":t,"payload":payload});

    agent_send(&mut sim, a, no_id("snapshot.get", json!({})));
    sim.settle();
    let got = agent_take(&mut sim, a);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["type"], "snapshot.state");
    assert!(got[0].get("replyTo").is_none(), "{}", got[0]);
    assert!(
        agent_take(&mut sim, b).is_empty(),
        "b never gets a's snapshot"
    );

    // The host's refusal of a's id-less tool call reaches a only.
    let call = json!({"toolName":"next","params":{},"reason":"r"});
    agent_send(&mut sim, a, no_id("tool.call", call.clone()));
    sim.settle();
    let got = agent_take(&mut sim, a);
    assert_eq!(error_of(&got[0]).0, "SESSION_NOT_ACTIVE");
    assert_eq!(error_of(&got[0]).2, None);
    assert!(agent_take(&mut sim, b).is_empty());

    // In a session: b's id-less session.start and tool call are answered to b; the state
    // change that follows is a push, and reaches both.
    agent_send(
        &mut sim,
        b,
        no_id(
            "session.start",
            json!({"studyId":"pilot-01","participantId":"P07"}),
        ),
    );
    sim.settle();
    assert_eq!(agent_take(&mut sim, b)[0]["type"], "session.started");
    assert!(agent_take(&mut sim, a).is_empty());
    agent_send(&mut sim, b, no_id("tool.call", call));
    sim.settle();
    let types = |v: Vec<Value>| -> Vec<String> {
        v.iter()
            .map(|m| m["type"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        types(agent_take(&mut sim, b)),
        ["tool.result", "state.updated"]
    );
    assert_eq!(types(agent_take(&mut sim, a)), ["state.updated"]);
}

#[test]
fn a_participants_click_reaches_every_agent_as_state_updated_from_user() {
    let (mut sim, host, a) = relay_sim(Duration::from_millis(5));
    let b = add_agent(&mut sim);
    sim.call_client(host, |h, now| {
        h.user_action("select", &json!({"itemId": "m1"}), now)
    })
    .unwrap();
    sim.settle();
    for agent in [a, b] {
        let got = agent_take(&mut sim, agent);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0]["type"], "state.updated");
        assert_eq!(got[0]["payload"]["source"], "user");
        assert_eq!(got[0]["payload"]["uiSpec"]["selected"], "m1");
    }
}

//! The Agent machine's traffic with the Controller, in simulated time: `req` to the
//! application and `resp` back, `add` and `released` binding and freeing a session, controller
//! errors surfaced, and commands refused while disconnected.

mod common;

use chopsticks_proto::{
    Add, Agent, AgentConfig, AgentEvent, ControllerConfig, ControllerEvent, Released, SessionKind,
};
use common::*;
use serde_json::json;

#[test]
fn req_reaches_the_application_and_resp_completes_the_request() {
    let mut sim = pair(ControllerConfig::default(), 5);
    let a = sim.add_client(agent("a1"));
    sim.connect(a);
    sim.settle();
    sim.take_server_events();
    let id = sim
        .call_server(|c, now| c.request("a1", "status", json!({"guildId":"g1"}), now))
        .expect("sent");
    sim.settle();
    let reqs: Vec<_> = sim
        .take_client_events(a)
        .into_iter()
        .filter_map(|e| match e {
            AgentEvent::Request(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].op, "status");
    assert_eq!(reqs[0].data.to_value(), json!({"guildId":"g1"}));
    let rid = reqs[0].id.clone();
    sim.call_client(a, |m, now| m.respond_ok(rid, json!({"playing":false}), now))
        .expect("connected");
    sim.settle();
    let done = events(&mut sim, |e| match e {
        ControllerEvent::RequestCompleted { id, resp, .. } => Some((*id, resp.agent_id.clone())),
        _ => None,
    });
    assert_eq!(
        done,
        [(id, Some("a1".to_string()))],
        "resp carries agentId like the real agent"
    );
}

#[test]
fn add_and_released_commands_bind_and_free_a_session() {
    let mut sim = pair(ControllerConfig::default(), 1);
    let a = sim.add_client(agent("a1"));
    sim.connect(a);
    sim.settle();
    let add = Add {
        agent_id: "a1".into(),
        guild_id: "g1".into(),
        voice_channel_id: "vc1".into(),
        text_channel_id: None,
        channel_id: String::new(),
        kind: SessionKind::Music,
        owner_user_id: None,
        ok: true,
        error: None,
        runner_id: None,
    };
    sim.call_client(a, |m, now| m.send_add(add, now))
        .expect("connected");
    sim.settle();
    assert_eq!(sim.server().sessions().count(), 1);
    let rel = Released {
        agent_id: "a1".into(),
        guild_id: "g1".into(),
        voice_channel_id: "vc1".into(),
        reason: "STOPPED".into(),
        kind: SessionKind::Music,
        runner_id: None,
    };
    sim.call_client(a, |m, now| m.send_released(rel, now))
        .expect("connected");
    sim.settle();
    assert_eq!(sim.server().sessions().count(), 0);
}

#[test]
fn controller_errors_reach_the_application() {
    let mut sim = pair(ControllerConfig::default(), 1);
    let a = sim.add_client(Agent::new(
        AgentConfig::new("old").with_protocol_version("0.9.0"),
    ));
    sim.connect(a);
    sim.settle();
    let errs: Vec<String> = sim
        .take_client_events(a)
        .into_iter()
        .filter_map(|e| match e {
            AgentEvent::ControllerError { error } => Some(error),
            _ => None,
        })
        .collect();
    assert_eq!(
        errs,
        ["Incompatible protocol version 0.9.0. Controller expects 1.0.0."]
    );
    assert!(!sim.is_connected(a), "closed by the controller");
}

#[test]
fn commands_while_disconnected_fail_without_output() {
    let mut a = agent("a1");
    let now = t0();
    assert!(a.respond_ok("x", json!(null), now).is_err());
    use agentwire_core::Machine;
    assert!(a.poll_output().is_none());
    assert_eq!(a.poll_timeout(), None);
}

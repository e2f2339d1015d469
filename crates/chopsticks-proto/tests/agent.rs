//! The Agent machine against the Controller, in simulated time.

mod common;

use std::time::Duration;

use agentwire_core::sim::{Sim, SimConfig};
use agentwire_core::SequentialIds;
use chopsticks_proto::{
    Add, Agent, AgentConfig, AgentEvent, Controller, ControllerConfig, ControllerEvent, Released,
    SessionKind,
};
use common::*;
use serde_json::json;

fn agent(id: &str) -> Agent {
    Agent::new(
        AgentConfig::new(id)
            .with_guilds(["g1"])
            .with_bot("42", "Bot#1"),
    )
}

fn pair(cfg: ControllerConfig, latency_ms: u64) -> CtlSim {
    let simcfg = SimConfig::default().with_latency(Duration::from_millis(latency_ms));
    Sim::new(Controller::new(cfg, SequentialIds::new(0)), t0(), simcfg)
}

#[test]
fn agent_says_hello_and_guilds_on_connect_and_registers() {
    let mut sim = pair(ControllerConfig::default(), 5);
    let a = sim.add_client(agent("a1"));
    sim.connect(a);
    sim.settle();
    let live = sim.server().agent("a1").expect("registered");
    assert_eq!(live.bot_user_id.as_deref(), Some("42"));
    assert_eq!(live.protocol_version, "1.0.0");
    assert!(sim
        .take_client_events(a)
        .iter()
        .any(|e| matches!(e, AgentEvent::Connected { .. })));
}

#[test]
fn agent_heartbeats_every_30s_and_stays_registered() {
    let mut sim = pair(ControllerConfig::default(), 5);
    let a = sim.add_client(agent("a1"));
    sim.connect(a);
    sim.run_for(Duration::from_secs(300));
    assert!(
        sim.server().agent("a1").is_some(),
        "never stale with a 30 s heartbeat"
    );
    let conn = sim.server_conn_of(a).expect("connected");
    assert_eq!(sim.server().agent("a1").map(|l| l.conn), Some(conn));
    let last = sim.server().last_seen("a1").expect("live");
    assert!(sim.now() - last <= Duration::from_secs(31));
}

#[test]
fn heartbeat_interval_is_configurable() {
    let mut sim = pair(
        ControllerConfig::default().with_stale_after(Duration::from_secs(10)),
        0,
    );
    let cfg = AgentConfig::new("a1").with_heartbeat_interval(Duration::from_secs(5));
    let a = sim.add_client(Agent::new(cfg));
    sim.connect(a);
    sim.run_for(Duration::from_secs(60));
    assert!(sim.server().agent("a1").is_some());
}

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
fn the_agent_survives_reconnects_and_re_registers() {
    let mut sim = pair(ControllerConfig::default(), 2);
    let a = sim.add_client(agent("a1"));
    sim.connect(a);
    sim.settle();
    let first = sim.server_conn_of(a).expect("connected");
    sim.call_client(a, |m, now| {
        m.set_guilds(vec!["g1".into(), "g2".into()], now)
    });
    sim.disconnect(a);
    assert!(sim.server().agent("a1").is_none());
    assert!(
        sim.call_client(a, |m, now| m.respond_ok("x", json!(null), now))
            .is_err(),
        "not connected"
    );
    sim.run_for(Duration::from_secs(3));
    sim.connect(a);
    sim.settle();
    let live = sim.server().agent("a1").expect("re-registered");
    assert_ne!(live.conn, first);
    assert!(
        live.guild_ids.contains("g2"),
        "state kept across reconnects"
    );
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

#[test]
fn a_lossy_link_still_converges_with_heartbeats() {
    let simcfg = SimConfig::default().with_loss_per_mille(300).with_seed(3);
    let mut sim: CtlSim = Sim::new(
        Controller::new(ControllerConfig::default(), SequentialIds::new(0)),
        t0(),
        simcfg,
    );
    let a = sim.add_client(agent("a1"));
    // A lost hello means hello-required closes the socket; reconnect like the transport would.
    for _ in 0..12 {
        if !sim.is_connected(a) {
            sim.connect(a);
        }
        sim.run_for(Duration::from_secs(10));
    }
    let regs = events(&mut sim, |e| {
        matches!(e, ControllerEvent::AgentRegistered { .. }).then_some(())
    });
    assert!(!regs.is_empty(), "some hello got through");
    assert!(sim.lost_frames() > 0);
    sim.disconnect(a);
    assert!(
        sim.server().agent("a1").is_none(),
        "no stale entry left behind"
    );
    assert_eq!(sim.server().connection_count(), 0);
}

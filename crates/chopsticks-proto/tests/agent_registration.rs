//! The Agent machine's registration against the Controller, in simulated time: hello and
//! guilds on connect, heartbeats that keep it registered, re-registration after a reconnect,
//! and convergence over a lossy link.

mod common;

use std::time::Duration;

use agentwire_core::sim::{Sim, SimConfig};
use agentwire_core::SequentialIds;
use chopsticks_proto::{
    Agent, AgentConfig, AgentEvent, Controller, ControllerConfig, ControllerEvent,
};
use common::*;
use serde_json::json;

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

//! Helpers shared by the simulated-time tests.
#![allow(dead_code, unreachable_pub)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use agentwire_core::sim::{Sim, SimConfig};
use agentwire_core::{CloseCode, FrameBuf, PeerInfo, SequentialIds};
use chopsticks_proto::{Agent, AgentConfig, Controller, ControllerConfig, ControllerEvent};
use serde_json::{json, Value};

pub type CtlSim = Sim<Controller, Agent>;

#[allow(clippy::disallowed_methods)] // the one base time of a test
pub fn t0() -> Instant {
    Instant::now()
}

pub fn sim(cfg: ControllerConfig) -> CtlSim {
    Sim::new(
        Controller::new(cfg, SequentialIds::new(0)),
        t0(),
        SimConfig::default(),
    )
}

pub fn peer(ip: [u8; 4], port: u16) -> PeerInfo {
    PeerInfo::new(Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port)))
}

/// A raw connection from a distinct loopback address.
pub fn raw(sim: &mut CtlSim) -> usize {
    let n = sim.server().connection_count() as u8;
    sim.connect_raw(peer([127, 0, 1, n], 30_000))
}

pub fn hello(agent_id: &str, version: &str) -> Value {
    json!({
        "type": "hello",
        "protocolVersion": version,
        "agentId": agent_id,
        "botUserId": format!("bot-{agent_id}"),
        "tag": format!("{agent_id}#0001"),
        "ready": true,
        "guildIds": ["g1"],
        "poolId": "pool_a"
    })
}

pub fn send(sim: &mut CtlSim, r: usize, v: &Value) {
    sim.raw_send(r, FrameBuf::text(v.to_string()));
    sim.settle();
}

pub fn send_text(sim: &mut CtlSim, r: usize, s: &str) {
    sim.raw_send(r, FrameBuf::text(s.to_owned()));
    sim.settle();
}

/// Connects a raw peer and registers `agent_id` on it.
pub fn registered(sim: &mut CtlSim, agent_id: &str, guilds: &[&str]) -> usize {
    let r = raw(sim);
    let mut h = hello(agent_id, "1.0.0");
    h["guildIds"] = json!(guilds);
    send(sim, r, &h);
    assert!(
        sim.server().agent(agent_id).is_some(),
        "{agent_id} registered"
    );
    r
}

/// Every JSON message raw peer `r` received, parsed, and forgets them.
pub fn received(sim: &mut CtlSim, r: usize) -> Vec<Value> {
    sim.raw_take(r)
        .into_iter()
        .map(|f| serde_json::from_slice(f.as_bytes()).expect("controller sends JSON"))
        .collect()
}

pub fn closed(sim: &CtlSim, r: usize) -> Option<(u16, String)> {
    sim.raw_closed(r)
        .map(|(c, s): (CloseCode, &str)| (c.0, s.to_owned()))
}

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Takes the controller's events, keeping only those `f` maps.
pub fn events<T>(sim: &mut CtlSim, f: impl Fn(&ControllerEvent) -> Option<T>) -> Vec<T> {
    sim.take_server_events().iter().filter_map(f).collect()
}

/// An agent `id` in guild `g1` as bot `42`.
pub fn agent(id: &str) -> Agent {
    Agent::new(
        AgentConfig::new(id)
            .with_guilds(["g1"])
            .with_bot("42", "Bot#1"),
    )
}

/// A controller with `cfg` and a link of `latency_ms` each way, for `Agent` clients.
pub fn pair(cfg: ControllerConfig, latency_ms: u64) -> CtlSim {
    let simcfg = SimConfig::default().with_latency(Duration::from_millis(latency_ms));
    Sim::new(Controller::new(cfg, SequentialIds::new(0)), t0(), simcfg)
}

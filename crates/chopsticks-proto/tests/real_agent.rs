//! The real Chopsticks agent, pinned: its frames (fixtures in `fixtures/real_agent/`, as its
//! source writes them) and a scripted peer that behaves as it does (INTEROP.md): `agentId`
//! and `runnerId` on every message, never an `add`, lower-case `released` reasons, and
//! `missing-actor` for every op (but `discordSend`) whose `data` names no acting user.

mod common;

use std::path::PathBuf;

use agentwire_core::Frame;
use chopsticks_proto::{
    AgentMessage, ControllerConfig, ControllerEvent, Event, FreeReason, SessionKey, SessionKind,
};
use common::*;
use serde_json::{json, Value};

const GUILD: &str = "1445809891242414226";
const VC: &str = "1445809891242414229";
const ACTOR: &str = "1457586883742928907";

fn fixture(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/real_agent")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("fixture is JSON")
}

/// The scripted real agent on raw connection `conn` of the simulation.
struct RealAgent {
    id: String,
    conn: usize,
}

impl RealAgent {
    /// Connects, then sends `hello` and `guilds` as the real agent does on open.
    fn connect(sim: &mut CtlSim, id: &str) -> Self {
        let conn = raw(sim);
        let agent = Self {
            id: id.to_owned(),
            conn,
        };
        agent.send(sim, fixture("hello.json"));
        agent.send(sim, fixture("guilds.json"));
        assert!(sim.server().agent(id).is_some(), "{id} registered");
        agent
    }

    /// Sends `frame` with this agent's id, as `sendWs` does (it overwrites `agentId`).
    fn send(&self, sim: &mut CtlSim, mut frame: Value) {
        frame["agentId"] = json!(self.id);
        send(sim, self.conn, &frame);
    }

    /// Answers every `req` received so far the way the real agent does; returns the ops.
    fn serve(&self, sim: &mut CtlSim) -> Vec<String> {
        let mut ops = Vec::new();
        for m in received(sim, self.conn) {
            if m["type"] != "req" {
                continue;
            }
            let (id, op, data) = (m["id"].clone(), m["op"].as_str().unwrap_or(""), &m["data"]);
            ops.push(op.to_owned());
            let actor = ["actorUserId", "ownerUserId", "adminUserId"]
                .iter()
                .any(|k| data[*k].is_string());
            let refusal = if data["guildId"].is_null() || data["voiceChannelId"].is_null() {
                Some("missing-session")
            } else if !actor {
                Some("missing-actor")
            } else {
                None
            };
            let mut resp = match (refusal, op) {
                (Some(error), _) => {
                    let mut r = fixture("resp_missing_actor.json");
                    r["error"] = json!(error);
                    r
                }
                (None, "play") => fixture("resp_play.json"),
                (None, "stop") => {
                    // The real agent reports the release before it answers.
                    let mut rel = fixture("released_stop.json");
                    rel["guildId"] = data["guildId"].clone();
                    rel["voiceChannelId"] = data["voiceChannelId"].clone();
                    self.send(sim, rel);
                    json!({"type":"resp","ok":true,"data":{"action":"stopped"},
                           "runnerId":"5b0c2f9e-3d41-4b8a-9c7e-2f1d6a8e4b10"})
                }
                (None, _) => json!({"type":"resp","ok":false,"error":"unknown-op",
                                    "runnerId":"5b0c2f9e-3d41-4b8a-9c7e-2f1d6a8e4b10"}),
            };
            resp["id"] = id;
            self.send(sim, resp);
        }
        ops
    }
}

fn play_data(actor: Option<&str>) -> Value {
    let mut d = json!({"guildId": GUILD, "voiceChannelId": VC, "query": "never gonna"});
    if let Some(a) = actor {
        d["actorUserId"] = json!(a);
    }
    d
}

/// `op` for the session through `request_for_session`, answered by whichever agent got it.
fn op(sim: &mut CtlSim, agents: &[&RealAgent], op: &str, data: Value) -> String {
    let (chosen, _) = sim
        .call_server(|c, now| c.request_for_session(GUILD, VC, op, data, now))
        .expect("sent");
    sim.settle();
    for a in agents {
        a.serve(sim);
    }
    chosen.into_string()
}

fn session_agent(sim: &CtlSim) -> Option<String> {
    sim.server()
        .session(&SessionKey::new(SessionKind::Music, GUILD, VC))
        .map(|s| s.agent_id.to_string())
}

#[test]
fn the_real_agents_frames_decode_and_keep_agent_id_and_runner_id() {
    for name in [
        "hello.json",
        "guilds.json",
        "resp_play.json",
        "resp_missing_actor.json",
        "released_stop.json",
    ] {
        let original = fixture(name);
        let text = original.to_string();
        let m = AgentMessage::decode(Frame::Text(&text), 64 * 1024)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut out = Vec::new();
        m.encode(&mut out);
        let again: Value = serde_json::from_slice(&out).expect("JSON");
        assert_eq!(again, original, "{name} re-encodes to the same value");
        if let AgentMessage::Event(Event::Released(r)) = &m {
            assert_eq!(r.reason, "stop", "lower-case reason kept as sent");
            assert_eq!(
                r.runner_id.as_deref(),
                Some("5b0c2f9e-3d41-4b8a-9c7e-2f1d6a8e4b10")
            );
        }
    }
}

#[test]
fn two_real_agents_stick_to_one_channel_until_it_releases() {
    let mut sim = sim(ControllerConfig::default());
    let a = RealAgent::connect(&mut sim, "agent-a");
    let b = RealAgent::connect(&mut sim, "agent-b");
    let agents = [&a, &b];
    sim.take_server_events();

    // No `add` ever comes, yet three plays for one channel go to one agent.
    let picks: Vec<String> = (0..3)
        .map(|_| op(&mut sim, &agents, "play", play_data(Some(ACTOR))))
        .collect();
    assert_eq!(picks, ["agent-a", "agent-a", "agent-a"]);
    assert_eq!(session_agent(&sim).as_deref(), Some("agent-a"));
    let done = events(&mut sim, |e| match e {
        ControllerEvent::RequestCompleted { resp, .. } => Some(resp.ok),
        ControllerEvent::ProtocolViolation { error, .. } => panic!("violation: {error}"),
        _ => None,
    });
    assert_eq!(done, [true, true, true]);

    // `stop`: the agent sends `released` (reason `stop`) and the session is free.
    assert_eq!(
        op(&mut sim, &agents, "stop", play_data(Some(ACTOR))),
        "agent-a"
    );
    assert_eq!(session_agent(&sim), None);
    let released = events(&mut sim, |e| match e {
        ControllerEvent::SessionReleased {
            agent_id, reason, ..
        } => Some((agent_id.to_string(), reason.clone())),
        _ => None,
    });
    assert_eq!(released, [("agent-a".to_string(), "stop".to_string())]);

    // The next play may pick another agent (round-robin moves on).
    assert_eq!(
        op(&mut sim, &agents, "play", play_data(Some(ACTOR))),
        "agent-b"
    );

    // A late or stray `released` from agent-a for the channel agent-b now holds: ignored.
    let mut stray = fixture("released_stop.json");
    stray["reason"] = json!("empty-channel");
    a.send(&mut sim, stray);
    assert_eq!(session_agent(&sim).as_deref(), Some("agent-b"));
    let evs = sim.take_server_events();
    assert!(evs.iter().any(
        |e| matches!(e, ControllerEvent::ReleaseIgnored { agent_id, .. } if agent_id == "agent-a")
    ));
    assert!(!evs
        .iter()
        .any(|e| matches!(e, ControllerEvent::ProtocolViolation { .. })));
}

#[test]
fn a_real_agent_refuses_ops_without_an_acting_user_and_stays_free() {
    let mut sim = sim(ControllerConfig::default());
    let a = RealAgent::connect(&mut sim, "agent-a");
    let b = RealAgent::connect(&mut sim, "agent-b");
    let agents = [&a, &b];
    sim.take_server_events();
    assert_eq!(op(&mut sim, &agents, "play", play_data(None)), "agent-a");
    let outcome = events(&mut sim, |e| match e {
        ControllerEvent::RequestCompleted { resp, .. } => {
            Some(resp.result().map(str::to_owned).map_err(str::to_owned))
        }
        ControllerEvent::SessionFreed { reason, .. } => {
            assert_eq!(*reason, FreeReason::StartFailed);
            None
        }
        _ => None,
    });
    assert_eq!(outcome, [Err("missing-actor".to_string())]);
    // It never joined, so it is not left bound: nothing holds the channel.
    assert_eq!(session_agent(&sim), None);
    // With an acting user the next play is served.
    let who = op(&mut sim, &agents, "play", play_data(Some(ACTOR)));
    assert_eq!(session_agent(&sim), Some(who));
}

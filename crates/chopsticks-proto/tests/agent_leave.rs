//! The spec's graceful disconnect in simulated time: `Agent::leave` sends `released` for
//! every session the agent is in, then closes; the controller frees each session on its
//! `released` (not by dropping the agent), so the guild is free at once for another agent or
//! for the same agent restarted.

mod common;

use agentwire_core::{FrameBuf, Machine, Output};
use chopsticks_proto::{
    texts, Add, Agent, AgentConfig, AgentEvent, CommandError, ControllerConfig, ControllerEvent,
    SessionKind,
};
use common::*;
use serde_json::json;

fn add(agent: &str, kind: SessionKind, vc: &str, ok: bool) -> Add {
    Add {
        agent_id: agent.into(),
        guild_id: "g1".into(),
        voice_channel_id: vc.into(),
        text_channel_id: None,
        channel_id: String::new(),
        kind,
        owner_user_id: None,
        ok,
        error: (!ok).then(|| "Missing permissions".into()),
        runner_id: None,
    }
}

/// A controller and agent `a1`, connected, in music vc1 and assistant vc2 of g1 (and a
/// failed join of vc3).
fn in_two_sessions() -> (CtlSim, usize) {
    let mut sim = pair(ControllerConfig::default(), 5);
    let a = sim.add_client(agent("a1"));
    sim.connect(a);
    sim.settle();
    for (kind, vc, ok) in [
        (SessionKind::Music, "vc1", true),
        (SessionKind::Assistant, "vc2", true),
        (SessionKind::Music, "vc3", false),
    ] {
        sim.call_client(a, |m, now| m.send_add(add("a1", kind, vc, ok), now))
            .expect("connected");
    }
    sim.settle();
    assert_eq!(sim.server().sessions().count(), 2);
    sim.take_server_events();
    (sim, a)
}

#[test]
fn leave_releases_every_session_before_it_closes_and_the_controller_frees_them_on_released() {
    let (mut sim, a) = in_two_sessions();
    assert_eq!(
        sim.client(a).sessions().collect::<Vec<_>>(),
        [
            (SessionKind::Music, "g1", "vc1"),
            (SessionKind::Assistant, "g1", "vc2")
        ]
    );
    let n = sim
        .call_client(a, |m, now| m.leave("shutdown", now))
        .expect("connected");
    assert_eq!(n, 2);
    sim.settle();
    let seen = events(&mut sim, |e| match e {
        ControllerEvent::SessionReleased {
            agent_id,
            kind,
            voice_channel_id,
            reason,
            ..
        } => Some(format!(
            "released {agent_id} {kind:?} {voice_channel_id} {reason}"
        )),
        ControllerEvent::SessionFreed { reason, .. } => Some(format!("freed {reason:?}")),
        ControllerEvent::AgentDropped { agent_id, .. } => Some(format!("dropped {agent_id}")),
        _ => None,
    });
    assert_eq!(
        seen,
        [
            "released a1 Music vc1 shutdown",
            "released a1 Assistant vc2 shutdown",
            "dropped a1",
        ],
        "each session freed by its released, then the agent dropped on the close"
    );
    assert_eq!(sim.server().sessions().count(), 0);
    assert!(!sim.is_connected(a));
    assert_eq!(sim.client(a).sessions().count(), 0);
}

#[test]
fn after_leave_a_restarted_agent_and_a_new_agent_get_the_guilds_next_requests() {
    let (mut sim, a) = in_two_sessions();
    sim.call_client(a, |m, now| m.leave("shutdown", now))
        .expect("connected");
    sim.settle();
    // A new agent in the guild gets the channel the first one played in.
    let b = sim.add_client(agent("b1"));
    sim.connect(b);
    sim.settle();
    let picked = sim.call_server(|c, _| c.select_agent("g1", "vc1"));
    assert_eq!(picked.map(|id| id.to_string()), Ok("b1".to_string()));
    // The first agent, restarted under the same id, is free in g1 too.
    sim.connect(a);
    sim.settle();
    let picked = sim.call_server(|c, _| c.select_agent("g1", "vc9"));
    assert_eq!(picked.map(|id| id.to_string()), Ok("a1".to_string()));
}

#[test]
fn the_leave_close_is_1000_and_nothing_follows_it_on_that_connection() {
    let mut a = Agent::new(AgentConfig::new("a1").with_guilds(["g1"]));
    let t = t0();
    let conn = agentwire_core::ConnId::new(7);
    a.handle_connect(conn, &agentwire_core::PeerInfo::new(None), t);
    a.send_add(add("a1", SessionKind::Music, "vc1", true), t)
        .expect("connected");
    while a.poll_output().is_some() {}
    assert_eq!(a.leave("SIGTERM", t), Ok(1));
    let outs: Vec<_> = std::iter::from_fn(|| a.poll_output()).collect();
    let [Output::Send { frame, .. }, Output::Close { code, reason, .. }] = &outs[..] else {
        panic!("released then close: {outs:?}");
    };
    let rel: serde_json::Value = serde_json::from_slice(frame.as_bytes()).expect("json");
    assert_eq!(
        rel,
        json!({"type":"event","event":"released","agentId":"a1","guildId":"g1",
               "voiceChannelId":"vc1","reason":"SIGTERM","kind":"music"})
    );
    assert_eq!(
        (code.0, reason.as_ref()),
        (1000, texts::CLOSE_AGENT_LEAVING)
    );
    // Closing: no commands, no heartbeat, controller frames ignored.
    assert!(!a.is_connected());
    assert_eq!(a.poll_timeout(), None);
    assert_eq!(
        a.respond_ok("r1", json!(null), t),
        Err(CommandError::NotConnected)
    );
    assert_eq!(a.leave("again", t), Err(CommandError::NotConnected));
    let req = r#"{"type":"req","id":"r2","op":"status","data":null,"agentId":"a1"}"#;
    a.handle_frame(conn, agentwire_core::Frame::Text(req), t);
    assert!(a.poll_output().is_none());
    // The connection ends; the next one is announced as usual.
    a.handle_disconnect(conn, t);
    assert!(matches!(
        a.poll_output(),
        Some(Output::Event(AgentEvent::Disconnected { .. }))
    ));
    let next = agentwire_core::ConnId::new(8);
    a.handle_connect(next, &agentwire_core::PeerInfo::new(None), t);
    let sent: Vec<FrameBuf> = std::iter::from_fn(|| a.poll_output())
        .filter_map(|o| match o {
            Output::Send { frame, .. } => Some(frame),
            _ => None,
        })
        .collect();
    assert_eq!(sent.len(), 2, "hello and guilds");
    assert!(a.poll_timeout().is_some(), "heartbeat again");
}

#[test]
fn leave_while_disconnected_fails_and_keeps_the_sessions() {
    let (mut sim, a) = in_two_sessions();
    sim.disconnect(a);
    sim.settle();
    let r = sim.call_client(a, |m, now| m.leave("shutdown", now));
    assert_eq!(r, Err(CommandError::NotConnected));
    assert_eq!(sim.client(a).sessions().count(), 2);
}

#[test]
fn released_and_failed_adds_take_sessions_off_the_list() {
    let (mut sim, a) = in_two_sessions();
    let rel = chopsticks_proto::Released {
        agent_id: "a1".into(),
        guild_id: "g1".into(),
        voice_channel_id: "vc2".into(),
        reason: "USER_LEFT".into(),
        kind: SessionKind::Assistant,
        runner_id: None,
    };
    sim.call_client(a, |m, now| m.send_released(rel, now))
        .expect("connected");
    sim.call_client(a, |m, now| {
        m.send_add(add("a1", SessionKind::Music, "vc1", false), now)
    })
    .expect("connected");
    assert_eq!(sim.client(a).sessions().count(), 0);
    assert_eq!(sim.call_client(a, |m, now| m.leave("shutdown", now)), Ok(0));
}

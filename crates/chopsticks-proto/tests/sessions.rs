//! Voice sessions (`add` / `released`) and agent selection for a guild.

mod common;

use chopsticks_proto::{
    CommandError, ControllerConfig, ControllerEvent, ProtocolError, SessionKey, SessionKind,
};
use common::*;
use serde_json::{json, Value};

fn add(agent: &str, guild: &str, vc: &str, kind: &str, ok: bool) -> Value {
    let mut v = json!({"type":"event","event":"add","agentId":agent,"guildId":guild,
        "voiceChannelId":vc,"channelId":vc,"kind":kind,"ownerUserId":"u1","ok":ok});
    if !ok {
        v["error"] = json!("Missing permissions: CONNECT, SPEAK");
    }
    v
}

fn released(agent: &str, guild: &str, vc: &str, kind: &str) -> Value {
    json!({"type":"event","event":"released","agentId":agent,"guildId":guild,
        "voiceChannelId":vc,"reason":"USER_LEFT","kind":kind})
}

#[test]
fn add_binds_the_session_to_the_sending_agent() {
    let mut sim = sim(ControllerConfig::default());
    let r = registered(&mut sim, "a1", &["g1"]);
    sim.take_server_events();
    send(&mut sim, r, &add("a1", "g1", "vc1", "music", true));
    let key = SessionKey::new(SessionKind::Music, "g1", "vc1");
    let s = sim.server().session(&key).expect("bound");
    assert_eq!(s.agent_id, "a1");
    assert_eq!(s.owner_user_id.as_deref(), Some("u1"));
    assert!(sim
        .take_server_events()
        .iter()
        .any(|e| matches!(e, ControllerEvent::SessionBound { agent_id, .. } if agent_id == "a1")));
}

#[test]
fn a_failed_add_binds_nothing_and_reports_the_error() {
    let mut sim = sim(ControllerConfig::default());
    let r = registered(&mut sim, "a1", &["g1"]);
    sim.take_server_events();
    send(&mut sim, r, &add("a1", "g1", "vc1", "music", false));
    assert_eq!(sim.server().sessions().count(), 0);
    let errs = events(&mut sim, |e| match e {
        ControllerEvent::SessionJoinFailed { error, .. } => Some(error.clone()),
        _ => None,
    });
    assert_eq!(errs, ["Missing permissions: CONNECT, SPEAK"]);
}

#[test]
fn released_frees_the_session_only_from_the_bound_agent() {
    let mut sim = sim(ControllerConfig::default());
    let a = registered(&mut sim, "a1", &["g1"]);
    let b = registered(&mut sim, "b1", &["g1"]);
    send(&mut sim, a, &add("a1", "g1", "vc1", "music", true));
    sim.take_server_events();
    // b claims to be a1 in the payload: the controller trusts the connection, not the field.
    send(&mut sim, b, &released("a1", "g1", "vc1", "music"));
    assert_eq!(
        sim.server().sessions().count(),
        1,
        "not freed by another agent"
    );
    assert!(sim.take_server_events().iter().any(|e| matches!(
        e,
        ControllerEvent::ProtocolViolation {
            error: ProtocolError::NotBound,
            ..
        }
    )));
    send(&mut sim, a, &released("a1", "g1", "vc1", "music"));
    assert_eq!(sim.server().sessions().count(), 0);
    let rel = events(&mut sim, |e| match e {
        ControllerEvent::SessionReleased {
            agent_id, reason, ..
        } => Some((agent_id.clone(), reason.clone())),
        _ => None,
    });
    assert_eq!(rel, [("a1".to_string(), "USER_LEFT".to_string())]);
}

#[test]
fn music_and_assistant_sessions_are_kept_apart() {
    let mut sim = sim(ControllerConfig::default());
    let a = registered(&mut sim, "a1", &["g1"]);
    send(&mut sim, a, &add("a1", "g1", "vc1", "assistant", true));
    assert!(sim
        .server()
        .session(&SessionKey::new(SessionKind::Assistant, "g1", "vc1"))
        .is_some());
    assert!(sim
        .server()
        .session(&SessionKey::new(SessionKind::Music, "g1", "vc1"))
        .is_none());
    // Releasing the music session of the same channel does not free the assistant one.
    send(&mut sim, a, &released("a1", "g1", "vc1", "music"));
    assert_eq!(sim.server().sessions().count(), 1);
}

#[test]
fn kind_defaults_to_music() {
    let mut sim = sim(ControllerConfig::default());
    let a = registered(&mut sim, "a1", &["g1"]);
    let mut v = add("a1", "g1", "vc1", "music", true);
    v.as_object_mut().expect("object").remove("kind");
    send(&mut sim, a, &v);
    assert!(sim
        .server()
        .session(&SessionKey::new(SessionKind::Music, "g1", "vc1"))
        .is_some());
}

#[test]
fn events_before_hello_are_ignored() {
    let mut sim = sim(ControllerConfig::default());
    let r = raw(&mut sim);
    send(&mut sim, r, &add("a1", "g1", "vc1", "music", true));
    assert_eq!(sim.server().sessions().count(), 0);
    assert!(sim.raw_is_open(r));
}

#[test]
fn selection_prefers_the_agent_already_bound_to_the_session() {
    let mut sim = sim(ControllerConfig::default());
    registered(&mut sim, "a1", &["g1"]);
    let b = registered(&mut sim, "b1", &["g1"]);
    send(&mut sim, b, &add("b1", "g1", "vc1", "music", true));
    for _ in 0..3 {
        assert_eq!(
            sim.call_server(|c, _| c.select_agent("g1", "vc1")),
            Ok("b1".to_string())
        );
    }
}

#[test]
fn a_bound_agent_that_is_not_ready_is_skipped() {
    let mut sim = sim(ControllerConfig::default());
    registered(&mut sim, "a1", &["g1"]);
    let b = registered(&mut sim, "b1", &["g1"]);
    send(&mut sim, b, &add("b1", "g1", "vc1", "music", true));
    let mut h = hello("b1", "1.0.0");
    h["ready"] = json!(false);
    send(&mut sim, b, &h);
    assert_eq!(
        sim.call_server(|c, _| c.select_agent("g1", "vc1")),
        Ok("a1".to_string())
    );
}

#[test]
fn selection_round_robins_idle_ready_agents_in_id_order() {
    let mut sim = sim(ControllerConfig::default());
    for id in ["c1", "a1", "b1"] {
        registered(&mut sim, id, &["g1"]);
    }
    let picks: Vec<String> = (0..4)
        .map(|i| {
            sim.call_server(|c, _| c.select_agent("g1", &format!("vc{i}")))
                .expect("pick")
        })
        .collect();
    assert_eq!(picks, ["a1", "b1", "c1", "a1"]);
}

#[test]
fn busy_and_unready_agents_are_not_selected() {
    let mut sim = sim(ControllerConfig::default());
    let a = registered(&mut sim, "a1", &["g1"]);
    let b = registered(&mut sim, "b1", &["g1"]);
    send(&mut sim, a, &add("a1", "g1", "vcA", "music", true));
    let mut h = hello("b1", "1.0.0");
    h["ready"] = json!(false);
    send(&mut sim, b, &h);
    assert_eq!(
        sim.call_server(|c, _| c.select_agent("g1", "vcNew")),
        Err(CommandError::NoFreeAgents)
    );
    // a1 is busy in g1 only; it is free for another guild it lists.
    send(
        &mut sim,
        a,
        &json!({"type":"guilds","guildIds":["g1","g2"]}),
    );
    assert_eq!(
        sim.call_server(|c, _| c.select_agent("g2", "vc")),
        Ok("a1".to_string())
    );
}

#[test]
fn no_agent_listing_the_guild_is_no_agents_in_guild() {
    let mut sim = sim(ControllerConfig::default());
    registered(&mut sim, "a1", &["g1"]);
    assert_eq!(
        sim.call_server(|c, _| c.select_agent("g9", "vc")),
        Err(CommandError::NoAgentsInGuild)
    );
    assert_eq!(CommandError::NoAgentsInGuild.as_str(), "no-agents-in-guild");
    assert_eq!(CommandError::NoFreeAgents.as_str(), "no-free-agents");
}

#[test]
fn request_for_guild_selects_then_sends() {
    let mut sim = sim(ControllerConfig::default());
    let a = registered(&mut sim, "a1", &["g1"]);
    let (agent, _id) = sim
        .call_server(|c, now| c.request_for_guild("g1", "vc1", "play", json!({"query":"q"}), now))
        .expect("sent");
    assert_eq!(agent, "a1");
    sim.settle();
    assert!(received(&mut sim, a)
        .iter()
        .any(|m| m["type"] == "req" && m["op"] == "play"));
}

//! Voice sessions and agent selection: binding at selection (the real controller's way, since
//! real agents never send `add`), `add` confirming or moving a binding, `released` from the
//! bound agent freeing it, and the controller freeing sessions whose agent left or whose
//! start failed.

mod common;

use chopsticks_proto::{
    BindSource, CommandError, ControllerConfig, ControllerEvent, FreeReason, Limits, SessionKey,
    SessionKind,
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

/// A `released` as the real agent sends it: lower-case reason, `agentId` and `runnerId`.
fn released(agent: &str, guild: &str, vc: &str, kind: &str) -> Value {
    json!({"type":"event","event":"released","agentId":agent,"guildId":guild,
        "voiceChannelId":vc,"reason":"stop","kind":kind,"runnerId":"runner-1"})
}

fn music(guild: &str, vc: &str) -> SessionKey {
    SessionKey::new(SessionKind::Music, guild, vc)
}

/// `play` for (`guild`, `vc`) through `request_for_session`; returns the chosen agent.
fn play(sim: &mut CtlSim, guild: &str, vc: &str) -> Result<String, CommandError> {
    sim.call_server(|c, now| {
        c.request_for_session(
            guild,
            vc,
            "play",
            json!({"query": "q", "actorUserId": "u1"}),
            now,
        )
    })
    .map(|(agent, _)| agent.into_string())
}

/// Answers every `req` raw peer `r` received with `resp{ok, error?}`.
fn answer_all(sim: &mut CtlSim, r: usize, ok: bool) {
    for m in received(sim, r) {
        if m["type"] == "req" {
            let mut resp = json!({"type":"resp","id":m["id"],"ok":ok,"agentId":m["agentId"],
                "runnerId":"runner-1"});
            if ok {
                resp["data"] = json!({"action": "playing"});
            } else {
                resp["error"] = json!("missing-actor");
            }
            send(sim, r, &resp);
        }
    }
}

fn freed(sim: &mut CtlSim) -> Vec<(String, FreeReason)> {
    events(sim, |e| match e {
        ControllerEvent::SessionFreed {
            agent_id, reason, ..
        } => Some((agent_id.to_string(), *reason)),
        _ => None,
    })
}

#[test]
fn repeated_plays_for_one_channel_stick_to_the_agent_selected_first() {
    let mut sim = sim(ControllerConfig::default());
    let a = registered(&mut sim, "a1", &["g1"]);
    let b = registered(&mut sim, "b1", &["g1"]);
    sim.take_server_events();
    // Real agents never send `add`: the binding made at selection is what sticks.
    let picks: Vec<String> = (0..3)
        .map(|_| {
            let agent = play(&mut sim, "g1", "vc1").expect("sent");
            sim.settle();
            answer_all(&mut sim, a, true);
            answer_all(&mut sim, b, true);
            agent
        })
        .collect();
    assert_eq!(picks, ["a1", "a1", "a1"]);
    let binds = events(&mut sim, |e| match e {
        ControllerEvent::SessionBound {
            agent_id, source, ..
        } => Some((agent_id.to_string(), *source)),
        _ => None,
    });
    assert_eq!(binds, [("a1".to_string(), BindSource::Selection)]);
    let s = sim.server().session(&music("g1", "vc1")).expect("bound");
    assert_eq!((s.agent_id.as_str(), s.confirmed), ("a1", false));

    // The bound agent releases (the real agent's `released`): the next play may pick another.
    send(&mut sim, a, &released("a1", "g1", "vc1", "music"));
    assert!(sim.server().session(&music("g1", "vc1")).is_none());
    assert_eq!(play(&mut sim, "g1", "vc1"), Ok("b1".to_string()));
}

#[test]
fn select_agent_binds_the_agent_it_picks() {
    let mut sim = sim(ControllerConfig::default());
    registered(&mut sim, "a1", &["g1"]);
    registered(&mut sim, "b1", &["g1"]);
    for _ in 0..3 {
        assert_eq!(
            sim.call_server(|c, _| c.select_agent("g1", "vc1"))
                .map(String::from),
            Ok("a1".to_string())
        );
    }
    // Another channel of the guild gets the other agent: a1 is busy there now.
    assert_eq!(
        sim.call_server(|c, _| c.select_agent("g1", "vc2"))
            .map(String::from),
        Ok("b1".to_string())
    );
    assert_eq!(sim.server().sessions().count(), 2);
}

#[test]
fn add_confirms_a_binding_made_at_selection() {
    let mut sim = sim(ControllerConfig::default());
    let a = registered(&mut sim, "a1", &["g1"]);
    assert_eq!(play(&mut sim, "g1", "vc1"), Ok("a1".to_string()));
    sim.take_server_events();
    send(&mut sim, a, &add("a1", "g1", "vc1", "music", true));
    let s = sim.server().session(&music("g1", "vc1")).expect("bound");
    assert_eq!(s.agent_id, "a1");
    assert!(s.confirmed);
    assert_eq!(s.owner_user_id.as_deref(), Some("u1"));
    let binds = events(&mut sim, |e| match e {
        ControllerEvent::SessionBound {
            agent_id,
            source,
            replaced,
            ..
        } => Some((
            agent_id.to_string(),
            *source,
            replaced.as_ref().map(ToString::to_string),
        )),
        _ => None,
    });
    assert_eq!(binds, [("a1".to_string(), BindSource::Add, None)]);
}

#[test]
fn add_from_another_agent_moves_the_binding() {
    let mut sim = sim(ControllerConfig::default());
    registered(&mut sim, "a1", &["g1"]);
    let b = registered(&mut sim, "b1", &["g1"]);
    assert_eq!(play(&mut sim, "g1", "vc1"), Ok("a1".to_string()));
    sim.take_server_events();
    send(&mut sim, b, &add("b1", "g1", "vc1", "music", true));
    assert_eq!(
        sim.server()
            .session(&music("g1", "vc1"))
            .map(|s| s.agent_id.as_str()),
        Some("b1")
    );
    let moved = events(&mut sim, |e| match e {
        ControllerEvent::SessionBound { replaced, .. } => {
            replaced.as_ref().map(ToString::to_string)
        }
        _ => None,
    });
    assert_eq!(moved, ["a1"]);
    assert_eq!(play(&mut sim, "g1", "vc1"), Ok("b1".to_string()));
}

#[test]
fn add_binds_the_session_to_the_sending_agent() {
    let mut sim = sim(ControllerConfig::default());
    let r = registered(&mut sim, "a1", &["g1"]);
    sim.take_server_events();
    send(&mut sim, r, &add("a1", "g1", "vc1", "music", true));
    let s = sim.server().session(&music("g1", "vc1")).expect("bound");
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
fn a_failed_add_from_the_bound_agent_frees_its_session() {
    let mut sim = sim(ControllerConfig::default());
    let a = registered(&mut sim, "a1", &["g1"]);
    let b = registered(&mut sim, "b1", &["g1"]);
    assert_eq!(play(&mut sim, "g1", "vc1"), Ok("a1".to_string()));
    sim.take_server_events();
    // Another agent's failure does not touch a1's binding.
    send(&mut sim, b, &add("b1", "g1", "vc1", "music", false));
    assert!(sim.server().session(&music("g1", "vc1")).is_some());
    send(&mut sim, a, &add("a1", "g1", "vc1", "music", false));
    assert!(sim.server().session(&music("g1", "vc1")).is_none());
    assert_eq!(
        freed(&mut sim),
        [("a1".to_string(), FreeReason::JoinFailed)]
    );
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
    send(&mut sim, a, &released("a1", "g1", "vc1", "music"));
    assert_eq!(sim.server().sessions().count(), 0);
    let rel = events(&mut sim, |e| match e {
        ControllerEvent::SessionReleased {
            agent_id, reason, ..
        } => Some((agent_id.to_string(), reason.clone())),
        _ => None,
    });
    assert_eq!(rel, [("a1".to_string(), "stop".to_string())]);
}

#[test]
fn a_released_for_a_session_the_sender_is_not_bound_to_is_ignored_not_a_violation() {
    let mut sim = sim(ControllerConfig::default());
    let a = registered(&mut sim, "a1", &["g1"]);
    let b = registered(&mut sim, "b1", &["g1"]);
    send(&mut sim, a, &add("a1", "g1", "vc1", "music", true));
    sim.take_server_events();
    // Bound to another agent, and bound to nobody at all.
    send(&mut sim, b, &released("b1", "g1", "vc1", "music"));
    send(&mut sim, b, &released("b1", "g1", "vc9", "music"));
    let evs = sim.take_server_events();
    assert!(
        !evs.iter()
            .any(|e| matches!(e, ControllerEvent::ProtocolViolation { .. })),
        "{evs:?}"
    );
    let ignored: Vec<(String, String)> = evs
        .iter()
        .filter_map(|e| match e {
            ControllerEvent::ReleaseIgnored {
                agent_id,
                voice_channel_id,
                ..
            } => Some((agent_id.to_string(), voice_channel_id.to_string())),
            _ => None,
        })
        .collect();
    assert_eq!(
        ignored,
        [
            ("b1".to_string(), "vc1".to_string()),
            ("b1".to_string(), "vc9".to_string())
        ]
    );
    assert!(received(&mut sim, b).is_empty(), "no reply");
    assert!(sim.raw_is_open(b));
    assert_eq!(
        sim.server()
            .session(&music("g1", "vc1"))
            .map(|s| s.agent_id.as_str()),
        Some("a1")
    );
}

#[test]
fn an_agent_that_disconnects_frees_its_sessions() {
    let mut sim = sim(ControllerConfig::default());
    let a = registered(&mut sim, "a1", &["g1", "g2"]);
    registered(&mut sim, "b1", &["g1"]);
    assert_eq!(play(&mut sim, "g1", "vc1"), Ok("a1".to_string()));
    send(&mut sim, a, &add("a1", "g2", "vc2", "assistant", true));
    sim.take_server_events();
    sim.raw_disconnect(a);
    sim.settle();
    assert_eq!(sim.server().sessions().count(), 0);
    let mut f = freed(&mut sim);
    f.sort_by_key(|(a, r)| (a.clone(), format!("{r:?}")));
    assert_eq!(
        f,
        [
            ("a1".to_string(), FreeReason::AgentDropped),
            ("a1".to_string(), FreeReason::AgentDropped)
        ]
    );
    assert_eq!(play(&mut sim, "g1", "vc1"), Ok("b1".to_string()));
}

#[test]
fn a_stale_agent_frees_its_sessions() {
    let mut sim = sim(ControllerConfig::default());
    registered(&mut sim, "a1", &["g1"]);
    assert_eq!(play(&mut sim, "g1", "vc1"), Ok("a1".to_string()));
    sim.run_for(secs(46));
    assert!(sim.server().agent("a1").is_none());
    assert_eq!(sim.server().sessions().count(), 0);
}

#[test]
fn a_start_request_that_fails_frees_the_binding_it_made() {
    let mut sim = sim(ControllerConfig::default());
    let a = registered(&mut sim, "a1", &["g1"]);
    registered(&mut sim, "b1", &["g1"]);
    assert_eq!(play(&mut sim, "g1", "vc1"), Ok("a1".to_string()));
    sim.settle();
    sim.take_server_events();
    // The real agent refuses an op without an acting user.
    answer_all(&mut sim, a, false);
    assert!(sim.server().session(&music("g1", "vc1")).is_none());
    assert_eq!(
        freed(&mut sim),
        [("a1".to_string(), FreeReason::StartFailed)]
    );
    // a1 is not left busy in g1: round-robin goes on to b1, then a1 is free again.
    assert_eq!(play(&mut sim, "g1", "vc1"), Ok("b1".to_string()));
    assert_eq!(play(&mut sim, "g1", "vc2"), Ok("a1".to_string()));
}

#[test]
fn a_start_request_that_times_out_frees_the_binding_it_made() {
    let mut sim = sim(ControllerConfig::default().with_stale_after(secs(3_600)));
    registered(&mut sim, "a1", &["g1"]);
    assert_eq!(play(&mut sim, "g1", "vc1"), Ok("a1".to_string()));
    sim.take_server_events();
    sim.run_for(secs(31));
    assert!(sim.server().session(&music("g1", "vc1")).is_none());
    assert_eq!(
        freed(&mut sim),
        [("a1".to_string(), FreeReason::StartFailed)]
    );
}

#[test]
fn a_started_session_survives_later_failed_ops() {
    let mut sim = sim(ControllerConfig::default());
    let a = registered(&mut sim, "a1", &["g1"]);
    assert_eq!(play(&mut sim, "g1", "vc1"), Ok("a1".to_string()));
    sim.settle();
    answer_all(&mut sim, a, true);
    // A later play (queue-full, say) and a pause fail: the agent is still in the channel.
    assert_eq!(play(&mut sim, "g1", "vc1"), Ok("a1".to_string()));
    sim.call_server(|c, now| c.request_for_session("g1", "vc1", "pause", json!({}), now))
        .expect("sent");
    sim.settle();
    answer_all(&mut sim, a, false);
    assert!(sim.server().session(&music("g1", "vc1")).is_some());
}

#[test]
fn a_session_confirmed_by_add_survives_a_failed_start_request() {
    let mut sim = sim(ControllerConfig::default());
    let a = registered(&mut sim, "a1", &["g1"]);
    assert_eq!(play(&mut sim, "g1", "vc1"), Ok("a1".to_string()));
    sim.settle();
    send(&mut sim, a, &add("a1", "g1", "vc1", "music", true));
    answer_all(&mut sim, a, false);
    assert!(sim.server().session(&music("g1", "vc1")).is_some());
}

#[test]
fn ops_that_do_not_start_a_session_go_to_the_bound_agent_or_fail_with_no_session() {
    let mut sim = sim(ControllerConfig::default());
    let a = registered(&mut sim, "a1", &["g1"]);
    registered(&mut sim, "b1", &["g1"]);
    assert_eq!(
        sim.call_server(|c, now| c.request_for_session("g1", "vc1", "pause", json!({}), now)),
        Err(CommandError::NoSession)
    );
    assert_eq!(CommandError::NoSession.as_str(), "no-session");
    assert_eq!(sim.server().sessions().count(), 0, "no binding for a pause");
    assert_eq!(play(&mut sim, "g1", "vc1"), Ok("a1".to_string()));
    sim.settle();
    received(&mut sim, a);
    let (agent, _) = sim
        .call_server(|c, now| c.request_for_session("g1", "vc1", "pause", json!({}), now))
        .expect("sent");
    assert_eq!(agent, "a1");
    sim.settle();
    assert!(received(&mut sim, a)
        .iter()
        .any(|m| m["type"] == "req" && m["op"] == "pause"));
}

#[test]
fn assistant_ops_bind_the_assistant_session() {
    let mut sim = sim(ControllerConfig::default());
    registered(&mut sim, "a1", &["g1"]);
    registered(&mut sim, "b1", &["g1"]);
    let (agent, _) = sim
        .call_server(|c, now| c.request_for_session("g1", "vc1", "assistantJoin", json!({}), now))
        .expect("sent");
    assert_eq!(agent, "a1");
    assert!(sim
        .server()
        .session(&SessionKey::new(SessionKind::Assistant, "g1", "vc1"))
        .is_some());
    assert!(sim.server().session(&music("g1", "vc1")).is_none());
    let (again, _) = sim
        .call_server(|c, now| c.request_for_session("g1", "vc1", "assistantSay", json!({}), now))
        .expect("sent");
    assert_eq!(again, "a1");
    // The music session of the same channel is another session, and a1 is busy in g1.
    assert_eq!(play(&mut sim, "g1", "vc1"), Ok("b1".to_string()));
}

#[test]
fn binding_at_selection_respects_max_sessions() {
    let mut limits = Limits::default();
    limits.max_sessions = 1;
    let mut sim = sim(ControllerConfig::default().with_limits(limits));
    registered(&mut sim, "a1", &["g1"]);
    registered(&mut sim, "b1", &["g1"]);
    assert_eq!(play(&mut sim, "g1", "vc1"), Ok("a1".to_string()));
    assert_eq!(
        play(&mut sim, "g1", "vc2"),
        Err(CommandError::TooManySessions)
    );
    assert_eq!(sim.server().sessions().count(), 1);
    // The session already bound still gets its agent.
    assert_eq!(play(&mut sim, "g1", "vc1"), Ok("a1".to_string()));
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
    assert!(sim.server().session(&music("g1", "vc1")).is_none());
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
    assert!(sim.server().session(&music("g1", "vc1")).is_some());
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
            sim.call_server(|c, _| c.select_agent("g1", "vc1"))
                .map(String::from),
            Ok("b1".to_string())
        );
    }
}

#[test]
fn a_bound_agent_that_is_not_ready_is_skipped_and_the_binding_moves() {
    let mut sim = sim(ControllerConfig::default());
    registered(&mut sim, "a1", &["g1"]);
    let b = registered(&mut sim, "b1", &["g1"]);
    send(&mut sim, b, &add("b1", "g1", "vc1", "music", true));
    let mut h = hello("b1", "1.0.0");
    h["ready"] = json!(false);
    send(&mut sim, b, &h);
    sim.take_server_events();
    assert_eq!(
        sim.call_server(|c, _| c.select_agent("g1", "vc1"))
            .map(String::from),
        Ok("a1".to_string())
    );
    let moved = events(&mut sim, |e| match e {
        ControllerEvent::SessionBound {
            agent_id, replaced, ..
        } => Some((
            agent_id.to_string(),
            replaced.as_ref().map(ToString::to_string),
        )),
        _ => None,
    });
    assert_eq!(moved, [("a1".to_string(), Some("b1".to_string()))]);
}

#[test]
fn selection_round_robins_idle_ready_agents_in_id_order() {
    let mut sim = sim(ControllerConfig::default());
    let mut conns = std::collections::BTreeMap::new();
    for id in ["c1", "a1", "b1"] {
        conns.insert(id, registered(&mut sim, id, &["g1"]));
    }
    // Each pick is released before the next, so every agent is idle at every pick.
    let picks: Vec<String> = (0..4)
        .map(|i| {
            let vc = format!("vc{i}");
            let pick = sim
                .call_server(|c, _| c.select_agent("g1", &vc))
                .expect("pick");
            send(
                &mut sim,
                conns[pick.as_str()],
                &released(&pick, "g1", &vc, "music"),
            );
            pick.into_string()
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
        sim.call_server(|c, _| c.select_agent("g2", "vc"))
            .map(String::from),
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
    assert_eq!(sim.server().sessions().count(), 0);
}

#[test]
fn a_start_op_for_a_session_selects_an_agent_then_sends_it_the_req() {
    let mut sim = sim(ControllerConfig::default());
    let a = registered(&mut sim, "a1", &["g1"]);
    let (agent, _id) = sim
        .call_server(|c, now| c.request_for_session("g1", "vc1", "play", json!({"query":"q"}), now))
        .expect("sent");
    assert_eq!(agent, "a1");
    sim.settle();
    assert!(received(&mut sim, a)
        .iter()
        .any(|m| m["type"] == "req" && m["op"] == "play"));
}

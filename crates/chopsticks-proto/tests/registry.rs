//! The live-agent registry: re-registration, guild diffs, replacement, staleness, rate, framing.

mod common;

use std::time::Duration;

use chopsticks_proto::{ControllerConfig, ControllerEvent, DropReason, GuildId, ProtocolError};
use common::*;
use serde_json::json;

#[test]
fn every_hello_re_registers_and_reports_changes() {
    let mut sim = sim(ControllerConfig::default());
    let r = registered(&mut sim, "a1", &["g1"]);
    sim.take_server_events();
    let mut h = hello("a1", "1.0.0");
    h["ready"] = json!(false);
    h["tag"] = json!("Renamed#2");
    h["guildIds"] = json!(["g1", "g2"]);
    sim.run_for(secs(5));
    send(&mut sim, r, &h);
    let a = sim.server().agent("a1").expect("live");
    assert!(!a.ready);
    assert_eq!(a.tag.as_deref(), Some("Renamed#2"));
    assert_eq!(sim.server().last_seen("a1"), Some(sim.now()));
    let ev = sim.take_server_events();
    assert!(ev
        .iter()
        .any(|e| matches!(e, ControllerEvent::AgentUpdated { agent_id } if agent_id == "a1")));
    assert!(ev.iter().any(|e| matches!(e,
        ControllerEvent::GuildsChanged { added, removed, .. } if added == &["g2"] && removed.is_empty())));
    // An identical hello is a heartbeat: no update event.
    send(&mut sim, r, &h);
    assert!(!sim
        .take_server_events()
        .iter()
        .any(|e| matches!(e, ControllerEvent::AgentUpdated { .. })));
}

#[test]
fn guilds_message_replaces_the_set_and_reports_the_diff() {
    let mut sim = sim(ControllerConfig::default());
    let r = registered(&mut sim, "a1", &["g1", "g2"]);
    sim.take_server_events();
    send(
        &mut sim,
        r,
        &json!({"type":"guilds","guildIds":["g2","g3"],"agentId":"a1"}),
    );
    let a = sim.server().agent("a1").expect("live");
    assert_eq!(
        a.guild_ids.iter().cloned().collect::<Vec<_>>(),
        ["g2", "g3"]
    );
    let diffs = events(&mut sim, |e| match e {
        ControllerEvent::GuildsChanged { added, removed, .. } => {
            let text = |ids: &[GuildId]| ids.iter().map(ToString::to_string).collect::<Vec<_>>();
            Some((text(added), text(removed)))
        }
        _ => None,
    });
    assert_eq!(diffs, [(vec!["g3".to_string()], vec!["g1".to_string()])]);
    assert!(received(&mut sim, r).is_empty(), "no response to guilds");
}

#[test]
fn guilds_before_hello_is_ignored() {
    let mut sim = sim(ControllerConfig::default());
    let r = raw(&mut sim);
    send(&mut sim, r, &json!({"type":"guilds","guildIds":["g1"]}));
    assert!(received(&mut sim, r).is_empty());
    assert!(sim.raw_is_open(r));
    assert_eq!(sim.server().agents().count(), 0);
}

#[test]
fn a_second_socket_replaces_the_first_without_the_stale_close_race() {
    let mut sim = sim(ControllerConfig::default());
    let old = registered(&mut sim, "a1", &["g1"]);
    let id = sim
        .call_server(|c, now| c.request("a1", "status", json!({}), now))
        .expect("sent");
    sim.settle();
    sim.take_server_events();
    let new = registered(&mut sim, "a1", &["g1"]);
    let new_conn = sim.raw_conn(new).expect("open");
    assert_eq!(sim.server().agent("a1").map(|a| a.conn), Some(new_conn));
    assert_eq!(
        closed(&sim, old).map(|c| c.0),
        Some(1000),
        "old socket closed"
    );
    let ev = sim.take_server_events();
    assert!(ev.iter().any(|e| matches!(
        e,
        ControllerEvent::AgentRegistered {
            replaced: Some(_),
            ..
        }
    )));
    assert!(
        ev.iter()
            .any(|e| matches!(e, ControllerEvent::RequestFailed { id: i, .. } if *i == id)),
        "requests sent on the old socket fail at once"
    );
    // The old socket's close arrives late: the new registration must survive it.
    sim.raw_disconnect(old);
    assert_eq!(sim.server().agent("a1").map(|a| a.conn), Some(new_conn));
    assert!(!sim
        .take_server_events()
        .iter()
        .any(|e| matches!(e, ControllerEvent::AgentDropped { .. })));
}

#[test]
fn an_agent_unseen_for_45s_is_dropped() {
    let mut sim = sim(ControllerConfig::default());
    let r = registered(&mut sim, "a1", &["g1"]);
    sim.take_server_events();
    sim.run_for(Duration::from_millis(44_999));
    assert!(sim.server().agent("a1").is_some());
    sim.run_for(Duration::from_millis(1));
    sim.settle();
    assert!(sim.server().agent("a1").is_none());
    assert_eq!(closed(&sim, r), Some((1008, "stale".into())));
    let drops = events(&mut sim, |e| match e {
        ControllerEvent::AgentDropped { reason, .. } => Some(*reason),
        _ => None,
    });
    assert_eq!(drops, [DropReason::Stale]);
}

#[test]
fn heartbeats_keep_an_agent_alive() {
    let mut sim = sim(ControllerConfig::default());
    let r = registered(&mut sim, "a1", &["g1"]);
    for _ in 0..10 {
        sim.run_for(secs(30));
        send(&mut sim, r, &hello("a1", "1.0.0"));
    }
    assert!(sim.server().agent("a1").is_some());
    assert!(sim.raw_is_open(r));
}

#[test]
fn a_reported_pong_keeps_an_agent_alive() {
    let mut sim = sim(ControllerConfig::default());
    let r = registered(&mut sim, "a1", &["g1"]);
    let conn = sim.raw_conn(r).expect("open");
    for _ in 0..4 {
        sim.run_for(secs(30));
        sim.call_server(|c, now| c.touch(conn, now));
    }
    assert!(sim.server().agent("a1").is_some());
}

#[test]
fn websocket_pongs_keep_an_agent_alive_and_their_absence_drops_it() {
    let mut sim = sim(ControllerConfig::default());
    let r = registered(&mut sim, "a1", &["g1"]);
    // Only pongs (Machine::handle_pong, as the driver reports them) for two minutes.
    for _ in 0..4 {
        sim.run_for(secs(30));
        sim.raw_pong(r);
    }
    assert!(sim.server().agent("a1").is_some());
    // Then silence: stale after 45 s.
    sim.run_for(secs(46));
    assert!(sim.server().agent("a1").is_none());
}

#[test]
fn disconnect_drops_the_agent() {
    let mut sim = sim(ControllerConfig::default());
    let r = registered(&mut sim, "a1", &["g1"]);
    sim.take_server_events();
    sim.raw_disconnect(r);
    assert!(sim.server().agent("a1").is_none());
    let drops = events(&mut sim, |e| match e {
        ControllerEvent::AgentDropped { reason, .. } => Some(*reason),
        _ => None,
    });
    assert_eq!(drops, [DropReason::Disconnected]);
}

#[test]
fn a_frame_of_exactly_64_kib_is_accepted_and_one_byte_more_is_too_large() {
    let mut sim = sim(ControllerConfig::default());
    let r = registered(&mut sim, "a1", &["g1"]);
    let base = json!({"type":"guilds","guildIds":["g1"],"pad":""}).to_string();
    let pad = 64 * 1024 - base.len();
    let exact = base.replace(r#""pad":"""#, &format!(r#""pad":"{}""#, "x".repeat(pad)));
    assert_eq!(exact.len(), 64 * 1024);
    send_text(&mut sim, r, &exact);
    assert!(
        received(&mut sim, r).is_empty(),
        "exactly the limit is fine"
    );
    let over = exact.replace(r#""pad":""#, r#""pad":"y"#);
    assert_eq!(over.len(), 64 * 1024 + 1);
    send_text(&mut sim, r, &over);
    assert_eq!(
        received(&mut sim, r),
        [json!({"type":"error","error":"Frame too large"})]
    );
    assert!(sim.raw_is_open(r), "socket stays open");
    assert!(sim.server().agent("a1").is_some());
}

#[test]
fn invalid_json_gets_an_error_and_the_socket_stays_open() {
    let mut sim = sim(ControllerConfig::default());
    let r = raw(&mut sim);
    send_text(&mut sim, r, "{not json");
    assert_eq!(
        received(&mut sim, r),
        [json!({"type":"error","error":"Invalid JSON"})]
    );
    assert!(sim.raw_is_open(r));
    send(&mut sim, r, &hello("a1", "1.0.0"));
    assert!(sim.server().agent("a1").is_some(), "still usable");
}

#[test]
fn unknown_type_before_hello_closes_with_protocol_error() {
    let mut sim = sim(ControllerConfig::default());
    let r = raw(&mut sim);
    send(&mut sim, r, &json!({"type":"dance"}));
    assert_eq!(
        received(&mut sim, r),
        [json!({"type":"error","error":"Unknown message type"})]
    );
    assert_eq!(closed(&sim, r), Some((1008, "protocol-error".into())));
}

#[test]
fn unknown_type_after_hello_is_ignored() {
    let mut sim = sim(ControllerConfig::default());
    let r = registered(&mut sim, "a1", &["g1"]);
    send(&mut sim, r, &json!({"type":"dance"}));
    assert!(received(&mut sim, r).is_empty());
    assert!(sim.raw_is_open(r));
    assert!(sim.server().agent("a1").is_some());
}

#[test]
fn wrong_typed_fields_are_ignored_silently() {
    let mut sim = sim(ControllerConfig::default());
    let r = registered(&mut sim, "a1", &["g1"]);
    sim.take_server_events();
    send(&mut sim, r, &json!({"type":"guilds","guildIds":"g1"}));
    assert!(received(&mut sim, r).is_empty());
    assert!(sim.raw_is_open(r));
    let v = events(&mut sim, |e| match e {
        ControllerEvent::ProtocolViolation {
            error: ProtocolError::Decode(_),
            ..
        } => Some(()),
        _ => None,
    });
    assert_eq!(v.len(), 1);
}

#[test]
fn more_than_100_messages_per_second_are_dropped() {
    let mut sim = sim(ControllerConfig::default());
    let r = registered(&mut sim, "a1", &["g1"]);
    sim.run_for(secs(1)); // a fresh one-second window
    for i in 0..150 {
        sim.raw_send(
            r,
            serde_json::to_string(&json!({"type":"guilds","guildIds":[format!("g{i}")]}))
                .map(agentwire_core::FrameBuf::text)
                .expect("json"),
        );
    }
    sim.settle();
    // The 100th message was applied, the 101st and later were dropped.
    let a = sim.server().agent("a1").expect("live");
    assert_eq!(a.guild_ids.iter().cloned().collect::<Vec<_>>(), ["g99"]);
    let limited = events(&mut sim, |e| match e {
        ControllerEvent::ProtocolViolation {
            error: ProtocolError::RateLimited,
            ..
        } => Some(()),
        _ => None,
    });
    assert_eq!(limited.len(), 1, "reported once per window");
    // The next second accepts messages again.
    sim.run_for(secs(1));
    send(&mut sim, r, &json!({"type":"guilds","guildIds":["fresh"]}));
    assert!(sim
        .server()
        .agent("a1")
        .expect("live")
        .guild_ids
        .contains("fresh"));
}

#[test]
fn time_going_backwards_is_clamped() {
    let mut sim = sim(ControllerConfig::default());
    let r = raw(&mut sim);
    let conn = sim.raw_conn(r).expect("open");
    let start = sim.now();
    // A driver whose clock jumps back must not move deadlines or re-fire them.
    sim.call_server(|c, _| {
        use agentwire_core::Machine;
        c.handle_timeout(start + secs(9));
        c.handle_timeout(start);
        c.handle_connect(
            agentwire_core::ConnId::new(999),
            &peer([10, 9, 9, 9], 1),
            start,
        );
        assert!(
            c.poll_timeout().is_some_and(|t| t > start + secs(9)),
            "new deadline from the clamped time"
        );
    });
    sim.settle();
    assert_eq!(closed(&sim, r), Some((1008, "hello-required".into())));
    let _ = conn;
}

//! The relay's rules, one test per behaviour, driven directly with simulated time.

mod common;

use std::time::Duration;

use agent_relay_proto::{
    texts, Direction, Limits, RateLimit, Refusal, Relay, RelayConfig, RelayEvent, Role, Undelivered,
};
use agentwire_core::{CloseCode, ConnId, Frame, Machine, Output, PeerInfo, SequentialIds};
use common::{error_of, t0, Harness, Out, UNIX_MS};
use serde_json::{json, Value};

// ---- connecting ---------------------------------------------------------------------------

#[test]
fn a_wrong_path_is_closed_1008_at_once() {
    let mut h = Harness::new(RelayConfig::default());
    let c = h.connect_at("/");
    assert!(h.take(c).is_empty(), "no hello on a refused connection");
    assert_eq!(
        h.closes(),
        [(c, CloseCode::POLICY, "unknown-path".to_owned())]
    );
    assert!(h.events().contains(&RelayEvent::Refused {
        conn: c,
        reason: Refusal::WrongPath { path: "/".into() }
    }));
    assert_eq!(h.relay.connection_count(), 0);
    // Its frames and its disconnect are no-ops.
    h.clear();
    h.msg(c, "relay.join", None, json!({"role": "host"}));
    h.disconnect(c);
    assert!(h.outs.is_empty(), "{:?}", h.outs);
    // The pure check the upgrade hook calls.
    assert!(agent_relay_proto::accept_path("/agent/ws"));
    assert!(!agent_relay_proto::accept_path("/agent/ws/"));
}

#[test]
fn relay_hello_is_sent_on_connect_by_default_and_can_be_turned_off() {
    let mut h = Harness::new(RelayConfig::default());
    let c = h.connect();
    assert_eq!(
        h.one(c),
        json!({"v":"mvp-0.2","type":"relay.hello","payload":{"message":"Send relay.join with role=host|agent"}})
    );
    let mut quiet = Harness::new(RelayConfig::default().with_hello(false));
    let c = quiet.connect();
    assert!(quiet.take(c).is_empty());
}

// ---- joining ------------------------------------------------------------------------------

#[test]
fn join_is_answered_with_relay_joined_reply_to_the_join() {
    let mut h = Harness::quiet();
    let c = h.connect();
    h.msg(
        c,
        "relay.join",
        Some("join-001"),
        json!({"role":"agent","sessionId":"default","agentName":"planner"}),
    );
    assert_eq!(
        h.one(c),
        json!({"v":"mvp-0.2","type":"relay.joined","replyTo":"join-001",
               "payload":{"role":"agent","sessionId":"default","clientName":"planner"}})
    );
    let host = h.connect();
    h.msg(host, "relay.join", Some("j"), json!({"role":"host"}));
    assert_eq!(
        h.one(host)["payload"],
        json!({"role":"host","sessionId":"default"})
    );
    assert_eq!(h.relay.host_of("default"), Some(host));
    assert_eq!(h.relay.agents_of("default"), [c]);
    assert_eq!(
        h.relay
            .membership(c)
            .map(|(s, r)| (s.as_str().to_owned(), r)),
        Some(("default".to_owned(), Role::Agent))
    );
}

#[test]
fn session_id_defaults_to_default_and_is_trimmed() {
    let mut h = Harness::quiet();
    for payload in [
        json!({"role":"agent"}),
        json!({"role":"agent","sessionId":null}),
        json!({"role":"agent","sessionId":""}),
        json!({"role":"agent","sessionId":"   "}),
    ] {
        let c = h.connect();
        h.msg(c, "relay.join", None, payload.clone());
        assert_eq!(h.one(c)["payload"]["sessionId"], "default", "{payload}");
    }
    let c = h.connect();
    h.msg(
        c,
        "relay.join",
        None,
        json!({"role":"agent","sessionId":"  s-1 "}),
    );
    assert_eq!(h.one(c)["payload"]["sessionId"], "s-1");
    assert_eq!(h.relay.agents_of("s-1"), [c]);
}

#[test]
fn an_invalid_role_is_invalid_message_with_reply_to_and_the_connection_stays() {
    let mut h = Harness::quiet();
    let c = h.connect();
    for role in [json!("admin"), json!(null), json!(5), json!("Host")] {
        h.msg(c, "relay.join", Some("j-7"), json!({"role": role}));
        assert_eq!(
            error_of(&h.one(c)),
            (
                "INVALID_MESSAGE".into(),
                texts::INVALID_ROLE.into(),
                Some("j-7".into())
            ),
            "{role}"
        );
    }
    h.msg(c, "relay.join", Some("j-8"), json!({}));
    assert_eq!(error_of(&h.one(c)).1, texts::INVALID_ROLE);
    assert!(h.closes().is_empty());
    h.msg(c, "relay.join", Some("j-9"), json!({"role":"agent"}));
    assert_eq!(h.one(c)["type"], "relay.joined");
}

#[test]
fn a_non_string_session_id_is_invalid_message() {
    let mut h = Harness::quiet();
    let c = h.connect();
    h.msg(
        c,
        "relay.join",
        Some("j"),
        json!({"role":"agent","sessionId":5}),
    );
    assert_eq!(
        error_of(&h.one(c)),
        (
            "INVALID_MESSAGE".into(),
            texts::INVALID_SESSION_ID.into(),
            Some("j".into())
        )
    );
    assert_eq!(h.relay.session_count(), 0);
}

#[test]
fn messages_before_join_get_session_not_active_with_the_exact_text() {
    let mut h = Harness::quiet();
    let c = h.connect();
    h.msg(c, "tool.call", Some("req-3"), json!({}));
    assert_eq!(
        error_of(&h.one(c)),
        (
            "SESSION_NOT_ACTIVE".into(),
            "You must send relay.join before other messages.".into(),
            Some("req-3".into())
        )
    );
    h.msg(c, "state.updated", None, json!({}));
    let (code, text, reply_to) = error_of(&h.one(c));
    assert_eq!(
        (code.as_str(), text.as_str(), reply_to),
        ("SESSION_NOT_ACTIVE", texts::NOT_JOINED, None)
    );
    assert!(h.logs().is_empty(), "nothing is logged outside a session");
}

#[test]
fn an_agent_is_named_from_agent_name_client_name_or_name() {
    let mut h = Harness::quiet();
    let cases = [
        (
            json!({"role":"agent","agentName":" a ","clientName":"b","name":"c"}),
            "a",
        ),
        (
            json!({"role":"agent","agentName":"  ","clientName":"b","name":"c"}),
            "b",
        ),
        (json!({"role":"agent","name":"c"}), "c"),
    ];
    for (payload, want) in cases {
        let c = h.connect();
        h.msg(c, "relay.join", None, payload);
        assert_eq!(h.one(c)["payload"]["clientName"], want);
    }
    // No name: `agent-` and the last six characters of the relay's id for it.
    let c = h.connect();
    h.msg(c, "relay.join", None, json!({"role":"agent"}));
    let name = h.one(c)["payload"]["clientName"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(name.starts_with("agent-") && name.len() == 12, "{name}");
    // Long names are cut, not refused.
    let c = h.connect();
    h.msg(
        c,
        "relay.join",
        None,
        json!({"role":"agent","name":"é".repeat(100)}),
    );
    assert_eq!(
        h.one(c)["payload"]["clientName"].as_str().unwrap().len(),
        128
    );
}

#[test]
fn a_repeated_join_is_answered_again_and_changes_nothing() {
    let mut h = Harness::quiet();
    let host = h.host();
    let a = h.agent();
    h.msg(a, "snapshot.get", Some("r1"), json!({}));
    h.clear();
    h.msg(a, "relay.join", Some("again"), json!({"role":"agent"}));
    assert_eq!(h.one(a)["replyTo"], "again");
    assert_eq!(h.relay.agents_of("default"), [a]);
    assert_eq!(
        h.relay.pending_requests(a),
        1,
        "its request is still pending"
    );
    h.msg(host, "relay.join", Some("again"), json!({"role":"host"}));
    assert_eq!(h.one(host)["type"], "relay.joined");
    assert!(h.closes().is_empty());
    assert_eq!(h.relay.host_of("default"), Some(host));
}

#[test]
fn joining_another_session_or_role_leaves_the_first() {
    let mut h = Harness::quiet();
    let a = h.agent();
    h.msg(
        a,
        "relay.join",
        Some("j2"),
        json!({"role":"agent","sessionId":"other"}),
    );
    assert_eq!(h.one(a)["payload"]["sessionId"], "other");
    assert!(h.relay.agents_of("default").is_empty());
    assert_eq!(h.relay.agents_of("other"), [a]);
    assert_eq!(h.relay.session_count(), 1, "the emptied session is gone");
    h.msg(
        a,
        "relay.join",
        Some("j3"),
        json!({"role":"host","sessionId":"other"}),
    );
    assert_eq!(h.one(a)["payload"]["role"], "host");
    assert!(h.relay.agents_of("other").is_empty());
    assert_eq!(h.relay.host_of("other"), Some(a));
}

#[test]
fn no_join_within_the_deadline_closes_1008() {
    let mut h = Harness::quiet();
    let idle = h.connect();
    let joined = h.agent();
    h.advance(Duration::from_secs(29));
    assert!(h.closes().is_empty());
    h.advance(Duration::from_secs(1));
    assert_eq!(
        h.closes(),
        [(idle, CloseCode::POLICY, "join-required".to_owned())]
    );
    assert!(h.events().iter().any(|e| matches!(e,
        RelayEvent::ProtocolViolation { conn, .. } if *conn == idle)));
    assert!(h.relay.membership(joined).is_some());
    // Frames from the closing connection are ignored.
    h.clear();
    h.msg(idle, "relay.join", None, json!({"role":"agent"}));
    assert!(h.outs.is_empty());
    // No deadline at all when configured so.
    let mut h = Harness::new(RelayConfig::default().with_join_timeout(None));
    h.connect();
    assert_eq!(h.relay.poll_timeout(), None);
}

// ---- host replacement ---------------------------------------------------------------------

#[test]
fn a_newer_host_replaces_the_old_one_which_gets_the_exact_error_then_close_1000() {
    let mut h = Harness::quiet();
    let old = h.host();
    let agent = h.agent();
    let new = h.connect();
    h.msg(new, "relay.join", Some("j"), json!({"role":"host"}));
    // The old host: the error, then the close, in that order.
    let i_err = h
        .outs
        .iter()
        .position(|o| matches!(o, Out::Send(c, _) if *c == old))
        .expect("error to old host");
    let i_close = h
        .outs
        .iter()
        .position(|o| matches!(o, Out::Close(c, ..) if *c == old))
        .expect("close of old host");
    assert!(i_err < i_close);
    assert_eq!(
        error_of(&h.one(old)),
        (
            "SESSION_NOT_ACTIVE".into(),
            "Host connection replaced by a newer host.".into(),
            None
        )
    );
    assert_eq!(
        h.closes(),
        [(old, CloseCode::NORMAL, "host-replaced".into())]
    );
    assert_eq!(h.one(new)["type"], "relay.joined");
    assert!(h.events().contains(&RelayEvent::HostReplaced {
        session: agent_relay_proto::SessionId::new("default"),
        old,
        new
    }));
    assert_eq!(h.relay.host_of("default"), Some(new));
    // The old host's frames are ignored; agent messages go to the new host.
    h.clear();
    h.msg(old, "state.updated", None, json!({"source":"user"}));
    assert!(h.take(agent).is_empty());
    h.msg(agent, "snapshot.get", Some("r1"), json!({}));
    assert_eq!(h.one(new)["id"], "r1");
    assert!(h.take(old).is_empty());
    // Its disconnect later changes nothing.
    h.disconnect(old);
    assert_eq!(h.relay.host_of("default"), Some(new));
}

#[test]
fn requests_outstanding_when_the_host_is_replaced_fail_with_reply_to() {
    let mut h = Harness::quiet();
    let _old = h.host();
    let agent = h.agent();
    h.msg(
        agent,
        "tool.call",
        Some("req-1"),
        json!({"toolName":"next","params":{},"reason":"r"}),
    );
    h.clear();
    let new = h.connect();
    h.msg(new, "relay.join", Some("j"), json!({"role":"host"}));
    assert_eq!(
        error_of(&h.one(agent)),
        (
            "SESSION_NOT_ACTIVE".into(),
            texts::HOST_GONE.into(),
            Some("req-1".into())
        )
    );
    // A late reply from the new host to that id reaches nobody.
    h.clear();
    h.reply(
        new,
        "tool.result",
        "req-1",
        json!({"ok":true,"toolName":"next"}),
    );
    assert!(h.take(agent).is_empty());
}

// ---- forwarding ---------------------------------------------------------------------------

#[test]
fn agent_messages_reach_the_host_byte_for_byte() {
    let now = t0();
    let mut relay = Relay::new(
        RelayConfig::default()
            .with_hello(false)
            .with_presence(false),
        SequentialIds::new(0),
        now,
        UNIX_MS,
    );
    let peer = PeerInfo::new(None).with_path("/agent/ws");
    let (host, agent) = (ConnId::new(1), ConnId::new(2));
    relay.handle_connect(host, &peer, now);
    relay.handle_connect(agent, &peer, now);
    relay.handle_frame(
        host,
        Frame::Text(r#"{"v":"mvp-0.2","type":"relay.join","payload":{"role":"host"}}"#),
        now,
    );
    relay.handle_frame(
        agent,
        Frame::Text(r#"{"v":"mvp-0.2","type":"relay.join","payload":{"role":"agent"}}"#),
        now,
    );
    while relay.poll_output().is_some() {}
    // Odd spacing, key order and an extra field: forwarded exactly as sent.
    let text = "{ \"payload\" : {\"toolName\":\"select\",\"params\":{\"itemId\":\"m1\"},\"reason\":\"x\",\"extra\":[1,2]},\n\"type\":\"tool.call\",\"id\":\"req-003\",\"v\":\"mvp-0.2\",\"x-trace\":7 }";
    relay.handle_frame(agent, Frame::Text(text), now);
    let mut sent = Vec::new();
    let mut logged = Vec::new();
    while let Some(out) = relay.poll_output() {
        match out {
            Output::Send { conn, frame } => sent.push((conn, frame)),
            Output::Event(RelayEvent::Log(r)) => logged.push(r),
            _ => {}
        }
    }
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, host);
    assert_eq!(sent[0].1.as_text(), Some(text));
    // The log payload is a slice of the very bytes that were forwarded (no copy).
    let frame = sent[0].1.as_bytes();
    let out_rec = logged
        .iter()
        .find(|r| r.direction == Direction::Out)
        .unwrap();
    let p = out_rec.payload.as_bytes();
    assert_eq!(
        out_rec.payload.as_str(),
        r#"{"toolName":"select","params":{"itemId":"m1"},"reason":"x","extra":[1,2]}"#
    );
    let (f0, p0) = (frame.as_ptr() as usize, p.as_ptr() as usize);
    assert!(
        p0 >= f0 && p0 + p.len() <= f0 + frame.len(),
        "payload is a slice of the frame"
    );
}

#[test]
fn every_agent_type_is_forwarded_and_any_other_is_invalid_message() {
    let mut h = Harness::quiet();
    let host = h.host();
    let a = h.agent();
    for t in [
        "session.start",
        "snapshot.get",
        "tool.call",
        "agent.message",
        "session.end",
    ] {
        h.msg(a, t, Some("r"), json!({}));
        assert_eq!(h.one(host)["type"], t);
        h.reply(host, "error", "r", json!({"code":"X","message":"y"}));
        h.clear();
    }
    for t in [
        "state.updated",
        "tool.result",
        "user.message",
        "error",
        "relay.hello",
        "relay.joined",
        "relay.presence",
        "tool.execute",
    ] {
        h.msg(a, t, Some("bad-1"), json!({}));
        assert_eq!(
            error_of(&h.one(a)),
            (
                "INVALID_MESSAGE".into(),
                format!("Unsupported message type for agent role: {t}"),
                Some("bad-1".into())
            )
        );
        assert!(h.take(host).is_empty(), "{t} must not reach the host");
    }
}

#[test]
fn every_host_type_is_forwarded_and_any_other_is_invalid_message() {
    let mut h = Harness::quiet();
    let host = h.host();
    let a = h.agent();
    for t in [
        "session.started",
        "snapshot.state",
        "tool.result",
        "state.updated",
        "error",
        "session.ended",
        "user.message",
    ] {
        h.msg(host, t, None, json!({}));
        assert_eq!(h.one(a)["type"], t);
    }
    for t in [
        "tool.call",
        "snapshot.get",
        "agent.message",
        "relay.hello",
        "whatever",
    ] {
        h.msg(host, t, Some("h-1"), json!({}));
        assert_eq!(
            error_of(&h.one(host)),
            (
                "INVALID_MESSAGE".into(),
                format!("Unsupported message type for host role: {t}"),
                Some("h-1".into())
            )
        );
        assert!(h.take(a).is_empty());
    }
}

#[test]
fn a_reply_reaches_only_the_agent_that_asked() {
    let mut h = Harness::quiet();
    let host = h.host();
    let (a, b, c) = (h.agent(), h.agent(), h.agent());
    h.msg(a, "snapshot.get", Some("a-1"), json!({}));
    h.msg(
        b,
        "tool.call",
        Some("b-1"),
        json!({"toolName":"next","params":{},"reason":"r"}),
    );
    h.clear();
    h.reply(
        host,
        "tool.result",
        "b-1",
        json!({"ok":true,"toolName":"next"}),
    );
    assert_eq!(h.one(b)["replyTo"], "b-1");
    assert!(h.take(a).is_empty() && h.take(c).is_empty());
    h.reply(
        host,
        "snapshot.state",
        "a-1",
        json!({"sessionId":"s","uiSpec":{},"messageHistory":[],"toolSchema":[]}),
    );
    assert_eq!(h.one(a)["type"], "snapshot.state");
    assert!(h.take(b).is_empty() && h.take(c).is_empty());
    assert_eq!(h.relay.pending_total(), 0);
    // Answered once: a second reply to the same id reaches nobody.
    h.clear();
    h.reply(host, "snapshot.state", "a-1", json!({}));
    assert!(h.take(a).is_empty());
    assert!(h
        .events()
        .iter()
        .any(|e| matches!(e, RelayEvent::Undelivered {
        reason: Undelivered::UnknownReplyTo { reply_to }, .. } if reply_to == "a-1")));
}

#[test]
fn pushes_reach_every_agent_of_the_session_and_no_other() {
    let mut h = Harness::quiet();
    let host = h.host();
    let (a, b) = (h.agent(), h.agent());
    let other_host = h.join("host", "s2");
    let other = h.join("agent", "s2");
    h.msg(
        host,
        "state.updated",
        None,
        json!({"source":"user","uiSpec":{},"messageHistory":[]}),
    );
    h.msg(
        host,
        "user.message",
        None,
        json!({"text":"I prefer evening showtimes.","stage":"time"}),
    );
    for agent in [a, b] {
        let got: Vec<Value> = h.take(agent);
        let types: Vec<&str> = got.iter().map(|v| v["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["state.updated", "user.message"]);
    }
    assert!(h.take(other).is_empty());
    assert!(h.take(other_host).is_empty());
    // A push with no agents joined goes nowhere, quietly.
    let mut h = Harness::quiet();
    let host = h.host();
    h.msg(host, "state.updated", None, json!({}));
    assert!(h
        .events()
        .iter()
        .any(|e| matches!(e, RelayEvent::Forwarded { recipients: 0, .. })));
}

#[test]
fn colliding_request_ids_are_answered_first_come_first_served() {
    let mut h = Harness::quiet();
    let host = h.host();
    let (a, b) = (h.agent(), h.agent());
    h.msg(a, "snapshot.get", Some("req-001"), json!({}));
    h.msg(b, "snapshot.get", Some("req-001"), json!({}));
    h.clear();
    h.reply(host, "snapshot.state", "req-001", json!({"n":1}));
    assert_eq!(h.one(a)["payload"]["n"], 1);
    assert!(h.take(b).is_empty());
    h.reply(host, "snapshot.state", "req-001", json!({"n":2}));
    assert_eq!(h.one(b)["payload"]["n"], 2);
    assert!(h.take(a).is_empty());
}

#[test]
fn no_host_gives_session_not_active_with_reply_to_and_the_exact_text() {
    let mut h = Harness::quiet();
    let a = h.agent();
    h.msg(a, "tool.call", Some("req-003"), json!({}));
    assert_eq!(
        error_of(&h.one(a)),
        (
            "SESSION_NOT_ACTIVE".into(),
            "No active host connection for this session.".into(),
            Some("req-003".into())
        )
    );
    assert_eq!(h.relay.pending_requests(a), 0, "nothing is remembered");
    assert!(h.events().iter().any(|e| matches!(
        e,
        RelayEvent::Undelivered {
            reason: Undelivered::NoHost,
            ..
        }
    )));
    // Without an id: the same error without replyTo.
    h.msg(a, "agent.message", None, json!({"text":"hi"}));
    assert_eq!(error_of(&h.one(a)).2, None);
}

#[test]
fn the_host_leaving_fails_every_outstanding_request_with_reply_to() {
    let mut h = Harness::quiet();
    let host = h.host();
    let (a, b) = (h.agent(), h.agent());
    h.msg(a, "tool.call", Some("a-1"), json!({}));
    h.msg(b, "snapshot.get", Some("b-1"), json!({}));
    h.msg(a, "snapshot.get", Some("a-2"), json!({}));
    h.msg(
        a,
        "agent.message",
        None,
        json!({"text":"no id, not a request"}),
    );
    h.clear();
    h.disconnect(host);
    let replies: Vec<_> = h.take(a).iter().map(error_of).collect();
    assert_eq!(
        replies,
        [
            (
                "SESSION_NOT_ACTIVE".into(),
                texts::HOST_GONE.into(),
                Some("a-1".into())
            ),
            (
                "SESSION_NOT_ACTIVE".into(),
                texts::HOST_GONE.into(),
                Some("a-2".into())
            ),
        ]
    );
    assert_eq!(error_of(&h.one(b)).2.as_deref(), Some("b-1"));
    assert_eq!(h.relay.pending_total(), 0);
    assert!(h.events().iter().any(|e| matches!(
        e,
        RelayEvent::Left {
            role: Role::Host,
            failed_requests: 3,
            ..
        }
    )));
    // The agents stay; a new host takes over the same session.
    let host2 = h.host();
    h.msg(a, "snapshot.get", Some("a-3"), json!({}));
    assert_eq!(h.one(host2)["id"], "a-3");
}

#[test]
fn an_agent_leaving_drops_its_requests_and_the_late_reply() {
    let mut h = Harness::quiet();
    let host = h.host();
    let (a, b) = (h.agent(), h.agent());
    h.msg(a, "snapshot.get", Some("r"), json!({}));
    h.disconnect(a);
    assert_eq!(h.relay.pending_total(), 0);
    h.clear();
    h.reply(host, "snapshot.state", "r", json!({}));
    assert!(
        h.take(b).is_empty(),
        "a reply for a gone agent reaches no one else"
    );
    assert_eq!(h.relay.agents_of("default"), [b]);
}

#[test]
fn pending_requests_expire_and_late_replies_are_dropped() {
    let mut h = Harness::new(
        RelayConfig::default()
            .with_hello(false)
            .with_presence(false)
            .with_pending_timeout(Some(Duration::from_secs(10))),
    );
    let host = h.host();
    let a = h.agent();
    h.msg(a, "snapshot.get", Some("slow"), json!({}));
    assert_eq!(h.relay.pending_requests(a), 1);
    h.advance(Duration::from_secs(9));
    assert_eq!(h.relay.pending_requests(a), 1);
    h.advance(Duration::from_secs(1));
    assert_eq!(h.relay.pending_requests(a), 0);
    assert!(h.events().iter().any(|e| matches!(e,
        RelayEvent::RequestExpired { agent, id, .. } if *agent == a && id == "slow")));
    h.clear();
    h.reply(host, "snapshot.state", "slow", json!({}));
    assert!(h.take(a).is_empty());
}

#[test]
fn binary_utf8_json_is_accepted_and_forwarded_as_text() {
    let mut h = Harness::quiet();
    let host = h.host();
    let a = h.agent();
    let now = h.now;
    let body = br#"{"v":"mvp-0.2","type":"snapshot.get","id":"bin","payload":{}}"#;
    h.relay.handle_frame(a, Frame::Binary(body), now);
    let mut forwarded = None;
    while let Some(out) = h.relay.poll_output() {
        if let Output::Send { conn, frame } = out {
            forwarded = Some((conn, frame));
        }
    }
    let (conn, frame) = forwarded.expect("forwarded");
    assert_eq!(conn, host);
    assert_eq!(frame.as_text().map(str::as_bytes), Some(&body[..]));
}

// ---- study log ----------------------------------------------------------------------------

#[test]
fn every_record_comes_before_the_send_it_records() {
    let mut h = Harness::new(RelayConfig::default());
    let host = h.host();
    let a = h.agent();
    let b = h.agent();
    h.clear();
    h.msg(
        a,
        "tool.call",
        Some("t1"),
        json!({"toolName":"next","params":{},"reason":"r"}),
    );
    h.reply(
        host,
        "tool.result",
        "t1",
        json!({"ok":true,"toolName":"next"}),
    );
    h.msg(host, "state.updated", None, json!({"source":"tool"}));
    h.msg(b, "tool.call", Some("t2"), json!({}));
    h.disconnect(host);
    // Each send must be preceded, since the previous send, by a record of its type and payload.
    let mut since_last_send: Vec<(Direction, &str, Value)> = Vec::new();
    let mut last_sent: Option<&Value> = None;
    let mut checked = 0;
    for o in &h.outs {
        match o {
            Out::Event(RelayEvent::Log(r)) => since_last_send.push((
                r.direction,
                r.msg_type,
                serde_json::from_str(r.payload.as_str()).unwrap(),
            )),
            Out::Send(_, v) => {
                let t = v["type"].as_str().unwrap();
                let recorded = since_last_send
                    .iter()
                    .any(|(d, rt, p)| *d != Direction::In && *rt == t && *p == v["payload"]);
                // A push to several agents is recorded once, before the first send.
                let repeat_of_push = since_last_send.is_empty() && last_sent == Some(v);
                assert!(
                    recorded || repeat_of_push,
                    "{v} sent without a record first"
                );
                since_last_send.clear();
                last_sent = Some(v);
                checked += 1;
            }
            _ => {}
        }
    }
    assert_eq!(
        checked, 6,
        "tool.call, tool.result, 2 x state.updated, tool.call, error"
    );
}

#[test]
fn log_records_follow_the_reference_directions() {
    let mut h = Harness::quiet();
    let host = h.connect();
    h.msg(host, "relay.join", Some("j1"), json!({"role":"host"}));
    let a = h.connect();
    h.msg(
        a,
        "relay.join",
        Some("j2"),
        json!({"role":"agent","agentName":"bot"}),
    );
    h.msg(
        a,
        "tool.call",
        Some("t"),
        json!({"toolName":"select","params":{"itemId":"m1"},"reason":"r"}),
    );
    h.reply(
        host,
        "tool.result",
        "t",
        json!({"ok":true,"toolName":"select"}),
    );
    h.msg(a, "state.updated", Some("bad"), json!({}));
    h.disconnect(a);
    use Direction::{In, Internal, Out};
    assert_eq!(
        h.log_lines(),
        [
            (Internal, "relay.join", json!({"role":"host"})),
            (
                Internal,
                "relay.joined",
                json!({"role":"host","sessionId":"default"})
            ),
            (
                Internal,
                "relay.join",
                json!({"role":"agent","agentName":"bot"})
            ),
            (
                Internal,
                "relay.joined",
                json!({"role":"agent","sessionId":"default","clientName":"bot"})
            ),
            (
                In,
                "tool.call",
                json!({"toolName":"select","params":{"itemId":"m1"},"reason":"r"})
            ),
            (
                Out,
                "tool.call",
                json!({"toolName":"select","params":{"itemId":"m1"},"reason":"r"})
            ),
            (In, "tool.result", json!({"ok":true,"toolName":"select"})),
            (Out, "tool.result", json!({"ok":true,"toolName":"select"})),
            (
                Internal,
                "error",
                json!({"code":"INVALID_MESSAGE","message":"Unsupported message type for agent role: state.updated",
                       "refusedType":"state.updated","refusedBytes":62})
            ),
            (
                Internal,
                "relay.disconnect",
                json!({"clientId":"00000000-0000-4000-8000-000000000002","role":"agent","clientName":"bot"})
            ),
        ]
    );
    assert!(h.logs().iter().all(|r| r.session_id.as_str() == "default"));
}

#[test]
fn records_keep_their_session_across_host_reconnects_and_carry_wall_clock_time() {
    let mut h = Harness::quiet();
    let host = h.host();
    let a = h.agent();
    h.disconnect(host);
    h.advance(Duration::from_millis(1500));
    let host2 = h.host();
    h.clear();
    h.msg(a, "snapshot.get", Some("r"), json!({}));
    h.reply(host2, "snapshot.state", "r", json!({}));
    let logs = h.logs();
    assert_eq!(logs.len(), 4);
    for r in &logs {
        assert_eq!(r.session_id.as_str(), "default");
        assert_eq!(r.at_unix_ms, UNIX_MS + 1500);
    }
    assert_eq!(
        agent_relay_proto::iso8601_ms(logs[0].at_unix_ms),
        "2026-02-13T10:22:18.623Z"
    );
}

#[test]
fn log_records_can_be_turned_off() {
    let mut cfg = RelayConfig::default();
    cfg.log_records = false;
    let mut h = Harness::new(cfg);
    let host = h.host();
    let a = h.agent();
    h.msg(a, "snapshot.get", Some("r"), json!({}));
    h.reply(host, "snapshot.state", "r", json!({}));
    assert!(h.logs().is_empty());
    assert_eq!(h.one(a)["replyTo"], "r");
}

// ---- presence -----------------------------------------------------------------------------

#[test]
fn the_host_gets_relay_presence_when_agents_come_and_go() {
    let mut h = Harness::new(RelayConfig::default().with_hello(false));
    let host = h.connect();
    h.msg(host, "relay.join", None, json!({"role":"host"}));
    let got = h.take(host);
    assert_eq!(
        got[1],
        json!({"v":"mvp-0.2","type":"relay.presence","payload":{"sessionId":"default","agentCount":0,"agents":[]}})
    );
    let a = h.connect();
    h.msg(a, "relay.join", None, json!({"role":"agent","name":"one"}));
    let p = h.one(host);
    assert_eq!(p["payload"]["agentCount"], 1);
    assert_eq!(p["payload"]["agents"][0]["name"], "one");
    assert!(p["payload"]["agents"][0]["id"].is_string());
    assert_eq!(h.one(a)["type"], "relay.joined", "agents get no presence");
    h.disconnect(a);
    assert_eq!(h.one(host)["payload"]["agentCount"], 0);
}

// ---- limits -------------------------------------------------------------------------------

fn limits(f: impl FnOnce(&mut Limits)) -> RelayConfig {
    let mut l = Limits::default();
    f(&mut l);
    RelayConfig::default()
        .with_hello(false)
        .with_presence(false)
        .with_limits(l)
}

#[test]
fn the_rate_limit_answers_limit_exceeded_and_refills() {
    let mut h = Harness::new(limits(|l| {
        l.rate = Some(RateLimit {
            per_second: 10,
            burst: 3,
        })
    }));
    let host = h.host(); // the join took one token
    let a = h.agent();
    h.msg(a, "agent.message", None, json!({"text":"1"}));
    h.msg(a, "agent.message", None, json!({"text":"2"}));
    h.msg(a, "agent.message", Some("third"), json!({"text":"3"}));
    assert_eq!(h.take(host).len(), 2);
    assert_eq!(
        error_of(&h.one(a)),
        (
            "LIMIT_EXCEEDED".into(),
            texts::RATE_LIMITED.into(),
            Some("third".into())
        )
    );
    assert!(h.closes().is_empty());
    h.now += Duration::from_millis(100);
    h.msg(a, "agent.message", None, json!({"text":"4"}));
    assert_eq!(h.take(host).len(), 1, "refilled after 100 ms at 10/s");
}

#[test]
fn an_agent_may_have_only_so_many_requests_pending() {
    let mut h = Harness::new(limits(|l| l.max_pending_per_agent = 2));
    let host = h.host();
    let a = h.agent();
    for id in ["1", "2", "3"] {
        h.msg(a, "snapshot.get", Some(id), json!({}));
    }
    assert_eq!(h.take(host).len(), 2);
    assert_eq!(
        error_of(&h.one(a)),
        (
            "LIMIT_EXCEEDED".into(),
            texts::TOO_MANY_PENDING.into(),
            Some("3".into())
        )
    );
    // Messages without an id are not requests and still pass; an answer frees a slot.
    h.msg(a, "agent.message", None, json!({"text":"hi"}));
    assert_eq!(h.take(host).len(), 1);
    h.reply(host, "snapshot.state", "1", json!({}));
    h.msg(a, "snapshot.get", Some("4"), json!({}));
    assert_eq!(h.take(host).len(), 1);
}

#[test]
fn sessions_and_agents_per_session_are_bounded() {
    let mut h = Harness::new(limits(|l| {
        l.max_sessions = 2;
        l.max_agents_per_session = 1;
    }));
    h.join("agent", "s1");
    h.join("host", "s2");
    let c = h.connect();
    h.msg(
        c,
        "relay.join",
        Some("j"),
        json!({"role":"host","sessionId":"s3"}),
    );
    assert_eq!(
        error_of(&h.one(c)),
        (
            "LIMIT_EXCEEDED".into(),
            texts::TOO_MANY_SESSIONS.into(),
            Some("j".into())
        )
    );
    h.msg(
        c,
        "relay.join",
        Some("j"),
        json!({"role":"agent","sessionId":"s1"}),
    );
    assert_eq!(error_of(&h.one(c)).1, texts::TOO_MANY_AGENTS);
    // A host may still join a session whose agent slots are full.
    h.msg(
        c,
        "relay.join",
        Some("j"),
        json!({"role":"host","sessionId":"s1"}),
    );
    assert_eq!(h.one(c)["type"], "relay.joined");
}

#[test]
fn one_connection_too_many_gets_an_error_and_close_1013() {
    let mut h = Harness::new(limits(|l| l.max_connections = 2));
    h.connect();
    h.connect();
    let c = h.connect();
    assert_eq!(
        error_of(&h.one(c)),
        (
            "LIMIT_EXCEEDED".into(),
            texts::TOO_MANY_CONNECTIONS.into(),
            None
        )
    );
    assert_eq!(
        h.closes(),
        [(c, CloseCode::TRY_AGAIN_LATER, "server-full".into())]
    );
    assert_eq!(h.relay.connection_count(), 2);
}

#[test]
fn ids_and_session_ids_are_bounded() {
    let mut h = Harness::new(limits(|l| {
        l.max_id_bytes = 8;
        l.max_session_id_bytes = 7; // "default" fits
    }));
    let host = h.host();
    let a = h.agent();
    h.msg(a, "snapshot.get", Some("123456789"), json!({}));
    assert_eq!(error_of(&h.one(a)).1, texts::ID_TOO_LONG);
    assert!(h.take(host).is_empty());
    let c = h.connect();
    h.msg(
        c,
        "relay.join",
        None,
        json!({"role":"agent","sessionId":"abcdefgh"}),
    );
    assert_eq!(error_of(&h.one(c)).1, texts::SESSION_ID_TOO_LONG);
}

#[test]
fn v_is_required_unless_configured_otherwise_and_never_wrong() {
    let mut h = Harness::quiet();
    let a = h.agent();
    h.send(a, json!({"type":"snapshot.get","id":"r","payload":{}}));
    assert_eq!(
        error_of(&h.one(a)),
        (
            "INVALID_MESSAGE".into(),
            texts::BAD_VERSION.into(),
            Some("r".into())
        )
    );
    let mut h = Harness::new(
        RelayConfig::default()
            .with_hello(false)
            .with_presence(false)
            .with_missing_version_allowed(true),
    );
    let host = h.host();
    let a = h.agent();
    h.send(a, json!({"type":"snapshot.get","id":"r","payload":{}}));
    assert_eq!(h.one(host)["id"], "r");
    h.send(
        a,
        json!({"v":"mvp-0.3","type":"snapshot.get","id":"r2","payload":{}}),
    );
    assert_eq!(error_of(&h.one(a)).1, texts::BAD_VERSION);
}

// ---- commands, clocks, determinism --------------------------------------------------------

#[test]
fn the_close_command_takes_the_connection_out_of_its_session() {
    let mut h = Harness::quiet();
    let host = h.host();
    let a = h.agent();
    h.msg(a, "snapshot.get", Some("r"), json!({}));
    h.clear();
    let now = h.now;
    h.relay
        .close(host, CloseCode::GOING_AWAY, "shutdown", now)
        .unwrap();
    h.drain();
    assert_eq!(h.relay.host_of("default"), None);
    assert_eq!(error_of(&h.one(a)).2.as_deref(), Some("r"));
    assert!(h
        .relay
        .close(host, CloseCode::NORMAL, "again", now)
        .is_err());
}

#[test]
fn time_going_backwards_is_clamped() {
    let mut h = Harness::new(limits(|_| {}).with_pending_timeout(Some(Duration::from_secs(5))));
    let host = h.host();
    let a = h.agent();
    h.now += Duration::from_secs(10);
    h.msg(a, "snapshot.get", Some("r"), json!({}));
    let deadline = h.relay.poll_timeout().unwrap();
    // A call with an earlier `now` neither fires early nor moves the deadline back.
    h.now -= Duration::from_secs(9);
    h.relay.handle_timeout(h.now);
    h.drain();
    assert_eq!(h.relay.pending_requests(a), 1);
    assert_eq!(h.relay.poll_timeout(), Some(deadline));
    h.reply(host, "snapshot.state", "r", json!({}));
    assert_eq!(h.one(a)["replyTo"], "r");
}

#[test]
fn the_same_inputs_give_the_same_outputs() {
    let run = || {
        let mut h = Harness::new(RelayConfig::default());
        let host = h.host();
        let (a, b) = (h.agent(), h.agent());
        h.msg(a, "snapshot.get", Some("x"), json!({}));
        h.msg(b, "snapshot.get", Some("x"), json!({}));
        h.msg(host, "state.updated", None, json!({}));
        h.disconnect(host);
        format!("{:?}", h.outs)
    };
    assert_eq!(run(), run());
}

#[test]
fn events_report_joins_forwards_and_leaves() {
    let mut h = Harness::quiet();
    let host = h.connect();
    h.msg(host, "relay.join", None, json!({"role":"host"}));
    let a = h.connect();
    h.msg(a, "relay.join", None, json!({"role":"agent","name":"n"}));
    h.msg(a, "agent.message", None, json!({"text":"t"}));
    h.disconnect(a);
    let ev = h.events();
    assert!(ev
        .iter()
        .any(|e| matches!(e, RelayEvent::Joined { conn, role: Role::Host, .. } if *conn == host)));
    assert!(ev.iter().any(|e| matches!(e, RelayEvent::Joined { conn, role: Role::Agent, client_name: Some(n), .. } if *conn == a && n == "n")));
    assert!(ev.iter().any(|e| matches!(e, RelayEvent::Forwarded { from, msg_type: "agent.message", recipients: 1, .. } if *from == a)));
    assert!(ev
        .iter()
        .any(|e| matches!(e, RelayEvent::Left { conn, role: Role::Agent, .. } if *conn == a)));
    assert!(ev.contains(&RelayEvent::Disconnected { conn: a }));
    let stats = h.relay.stats();
    assert_eq!((stats.to_host, stats.errors_sent), (1, 0));
}

#[test]
fn refused_messages_are_recorded_as_one_internal_error_with_type_and_size_never_payload() {
    // An agent without a host (no authentication needed to join) sends 150 messages of
    // 512 KiB: each is refused, none is an `in` record, and the log grows by one small
    // `error` record per message, whatever its size.
    let mut h = Harness::quiet();
    let a = h.agent();
    let big = "x".repeat(512 << 10);
    for i in 0..150 {
        h.msg(
            a,
            "agent.message",
            Some(&format!("m-{i}")),
            json!({ "text": big }),
        );
        assert_eq!(error_of(&h.one(a)).0, "SESSION_NOT_ACTIVE");
    }
    let logs = h.logs();
    assert_eq!(logs.len(), 150);
    let mut bytes = 0;
    for r in &logs {
        assert_eq!((r.direction, r.msg_type), (Direction::Internal, "error"));
        assert!(!r.payload.as_str().contains("xxxx"), "payload logged");
        let v: Value = serde_json::from_str(r.payload.as_str()).expect("json");
        assert_eq!(v["refusedType"], "agent.message");
        assert!(v["refusedBytes"].as_u64().expect("size") > 512 << 10);
        bytes += r.line_len_bound();
    }
    assert!(bytes < 150 * 400, "{bytes} bytes of log for 75 MiB refused");
    // Other refusals (garbage, a type the role may not send) are recorded the same way.
    h.clear();
    h.send_text(a, "not json");
    h.msg(a, "tool.result", None, json!({}));
    let lines = h.log_lines();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0].2["refusedBytes"], 8);
    assert!(lines[0].2.get("refusedType").is_none());
    assert_eq!(lines[1].2["refusedType"], "tool.result");
}

#[test]
fn the_log_cap_refuses_what_would_pass_it_and_resets_at_session_ended() {
    let mut limits = Limits::default();
    limits.max_log_bytes_per_session = Some(21_000);
    limits.rate = None;
    let mut h = Harness::new(
        RelayConfig::default()
            .with_hello(false)
            .with_presence(false)
            .with_limits(limits),
    );
    let host = h.host();
    let a = h.agent();
    let text = "y".repeat(3_000);
    // A request the host answers once the log is full.
    h.msg(a, "snapshot.get", Some("s1"), json!({}));
    assert_eq!(h.one(host)["id"], "s1");
    let mut accepted = 0;
    let refused = loop {
        h.clear();
        h.msg(a, "agent.message", Some("m"), json!({ "text": text }));
        if let Some(v) = h.take(a).first() {
            break v.clone();
        }
        assert_eq!(h.one(host)["type"], "agent.message");
        accepted += 1;
        assert!(accepted < 10, "the cap never refused");
    };
    assert_eq!(
        error_of(&refused),
        (
            "LIMIT_EXCEEDED".into(),
            texts::LOG_FULL.into(),
            Some("m".into())
        )
    );
    assert_eq!(
        accepted, 3,
        "3 x 2 records of ~3.2 KB fit 21,000 bytes with the joins, a 4th does not"
    );
    assert!(h.take(host).is_empty(), "not forwarded");
    assert!(h
        .log_lines()
        .iter()
        .all(|(d, _, _)| *d == Direction::Internal));
    // The refusals are recorded while they fit; beyond the cap the relay's own records are
    // dropped and counted, and the sender is still answered every time.
    for _ in 0..10 {
        h.clear();
        h.msg(a, "agent.message", Some("m"), json!({ "text": text }));
        assert_eq!(error_of(&h.one(a)).0, "LIMIT_EXCEEDED");
    }
    assert!(h.relay.stats().log_records_dropped >= 1);
    assert!(h.logs().is_empty());
    // A host reply past the cap: the host is refused, the asking agent told at once.
    h.clear();
    let pending = h.relay.pending_requests(a);
    h.reply(host, "snapshot.state", "s1", json!({ "uiSpec": text }));
    assert_eq!(error_of(&h.one(host)).0, "LIMIT_EXCEEDED");
    assert_eq!(
        error_of(&h.one(a)),
        (
            "LIMIT_EXCEEDED".into(),
            texts::LOG_FULL.into(),
            Some("s1".into())
        )
    );
    assert_eq!(h.relay.pending_requests(a), pending - 1, "s1 is answered");
    // session.end and session.ended always pass; session.ended starts a new budget.
    h.clear();
    h.msg(a, "session.end", Some("e"), json!({ "reason": text }));
    assert_eq!(h.one(host)["type"], "session.end");
    h.reply(
        host,
        "session.ended",
        "e",
        json!({"sessionId":"s-1","logFile":"x","stateReset":true}),
    );
    assert_eq!(h.one(a)["type"], "session.ended");
    h.clear();
    h.msg(a, "agent.message", Some("m"), json!({ "text": text }));
    assert_eq!(h.one(host)["type"], "agent.message");
}

//! Forwarding through the relay: agent messages reach the host byte for byte, a reply
//! reaches only the agent that asked, pushes reach every agent, and outstanding requests
//! fail, are dropped or expire when their host or agent leaves.

mod common;

use std::time::Duration;

use agent_relay_proto::{texts, Direction, Relay, RelayConfig, RelayEvent, Role, Undelivered};
use agentwire_core::{ConnId, Frame, Machine, Output, PeerInfo, SequentialIds};
use common::{error_of, t0, Harness, UNIX_MS};
use serde_json::{json, Value};

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
        h.msg(a, "snapshot.get", Some("q"), json!({}));
        h.clear();
        h.reply(host, t, "q", json!({}));
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
fn a_request_without_id_is_answered_to_its_sender_only() {
    let mut h = Harness::quiet();
    let host = h.host();
    let (a, b) = (h.agent(), h.agent());
    // Agent a asks without an id: the host gets the request with an id of the relay's.
    h.msg(a, "snapshot.get", None, json!({}));
    let forwarded = h.one(host);
    assert_eq!(forwarded["type"], "snapshot.get");
    assert_eq!(forwarded["payload"], json!({}));
    let minted = forwarded["id"].as_str().expect("an id").to_owned();
    assert!(minted.starts_with("relay-"), "{minted}");
    // Agent b uses the same text as its own id: the two never mix.
    h.msg(b, "snapshot.get", Some(&minted), json!({}));
    let second = h.one(host)["id"].clone();
    assert_eq!(second, minted.as_str());
    h.clear();

    // The answer reaches a only, without the relay's replyTo, its bytes otherwise the host's.
    let state = json!({"sessionId":"default","uiSpec":{},"messageHistory":[],"toolSchema":[]});
    h.reply(host, "snapshot.state", &minted, state.clone());
    let got = h.one(a);
    assert_eq!(
        got,
        json!({"v":"mvp-0.2","type":"snapshot.state","payload":state})
    );
    assert!(h.take(b).is_empty(), "b never sees a's answer");
    // The next answer with that replyTo is b's own.
    h.reply(host, "snapshot.state", &minted, state.clone());
    assert_eq!(h.one(b)["replyTo"], minted.as_str());
    assert!(h.take(a).is_empty());

    // The log records the agent's request and the answer as each side sees it.
    let lines = h.log_lines();
    let out: Vec<&Value> = lines
        .iter()
        .filter(|(d, t, _)| *d == Direction::Out && *t == "snapshot.state")
        .map(|(_, _, p)| p)
        .collect();
    assert_eq!(out, [&state, &state]);

    // A tool call without id: its error, too, reaches a only.
    h.clear();
    h.msg(
        a,
        "tool.call",
        None,
        json!({"toolName":"next","params":{},"reason":"r"}),
    );
    let id = h.one(host)["id"].as_str().unwrap().to_owned();
    h.reply(
        host,
        "error",
        &id,
        json!({"code":"SESSION_NOT_ACTIVE","message":"No session."}),
    );
    assert_eq!(
        error_of(&h.one(a)),
        ("SESSION_NOT_ACTIVE".into(), "No session.".into(), None)
    );
    assert!(h.take(b).is_empty());
    assert_eq!(h.relay.pending_total(), 0);
}

#[test]
fn a_host_answer_without_reply_to_is_never_sent_to_every_agent() {
    let mut h = Harness::quiet();
    let host = h.host();
    let (a, b) = (h.agent(), h.agent());
    for t in ["session.started", "snapshot.state", "tool.result", "error"] {
        h.clear();
        h.msg(host, t, None, json!({}));
        assert!(h.take(a).is_empty() && h.take(b).is_empty(), "{t}");
        assert!(
            h.events()
                .iter()
                .any(|e| matches!(e, RelayEvent::Undelivered {
                reason: Undelivered::NoReplyTo, msg_type, .. } if *msg_type == t)),
            "{t}"
        );
    }
    // The pushes go to every agent.
    for t in ["state.updated", "user.message", "session.ended"] {
        h.clear();
        h.msg(host, t, None, json!({}));
        assert_eq!(h.one(a)["type"], t);
        assert_eq!(h.one(b)["type"], t);
    }
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
        json!({"text":"no id: answered without replyTo"}),
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
            ("SESSION_NOT_ACTIVE".into(), texts::HOST_GONE.into(), None),
        ]
    );
    assert_eq!(error_of(&h.one(b)).2.as_deref(), Some("b-1"));
    assert_eq!(h.relay.pending_total(), 0);
    assert!(h.events().iter().any(|e| matches!(
        e,
        RelayEvent::Left {
            role: Role::Host,
            failed_requests: 4,
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

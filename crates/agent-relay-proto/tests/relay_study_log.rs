//! The relay's study-log records: one per message, before the send it records, in the
//! reference's directions, one `internal` record per refusal, and the per-session cap.

mod common;

use std::time::Duration;

use agent_relay_proto::{texts, Direction, Limits, RelayConfig, RelayEvent};
use common::{error_of, Harness, Out, UNIX_MS};
use serde_json::{json, Value};

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

/// `(sessionId, relay session, direction, type)` of every record since the last `clear`.
fn sessions_of(h: &Harness) -> Vec<(String, String, Direction, &'static str)> {
    h.logs()
        .into_iter()
        .map(|r| {
            (
                r.session_id.as_str().to_owned(),
                r.relay_session.as_str().to_owned(),
                r.direction,
                r.msg_type,
            )
        })
        .collect()
}

#[test]
fn records_of_a_study_session_carry_its_id_and_the_others_the_relay_session() {
    let mut h = Harness::quiet();
    let host = h.host();
    let a = h.agent();
    let study = |d, t| ("s-20260213-001".to_owned(), "default".to_owned(), d, t);
    let relay = |d, t| ("default".to_owned(), "default".to_owned(), d, t);
    use Direction::{In, Out};

    // Before a study session: the relay session's id.
    h.clear();
    h.msg(a, "snapshot.get", Some("p-1"), json!({}));
    h.reply(
        host,
        "snapshot.state",
        "p-1",
        json!({"sessionId":"default"}),
    );
    h.msg(
        a,
        "session.start",
        Some("req-001"),
        json!({"studyId":"x","participantId":"y"}),
    );
    assert_eq!(
        sessions_of(&h),
        [
            relay(In, "snapshot.get"),
            relay(Out, "snapshot.get"),
            relay(In, "snapshot.state"),
            relay(Out, "snapshot.state"),
            relay(In, "session.start"),
            relay(Out, "session.start"),
        ]
    );
    assert_eq!(h.relay.study_session_of("default"), None);

    // From session.started through session.ended: the study session's id (spec §6).
    h.clear();
    h.reply(
        host,
        "session.started",
        "req-001",
        json!({"sessionId":"s-20260213-001"}),
    );
    assert_eq!(
        h.relay.study_session_of("default").map(|s| s.as_str()),
        Some("s-20260213-001")
    );
    h.msg(
        a,
        "tool.call",
        Some("t-1"),
        json!({"toolName":"next","params":{},"reason":"r"}),
    );
    let mut got = sessions_of(&h);
    h.clear();
    // A host reconnect keeps the study session (the host keeps it too).
    h.disconnect(host);
    got.extend(sessions_of(&h));
    let host = h.host();
    h.msg(host, "state.updated", None, json!({"source":"user"}));
    h.msg(a, "session.end", Some("req-999"), json!({}));
    h.reply(
        host,
        "session.ended",
        "req-999",
        json!({"sessionId":"s-20260213-001","logFile":"x","stateReset":true}),
    );
    got.extend(sessions_of(&h));
    let studied: Vec<_> = got
        .iter()
        .filter(|(_, _, d, _)| *d != Direction::Internal)
        .cloned()
        .collect();
    assert_eq!(
        studied,
        [
            study(In, "session.started"),
            study(Out, "session.started"),
            study(In, "tool.call"),
            study(Out, "tool.call"),
            study(In, "state.updated"),
            study(Out, "state.updated"),
            study(In, "session.end"),
            study(Out, "session.end"),
            study(In, "session.ended"),
            study(Out, "session.ended"),
        ]
    );
    // The relay's own records meanwhile (the failed request, the disconnect) belong to the
    // study session too.
    assert!(got.iter().all(|r| r.0 == "s-20260213-001"), "{got:?}");

    // After session.ended: the relay session's id again.
    h.clear();
    assert_eq!(h.relay.study_session_of("default"), None);
    h.msg(a, "snapshot.get", Some("p-2"), json!({}));
    assert_eq!(sessions_of(&h)[0], relay(In, "snapshot.get"));

    // A session.started whose sessionId is no usable id changes nothing.
    for bad in [
        json!({}),
        json!({"sessionId": 7}),
        json!({"sessionId": "  "}),
        json!({"sessionId": "x".repeat(257)}),
    ] {
        h.msg(a, "session.start", Some("s"), json!({}));
        h.clear();
        h.reply(host, "session.started", "s", bad.clone());
        assert_eq!(sessions_of(&h)[0], relay(In, "session.started"), "{bad}");
    }
}

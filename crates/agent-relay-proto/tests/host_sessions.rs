//! The Host's study sessions: `session.start` and its dated ids, requests outside a
//! session, and `session.end` with the application's log flush.

mod common;

use std::time::Duration;

use agent_relay_proto::{
    host_texts, study_log_path, ErrorCode, HostCommandError, HostEvent, HostTimer, Tools,
};
use agentwire_core::Machine;
use serde_json::json;

use common::host::*;
use common::{error_of, UNIX_MS};

// ---- sessions ------------------------------------------------------------------------------

#[test]
fn session_start_answers_a_new_dated_id_counting_from_001_per_day() {
    let mut h = H::new();
    h.req(
        "session.start",
        "req-001",
        json!({"studyId":"pilot-01","participantId":"P07"}),
    );
    assert_eq!(h.one(), fixture("session_started"));
    assert_eq!(
        h.events(),
        [HostEvent::SessionStarted {
            session_id: "s-20260213-001".into(),
            study_id: "pilot-01".into(),
            participant_id: "P07".into()
        }]
    );
    assert_eq!(h.host.session_id(), Some("s-20260213-001"));

    let mut ids = Vec::new();
    for _ in 0..2 {
        h.end();
        ids.push(h.start());
    }
    // The wall clock runs on with `now`: the next day starts again at 001.
    h.now += Duration::from_millis(DAY_MS);
    h.end();
    ids.push(h.start());
    assert_eq!(ids, ["s-20260213-002", "s-20260213-003", "s-20260214-001"]);
    // Re-anchoring the wall clock moves the date too.
    h.host.set_wall_clock(h.now, UNIX_MS + 30 * DAY_MS);
    h.end();
    assert_eq!(h.start(), "s-20260315-001");
}

#[test]
fn resume_numbering_continues_after_the_last_id_of_the_day() {
    let mut h = H::new();
    assert_eq!(
        h.host.resume_numbering("s-20260213-1"),
        Ok(()),
        "short numbers parse"
    );
    h.host.resume_numbering("s-20260213-041").unwrap();
    h.host.resume_numbering("s-20260212-099").unwrap(); // an older day changes nothing
    for bad in [
        "",
        "s-2026021-001",
        "x-20260213-001",
        "s-20260213-",
        "s-20260213-0a1",
    ] {
        assert_eq!(
            h.host.resume_numbering(bad),
            Err(HostCommandError::InvalidSessionId),
            "{bad}"
        );
    }
    assert_eq!(h.start(), "s-20260213-042");
}

#[test]
fn requests_outside_a_session_get_session_not_active() {
    let mut h = H::new();
    for (t, payload) in [
        (
            "tool.call",
            json!({"toolName":"select","params":{"itemId":"m1"},"reason":"r"}),
        ),
        ("agent.message", json!({"text":"hi"})),
        ("session.end", json!({})),
    ] {
        h.req(t, "q-1", payload);
        assert_eq!(
            error_of(&h.one()),
            err("SESSION_NOT_ACTIVE", host_texts::NO_SESSION, "q-1"),
            "{t}"
        );
    }
    assert_eq!(h.host.tools().calls, 0);
    assert!(h.host.history().is_empty());
    let refused = h.events();
    assert_eq!(refused.len(), 3);
    assert!(
        matches!(&refused[0], HostEvent::Refused { msg_type: "tool.call", reply_to: Some(r), error }
        if r == "q-1" && error.code == ErrorCode::SESSION_NOT_ACTIVE)
    );
}

#[test]
fn snapshot_get_is_answered_before_session_start_and_after_session_end() {
    let mut h = H::new();
    // The reference agent polls from the moment it joins, before any session.start.
    h.req("snapshot.get", "poll-1", json!({}));
    let snap = h.one();
    assert_eq!(snap["type"], "snapshot.state");
    assert_eq!(snap["replyTo"], "poll-1");
    // Outside a study session the snapshot names the relay session, as the real host does.
    assert_eq!(snap["payload"]["sessionId"], "default");
    assert_eq!(snap["payload"]["uiSpec"]["stage"], "movie");
    assert_eq!(snap["payload"]["messageHistory"], json!([]));
    assert_eq!(snap["payload"]["toolSchema"][0]["name"], "select");
    assert!(h.events().is_empty(), "a read is no refusal");

    // In a session it names the study session; after the end, the relay session again.
    let id = h.start();
    h.req("snapshot.get", "poll-2", json!({}));
    assert_eq!(h.one()["payload"]["sessionId"], id.as_str());
    h.end();
    h.req("snapshot.get", "poll-3", json!({}));
    assert_eq!(h.one()["payload"]["sessionId"], "default");

    // A host serving another relay session names that one.
    let mut other = H::with(
        agent_relay_proto::HostConfig::default().with_relay_session("lab-2"),
        Booking::new(),
    );
    other.connect();
    let join = other.sent().pop().unwrap();
    other.feed(
        json!({"v":"mvp-0.2","type":"relay.joined","replyTo":join["id"],
        "payload":{"role":"host","sessionId":"lab-2"}}),
    );
    other.outs.clear();
    other.req("snapshot.get", "poll-1", json!({}));
    assert_eq!(other.one()["payload"]["sessionId"], "lab-2");
}

#[test]
fn a_repeated_session_start_gets_the_same_session_and_another_is_refused() {
    let mut h = H::in_session();
    h.req(
        "session.start",
        "retry",
        json!({"studyId":"pilot-01","participantId":"P07"}),
    );
    assert_eq!(
        h.one(),
        json!({"v":"mvp-0.2","type":"session.started","replyTo":"retry",
               "payload":{"sessionId":"s-20260213-001"}})
    );
    assert!(h.events().is_empty(), "no new session");
    h.req(
        "session.start",
        "other",
        json!({"studyId":"pilot-01","participantId":"P08"}),
    );
    assert_eq!(
        error_of(&h.one()),
        err(
            "INVALID_MESSAGE",
            "A session is already active: s-20260213-001.",
            "other"
        )
    );
    h.req("session.start", "bad", json!({"studyId":"pilot-01"}));
    let (code, message, reply_to) = error_of(&h.one());
    assert_eq!(
        (code.as_str(), reply_to.as_deref()),
        ("INVALID_MESSAGE", Some("bad"))
    );
    assert!(
        message.starts_with("Invalid session.start payload: missing field `participantId`"),
        "{message}"
    );
}

// ---- ending a session ----------------------------------------------------------------------

#[test]
fn session_end_waits_for_the_flush_then_resets_and_answers_session_ended() {
    let mut h = H::in_session();
    h.call("n", "next", json!({}));
    h.req("agent.message", "m", json!({"text":"hi"}));
    h.outs.clear();
    let ticket = h.begin_end();
    assert!(h.host.is_ending());
    let (_, kind) = h.host.next_timer().unwrap();
    assert_eq!(kind, HostTimer::LogFlush);

    // While the log is flushed, reads work and changes are refused.
    h.req("snapshot.get", "s", json!({}));
    assert_eq!(h.one()["type"], "snapshot.state");
    h.call("c", "next", json!({}));
    assert_eq!(
        error_of(&h.one()),
        err("SESSION_NOT_ACTIVE", host_texts::SESSION_ENDING, "c")
    );
    h.req("session.end", "again", json!({}));
    assert_eq!(error_of(&h.one()).1, host_texts::SESSION_ENDING);
    h.events();

    let log = study_log_path("s-20260213-001");
    assert_eq!(log, "logs/study/s-20260213-001.jsonl");
    h.host.confirm_flush(ticket, &log, h.now).unwrap();
    h.drain();
    let sent = h.sent();
    assert_eq!(sent[0], fixture("session_ended"));
    assert_eq!(sent[1]["type"], "state.updated");
    assert_eq!(sent[1]["payload"]["source"], "reset");
    assert_eq!(sent[1]["payload"]["uiSpec"]["stage"], "movie");
    assert_eq!(sent[1]["payload"]["messageHistory"], json!([]));
    assert_eq!(
        h.events(),
        [
            HostEvent::SessionEnded {
                session_id: "s-20260213-001".into(),
                log_file: log.clone()
            },
            HostEvent::StateChanged {
                source: "reset".into()
            }
        ]
    );
    assert_eq!(h.host.tools().resets, 1);
    assert!(h.host.history().is_empty());
    assert_eq!(h.host.session_id(), None);
    assert_eq!(h.host.poll_timeout(), None);
    h.req(
        "tool.call",
        "after",
        json!({"toolName":"next","params":{},"reason":"r"}),
    );
    assert_eq!(error_of(&h.one()).0, "SESSION_NOT_ACTIVE");
    // The ticket is spent.
    assert_eq!(
        h.host.confirm_flush(ticket, &log, h.now),
        Err(HostCommandError::UnknownTicket)
    );
}

#[test]
fn a_failed_or_late_flush_keeps_the_session_and_answers_log_flush_failed() {
    let mut h = H::in_session();
    h.call("n", "next", json!({}));
    h.outs.clear();
    let ticket = h.begin_end();
    h.host.fail_flush(ticket, "disk full", h.now).unwrap();
    h.drain();
    assert_eq!(
        error_of(&h.one()),
        err("LOG_FLUSH_FAILED", "disk full", "req-999")
    );
    assert_eq!(
        h.events(),
        [HostEvent::SessionEndFailed {
            session_id: "s-20260213-001".into(),
            message: "disk full".into()
        }]
    );
    assert!(!h.host.is_ending());
    assert_eq!(h.host.tools().stage(), Some("theater"), "nothing was reset");
    assert_eq!(h.host.tools().resets, 0);
    assert_eq!(
        h.host.confirm_flush(ticket, "x", h.now),
        Err(HostCommandError::UnknownTicket)
    );

    // No confirmation within flush_timeout (10 s) fails the same way.
    let ticket = h.begin_end();
    h.advance(Duration::from_millis(9_999));
    assert!(h.outs.is_empty());
    h.advance(Duration::from_millis(1));
    assert_eq!(
        error_of(&h.one()),
        err("LOG_FLUSH_FAILED", host_texts::FLUSH_TIMEOUT, "req-999")
    );
    assert_eq!(h.host.session_id(), Some("s-20260213-001"));
    assert_eq!(
        h.host.confirm_flush(ticket, "late", h.now),
        Err(HostCommandError::UnknownTicket)
    );
    assert_eq!(h.host.poll_timeout(), None);
    // And the agent may try again.
    let ticket = h.begin_end();
    h.host.confirm_flush(ticket, "ok.jsonl", h.now).unwrap();
    assert_eq!(h.host.session_id(), None);
}

#[test]
fn the_application_can_end_the_session_and_agents_get_session_ended() {
    let mut h = H::new();
    assert_eq!(
        h.host.end_session(None, h.now),
        Err(HostCommandError::NoSession)
    );
    h.start();
    let ticket = h.host.end_session(Some("participant-left"), h.now).unwrap();
    h.drain();
    assert_eq!(
        h.events(),
        [HostEvent::SessionEnding {
            session_id: "s-20260213-001".into(),
            reason: Some("participant-left".into()),
            ticket
        }]
    );
    assert_eq!(
        h.host.end_session(None, h.now),
        Err(HostCommandError::Ending)
    );
    h.host.confirm_flush(ticket, "l.jsonl", h.now).unwrap();
    h.drain();
    assert_eq!(
        h.sent()[0],
        json!({"v":"mvp-0.2","type":"session.ended","payload":
            {"sessionId":"s-20260213-001","logFile":"l.jsonl","stateReset":true}})
    );
}

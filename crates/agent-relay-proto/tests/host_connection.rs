//! The Host's connection to the relay: `relay.join` on every connect, join refusals and
//! deadlines, the relay's own messages, and reconnects (the session survives, pushes wait
//! for the join).

mod common;

use std::time::Duration;

use agent_relay_proto::{
    sources, texts, ErrorCode, Host, HostCommandError, HostConfig, HostEvent, HostLimits, HostTimer,
};
use agentwire_core::{CloseCode, Frame, Machine};
use serde_json::json;

use common::host::*;

// ---- joining the relay ---------------------------------------------------------------------

#[test]
fn every_connect_sends_relay_join_as_host_for_its_relay_session() {
    let mut h = H::with(HostConfig::default(), Booking::new());
    h.connect();
    assert_eq!(
        h.one(),
        json!({"v":"mvp-0.2","type":"relay.join","id":"host-join-1",
               "payload":{"role":"host","sessionId":"default"}})
    );
    assert!(h.host.is_connected() && !h.host.is_joined());
    h.disconnect();
    assert_eq!(h.events(), [HostEvent::Disconnected]);
    h.connect();
    assert_eq!(h.one()["id"], "host-join-2", "a fresh join id per connect");

    let mut h = H::with(
        HostConfig::default().with_relay_session("lab-3"),
        Booking::new(),
    );
    h.connect();
    assert_eq!(h.one()["payload"]["sessionId"], "lab-3");
    // Only the answer to our own join counts.
    h.feed(json!({"v":"mvp-0.2","type":"relay.hello","payload":{"message":"hi"}}));
    h.feed(json!({"v":"mvp-0.2","type":"relay.joined","replyTo":"other","payload":{"role":"host","sessionId":"lab-3"}}));
    assert!(!h.host.is_joined());
    h.feed(json!({"v":"mvp-0.2","type":"relay.joined","replyTo":"host-join-1","payload":{"role":"host","sessionId":"lab-3"}}));
    assert!(h.host.is_joined());
    assert_eq!(
        h.events(),
        [HostEvent::Joined {
            relay_session: "lab-3".into()
        }]
    );
    assert!(h.sent().is_empty());
}

#[test]
fn the_relay_refusing_the_join_closes_the_connection() {
    let mut h = H::with(HostConfig::default(), Booking::new());
    let c = h.connect();
    h.sent();
    h.feed(json!({"v":"mvp-0.2","type":"error","replyTo":"host-join-1",
        "payload":{"code":"LIMIT_EXCEEDED","message":"The relay has reached its session limit."}}));
    assert_eq!(
        h.closes(),
        [(c, CloseCode::NORMAL, "join-refused".to_owned())]
    );
    assert_eq!(
        h.events(),
        [HostEvent::JoinRefused {
            code: ErrorCode::LIMIT_EXCEEDED,
            message: "The relay has reached its session limit.".into()
        }]
    );
    assert!(!h.host.is_connected());
    // The driver's later disconnect and stray frames on that connection are no-ops.
    h.req("snapshot.get", "r", json!({}));
    h.disconnect();
    assert!(h.outs.is_empty(), "{:?}", h.outs);
}

#[test]
fn no_join_answer_within_the_deadline_closes_the_connection() {
    let mut h = H::with(HostConfig::default(), Booking::new());
    let c = h.connect();
    h.sent();
    let (at, kind) = h.host.next_timer().unwrap();
    assert_eq!(
        (at - h.now, kind),
        (Duration::from_secs(10), HostTimer::JoinReply)
    );
    h.advance(Duration::from_millis(9_999));
    assert!(h.outs.is_empty());
    h.advance(Duration::from_millis(1));
    assert_eq!(
        h.closes(),
        [(c, CloseCode::NORMAL, "join-timeout".to_owned())]
    );
    assert_eq!(h.events(), [HostEvent::JoinTimedOut]);
    assert_eq!(h.host.poll_timeout(), None);
    // A join answered in time leaves no deadline.
    h.join();
    assert_eq!(h.host.poll_timeout(), None);
}

#[test]
fn relay_presence_errors_and_replacement_are_reported() {
    let mut h = H::new();
    h.feed(
        json!({"v":"mvp-0.2","type":"relay.presence","payload":{"sessionId":"default",
        "agentCount":1,"agents":[{"id":"a1","name":"planner"}]}}),
    );
    assert!(matches!(&h.events()[..], [HostEvent::Presence(p)] if p.agent_count == 1));
    h.feed(
        json!({"v":"mvp-0.2","type":"error","payload":{"code":"LIMIT_EXCEEDED",
        "message":"Rate limit exceeded; message dropped."}}),
    );
    assert_eq!(
        h.events(),
        [HostEvent::RelayError {
            code: ErrorCode::LIMIT_EXCEEDED,
            message: texts::RATE_LIMITED.into(),
            reply_to: None
        }]
    );
    h.feed(
        json!({"v":"mvp-0.2","type":"error","payload":{"code":"SESSION_NOT_ACTIVE",
        "message": texts::HOST_REPLACED}}),
    );
    assert_eq!(h.events(), [HostEvent::Replaced]);
    assert!(h.sent().is_empty(), "the host never answers the relay");
}

// ---- reconnects ----------------------------------------------------------------------------

#[test]
fn a_session_survives_a_reconnect_and_pushes_wait_for_the_join() {
    let mut h = H::in_session();
    h.call("n", "next", json!({}));
    h.outs.clear();
    h.disconnect();
    assert_eq!(h.events(), [HostEvent::Disconnected]);
    // Offline: the participant chats and clicks; nothing can be sent.
    h.host.user_message("still there?", h.now).unwrap();
    h.host.tools_mut().selected = Some("m2".into());
    h.host.publish_state(sources::USER, h.now);
    h.drain();
    assert!(h.sent().is_empty());
    assert_eq!(h.host.queued_pushes(), 1);

    h.connect();
    assert_eq!(
        h.types(),
        ["relay.join"],
        "nothing before the relay answers"
    );
    h.feed(
        json!({"v":"mvp-0.2","type":"relay.joined","replyTo":"host-join-2",
        "payload":{"role":"host","sessionId":"default"}}),
    );
    let sent = h.sent();
    assert_eq!(sent.len(), 2, "{sent:#?}");
    assert_eq!(sent[0]["type"], "user.message");
    assert_eq!(sent[0]["payload"]["stage"], "theater");
    assert_eq!(
        sent[1]["type"], "state.updated",
        "one push for every change"
    );
    assert_eq!(sent[1]["payload"]["uiSpec"]["selected"], "m2");
    assert_eq!(h.host.queued_pushes(), 0);

    h.req("snapshot.get", "s", json!({}));
    let snap = h.one();
    assert_eq!(snap["payload"]["sessionId"], "s-20260213-001");
    assert_eq!(snap["payload"]["uiSpec"]["stage"], "theater");
}

#[test]
fn a_replaced_connection_is_dropped_and_its_frames_ignored() {
    let mut h = H::in_session();
    let old = h.conn;
    h.join();
    assert_ne!(h.conn, old);
    h.host.handle_frame(
        old,
        Frame::Text(r#"{"v":"mvp-0.2","type":"snapshot.get","id":"x","payload":{}}"#),
        h.now,
    );
    h.host.handle_disconnect(old, h.now);
    h.drain();
    assert!(h.outs.is_empty(), "{:?}", h.outs);
    assert_eq!(h.host.session_id(), Some("s-20260213-001"));
}

#[test]
fn user_message_is_refused_when_the_offline_queue_is_full() {
    let mut limits = HostLimits::default();
    limits.max_queued_pushes = 2;
    let mut h = H::with(HostConfig::default().with_limits(limits), Booking::new());
    h.host.user_message("1", h.now).unwrap();
    h.host.user_message("2", h.now).unwrap();
    assert_eq!(
        h.host.user_message("3", h.now),
        Err(HostCommandError::QueueFull)
    );
    assert_eq!(
        h.host.history().len(),
        2,
        "a refused message is not recorded"
    );
}

#[test]
fn a_session_end_confirmed_after_a_reconnect_is_pushed_without_reply_to() {
    let mut h = H::in_session();
    let ticket = h.begin_end();
    h.disconnect();
    h.host.confirm_flush(ticket, "f.jsonl", h.now).unwrap();
    h.drain();
    assert!(h.sent().is_empty());
    h.join_keep();
    let sent = h.sent();
    assert_eq!(sent[0]["type"], "session.ended");
    assert_eq!(
        sent[0].get("replyTo"),
        None,
        "the relay already failed that request"
    );
    assert_eq!(sent[1]["payload"]["source"], "reset");
}

#[test]
fn a_host_can_move_to_the_transports_task() {
    fn send<T: Send + 'static>() {}
    send::<Host<Booking>>();
    send::<HostEvent>();
}

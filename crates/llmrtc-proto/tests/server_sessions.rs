//! Sessions: expiry after inactivity, `reconnect` with a known, unknown or expired id, a
//! session taken over from another connection, and the bounds on history and session count.
//!
//! The server driven directly with simulated time (harness in `common`).

mod common;

use common::*;

use std::time::Duration;

use agentwire_core::{CloseCode, Machine};
use llmrtc_proto::{texts, ChatRole, Limits, ServerConfig, ServerEvent};
use serde_json::json;

#[test]
fn a_session_expires_30_minutes_after_its_last_activity() {
    let mut h = Harness::default_config();
    let (c, sid) = h.client();
    h.advance(Duration::from_secs(10));
    h.disconnect(c);
    h.advance(Duration::from_secs(30 * 60 - 1));
    assert_eq!(h.server.sessions(), 1);
    h.advance(Duration::from_secs(1));
    assert_eq!(h.server.sessions(), 0);
    assert!(h.take_events().contains(&ServerEvent::SessionExpired {
        session: sid.into()
    }));
    assert_eq!(h.server.poll_timeout(), None);
}

#[test]
fn reconnect_with_a_known_id_recovers_the_history() {
    let mut h = Harness::default_config();
    let (c1, sid) = h.client();
    h.full_turn(c1, "Hello", &["Hi!"]);
    h.disconnect(c1);
    h.advance(Duration::from_secs(60));
    let (c2, new_id) = h.client();
    assert_ne!(new_id, sid);
    h.send(c2, json!({"type":"reconnect","sessionId": sid}));
    assert_eq!(
        h.take(c2),
        [json!({"type":"reconnect-ack","success":true,"sessionId":sid,"historyRecovered":true})]
    );
    assert_eq!(h.server.session_of(c2), Some(sid.as_str()));
    assert_eq!(
        h.server.sessions(),
        1,
        "the session made at connect is gone"
    );
    let history: Vec<_> = h
        .server
        .history(&sid)
        .expect("history")
        .map(|m| (m.role, m.text.clone()))
        .collect();
    assert_eq!(
        history,
        [
            (ChatRole::User, "Hello".to_owned()),
            (ChatRole::Assistant, "Hi!".to_owned())
        ]
    );
    // The next turn's LLM request carries the recovered history.
    h.audio(c2, 16000, &utterance(16000, 400));
    let stt = h.stt_requests().pop().expect("stt");
    let now = h.now;
    h.server
        .stt_result(stt.request, Ok("Again".into()), now)
        .expect("stt");
    h.drain();
    let llm = h
        .events
        .iter()
        .find_map(|e| match e {
            ServerEvent::Llm(r) => Some(r.clone()),
            _ => None,
        })
        .expect("llm");
    assert_eq!(llm.history.len(), 3);
    assert_eq!(llm.session, sid);
}

#[test]
fn reconnect_with_an_unknown_id_fails_with_the_current_id_and_session_not_found() {
    let mut h = Harness::default_config();
    let (c, current) = h.client();
    h.send(c, json!({"type":"reconnect","sessionId":"no-such-session"}));
    assert_eq!(
        h.take(c),
        [
            json!({"type":"reconnect-ack","success":false,"sessionId":current,"historyRecovered":false}),
            json!({"type":"error","code":"SESSION_NOT_FOUND","message":texts::SESSION_NOT_FOUND}),
        ]
    );
    assert_eq!(h.server.session_of(c), Some(current.as_str()));
}

#[test]
fn reconnect_with_an_expired_id_says_session_expired() {
    let mut h = Harness::default_config();
    let (c1, old) = h.client();
    h.disconnect(c1);
    h.advance(Duration::from_secs(31 * 60));
    let (c2, current) = h.client();
    h.send(c2, json!({"type":"reconnect","sessionId": old}));
    let sent = h.take(c2);
    assert_eq!(sent[0]["success"], false);
    assert_eq!(sent[0]["sessionId"], json!(current));
    assert_eq!(sent[0]["historyRecovered"], false);
    assert_eq!(codes(&sent), ["SESSION_EXPIRED"]);
}

#[test]
fn reconnect_takes_a_session_from_a_connection_still_holding_it() {
    let mut h = Harness::default_config();
    let (c1, sid) = h.client();
    let (c2, _) = h.client();
    h.send(c2, json!({"type":"reconnect","sessionId": sid}));
    assert_eq!(h.take(c2)[0]["success"], true);
    assert_eq!(
        h.closes,
        [(
            c1,
            CloseCode::NORMAL,
            llmrtc_proto::CLOSE_SESSION_MOVED.to_owned()
        )]
    );
    // Frames from the old connection are ignored from now on, and its end detaches nothing.
    h.send(c1, json!({"type":"ping","timestamp":1}));
    assert!(h.take(c1).is_empty());
    h.disconnect(c1);
    assert_eq!(h.server.conn_of(&sid), Some(c2));
}

#[test]
fn history_and_sessions_are_bounded() {
    let mut limits = Limits::default();
    limits.max_history = 3;
    limits.max_sessions = 2;
    let mut h = Harness::new(ServerConfig::default().with_limits(limits));
    let (c, sid) = h.client();
    h.full_turn(c, "one", &["1"]);
    h.full_turn(c, "two", &["2"]);
    let texts: Vec<_> = h
        .server
        .history(&sid)
        .expect("h")
        .map(|m| m.text.clone())
        .collect();
    assert_eq!(texts, ["1", "two", "2"]);
    // Two sessions: a third connection evicts the oldest disconnected one...
    h.disconnect(c);
    let (_c2, _) = h.client();
    let (c3, _) = h.client();
    assert_eq!(h.server.sessions(), 2);
    assert!(h.take_events().contains(&ServerEvent::SessionExpired {
        session: sid.clone().into()
    }));
    h.send(c3, json!({"type":"reconnect","sessionId": sid}));
    assert_eq!(codes(&h.take(c3)), ["SESSION_EXPIRED"]);
    // ...and with every session connected, the next is refused.
    let c4 = h.connect();
    assert_eq!(codes(&h.take(c4)), ["RATE_LIMITED"]);
    assert_eq!(
        h.closes.last().map(|x| x.1),
        Some(CloseCode::TRY_AGAIN_LATER)
    );
}

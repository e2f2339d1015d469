//! The relay's limits: rate, pending requests, sessions, agents, connections, id lengths
//! and the protocol version, each answered with an error.

mod common;

use std::time::Duration;

use agent_relay_proto::{texts, RateLimit, RelayConfig};
use agentwire_core::CloseCode;
use common::{error_of, limits, Harness};
use serde_json::json;

// ---- limits -------------------------------------------------------------------------------

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
    // A message without an id is a request too (its answer must find it): refused as well.
    h.msg(a, "agent.message", None, json!({"text":"hi"}));
    assert!(h.take(host).is_empty());
    assert_eq!(
        error_of(&h.one(a)),
        (
            "LIMIT_EXCEEDED".into(),
            texts::TOO_MANY_PENDING.into(),
            None
        )
    );
    // An answer frees a slot.
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

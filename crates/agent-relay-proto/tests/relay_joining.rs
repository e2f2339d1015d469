//! Connecting to the relay and joining a session: the path and the greeting, `relay.join`
//! and its checks, names, repeats and the join deadline, a newer host replacing the old
//! one, and `relay.presence`.

mod common;

use std::time::Duration;

use agent_relay_proto::{texts, Refusal, RelayConfig, RelayEvent, Role};
use agentwire_core::{CloseCode, Machine};
use common::{error_of, Harness, Out};
use serde_json::json;

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

//! The relay's commands and clock: `close`, time going backwards, determinism, and the
//! events it reports.

mod common;

use std::time::Duration;

use agent_relay_proto::{RelayConfig, RelayEvent, Role};
use agentwire_core::{CloseCode, Machine};
use common::{error_of, limits, Harness};
use serde_json::json;

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

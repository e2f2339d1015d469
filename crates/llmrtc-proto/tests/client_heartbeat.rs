//! Heartbeats: a ping every 15 s with the RTT from its echo, and two missed pongs in a row
//! drop the connection.
//!
//! `LlmrtcClient` driven directly in simulated time; the server is scripted JSON (harness in
//! `common::client`).

mod common;

use common::client::*;

use std::time::Duration;

use agentwire_core::{CloseCode, Dial, Dialer};
use llmrtc_proto::{ClientEvent, ConnectionState, LossReason, CLOSE_PONG_TIMEOUT};
use serde_json::json;

#[test]
fn pings_every_fifteen_seconds_and_measures_rtt_from_the_echo() {
    let mut h = H::default_started();
    h.c.set_wall_clock(h.now, 1_700_000_000_000);
    let c = h.connected("s");
    h.advance(S * 14);
    assert!(h.sent.is_empty());
    h.advance(S);
    assert_eq!(
        h.sent,
        [(c, json!({"type":"ping","timestamp":1_700_000_015_000u64}))]
    );
    h.sent.clear();
    h.advance(Duration::from_millis(120));
    h.recv(c, json!({"type":"pong","timestamp":1_700_000_015_000u64}));
    assert_eq!(
        h.take_events(),
        [ClientEvent::Pong {
            timestamp: 1_700_000_015_000,
            rtt: Some(Duration::from_millis(120))
        }]
    );
    assert_eq!(h.c.rtt(), Some(Duration::from_millis(120)));
    h.advance(S * 15);
    assert_eq!(h.types(), ["ping"]);
    assert_eq!(h.c.state(), ConnectionState::Connected);
}

#[test]
fn two_missed_pongs_in_a_row_drop_the_connection_and_reconnect() {
    let mut h = H::default_started();
    let c = h.connected("s");
    // First ping at 15 s, missed at 25 s.
    h.advance(S * 25);
    assert_eq!(h.types(), ["ping"]);
    assert_eq!(h.take_events(), [ClientEvent::PongMissed { missed: 1 }]);
    // Second ping at 30 s, missed at 40 s: the second miss in a row.
    h.advance(S * 15);
    assert_eq!(h.types(), ["ping"]);
    assert_eq!(
        h.closes,
        [(c, CloseCode::NORMAL, CLOSE_PONG_TIMEOUT.to_owned())]
    );
    let ev = h.take_events();
    assert_eq!(ev[0], ClientEvent::PongMissed { missed: 2 });
    assert!(ev.contains(&ClientEvent::ConnectionLost {
        reason: LossReason::HeartbeatTimeout
    }));
    assert_eq!(h.c.state(), ConnectionState::Reconnecting);
    h.advance(S);
    assert_eq!(h.c.poll_dial(), Dial::Now);
}

#[test]
fn a_pong_between_misses_resets_the_count() {
    let mut h = H::default_started();
    let c = h.connected("s");
    h.advance(S * 25); // miss 1
    h.advance(S * 5); // ping at 30 s
    let ts = h.sent.last().expect("ping").1["timestamp"].clone();
    h.recv(c, json!({"type":"pong","timestamp":ts}));
    h.advance(S * 25); // ping at 45 s missed at 55 s: one miss only
    assert!(h.closes.is_empty());
    assert_eq!(h.c.state(), ConnectionState::Connected);
    assert!(h.events.contains(&ClientEvent::PongMissed { missed: 1 }));
}

//! Connection states: nothing dials before `start`, the whole state cycle, `close` is
//! terminal, and commands queue within bounds.
//!
//! `LlmrtcClient` driven directly in simulated time; the server is scripted JSON (harness in
//! `common::client`).

mod common;

use common::client::*;

use agentwire_core::{CloseCode, ConnId, Dial, Dialer, Machine, PeerInfo};
use llmrtc_proto::{ClientCommandError, ClientConfig, ConnectionState};

#[test]
fn starts_disconnected_and_dials_only_after_start() {
    let mut h = H::new(ClientConfig::default());
    assert_eq!(h.c.state(), ConnectionState::Disconnected);
    assert_eq!(h.c.poll_dial(), Dial::Wait);
    assert_eq!(h.c.poll_timeout(), None);
    h.c.start(h.now).expect("start");
    h.drain();
    assert_eq!(h.states(), [ConnectionState::Connecting]);
    assert_eq!(h.c.poll_dial(), Dial::Now);
    assert_eq!(
        h.c.start(h.now),
        Err(ClientCommandError::AlreadyStarted(
            ConnectionState::Connecting
        ))
    );
    let c = h.connect();
    assert_eq!(h.c.poll_dial(), Dial::Wait, "one socket at a time");
    assert_eq!(
        h.c.state(),
        ConnectionState::Connecting,
        "connected only on ready"
    );
    h.ready(c, "s1");
    assert_eq!(h.c.state(), ConnectionState::Connected);
    assert_eq!(h.c.session_id(), Some("s1"));
    assert_eq!(h.c.ready_id(), Some("s1"));
    assert_eq!(h.c.server_protocol_version(), Some(1));
    assert_eq!(h.c.ice_servers().map(<[_]>::len), Some(1));
    assert!(
        h.sent.is_empty(),
        "a first connection sends nothing on ready"
    );
}

#[test]
fn the_full_state_cycle() {
    let mut h = H::new(ClientConfig::default());
    h.c.start(h.now).expect("start");
    h.drain();
    let c = h.connect();
    h.ready(c, "s");
    h.c.handle_disconnect(c, h.now);
    h.drain();
    h.advance(S);
    let c2 = h.connect();
    h.ready(c2, "t");
    h.c.close(h.now);
    h.drain();
    use ConnectionState::*;
    assert_eq!(
        h.states(),
        [
            Connecting,
            Connected,
            Reconnecting,
            Connecting,
            Connected,
            Closed
        ]
    );
}

#[test]
fn close_is_terminal() {
    let mut h = H::default_started();
    let c = h.connected("s");
    h.c.close(h.now);
    h.drain();
    assert_eq!(
        h.closes,
        [(c, CloseCode::NORMAL, "client-closed".to_owned())]
    );
    assert_eq!(h.c.state(), ConnectionState::Closed);
    assert_eq!(h.c.poll_dial(), Dial::Stop);
    assert_eq!(h.c.poll_timeout(), None);
    assert_eq!(h.states(), [ConnectionState::Closed]);
    assert_eq!(
        h.c.send_audio(b"x", &[], h.now),
        Err(ClientCommandError::Closed)
    );
    assert_eq!(h.c.start(h.now), Err(ClientCommandError::Closed));
    // A connection that opens anyway is closed at once.
    let late = ConnId::new(50);
    h.c.handle_connect(late, &PeerInfo::new(None), h.now);
    h.drain();
    assert_eq!(h.closes.last().map(|x| x.0), Some(late));
}

#[test]
fn the_send_queue_is_bounded() {
    let mut config = ClientConfig::default();
    config.max_queued = 2;
    let mut h = H::new(config);
    h.c.send_audio(b"a", &[], h.now).expect("1");
    h.c.send_audio(b"b", &[], h.now).expect("2");
    assert_eq!(
        h.c.send_audio(b"c", &[], h.now),
        Err(ClientCommandError::QueueFull("max_queued"))
    );
    let mut config = ClientConfig::default();
    config.max_queued_bytes = 100;
    let mut h = H::new(config);
    assert_eq!(
        h.c.send_audio(&[0u8; 200], &[], h.now),
        Err(ClientCommandError::QueueFull("max_queued_bytes"))
    );
}

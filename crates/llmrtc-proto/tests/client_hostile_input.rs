//! Hostile input: messages before `ready`, unknown types and garbage change nothing, the
//! timer contract holds, and arbitrary lives keep the client consistent.
//!
//! `LlmrtcClient` driven directly in simulated time; the server is scripted JSON (harness in
//! `common::client`).

mod common;

use common::client::*;

use std::time::Duration;

use agentwire_core::sim::{check_timer_contract, TimerInput};
use agentwire_core::{ConnId, Dial, Dialer, Frame, FrameBuf, Machine};
use llmrtc_proto::{
    ClientConfig, ClientEvent, ConnectionState, IgnoreReason, LlmrtcClient, SplitMix64,
};
use proptest::prelude::*;
use serde_json::json;

#[test]
fn nothing_before_ready_unknown_types_and_garbage_are_ignored_without_harm() {
    let mut h = H::default_started();
    let c = h.connect();
    h.recv(
        c,
        json!({"type":"transcript","text":"early","isFinal":true}),
    );
    assert_eq!(
        h.take_events(),
        [ClientEvent::Ignored {
            type_name: "transcript".into(),
            reason: IgnoreReason::BeforeReady
        }]
    );
    h.ready(c, "s");
    h.events.clear();
    h.recv(c, json!({"type":"future-thing","x":1}));
    assert_eq!(
        h.take_events(),
        [ClientEvent::Ignored {
            type_name: "future-thing".into(),
            reason: IgnoreReason::UnknownType
        }]
    );
    for bad in [
        "",
        "{",
        "[1]",
        "{\"type\":3}",
        "{\"type\":\"llm\"}",
        "\u{0}",
    ] {
        h.c.handle_frame(c, Frame::Text(bad), h.now);
        h.drain();
    }
    h.c.handle_frame(c, Frame::Binary(&[0xff, 0xfe]), h.now);
    h.drain();
    assert_eq!(h.events.len(), 7);
    assert!(h
        .events
        .iter()
        .all(|e| matches!(e, ClientEvent::ProtocolViolation { .. })));
    // A frame for another connection id is ignored.
    h.c.handle_frame(
        ConnId::new(99),
        Frame::Text("{\"type\":\"tts-start\"}"),
        h.now,
    );
    h.drain();
    assert_eq!(h.events.len(), 7);
    assert_eq!(h.c.state(), ConnectionState::Connected);
    assert!(h.closes.is_empty());
}

fn input() -> impl Strategy<Value = TimerInput> {
    let frames = prop_oneof![
        Just(json!({"type":"ready","id":"s","protocolVersion":1})),
        Just(json!({"type":"pong","timestamp":15000})),
        Just(json!({"type":"tts-start"})),
        Just(json!({"type":"llm-chunk","content":"x","done":false})),
        Just(
            json!({"type":"reconnect-ack","success":true,"sessionId":"s","historyRecovered":true})
        ),
    ];
    prop_oneof![
        Just(TimerInput::Connect),
        (0usize..4, frames).prop_map(|(i, v)| TimerInput::Frame(i, FrameBuf::text(v.to_string()))),
        (0usize..4).prop_map(TimerInput::Disconnect),
        (0u64..40_000).prop_map(|ms| TimerInput::Advance(Duration::from_millis(ms))),
        (0u64..5_000).prop_map(|ms| TimerInput::Rewind(Duration::from_millis(ms))),
        Just(TimerInput::Timeout),
        Just(TimerInput::FireDue),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn the_client_keeps_the_timer_contract(inputs in proptest::collection::vec(input(), 1..60)) {
        let mut c = LlmrtcClient::new(ClientConfig::default(), SplitMix64::new(9));
        let start = t0();
        c.start(start).expect("start");
        if let Err(e) = check_timer_contract(&mut c, start, &inputs) {
            return Err(TestCaseError::fail(e));
        }
    }
}

/// One step of an arbitrary client life.
#[derive(Debug, Clone)]
enum Op {
    Connect,
    Disconnect,
    DialFailed,
    Ws(String),
    Dc(String),
    Binary(Vec<u8>),
    DcOpen(bool),
    Audio(usize),
    Drop,
    Start,
    Close,
    Advance(u64),
}

fn hostile_text() -> impl Strategy<Value = String> {
    let known = prop_oneof![
        Just(r#"{"type":"ready","id":"s","protocolVersion":1}"#.to_owned()),
        Just(r#"{"type":"ready","id":"s","protocolVersion":7}"#.to_owned()),
        Just(r#"{"type":"pong","timestamp":15000}"#.to_owned()),
        Just(r#"{"type":"tts-start"}"#.to_owned()),
        Just(
            r#"{"type":"tts-chunk","format":"pcm","sampleRate":24000,"data":"AAECAw=="}"#
                .to_owned()
        ),
        Just(r#"{"type":"tts-complete"}"#.to_owned()),
        Just(r#"{"type":"llm-chunk","content":"abc","done":false}"#.to_owned()),
        Just(r#"{"type":"llm","text":"abc"}"#.to_owned()),
        Just(
            r#"{"type":"reconnect-ack","success":false,"sessionId":"n","historyRecovered":false}"#
                .to_owned()
        ),
    ];
    prop_oneof![
        known,
        "\\PC{0,40}",
        "\\{\"type\":\"[a-z-]{0,14}\"(,\"[a-zA-Z]{1,8}\":(1|\"x\"|null|true|\\[\\]|\\{\\})){0,3}\\}",
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Connect),
        1 => Just(Op::Disconnect),
        1 => Just(Op::DialFailed),
        6 => hostile_text().prop_map(Op::Ws),
        2 => hostile_text().prop_map(Op::Dc),
        1 => proptest::collection::vec(any::<u8>(), 0..32).prop_map(Op::Binary),
        1 => any::<bool>().prop_map(Op::DcOpen),
        2 => (0usize..3000).prop_map(Op::Audio),
        1 => Just(Op::Drop),
        1 => Just(Op::Start),
        1 => Just(Op::Close),
        4 => (0u64..40_000).prop_map(Op::Advance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever the server sends and whatever the driver does, the client never panics,
    /// keeps its queue within its limits, never has two connections, and its state stays
    /// consistent with its connection.
    #[test]
    fn arbitrary_lives_keep_the_client_consistent(ops in proptest::collection::vec(op(), 1..80)) {
        let mut config = ClientConfig::default();
        config.max_queued = 3;
        config.max_queued_bytes = 10_000;
        config.max_tts_audio_bytes = 8;
        let mut h = H::new(config);
        h.c.start(h.now).expect("start");
        let mut open: Option<ConnId> = None;
        for op in ops {
            match op {
                Op::Connect => {
                    if h.c.poll_dial() == Dial::Now && open.is_none() {
                        open = Some(h.connect());
                    }
                }
                Op::Disconnect => {
                    if let Some(c) = open.take() {
                        h.c.handle_disconnect(c, h.now);
                    }
                }
                Op::DialFailed => {
                    if h.c.poll_dial() == Dial::Now && open.is_none() {
                        h.c.handle_dial_failed("refused", h.now);
                    }
                }
                Op::Ws(t) => {
                    if let Some(c) = open {
                        h.c.handle_frame(c, Frame::Text(&t), h.now);
                    }
                }
                Op::Dc(t) => h.c.handle_data_channel_frame(Frame::Text(&t), h.now),
                Op::Binary(b) => {
                    if let Some(c) = open {
                        h.c.handle_frame(c, Frame::Binary(&b), h.now);
                    }
                }
                Op::DcOpen(o) => h.c.set_data_channel_open(o, h.now),
                Op::Audio(n) => {
                    let _ = h.c.send_audio(&vec![0u8; n], &[], h.now);
                }
                Op::Drop => {
                    h.c.drop_connection(h.now);
                }
                Op::Start => {
                    let _ = h.c.start(h.now);
                }
                Op::Close => h.c.close(h.now),
                Op::Advance(ms) => h.advance(Duration::from_millis(ms)),
            }
            h.drain();
            // The harness reports the end of connections the client closed itself.
            if let Some(c) = open {
                if h.closes.iter().any(|(x, _, _)| *x == c) {
                    open = None;
                }
            }
            prop_assert!(h.c.queued() <= 3);
            prop_assert_eq!(h.c.conn(), open.filter(|_| h.c.state() != ConnectionState::Closed));
            let connected = h.c.state() == ConnectionState::Connected;
            prop_assert!(!connected || h.c.conn().is_some());
            if let Some(t) = h.c.poll_timeout() {
                prop_assert!(h.c.state() != ConnectionState::Closed, "no timers once closed: {:?}", t);
            }
        }
    }
}

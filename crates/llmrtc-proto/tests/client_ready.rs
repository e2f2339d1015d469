//! `ready`: the ready timeout, the version warning, and core 1.3's messages and session mode.
//!
//! `LlmrtcClient` driven directly in simulated time; the server is scripted JSON (harness in
//! `common::client`).

mod common;

use common::client::*;

use std::time::Duration;

use agentwire_core::CloseCode;
use llmrtc_proto::{
    AssistantTranscript, ClientEvent, ConnectionState, ErrorCode, ErrorMessage, LossReason,
    ModeChanged, ServerMessage, SessionMode, Usage, CLOSE_READY_TIMEOUT,
};
use serde_json::json;

#[test]
fn no_ready_within_ten_seconds_closes_and_retries() {
    let mut h = H::default_started();
    let c = h.connect();
    h.c.send_audio(b"RIFF", &[], h.now).expect("queued");
    h.advance(S * 9 + Duration::from_millis(999));
    assert!(h.closes.is_empty());
    assert!(h.sent.is_empty(), "nothing is sent before ready");
    h.advance(Duration::from_millis(1));
    assert_eq!(
        h.closes,
        [(c, CloseCode::NORMAL, CLOSE_READY_TIMEOUT.to_owned())]
    );
    assert!(h.events.contains(&ClientEvent::ConnectionLost {
        reason: LossReason::ReadyTimeout
    }));
    assert_eq!(h.c.state(), ConnectionState::Reconnecting);
    assert_eq!(h.delays(), [S]);
    // A ready on the dead connection changes nothing.
    h.ready(c, "late");
    assert_eq!(h.c.state(), ConnectionState::Reconnecting);
    assert_eq!(h.c.queued(), 1, "the queued audio waits for the next ready");
}

#[test]
fn a_protocol_version_mismatch_warns_and_the_connection_proceeds() {
    let mut h = H::default_started();
    let c = h.connect();
    h.recv(c, json!({"type":"ready","id":"s","protocolVersion":2}));
    assert!(h.events.contains(&ClientEvent::VersionMismatch {
        server: 2,
        client: 1
    }));
    assert_eq!(h.c.state(), ConnectionState::Connected);
    h.c.send_audio(b"RIFF....", &[], h.now).expect("send");
    h.drain();
    assert_eq!(h.types(), ["audio"]);
}

#[test]
fn core_1_3_messages_surface_as_events_and_mode_follows_mode_changed() {
    let mut h = H::default_started();
    assert_eq!(h.c.mode(), None, "no mode before ready");
    let c = h.connect();
    h.recv(
        c,
        json!({"type":"ready","id":"s","protocolVersion":1,"mode":"realtime"}),
    );
    assert!(h.events.contains(&ClientEvent::Ready {
        id: "s".into(),
        protocol_version: 1,
        ice_servers: None,
        mode: Some(SessionMode::REALTIME),
    }));
    assert_eq!(h.c.mode(), Some(&SessionMode::REALTIME));
    h.events.clear();
    h.recv(
        c,
        json!({"type":"assistant-transcript","text":"Hello th","isFinal":false}),
    );
    h.recv(
        c,
        json!({"type":"usage","inputTokens":120,"outputTokens":45,"audioInputTokens":100,
               "audioOutputTokens":40,"cachedTokens":64}),
    );
    h.recv(
        c,
        json!({"type":"error","code":"BUDGET_EXCEEDED","message":"over budget"}),
    );
    h.recv(c, json!({"type":"mode-changed","mode":"pipeline"}));
    assert_eq!(
        h.take_events(),
        [
            ClientEvent::Message(ServerMessage::AssistantTranscript(AssistantTranscript {
                text: "Hello th".into(),
                is_final: false,
            })),
            ClientEvent::Message(ServerMessage::Usage(Usage {
                input_tokens: 120,
                output_tokens: 45,
                audio_input_tokens: Some(100),
                audio_output_tokens: Some(40),
                cached_tokens: Some(64),
            })),
            ClientEvent::Message(ServerMessage::Error(ErrorMessage::new(
                ErrorCode::BUDGET_EXCEEDED,
                "over budget"
            ))),
            ClientEvent::Message(ServerMessage::ModeChanged(ModeChanged {
                mode: SessionMode::PIPELINE,
            })),
        ]
    );
    assert_eq!(h.c.mode(), Some(&SessionMode::PIPELINE));
    // A server older than core 1.3.0 sends no mode: it runs the pipeline.
    h.c.drop_connection(h.now);
    h.drain();
    h.advance(Duration::from_secs(40));
    let c = h.connect();
    h.events.clear();
    h.recv(c, json!({"type":"ready","id":"t","protocolVersion":1}));
    assert!(h
        .events
        .iter()
        .any(|e| matches!(e, ClientEvent::Ready { mode: None, .. })));
    assert_eq!(h.c.mode(), Some(&SessionMode::PIPELINE));
    // An unknown mode does not break the connection; it is kept as sent.
    h.recv(c, json!({"type":"mode-changed","mode":"hybrid"}));
    assert_eq!(h.c.mode().map(SessionMode::as_str), Some("hybrid"));
    assert_eq!(h.c.state(), ConnectionState::Connected);
}

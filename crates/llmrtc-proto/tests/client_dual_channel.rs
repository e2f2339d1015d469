//! The dual-channel rule: each payload message is handled once whichever channel it comes
//! on, signalling only from the WebSocket, and data-channel frames without a connection.
//!
//! `LlmrtcClient` driven directly in simulated time; the server is scripted JSON (harness in
//! `common::client`).

mod common;

use common::client::*;

use agentwire_core::{FrameBuf, Machine};
use base64::Engine as _;
use llmrtc_proto::{ClientEvent, IgnoreReason, ServerMessage};
use serde_json::{json, Value};

/// Every payload type the server sends on both channels.
fn payloads() -> Vec<Value> {
    let pcm = base64::engine::general_purpose::STANDARD.encode([1u8, 0, 2, 0]);
    vec![
        json!({"type":"speech-start"}),
        json!({"type":"speech-end"}),
        json!({"type":"transcript","text":"Hello","isFinal":true}),
        json!({"type":"llm-chunk","content":"Hi","done":false}),
        json!({"type":"llm-chunk","content":" there!","done":true}),
        json!({"type":"llm","text":"Hi there!"}),
        json!({"type":"tts-start"}),
        json!({"type":"tts-chunk","format":"pcm","sampleRate":24000,"data":pcm}),
        json!({"type":"tts-complete"}),
        json!({"type":"tool-call-start","name":"book","callId":"x","arguments":{}}),
        json!({"type":"tool-call-end","callId":"x","result":{"ok":true},"durationMs":3}),
        json!({"type":"stage-change","from":"a","to":"b","reason":"tool_result"}),
        json!({"type":"tts-cancelled"}),
        json!({"type":"error","code":"LLM_ERROR","message":"boom"}),
        json!({"type":"assistant-transcript","text":"Hi","isFinal":false}),
        json!({"type":"usage","inputTokens":12,"outputTokens":30}),
        json!({"type":"mode-changed","mode":"pipeline"}),
    ]
}

#[test]
fn dual_channel_each_payload_message_is_handled_once() {
    let mut h = H::default_started();
    let c = h.connected("s");
    let want: Vec<&str> = payloads()
        .iter()
        .map(|v| v["type"].as_str().expect("type"))
        .map(|t| {
            ServerMessage::TYPES
                .iter()
                .copied()
                .find(|k| *k == t)
                .expect("known")
        })
        .collect();
    // Data channel closed: the WebSocket copy counts; a stray data-channel copy does not.
    for p in payloads() {
        h.recv(c, p.clone());
        h.recv_dc(p);
    }
    assert_eq!(h.messages(), want);
    h.events.clear();
    // Data channel open: the server sends each payload to both; only the DC copy counts,
    // whichever arrives first.
    h.c.set_data_channel_open(true, h.now);
    for (i, p) in payloads().into_iter().enumerate() {
        if i % 2 == 0 {
            h.recv(c, p.clone());
            h.recv_dc(p);
        } else {
            h.recv_dc(p.clone());
            h.recv(c, p);
        }
    }
    assert_eq!(h.messages(), want);
    let ignored = h
        .events
        .iter()
        .filter(|e| {
            matches!(
                e,
                ClientEvent::Ignored {
                    reason: IgnoreReason::OtherChannel,
                    ..
                }
            )
        })
        .count();
    assert_eq!(ignored, want.len());
    h.events.clear();
    // Signalling always comes from the WebSocket, even with the data channel open.
    h.recv_dc(json!({"type":"pong","timestamp":1}));
    h.recv_dc(json!({"type":"signal","signal":{"type":"answer","sdp":"v=0"}}));
    h.recv_dc(
        json!({"type":"reconnect-ack","success":true,"sessionId":"z","historyRecovered":true}),
    );
    assert_eq!(h.c.session_id(), Some("s"));
    assert!(h.messages().is_empty());
    h.recv(
        c,
        json!({"type":"signal","signal":{"type":"answer","sdp":"v=0"}}),
    );
    assert_eq!(h.messages(), ["signal"]);
    // A lost connection closes the data channel with it.
    h.c.handle_disconnect(c, h.now);
    h.drain();
    assert!(!h.c.is_data_channel_open());
}

#[test]
fn outputs_for_a_data_channel_frame_without_a_connection_are_none() {
    let mut h = H::default_started();
    h.recv_dc(json!({"type":"tts-start"}));
    assert!(h.events.is_empty());
    // Frames (text or binary) as a driver delivers them decode the same.
    let c = h.connected("s");
    let f = FrameBuf::binary(br#"{"type":"speech-start"}"#.to_vec());
    h.c.handle_frame(c, f.as_frame(), h.now);
    h.drain();
    assert_eq!(h.messages(), ["speech-start"]);
}

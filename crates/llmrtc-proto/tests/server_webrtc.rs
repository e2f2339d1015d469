//! WebRTC: payload messages copied to an open data channel (signalling stays on the WebSocket),
//! and offers refused or handed to the application that answers them.
//!
//! The server driven directly with simulated time (harness in `common`).

mod common;

use common::*;

use llmrtc_proto::{ServerConfig, ServerEvent};
use serde_json::json;

#[test]
fn payload_messages_are_copied_to_the_data_channel_and_signalling_is_not() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    h.server.set_data_channel_open(c, true).expect("conn");
    h.send(c, json!({"type":"ping","timestamp":5}));
    assert!(h.dc.is_empty(), "pong is WebSocket only");
    h.full_turn(c, "Hello", &["Hi"]);
    let dc_types: Vec<_> =
        h.dc.iter()
            .map(|(_, v)| v["type"].as_str().unwrap_or("").to_owned())
            .collect();
    assert_eq!(
        dc_types,
        [
            "speech-start",
            "speech-end",
            "transcript",
            "llm-chunk",
            "llm",
            "tts-start",
            "tts-chunk",
            "tts-complete"
        ]
    );
    h.server.set_data_channel_open(c, false).expect("conn");
    h.dc.clear();
    h.full_turn(c, "Again", &["Hi"]);
    assert!(h.dc.is_empty());
}

#[test]
fn offers_are_webrtc_unavailable_unless_the_application_answers_them() {
    let offer = json!({"type":"offer","signal":{"type":"offer","sdp":"v=0\r\n"}});
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    h.send(c, offer.clone());
    assert_eq!(codes(&h.take(c)), ["WEBRTC_UNAVAILABLE"]);

    let mut h = Harness::new(ServerConfig::default().with_webrtc(true));
    let (c, sid) = h.client();
    h.send(c, offer);
    let ev = h.take_events();
    let Some(ServerEvent::Offer {
        conn,
        session,
        signal,
    }) = ev.last().cloned()
    else {
        panic!("{ev:?}")
    };
    assert_eq!((conn, session), (c, sid.into()));
    assert_eq!(signal.to_value(), json!({"type":"offer","sdp":"v=0\r\n"}));
    h.server
        .signal(
            c,
            llmrtc_proto::RawJson::from_text(r#"{"type":"answer","sdp":"v=0"}"#).expect("json"),
        )
        .expect("signal");
    h.drain();
    assert_eq!(
        h.take(c),
        [json!({"type":"signal","signal":{"type":"answer","sdp":"v=0"}})]
    );
}

//! Reply assembly: LLM chunks into the reply text, TTS chunks into audio, and the limits on both.
//!
//! `LlmrtcClient` driven directly in simulated time; the server is scripted JSON (harness in
//! `common::client`).

mod common;

use common::client::*;

use base64::Engine as _;
use llmrtc_proto::{ClientConfig, ClientEvent, ConnectionState, ProtocolError};
use serde_json::json;

#[test]
fn llm_chunks_are_assembled_into_the_reply() {
    let mut h = H::default_started();
    let c = h.connected("s");
    h.recv(
        c,
        json!({"type":"transcript","text":"Hello","isFinal":true}),
    );
    h.recv(c, json!({"type":"llm-chunk","content":"Hi","done":false}));
    h.recv(
        c,
        json!({"type":"llm-chunk","content":" there!","done":true}),
    );
    h.recv(c, json!({"type":"llm","text":"Hi there!"}));
    assert!(h.events.contains(&ClientEvent::LlmReply {
        text: "Hi there!".into(),
        streamed: "Hi there!".into()
    }));
    h.events.clear();
    // The next reply starts from nothing.
    h.recv(c, json!({"type":"llm","text":"plain"}));
    assert!(h.events.contains(&ClientEvent::LlmReply {
        text: "plain".into(),
        streamed: String::new()
    }));
}

#[test]
fn the_llm_text_limit_stops_appending_and_says_so_once() {
    let mut config = ClientConfig::default();
    config.max_llm_text_bytes = 4;
    let mut h = H::new(config);
    h.c.start(h.now).expect("start");
    let c = h.connected("s");
    for part in ["ab", "cd", "ef", "gh"] {
        h.recv(c, json!({"type":"llm-chunk","content":part,"done":false}));
    }
    h.recv(c, json!({"type":"llm","text":"abcdefgh"}));
    let violations = h
        .events
        .iter()
        .filter(|e| matches!(e, ClientEvent::ProtocolViolation { .. }))
        .count();
    assert_eq!(violations, 1);
    assert!(h.events.contains(&ClientEvent::LlmReply {
        text: "abcdefgh".into(),
        streamed: "abcd".into()
    }));
}

#[test]
fn tts_chunks_are_decoded_and_joined_at_tts_complete() {
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let mut h = H::default_started();
    let c = h.connected("s");
    h.recv(c, json!({"type":"tts-start"}));
    h.recv(
        c,
        json!({"type":"tts-chunk","format":"pcm","sampleRate":24000,"data":b64(&[1,2])}),
    );
    h.recv(
        c,
        json!({"type":"tts-chunk","format":"pcm","sampleRate":24000,"data":b64(&[3,4,5,6])}),
    );
    assert!(h.events.contains(&ClientEvent::TtsChunk {
        format: "pcm".into(),
        sample_rate: 24000,
        audio: vec![3, 4, 5, 6]
    }));
    h.recv(c, json!({"type":"tts-complete"}));
    assert_eq!(
        h.events.last(),
        Some(&ClientEvent::TtsAudio {
            format: "pcm".into(),
            sample_rate: Some(24000),
            audio: vec![1, 2, 3, 4, 5, 6]
        })
    );
    h.events.clear();
    // Barge-in: a cancelled reply yields no audio.
    h.recv(c, json!({"type":"tts-start"}));
    h.recv(
        c,
        json!({"type":"tts-chunk","format":"pcm","sampleRate":24000,"data":b64(&[9,9])}),
    );
    h.recv(c, json!({"type":"tts-cancelled"}));
    h.recv(c, json!({"type":"tts-complete"}));
    assert!(!h
        .events
        .iter()
        .any(|e| matches!(e, ClientEvent::TtsAudio { .. })));
    // A whole `tts` message.
    h.recv(c, json!({"type":"tts","format":"mp3","data":b64(b"ID3")}));
    assert_eq!(
        h.events.last(),
        Some(&ClientEvent::TtsAudio {
            format: "mp3".into(),
            sample_rate: None,
            audio: b"ID3".to_vec()
        })
    );
    // A whole `tts` holding a WAV file: its rate is read from the header.
    let wav = llmrtc_proto::wav::wav_from_samples(16000, &[1, 2, 3]);
    h.recv(c, json!({"type":"tts","format":"wav","data":b64(&wav)}));
    assert_eq!(
        h.events.last(),
        Some(&ClientEvent::TtsAudio {
            format: "wav".into(),
            sample_rate: Some(16000),
            audio: wav
        })
    );
    // Not base64: reported, the connection stays.
    h.recv(
        c,
        json!({"type":"tts-chunk","format":"pcm","sampleRate":24000,"data":"!!!"}),
    );
    assert_eq!(
        h.events.last(),
        Some(&ClientEvent::ProtocolViolation {
            error: ProtocolError::BadAudio("tts-chunk")
        })
    );
    assert_eq!(h.c.state(), ConnectionState::Connected);
}

#[test]
fn tts_audio_beyond_the_limit_is_dropped() {
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let mut config = ClientConfig::default();
    config.max_tts_audio_bytes = 4;
    let mut h = H::new(config);
    h.c.start(h.now).expect("start");
    let c = h.connected("s");
    h.recv(c, json!({"type":"tts-start"}));
    h.recv(
        c,
        json!({"type":"tts-chunk","format":"pcm","sampleRate":16000,"data":b64(&[1,2,3])}),
    );
    h.recv(
        c,
        json!({"type":"tts-chunk","format":"pcm","sampleRate":16000,"data":b64(&[4,5])}),
    );
    h.recv(c, json!({"type":"tts-complete"}));
    assert!(h.events.contains(&ClientEvent::ProtocolViolation {
        error: ProtocolError::AudioTooLarge { max: 4 }
    }));
    assert!(!h
        .events
        .iter()
        .any(|e| matches!(e, ClientEvent::TtsAudio { .. })));
}

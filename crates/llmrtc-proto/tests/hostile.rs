//! Hostile input: bad base64, bad WAV, huge audio, garbage frames, unknown types, messages
//! around `ready`. The server answers what the spec says, never panics, and other
//! connections keep working.

mod common;

use agentwire_core::{ConnId, Frame, Machine, PeerInfo};
use common::*;
use llmrtc_proto::wav::wav_from_samples;
use llmrtc_proto::{encode_audio, Limits, ServerConfig};
use serde_json::json;

fn codes(h: &mut Harness, c: ConnId) -> Vec<String> {
    h.take(c)
        .iter()
        .filter(|v| v["type"] == "error")
        .map(|v| v["code"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// After whatever happened, a second client still gets a whole turn and a pong.
fn others_still_work(h: &mut Harness) {
    let (c, _) = h.client();
    let types = h.full_turn(c, "still there?", &["yes"]);
    assert_eq!(types.last().map(String::as_str), Some("tts-complete"));
}

#[test]
fn bad_base64_is_audio_processing_error() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    for data in ["!!!!", "AAAA=A==", "ÿÿÿÿ", "A"] {
        h.send(c, json!({"type":"audio","data": data}));
        assert_eq!(codes(&mut h, c), ["AUDIO_PROCESSING_ERROR"], "{data}");
    }
    h.send(c, json!({"type":"ping","timestamp":1}));
    assert_eq!(h.types(c), ["pong"], "the connection stays");
    others_still_work(&mut h);
}

#[test]
fn bad_wav_is_invalid_audio_format() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    let good = wav_from_samples(16000, &utterance(16000, 300));
    let mut cases: Vec<Vec<u8>> = vec![
        b"not a wav file at all".to_vec(),
        good[..20].to_vec(),
        good[..40].to_vec(), // no data chunk
        Vec::new(),
    ];
    for (off, bytes) in [
        (20usize, 3u16.to_le_bytes()), // IEEE float
        (34, 8u16.to_le_bytes()),      // 8-bit
        (22, 6u16.to_le_bytes()),      // 6 channels
        (32, 7u16.to_le_bytes()),      // block align
    ] {
        let mut b = good.clone();
        b[off..off + 2].copy_from_slice(&bytes);
        cases.push(b);
    }
    for wav in &cases {
        let mut body = Vec::new();
        encode_audio(&mut body, wav, &[]);
        h.send_text(c, std::str::from_utf8(&body).expect("utf8"));
        assert_eq!(
            codes(&mut h, c),
            ["INVALID_AUDIO_FORMAT"],
            "{:?}",
            &wav[..wav.len().min(44)]
        );
    }
    assert!(h.stt_requests().is_empty());
    others_still_work(&mut h);
}

#[test]
fn huge_audio_is_refused_before_parsing_and_memory_stays_bounded() {
    let mut limits = Limits::default();
    limits.max_message_bytes = 64 * 1024;
    limits.max_segment_bytes = 8 * 1024;
    let mut h = Harness::new(ServerConfig::default().with_limits(limits));
    let (c, _) = h.client();
    // Over the message limit: INVALID_MESSAGE, nothing decoded.
    let big = audio_text(16000, &loud(16000, 3000));
    assert!(big.len() > 64 * 1024);
    h.send_text(c, &big);
    assert_eq!(codes(&mut h, c), ["INVALID_MESSAGE"]);
    assert!(h.stt_requests().is_empty());
    // Under it, but longer than a segment may be: cut at the segment limit.
    h.audio(c, 16000, &loud(16000, 1500));
    let stt = h.stt_requests().pop().expect("stt");
    assert_eq!(stt.segment.samples.len(), 4 * 1024);
    // A WAV whose data size claims 4 GiB holds only what is present.
    let mut wav = wav_from_samples(16000, &loud(16000, 200));
    wav[40..44].copy_from_slice(&u32::MAX.to_le_bytes());
    wav[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    let mut body = Vec::new();
    encode_audio(&mut body, &wav, &[]);
    h.send_text(c, std::str::from_utf8(&body).expect("utf8"));
    assert!(codes(&mut h, c).is_empty());
    others_still_work(&mut h);
}

#[test]
fn garbage_frames_are_invalid_message_and_the_connection_stays() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    let frames: [&[u8]; 12] = [
        b"",
        b"{",
        b"[]",
        b"null",
        b"42",
        br#""ping""#,
        br#"{"type":null}"#,
        br#"{"type":{"a":1}}"#,
        br#"{"type":"audio"}"#,
        br#"{"type":"audio","data":7}"#,
        br#"{"type":"reconnect","sessionId":["x"]}"#,
        br#"{"type":"attachments","attachments":[{"mimeType":"x"}]}"#,
    ];
    for f in frames {
        h.server.handle_frame(c, Frame::Binary(f), h.now);
        h.drain();
        assert_eq!(
            codes(&mut h, c),
            ["INVALID_MESSAGE"],
            "{}",
            String::from_utf8_lossy(f)
        );
    }
    h.server
        .handle_frame(c, Frame::Binary(&[0xff, 0xfe, b'{']), h.now);
    h.drain();
    assert_eq!(codes(&mut h, c), ["INVALID_MESSAGE"]);
    let deep = "[".repeat(100_000);
    h.send_text(c, &deep);
    assert_eq!(codes(&mut h, c), ["INVALID_MESSAGE"]);
    others_still_work(&mut h);
}

#[test]
fn unknown_types_are_ignored_silently() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    for t in ["future-feature", "ready", "tts-chunk", "", "PING"] {
        h.send(c, json!({"type": t, "whatever": [1, 2, 3]}));
    }
    assert!(h.take(c).is_empty());
    others_still_work(&mut h);
}

#[test]
fn messages_before_ready_and_after_close_are_handled_in_order() {
    let mut h = Harness::default_config();
    // Frames for a connection never reported: no-op.
    h.server.handle_frame(
        ConnId::new(99),
        Frame::Text(r#"{"type":"ping","timestamp":1}"#),
        h.now,
    );
    h.server.handle_disconnect(ConnId::new(99), h.now);
    h.drain();
    assert!(h.sent.is_empty());
    // A burst queued right behind the upgrade: ready goes out first, then the answers.
    let c = ConnId::new(1);
    h.server.handle_connect(c, &PeerInfo::new(None), h.now);
    for i in 0..3 {
        h.server.handle_frame(
            c,
            Frame::Text(&format!(r#"{{"type":"ping","timestamp":{i}}}"#)),
            h.now,
        );
    }
    h.server.handle_frame(
        c,
        Frame::Text(&audio_text(16000, &utterance(16000, 300))),
        h.now,
    );
    h.drain();
    assert_eq!(
        h.types(c),
        [
            "ready",
            "pong",
            "pong",
            "pong",
            "speech-start",
            "speech-end"
        ]
    );
    // A second connect with the same id changes nothing.
    h.server.handle_connect(c, &PeerInfo::new(None), h.now);
    h.drain();
    assert!(h.take(c).is_empty());
    h.disconnect(c);
    h.send(c, json!({"type":"ping","timestamp":1}));
    assert!(h.take(c).is_empty(), "nothing after the disconnect");
    others_still_work(&mut h);
}

#[test]
fn a_reconnect_storm_with_long_ids_stays_bounded() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    let long = "x".repeat(100_000);
    for _ in 0..50 {
        h.send(c, json!({"type":"reconnect","sessionId": long}));
    }
    assert_eq!(h.server.sessions(), 1);
    let failed: Vec<_> = h
        .take_events()
        .into_iter()
        .filter_map(|e| match e {
            llmrtc_proto::ServerEvent::ResumeFailed { requested, .. } => Some(requested.len()),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 50);
    assert!(failed.iter().all(|&n| n <= 256), "ids in events are cut");
    others_still_work(&mut h);
}

//! Turns: the spec's message sequence for a whole turn, one turn at a time, attachments for
//! the next turn, provider failures and timeouts as error codes, and the queue limits.
//!
//! The server driven directly with simulated time (harness in `common`).

mod common;

use common::*;

use std::time::Duration;

use llmrtc_proto::{
    texts, Limits, ProviderError, ProviderKind, ServerConfig, ServerEvent, VisionAttachment,
};
use serde_json::json;

#[test]
fn a_whole_turn_sends_the_spec_sequence() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    let types = h.full_turn(c, "Hello", &["Hi", " there!"]);
    assert_eq!(
        types,
        [
            "speech-start",
            "speech-end",
            "transcript",
            "llm-chunk",
            "llm-chunk",
            "llm",
            "tts-start",
            "tts-chunk",
            "tts-complete"
        ]
    );
}

#[test]
fn the_next_turn_starts_only_after_tts_complete() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    h.audio(c, 16000, &utterance(16000, 400));
    let stt = h.stt_requests().pop().expect("stt");
    let now = h.now;
    h.server
        .stt_result(stt.request, Ok("one".into()), now)
        .expect("stt");
    h.drain();
    let llm = h.llm_request().expect("llm");
    h.audio(c, 16000, &utterance(16000, 400)); // queued while the LLM runs
    h.server.llm_chunk(llm, "reply", now).expect("chunk");
    h.server.llm_done(llm, now).expect("done");
    h.drain();
    let tts = h.tts_request().expect("tts");
    assert!(h.stt_requests().is_empty(), "still in the first turn");
    h.server.tts_done(tts, now).expect("done");
    h.drain();
    assert_eq!(h.stt_requests().len(), 1, "the queued utterance is next");
}

#[test]
fn attachments_queue_for_the_next_turn_only() {
    let mut h = Harness::default_config();
    let (c, sid) = h.client();
    h.send(
        c,
        json!({"type":"attachments","attachments":[{"data":"data:image/png;base64,AAAA","mimeType":"image/png"}]}),
    );
    assert_eq!(h.server.queued_attachments(&sid), 1);
    let wav = llmrtc_proto::wav::wav_from_samples(16000, &utterance(16000, 300));
    let mut body = Vec::new();
    llmrtc_proto::encode_audio(
        &mut body,
        &wav,
        &[VisionAttachment::new("https://x/y.jpg").with_alt("y")],
    );
    h.send_text(c, std::str::from_utf8(&body).expect("utf8"));
    assert_eq!(h.server.queued_attachments(&sid), 0);
    let stt = h.stt_requests().pop().expect("stt");
    let now = h.now;
    h.server
        .stt_result(stt.request, Ok("look".into()), now)
        .expect("stt");
    h.drain();
    let llm = h
        .take_events()
        .into_iter()
        .find_map(|e| match e {
            ServerEvent::Llm(r) => Some(r),
            _ => None,
        })
        .expect("llm");
    let data: Vec<_> = llm.attachments.iter().map(|a| a.data.as_str()).collect();
    assert_eq!(data, ["data:image/png;base64,AAAA", "https://x/y.jpg"]);
}

#[test]
fn too_many_attachments_are_rate_limited_and_dropped() {
    let mut limits = Limits::default();
    limits.max_queued_attachments = 2;
    let mut h = Harness::new(ServerConfig::default().with_limits(limits));
    let (c, sid) = h.client();
    let att = json!({"data":"u"});
    h.send(
        c,
        json!({"type":"attachments","attachments":[att, att, att]}),
    );
    assert_eq!(h.server.queued_attachments(&sid), 2);
    assert_eq!(codes(&h.take(c)), ["RATE_LIMITED"]);
}

#[test]
fn provider_failures_become_their_error_codes() {
    // STT error and timeout (no heartbeat, so the long waits keep the connection).
    let mut h = Harness::new(ServerConfig::default().with_heartbeat_timeout(None));
    let (c, _) = h.client();
    h.audio(c, 16000, &utterance(16000, 400));
    let stt = h.stt_requests().pop().expect("stt");
    let now = h.now;
    h.server
        .stt_result(stt.request, Err(ProviderError::Failed("boom".into())), now)
        .expect("stt");
    h.drain();
    let sent = h.take(c);
    assert_eq!(
        sent.last(),
        Some(&json!({"type":"error","code":"STT_ERROR","message":"boom"}))
    );
    h.audio(c, 16000, &utterance(16000, 400));
    h.take(c);
    h.advance(Duration::from_secs(29));
    assert!(codes(&h.take(c)).is_empty());
    h.advance(Duration::from_secs(1));
    assert_eq!(codes(&h.take(c)), ["STT_TIMEOUT"]);
    assert!(h.take_events().iter().any(|e| matches!(
        e,
        ServerEvent::Cancel {
            kind: ProviderKind::Stt,
            ..
        }
    )));
    // LLM error mid-stream: the stream is closed with done:true, then the error; no `llm`.
    let llm = to_llm(&mut h, c, "hi");
    let now = h.now;
    h.server.llm_chunk(llm, "par", now).expect("chunk");
    h.server.llm_chunk(llm, "tial", now).expect("chunk");
    h.server
        .llm_failed(llm, ProviderError::Timeout, now)
        .expect("failed");
    h.drain();
    let sent = h.take(c);
    let tail: Vec<_> = sent.iter().rev().take(3).rev().cloned().collect();
    assert_eq!(
        tail,
        [
            json!({"type":"llm-chunk","content":"par","done":false}),
            json!({"type":"llm-chunk","content":"tial","done":true}),
            json!({"type":"error","code":"LLM_TIMEOUT","message":texts::LLM_TIMEOUT}),
        ]
    );
    // TTS failure: error, then tts-complete closes the tts-start.
    let llm = to_llm(&mut h, c, "hi");
    let now = h.now;
    h.server.llm_chunk(llm, "ok", now).expect("chunk");
    h.server.llm_done(llm, now).expect("done");
    h.drain();
    let tts = h.tts_request().expect("tts");
    h.server
        .tts_failed(tts, ProviderError::Failed("no voice".into()), now)
        .expect("failed");
    h.drain();
    let types = h.types(c);
    assert_eq!(
        types[types.len() - 3..],
        ["tts-start", "error", "tts-complete"]
    );
    // TTS timeout, by the machine's own clock.
    let llm = to_llm(&mut h, c, "hi");
    let now = h.now;
    h.server.llm_chunk(llm, "ok", now).expect("chunk");
    h.server.llm_done(llm, now).expect("done");
    h.drain();
    h.take(c);
    h.advance(Duration::from_secs(30));
    let sent = h.take(c);
    assert_eq!(codes(&sent), ["TTS_TIMEOUT"]);
    assert_eq!(
        sent.last().map(|v| v["type"].clone()),
        Some(json!("tts-complete"))
    );
}

#[test]
fn an_llm_reply_without_chunks_still_closes_the_stream_and_skips_tts() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    let llm = to_llm(&mut h, c, "hi");
    h.take(c);
    let now = h.now;
    h.server.llm_done(llm, now).expect("done");
    h.drain();
    assert_eq!(
        h.take(c),
        [
            json!({"type":"llm-chunk","content":"","done":true}),
            json!({"type":"llm","text":""}),
        ]
    );
    assert_eq!(h.tts_request(), None);
}

#[test]
fn too_many_queued_utterances_are_rate_limited() {
    let mut limits = Limits::default();
    limits.max_queued_turns = 1;
    let mut h = Harness::new(ServerConfig::default().with_limits(limits));
    let (c, _) = h.client();
    h.audio(c, 16000, &utterance(16000, 300)); // the turn
    h.audio(c, 16000, &utterance(16000, 300)); // queued
    h.take(c);
    h.audio(c, 16000, &utterance(16000, 300)); // one too many
    assert_eq!(codes(&h.take(c)), ["RATE_LIMITED"]);
}

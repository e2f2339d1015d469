//! The spec's fallbacks and the rarer error codes: whole `tts` messages when streaming TTS is
//! off, partial transcripts (`isFinal: false`), `VAD_ERROR` for audio the detector cannot
//! judge, and `INTERNAL_ERROR` for a failure around a provider.
//!
//! The server driven directly with simulated time (harness in `common`).

mod common;

use common::*;

use base64::Engine as _;
use llmrtc_proto::wav::{parse_wav, wav_from_samples};
use llmrtc_proto::{texts, Limits, ProviderError, ServerConfig, ServerEvent, VadConfig};
use serde_json::{json, Value};

fn whole_tts() -> Harness {
    Harness::new(ServerConfig::default().with_streaming_tts(false))
}

/// Runs a turn to its TTS request; returns the request and whether it asked for streaming.
fn to_tts(h: &mut Harness, c: agentwire_core::ConnId) -> (llmrtc_proto::RequestId, bool) {
    let llm = to_llm(h, c, "hello");
    let now = h.now;
    h.server.llm_chunk(llm, "Hi there.", now).expect("chunk");
    h.server.llm_done(llm, now).expect("done");
    h.drain();
    let mut found = None;
    h.events.retain(|e| match e {
        ServerEvent::Tts(r) => {
            found = Some((r.request, r.streaming));
            false
        }
        _ => true,
    });
    found.expect("tts request")
}

fn decode(v: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(v["data"].as_str().expect("data"))
        .expect("base64")
}

#[test]
fn with_streaming_tts_off_the_reply_goes_out_whole_in_one_tts_message() {
    let mut h = whole_tts();
    let (c, _) = h.client();
    let (tts, streaming) = to_tts(&mut h, c);
    assert!(!streaming, "the provider is told to make the whole audio");
    h.take(c);
    let now = h.now;
    // A provider that streams anyway: its chunks are gathered, nothing is sent yet.
    let pcm: Vec<u8> = (0..480u16).flat_map(|i| i.to_le_bytes()).collect();
    for piece in pcm.chunks(320) {
        h.server
            .tts_chunk(tts, "pcm", 16000, piece, now)
            .expect("chunk");
    }
    h.drain();
    assert!(h.take(c).is_empty(), "nothing before tts_done");
    h.server.tts_done(tts, now).expect("done");
    h.drain();
    let sent = h.take(c);
    let types: Vec<_> = sent.iter().map(|v| v["type"].clone()).collect();
    assert_eq!(types, [json!("tts"), json!("tts-complete")]);
    // PCM goes out as a WAV file, so the rate survives a message without `sampleRate`.
    assert_eq!(sent[0]["format"], "wav");
    let wav = decode(&sent[0]);
    let parsed = parse_wav(&wav).expect("a WAV file");
    assert_eq!(parsed.format.sample_rate, 16000);
    assert_eq!(parsed.format.channels, 1);
    assert_eq!(parsed.pcm, &pcm[..]);

    // A provider with a non-streaming API answers with the whole audio in its format.
    let (tts, _) = to_tts(&mut h, c);
    h.take(c);
    let now = h.now;
    h.server
        .tts_audio(tts, "mp3", b"ID3fake", now)
        .expect("audio");
    h.server.tts_done(tts, now).expect("done");
    h.drain();
    let sent = h.take(c);
    assert_eq!(sent[0]["type"], "tts");
    assert_eq!(sent[0]["format"], "mp3");
    assert_eq!(decode(&sent[0]), b"ID3fake");
    assert_eq!(sent[1]["type"], "tts-complete");
    assert_eq!(sent.len(), 2);
}

#[test]
fn with_streaming_tts_on_the_provider_is_asked_to_stream() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    let (_, streaming) = to_tts(&mut h, c);
    assert!(streaming);
}

#[test]
fn whole_tts_audio_over_the_limit_or_mixed_fails_the_turn_with_tts_error() {
    let mut limits = Limits::default();
    limits.max_tts_bytes = 1000;
    let mut h = Harness::new(
        ServerConfig::default()
            .with_streaming_tts(false)
            .with_limits(limits),
    );
    let (c, _) = h.client();
    let (tts, _) = to_tts(&mut h, c);
    h.take(c);
    let now = h.now;
    h.server
        .tts_chunk(tts, "pcm", 24000, &[0; 600], now)
        .expect("chunk");
    h.server
        .tts_chunk(tts, "pcm", 24000, &[0; 600], now)
        .expect("the turn fails, the call does not");
    h.drain();
    let sent = h.take(c);
    assert_eq!(
        sent,
        [
            json!({"type":"error","code":"TTS_ERROR","message":texts::TTS_TOO_LONG}),
            json!({"type":"tts-complete"}),
        ]
    );
    assert!(
        h.server.tts_done(tts, now).is_err(),
        "the request was withdrawn"
    );
    // A reply whose chunks change rate cannot become one file.
    let (tts, _) = to_tts(&mut h, c);
    h.take(c);
    let now = h.now;
    h.server
        .tts_chunk(tts, "pcm", 24000, &[0; 8], now)
        .expect("chunk");
    h.server
        .tts_chunk(tts, "pcm", 16000, &[0; 8], now)
        .expect("chunk");
    h.drain();
    assert_eq!(codes(&h.take(c)), ["TTS_ERROR"]);
}

#[test]
fn partial_transcripts_go_out_before_the_final_one_and_keep_stt_alive() {
    let mut h = Harness::new(ServerConfig::default().with_heartbeat_timeout(None));
    let (c, _) = h.client();
    h.audio(c, 16000, &utterance(16000, 400));
    h.take(c);
    let stt = h.stt_requests().pop().expect("stt");
    // 20 s, a partial, 20 s more: the 30 s STT timeout is an idle time.
    h.advance(std::time::Duration::from_secs(20));
    let now = h.now;
    h.server
        .stt_partial(stt.request, "Book a", now)
        .expect("partial");
    h.drain();
    h.advance(std::time::Duration::from_secs(20));
    let now = h.now;
    h.server
        .stt_partial(stt.request, "Book a table", now)
        .expect("partial");
    h.server
        .stt_result(stt.request, Ok("Book a table.".into()), now)
        .expect("final");
    h.drain();
    assert_eq!(
        h.take(c),
        [
            json!({"type":"transcript","text":"Book a","isFinal":false}),
            json!({"type":"transcript","text":"Book a table","isFinal":false}),
            json!({"type":"transcript","text":"Book a table.","isFinal":true}),
        ]
    );
    assert!(
        h.llm_request().is_some(),
        "only the final text asks the LLM"
    );
    // After the final transcript, a late partial is refused and sends nothing.
    assert!(h.server.stt_partial(stt.request, "late", now).is_err());
    h.drain();
    assert!(h.take(c).is_empty());
}

#[test]
fn audio_at_a_rate_the_vad_does_not_run_at_is_vad_error() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    for rate in [4000, 400_000] {
        h.audio(c, rate, &utterance(rate, 400));
        assert_eq!(
            h.take(c),
            [json!({"type":"error","code":"VAD_ERROR",
                    "message":texts::vad_rate(rate, &VadConfig::default())})],
            "{rate} Hz"
        );
    }
    assert!(h.stt_requests().is_empty());
    // The connection keeps working, and the range is a setting.
    h.audio(c, 8000, &utterance(8000, 400));
    assert_eq!(h.types(c), ["speech-start", "speech-end"]);
    let mut vad = VadConfig::default();
    vad.min_sample_rate = 4000;
    let mut h = Harness::new(ServerConfig::default().with_vad(vad));
    let (c, _) = h.client();
    h.audio(c, 4000, &utterance(4000, 400));
    assert_eq!(h.types(c), ["speech-start", "speech-end"]);
    // A malformed WAV is still INVALID_AUDIO_FORMAT, bad base64 AUDIO_PROCESSING_ERROR.
    let mut wav = wav_from_samples(16000, &utterance(16000, 100));
    wav[20] = 3; // IEEE float
    let data = base64::engine::general_purpose::STANDARD.encode(&wav);
    h.send(c, json!({"type":"audio","data":data}));
    assert_eq!(codes(&h.take(c)), ["INVALID_AUDIO_FORMAT"]);
}

#[test]
fn a_failure_around_a_provider_is_internal_error_whichever_provider() {
    let mut h = Harness::new(ServerConfig::default().with_heartbeat_timeout(None));
    let (c, _) = h.client();
    let internal = || ProviderError::Internal("the STT worker panicked".into());
    h.audio(c, 16000, &utterance(16000, 400));
    let stt = h.stt_requests().pop().expect("stt");
    let now = h.now;
    h.server
        .stt_result(stt.request, Err(internal()), now)
        .expect("stt");
    h.drain();
    assert_eq!(
        h.take(c).last(),
        Some(&json!({"type":"error","code":"INTERNAL_ERROR","message":"the STT worker panicked"}))
    );
    let llm = to_llm(&mut h, c, "hi");
    let now = h.now;
    h.server.llm_failed(llm, internal(), now).expect("llm");
    h.drain();
    assert_eq!(codes(&h.take(c)), ["INTERNAL_ERROR"]);
    let (tts, _) = to_tts(&mut h, c);
    h.take(c);
    let now = h.now;
    h.server.tts_failed(tts, internal(), now).expect("tts");
    h.drain();
    assert_eq!(
        h.types(c),
        ["error", "tts-complete"],
        "the tts-start is closed"
    );
    // The session goes on.
    let types = h.full_turn(c, "again", &["fine"]);
    assert_eq!(types.last().map(String::as_str), Some("tts-complete"));
}

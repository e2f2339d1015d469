//! Audio in: silence starts no turn, stereo is mixed down, and a segment ends at the PCM limit.
//!
//! The server driven directly with simulated time (harness in `common`).

mod common;

use common::*;

use llmrtc_proto::{Limits, ServerConfig};

#[test]
fn silence_starts_no_turn_and_stereo_is_mixed_down() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    h.audio(c, 16000, &quiet(16000, 2000));
    assert!(h.take(c).is_empty());
    assert!(h.stt_requests().is_empty());
    // 44.1 kHz stereo.
    let mono = utterance(44100, 400);
    let pcm: Vec<u8> = mono
        .iter()
        .flat_map(|s| [s.to_le_bytes(), s.to_le_bytes()].concat())
        .collect();
    let mut wav = Vec::new();
    llmrtc_proto::write_wav(
        &mut wav,
        llmrtc_proto::WavFormat {
            channels: 2,
            sample_rate: 44100,
        },
        &pcm,
    );
    let mut body = Vec::new();
    llmrtc_proto::encode_audio(&mut body, &wav, &[]);
    h.send_text(c, std::str::from_utf8(&body).expect("utf8"));
    let stt = h.stt_requests().pop().expect("stt");
    assert_eq!(stt.segment.sample_rate, 44100);
    assert!(stt.segment.duration_ms() >= 400);
}

#[test]
fn a_segment_over_the_pcm_limit_ends_there() {
    let mut limits = Limits::default();
    limits.max_segment_bytes = 16000 * 2; // one second at 16 kHz
    let mut h = Harness::new(ServerConfig::default().with_limits(limits));
    let (c, _) = h.client();
    h.audio(c, 16000, &loud(16000, 3000));
    assert_eq!(h.types(c), ["speech-start", "speech-end"]);
    let stt = h.stt_requests().pop().expect("stt");
    assert_eq!(stt.segment.samples.len(), 16000);
}

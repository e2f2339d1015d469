//! WebRTC audio tracks: microphone PCM from the inbound track feeds the same VAD → STT
//! turns as `audio` messages, and TTS goes out on the outbound track (as
//! `ServerEvent::TrackAudio`) with `tts-start`, `tts-complete` after playout, and
//! `tts-cancelled` on barge-in, as the real backend sends them.
//!
//! The server driven directly with simulated time (harness in `common`).

mod common;

use std::time::Duration;

use agentwire_core::{ConnId, Machine};
use common::*;

use llmrtc_proto::{
    CommandError, ConfigError, LlmrtcServer, RequestId, ServerConfig, ServerEvent, TurnOutcome,
};

/// Feeds `samples` at `rate` as the WebRTC layer does: 20 ms pieces, 20 ms apart.
fn feed_track(h: &mut Harness, c: ConnId, rate: u32, samples: &[i16]) {
    for piece in samples.chunks(rate as usize / 50) {
        let now = h.now;
        h.server
            .track_audio(c, piece, rate, now)
            .expect("track audio");
        h.drain();
        h.advance(Duration::from_millis(20));
    }
}

/// Drives a turn from track speech up to its TTS request.
fn track_turn_to_tts(h: &mut Harness, c: ConnId) -> RequestId {
    feed_track(h, c, 48_000, &utterance(48_000, 400));
    let stt = h.stt_requests().pop().expect("stt");
    let now = h.now;
    h.server
        .stt_result(stt.request, Ok("Hello".into()), now)
        .expect("stt");
    h.drain();
    let llm = h.llm_request().expect("llm");
    h.server.llm_chunk(llm, "Hi there!", now).expect("chunk");
    h.server.llm_done(llm, now).expect("done");
    h.drain();
    h.tts_request().expect("tts")
}

/// A whole turn from track speech to a reply of `ms` that TTS finished and the track
/// still plays; what was sent and emitted so far is taken.
fn reply_playing_on_track(h: &mut Harness, c: ConnId, ms: u32) {
    h.server.set_audio_track(c, true).expect("track");
    let tts = track_turn_to_tts(h, c);
    let now = h.now;
    h.server
        .tts_chunk(tts, "pcm", 24_000, &pcm_bytes(ms), now)
        .expect("chunk");
    h.server.tts_done(tts, now).expect("done");
    h.drain();
    h.take(c);
    h.take_events();
}

/// `ms` of 24 kHz PCM as a TTS provider's little-endian bytes.
fn pcm_bytes(ms: u32) -> Vec<u8> {
    loud(24_000, ms)
        .iter()
        .flat_map(|s| s.to_le_bytes())
        .collect()
}

fn track_audio(events: &[ServerEvent]) -> Vec<(Vec<i16>, u32)> {
    events
        .iter()
        .filter_map(|e| match e {
            ServerEvent::TrackAudio {
                samples,
                sample_rate,
                ..
            } => Some((samples.clone(), *sample_rate)),
            _ => None,
        })
        .collect()
}

fn track_ends(events: &[ServerEvent]) -> Vec<bool> {
    events
        .iter()
        .filter_map(|e| match e {
            ServerEvent::TrackAudioEnd { cancelled, .. } => Some(*cancelled),
            _ => None,
        })
        .collect()
}

#[test]
fn track_audio_is_resampled_and_makes_one_turn_with_speech_start_and_end() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    // 48 kHz from Opus, in 20 ms pieces: the end of a piece never ends speech.
    feed_track(&mut h, c, 48_000, &utterance(48_000, 600));
    assert_eq!(h.types(c), ["speech-start", "speech-end"]);
    let stt = h.stt_requests();
    assert_eq!(stt.len(), 1);
    let seg = &stt[0].segment;
    assert_eq!(seg.sample_rate, 16_000, "resampled to track_sample_rate");
    // 600 ms of speech plus pre-roll and the silence that ended it, at 16 kHz.
    let secs = seg.samples.len() as f64 / 16_000.0;
    assert!((0.6..1.4).contains(&secs), "{secs} s");
    assert!(seg.samples.iter().any(|&s| s.unsigned_abs() > 3_000));
}

#[test]
fn track_sample_rate_is_a_setting_checked_against_the_vad() {
    let mut h = Harness::new(ServerConfig::default().with_track_sample_rate(24_000));
    let (c, _) = h.client();
    feed_track(&mut h, c, 48_000, &utterance(48_000, 400));
    assert_eq!(h.stt_requests()[0].segment.sample_rate, 24_000);
    let bad = ServerConfig::default().with_track_sample_rate(4_000);
    assert_eq!(
        LlmrtcServer::new(bad, agentwire_core::SequentialIds::new(0)).err(),
        Some(ConfigError::TrackSampleRate(4_000))
    );
}

#[test]
fn track_audio_is_refused_for_unknown_connections_and_unsupported_rates() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    let now = h.now;
    assert_eq!(
        h.server
            .track_audio(ConnId::new(99), &[0; 960], 48_000, now),
        Err(CommandError::UnknownConnection)
    );
    assert_eq!(
        h.server.track_audio(c, &[0; 960], 0, now),
        Err(CommandError::UnsupportedRate(0))
    );
    assert_eq!(
        h.server.track_audio(c, &[0; 960], 1_000_000, now),
        Err(CommandError::UnsupportedRate(1_000_000))
    );
    // A rate far below the VAD's would make a small piece huge once resampled.
    assert_eq!(
        h.server.track_audio(c, &[0; 960], 1, now),
        Err(CommandError::UnsupportedRate(1))
    );
    // Any rate the VAD range allows is resampled: 44.1 kHz works too.
    feed_track(&mut h, c, 44_100, &utterance(44_100, 400));
    assert_eq!(h.types(c), ["speech-start", "speech-end"]);
    h.disconnect(c);
    assert_eq!(
        h.server.track_audio(c, &[0; 960], 48_000, now),
        Err(CommandError::UnknownConnection)
    );
}

#[test]
fn with_an_audio_track_tts_goes_on_the_track_and_tts_complete_waits_for_playout() {
    let mut h = Harness::default_config();
    let (c, sid) = h.client();
    h.server.set_audio_track(c, true).expect("track");
    h.server.set_data_channel_open(c, true).expect("dc");
    assert!(h.server.has_audio_track(c));
    let tts = track_turn_to_tts(&mut h, c);
    h.take_events();
    h.dc.clear();
    let now = h.now;
    // One second of 24 kHz speech in two chunks, split at an odd byte.
    let audio = pcm_bytes(1_000);
    h.server
        .tts_chunk(tts, "pcm", 24_000, &audio[..10_001], now)
        .expect("chunk");
    h.server
        .tts_chunk(tts, "pcm", 24_000, &audio[10_001..], now)
        .expect("chunk");
    h.server.tts_done(tts, now).expect("done");
    h.drain();
    let events = h.take_events();
    let pieces = track_audio(&events);
    let samples: Vec<i16> = pieces.iter().flat_map(|(s, _)| s.clone()).collect();
    assert!(pieces.iter().all(|(_, rate)| *rate == 24_000));
    assert_eq!(samples, loud(24_000, 1_000), "the odd byte is carried over");
    assert_eq!(track_ends(&events), [false]);
    // No tts-chunk on either channel, and no tts-complete while the audio plays.
    let types = h.types(c);
    assert_eq!(
        types,
        [
            "speech-start",
            "speech-end",
            "transcript",
            "llm-chunk",
            "llm",
            "tts-start"
        ]
    );
    assert!(h.dc.iter().all(|(_, v)| v["type"] != "tts-chunk"));
    assert!(h.server.in_turn(&sid));
    h.advance(Duration::from_millis(990));
    assert!(h.types(c).is_empty(), "still playing");
    h.advance(Duration::from_millis(10));
    assert_eq!(h.types(c), ["tts-complete"]);
    assert!(h.dc.iter().any(|(_, v)| v["type"] == "tts-complete"));
    assert!(!h.server.in_turn(&sid));
    let events = h.take_events();
    assert!(events.contains(&ServerEvent::TurnEnded {
        session: sid.as_str().into(),
        outcome: TurnOutcome::Completed
    }));
    assert!(track_ends(&events).is_empty(), "nothing left to cancel");
}

#[test]
fn barge_in_on_the_track_during_playout_cancels_the_track_audio() {
    let mut h = Harness::default_config();
    let (c, sid) = h.client();
    reply_playing_on_track(&mut h, c, 5_000);
    // The user talks over the reply, one second into its five.
    h.advance(Duration::from_secs(1));
    feed_track(&mut h, c, 48_000, &utterance(48_000, 400));
    let types = h.types(c);
    assert_eq!(types, ["tts-cancelled", "speech-start", "speech-end"]);
    assert_eq!(
        h.stt_requests().len(),
        1,
        "the new utterance is the next turn"
    );
    let events = h.take_events();
    assert_eq!(track_ends(&events), [true], "buffered audio is dropped");
    assert!(events.contains(&ServerEvent::TurnEnded {
        session: sid.as_str().into(),
        outcome: TurnOutcome::Interrupted
    }));
    // The old reply's playout end passes without a tts-complete.
    h.advance(Duration::from_secs(10));
    assert!(h.types(c).is_empty());
}

#[test]
fn barge_in_while_tts_streams_to_the_track_cancels_the_request_and_the_audio() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    h.server.set_audio_track(c, true).expect("track");
    let tts = track_turn_to_tts(&mut h, c);
    let now = h.now;
    h.server
        .tts_chunk(tts, "pcm", 24_000, &pcm_bytes(200), now)
        .expect("chunk");
    h.drain();
    h.take(c);
    h.take_events();
    feed_track(&mut h, c, 48_000, &utterance(48_000, 400));
    assert_eq!(h.types(c)[..2], ["tts-cancelled", "speech-start"]);
    let events = h.take_events();
    assert_eq!(track_ends(&events), [true]);
    assert!(events.contains(&ServerEvent::Cancel {
        request: tts,
        kind: llmrtc_proto::ProviderKind::Tts
    }));
}

#[test]
fn audio_the_track_cannot_carry_goes_as_messages_and_no_track_means_messages() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    h.server.set_audio_track(c, true).expect("track");
    let tts = track_turn_to_tts(&mut h, c);
    h.take(c);
    let now = h.now;
    // mp3 is not PCM: a tts-chunk message, as without the track.
    h.server
        .tts_chunk(tts, "mp3", 24_000, &[1, 2, 3], now)
        .expect("chunk");
    // A whole WAV goes on the track at its own rate.
    let wav = llmrtc_proto::wav::wav_from_samples(22_050, &loud(22_050, 100));
    h.server.tts_audio(tts, "wav", &wav, now).expect("wav");
    h.drain();
    assert_eq!(h.types(c), ["tts-chunk"]);
    let pieces = track_audio(&h.take_events());
    assert_eq!(pieces.len(), 1);
    assert_eq!(pieces[0].1, 22_050);
    assert_eq!(pieces[0].0.len(), 2_205);
    h.server.tts_done(tts, now).expect("done");
    h.drain();
    assert!(
        h.types(c).is_empty(),
        "tts-complete waits for 100 ms of playout"
    );
    h.advance(Duration::from_millis(100));
    assert_eq!(h.types(c), ["tts-complete"]);

    // The track off again (the peer went away): TTS is messages again.
    h.server.set_audio_track(c, false).expect("track off");
    let types = h.full_turn(c, "again", &["Sure."]);
    assert!(types.contains(&"tts-chunk".to_owned()), "{types:?}");
    assert!(track_audio(&h.take_events()).is_empty());
}

#[test]
fn a_disconnect_during_playout_drops_the_track_audio_and_the_turn() {
    let mut h = Harness::default_config();
    let (c, sid) = h.client();
    reply_playing_on_track(&mut h, c, 2_000);
    h.disconnect(c);
    let events = h.take_events();
    assert_eq!(track_ends(&events), [true]);
    assert!(events.contains(&ServerEvent::TurnEnded {
        session: sid.as_str().into(),
        outcome: TurnOutcome::Abandoned
    }));
    h.advance(Duration::from_secs(5));
    assert!(h.take(c).is_empty());
}

#[test]
fn the_playout_end_is_the_next_deadline_and_fires_once() {
    let mut h = Harness::new(ServerConfig::default().with_heartbeat_timeout(None));
    let (c, _) = h.client();
    reply_playing_on_track(&mut h, c, 1_000);
    let end = h.now + Duration::from_secs(1);
    assert_eq!(h.server.poll_timeout(), Some(end));
    // An early call changes nothing.
    h.server.handle_timeout(h.now + Duration::from_millis(500));
    h.drain();
    assert!(h.take(c).is_empty());
    assert_eq!(h.server.poll_timeout(), Some(end));
    h.server.handle_timeout(end);
    h.drain();
    assert_eq!(h.types(c), ["tts-complete"]);
    assert_eq!(h.server.poll_timeout(), None);
    h.server.handle_timeout(end);
    h.drain();
    assert!(h.take(c).is_empty(), "fires once");
}

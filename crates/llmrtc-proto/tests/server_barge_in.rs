//! Barge-in: speech while TTS plays cancels the reply and starts the next turn; speech while
//! the LLM thinks waits its turn.
//!
//! The server driven directly with simulated time (harness in `common`).

mod common;

use common::*;

use llmrtc_proto::{ProviderKind, ServerEvent, TurnOutcome};

#[test]
fn barge_in_sends_tts_cancelled_then_speech_start_and_drops_the_turn() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    h.audio(c, 16000, &utterance(16000, 400));
    let stt = h.stt_requests().pop().expect("stt");
    let now = h.now;
    h.server
        .stt_result(stt.request, Ok("Tell me a story".into()), now)
        .expect("stt");
    h.drain();
    let llm = h.llm_request().expect("llm");
    h.server
        .llm_chunk(llm, "Once upon a time", now)
        .expect("chunk");
    h.server.llm_done(llm, now).expect("done");
    h.drain();
    let tts = h.tts_request().expect("tts");
    h.server
        .tts_chunk(tts, "pcm", 24000, &[0; 64], now)
        .expect("chunk");
    h.drain();
    h.take(c);
    // The user speaks while TTS plays.
    h.audio(c, 16000, &utterance(16000, 400));
    let types = h.types(c);
    assert_eq!(types[..3], ["tts-cancelled", "speech-start", "speech-end"]);
    // The new utterance is the next turn.
    assert_eq!(h.stt_requests().len(), 1);
    let events = h.take_events();
    assert!(events.contains(&ServerEvent::Cancel {
        request: tts,
        kind: ProviderKind::Tts
    }));
    assert!(events.contains(&ServerEvent::TurnEnded {
        session: h.server.session_of(c).expect("sid").into(),
        outcome: TurnOutcome::Interrupted
    }));
    // The rest of that turn is dropped: its late audio is refused and sends nothing.
    assert_eq!(
        h.server.tts_chunk(tts, "pcm", 24000, &[0; 4], now),
        Err(llmrtc_proto::CommandError::UnknownRequest)
    );
    assert_eq!(
        h.server.tts_done(tts, now),
        Err(llmrtc_proto::CommandError::UnknownRequest)
    );
    h.drain();
    assert!(h.take(c).is_empty());
}

#[test]
fn speech_while_the_llm_thinks_is_no_barge_in_and_waits_its_turn() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    h.audio(c, 16000, &utterance(16000, 400));
    let first = h.stt_requests().pop().expect("stt");
    h.audio(c, 16000, &utterance(16000, 400));
    h.audio(c, 16000, &utterance(16000, 400));
    assert!(h.stt_requests().is_empty(), "turns are serialized");
    assert_eq!(
        h.types(c),
        [
            "speech-start",
            "speech-end",
            "speech-start",
            "speech-end",
            "speech-start",
            "speech-end"
        ]
    );
    let now = h.now;
    h.server
        .stt_result(first.request, Ok(String::new()), now)
        .expect("stt");
    h.drain();
    // An empty transcript ends the turn without an LLM call; the next one starts.
    assert_eq!(h.llm_request(), None);
    let second = h.stt_requests();
    assert_eq!(second.len(), 1);
    assert_eq!(h.types(c), ["transcript"]);
}

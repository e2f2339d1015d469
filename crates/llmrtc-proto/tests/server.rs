//! The server's rules, driven directly with simulated time.

mod common;

use common::*;

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

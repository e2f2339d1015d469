//! Entry points of the cargo-fuzz targets in `fuzz/` (feature `fuzzing`).
//!
//! Each `fuzz/fuzz_targets/*.rs` only calls one of these functions, so the bodies build and
//! run on stable Rust too: `tests/fuzz_seeds.rs` replays every committed seed through them.
//! Every function panics on a broken invariant; that is how the fuzzer finds bugs.

use agentwire_core::Frame;

use crate::message::{AgentMessage, ControllerMessage};

/// A frame limit well above anything a fuzzer produces, so that parsing always runs.
const FUZZ_MAX: usize = 1 << 20;

/// Decodes `data` as an agent → controller message (as a binary frame and, when it is
/// UTF-8, as a text frame); whatever decodes must survive an encode/decode round trip.
pub fn decode_agent(data: &[u8]) {
    let binary = AgentMessage::decode(Frame::Binary(data), FUZZ_MAX);
    if let Ok(text) = std::str::from_utf8(data) {
        let from_text = AgentMessage::decode(Frame::Text(text), FUZZ_MAX);
        assert_eq!(
            binary.as_ref().ok(),
            from_text.as_ref().ok(),
            "text and binary frames decode alike"
        );
    }
    if let Ok(m) = binary {
        let mut out = Vec::new();
        m.encode(&mut out);
        match AgentMessage::decode(Frame::Binary(&out), usize::MAX) {
            Ok(again) => assert_eq!(again, m, "round trip of {}", String::from_utf8_lossy(&out)),
            Err(e) => panic!("re-decode failed: {e}: {}", String::from_utf8_lossy(&out)),
        }
    }
}

/// Decodes `data` as a controller → agent message (as a binary frame and, when it is
/// UTF-8, as a text frame); whatever decodes must survive an encode/decode round trip.
pub fn decode_controller(data: &[u8]) {
    let binary = ControllerMessage::decode(Frame::Binary(data), FUZZ_MAX);
    if let Ok(text) = std::str::from_utf8(data) {
        let from_text = ControllerMessage::decode(Frame::Text(text), FUZZ_MAX);
        assert_eq!(
            binary.as_ref().ok(),
            from_text.as_ref().ok(),
            "text and binary frames decode alike"
        );
    }
    if let Ok(m) = binary {
        let mut out = Vec::new();
        m.encode(&mut out);
        match ControllerMessage::decode(Frame::Binary(&out), usize::MAX) {
            Ok(again) => assert_eq!(again, m, "round trip of {}", String::from_utf8_lossy(&out)),
            Err(e) => panic!("re-decode failed: {e}: {}", String::from_utf8_lossy(&out)),
        }
    }
}

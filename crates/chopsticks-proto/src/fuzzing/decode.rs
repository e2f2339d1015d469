//! The codec targets: whatever decodes must survive an encode/decode round trip.

use std::fmt::Debug;

use agentwire_core::Frame;

use crate::error::DecodeError;
use crate::message::{AgentMessage, ControllerMessage};

/// A frame limit well above anything a fuzzer produces, so that parsing always runs.
const FUZZ_MAX: usize = 1 << 20;

/// Decodes `data` as an agent → controller message (as a binary frame and, when it is
/// UTF-8, as a text frame); whatever decodes must survive an encode/decode round trip.
pub fn decode_agent(data: &[u8]) {
    round_trip(data, AgentMessage::decode, AgentMessage::encode);
}

/// Decodes `data` as a controller → agent message (as a binary frame and, when it is
/// UTF-8, as a text frame); whatever decodes must survive an encode/decode round trip.
pub fn decode_controller(data: &[u8]) {
    round_trip(data, ControllerMessage::decode, ControllerMessage::encode);
}

/// The checks of both codec targets, for one sender's message type.
fn round_trip<M: PartialEq + Debug>(
    data: &[u8],
    decode: impl Fn(Frame<'_>, usize) -> Result<M, DecodeError>,
    encode: impl Fn(&M, &mut Vec<u8>),
) {
    let binary = decode(Frame::Binary(data), FUZZ_MAX);
    if let Ok(text) = std::str::from_utf8(data) {
        let from_text = decode(Frame::Text(text), FUZZ_MAX);
        assert_eq!(
            binary.as_ref().ok(),
            from_text.as_ref().ok(),
            "text and binary frames decode alike"
        );
    }
    if let Ok(m) = binary {
        let mut out = Vec::new();
        encode(&m, &mut out);
        match decode(Frame::Binary(&out), usize::MAX) {
            Ok(again) => assert_eq!(again, m, "round trip of {}", String::from_utf8_lossy(&out)),
            Err(e) => panic!("re-decode failed: {e}: {}", String::from_utf8_lossy(&out)),
        }
    }
}

//! The codec targets: `llmrtc_decode` (client and server messages) and `llmrtc_wav`.

use agentwire_core::{Frame, FrameError};

use crate::codec::{decode_base64, Decoded};
use crate::error::DecodeError;
use crate::message::{ClientMessage, ServerMessage};
use crate::wav::{parse_wav, write_wav};

/// A body limit well above anything a fuzzer produces.
const FUZZ_MAX: usize = 1 << 20;

/// Decodes `data` as a client and as a server message.
///
/// Checks: no panic; the size limit is checked first; a decoded message (core 1.3.0's
/// server messages included) re-encodes to JSON that decodes to the same message, with `type`
/// first; a `ping`'s timestamp is the input's number text, finite, and a `pong` writes it
/// unchanged; an unknown type keeps a bounded name; decode errors are INVALID_MESSAGE.
pub fn decode(data: &[u8]) {
    let frame = Frame::Binary(data);
    let borrowed = crate::ClientMessageRef::decode(frame, FUZZ_MAX).map(|d| match d {
        Decoded::Message(m) => Decoded::Message(m.into_owned()),
        Decoded::Unknown { type_name } => Decoded::Unknown { type_name },
    });
    let owned = ClientMessage::decode(frame, FUZZ_MAX);
    match (&borrowed, &owned) {
        (Ok(b), Ok(o)) => assert_eq!(b, o, "borrowed and owned decodes agree"),
        (Err(_), Err(_)) => {}
        _ => panic!("borrowed {borrowed:?} vs owned {owned:?}"),
    }
    match owned {
        Ok(Decoded::Message(m)) => {
            if let ClientMessage::Ping(p) = &m {
                // The timestamp is the input's own number text, echoed as is by `pong`.
                let ts = p.timestamp.as_str();
                assert!(
                    data.windows(ts.len()).any(|w| w == ts.as_bytes()),
                    "timestamp {ts} is not text of the input"
                );
                assert!(p.timestamp.as_f64().is_finite());
                let pong = ServerMessage::Pong(crate::message::Pong {
                    timestamp: p.timestamp.clone(),
                })
                .to_json();
                assert_eq!(pong, format!(r#"{{"type":"pong","timestamp":{ts}}}"#));
            }
            let json = m.to_json();
            assert!(json.starts_with("{\"type\":"), "{json}");
            let again = ClientMessage::decode_str(&json).expect("re-decode");
            assert_eq!(again, Decoded::Message(m), "client round trip");
        }
        Ok(Decoded::Unknown { type_name }) => assert!(type_name.len() <= 64),
        Err(e) => assert_eq!(e.code(), crate::ErrorCode::INVALID_MESSAGE),
    }
    match ServerMessage::decode(frame, FUZZ_MAX) {
        Ok(Decoded::Message(m)) => {
            let json = m.to_json();
            assert!(json.starts_with("{\"type\":"), "{json}");
            let again = ServerMessage::decode_str(&json).expect("re-decode");
            assert_eq!(again, Decoded::Message(m), "server round trip");
        }
        Ok(Decoded::Unknown { type_name }) => assert!(type_name.len() <= 64),
        Err(_) => {}
    }
    if let Some(max) = data.len().checked_sub(1) {
        assert!(
            matches!(
                ClientMessage::decode(frame, max),
                Err(DecodeError::Frame(FrameError::TooLarge { .. }))
            ),
            "the size limit is checked first"
        );
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let mut out = Vec::new();
        if decode_base64(text, FUZZ_MAX, &mut out).is_some() {
            assert!(out.len() <= text.len() / 4 * 3 + 2);
            let mut short = Vec::new();
            if let Some(m) = out.len().checked_sub(1) {
                assert!(decode_base64(text, m, &mut short).is_none(), "base64 limit");
                assert!(short.is_empty());
            }
        }
    }
}

/// Parses `data` as a WAV file.
///
/// Checks: no panic; accepted files are 16-bit PCM mono or stereo with a positive rate and
/// whole frames; writing the parsed format and samples and parsing again gives the same.
pub fn wav(data: &[u8]) {
    let Ok(w) = parse_wav(data) else {
        return;
    };
    assert!(w.format.channels == 1 || w.format.channels == 2);
    assert!(w.format.sample_rate > 0);
    assert_eq!(w.pcm.len() % (2 * usize::from(w.format.channels)), 0);
    assert_eq!(w.mono_samples().count(), w.frames());
    let mut out = Vec::new();
    write_wav(&mut out, w.format, w.pcm);
    let again = parse_wav(&out).expect("re-parse");
    assert_eq!(again, w);
}

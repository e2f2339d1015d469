//! Decoding and encoding of whole WebSocket (or data channel) message bodies.

use agentwire_core::{Frame, FrameBuf};
use base64::Engine as _;
use serde::Serialize;

use crate::error::DecodeError;
use crate::message::{AudioRef, ClientMessage, ClientMessageRef, ServerMessage, VisionAttachment};
use agentwire_core::json::{probe, Probe, Tagged};

/// Default largest message body a decoder accepts: 8 MiB.
///
/// An `audio` message carries a whole utterance as base64 WAV: 60 s of 16 kHz 16-bit mono
/// is 1.9 MB of PCM and 2.6 MB of base64, so the 1 MiB default of other protocols is too
/// small. Every decoder takes its limit as an argument; this is the default of
/// [`Limits::max_message_bytes`](crate::Limits::max_message_bytes).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 8 << 20;

/// The outcome of decoding one message body: a known message, or a `type` this sender does
/// not send, which the spec says to ignore (not an error).
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded<T> {
    /// A message of a known type.
    Message(T),
    /// A JSON object with a string `type` that is not one of the sender's types (the name,
    /// cut to 64 bytes). Callers ignore it.
    Unknown {
        /// The unknown `type` value.
        type_name: String,
    },
}

impl<T> Decoded<T> {
    /// The message, or `None` for an unknown type.
    pub fn message(self) -> Option<T> {
        match self {
            Self::Message(m) => Some(m),
            Self::Unknown { .. } => None,
        }
    }
}

fn decode_text<'a, T: Tagged<'a>>(
    text: &'a str,
    type_name_of: fn(&str) -> Option<&'static str>,
) -> Result<Decoded<T>, DecodeError> {
    match probe::<T>(text) {
        Ok(Probe::Message(m)) => Ok(Decoded::Message(m)),
        Ok(Probe::UnknownType(type_name)) => Ok(Decoded::Unknown { type_name }),
        Ok(Probe::MissingType) => Err(DecodeError::MissingType),
        Ok(Probe::NotAnObject) => Err(DecodeError::NotAnObject),
        Err(e) if e.is_data() => {
            // A data error can only come from a known type's fields: find which.
            let type_name = serde_json::from_str::<TypeOnly<'_>>(text)
                .ok()
                .and_then(|t| type_name_of(&t.ty))
                .unwrap_or("unknown");
            Err(DecodeError::InvalidFields {
                type_name,
                source: e,
            })
        }
        Err(e) => Err(DecodeError::InvalidJson(e)),
    }
}

/// Just the `type` of an object (for error reports).
#[derive(serde::Deserialize)]
struct TypeOnly<'a> {
    #[serde(rename = "type", borrow)]
    ty: std::borrow::Cow<'a, str>,
}

fn encode_into<T: Serialize>(msg: &T, out: &mut Vec<u8>) {
    // Writing to a Vec cannot fail, and every message type has string keys only, so
    // serialization cannot fail either.
    let _ = serde_json::to_writer(out, msg);
}

/// `decode`, `encode` and `to_frame` for one sender's message enum.
macro_rules! impl_codec {
    ($ty:ident, $dir:literal) => {
        impl $ty {
            #[doc = concat!("Decodes a ", $dir, " message from one message body.")]
            ///
            /// Never panics. Checks `max_len` before parsing; binary frames must hold UTF-8
            /// JSON. A string `type` the sender does not send is [`Decoded::Unknown`].
            pub fn decode(frame: Frame<'_>, max_len: usize) -> Result<Decoded<Self>, DecodeError> {
                decode_text(frame.text_within(max_len)?, |t| {
                    Self::TYPES.iter().copied().find(|k| *k == t)
                })
            }

            /// Decodes from a string (no size limit: the caller has bounded it).
            pub fn decode_str(text: &str) -> Result<Decoded<Self>, DecodeError> {
                decode_text(text, |t| Self::TYPES.iter().copied().find(|k| *k == t))
            }

            /// Appends the JSON encoding to `out` (a caller-owned, reusable buffer).
            pub fn encode(&self, out: &mut Vec<u8>) {
                encode_into(self, out);
            }

            /// The JSON encoding as a string.
            pub fn to_json(&self) -> String {
                let mut out = Vec::new();
                self.encode(&mut out);
                // serde_json writes UTF-8 only.
                String::from_utf8(out).unwrap_or_default()
            }

            /// Encodes into a text frame, using `scratch` as the encode buffer.
            pub fn to_frame(&self, scratch: &mut Vec<u8>) -> FrameBuf {
                scratch.clear();
                self.encode(scratch);
                FrameBuf::json_from_slice(scratch)
            }
        }
    };
}

impl_codec!(ClientMessage, "client → server");

impl<'a> ClientMessageRef<'a> {
    /// Decodes a client → server message, borrowing `audio.data` from the frame when it has
    /// no escapes (base64 never needs any), so a large utterance is not copied.
    ///
    /// Never panics. Checks `max_len` before parsing, like [`ClientMessage::decode`].
    pub fn decode(frame: Frame<'a>, max_len: usize) -> Result<Decoded<Self>, DecodeError> {
        let text = frame.text_within(max_len)?;
        if let Some(audio) = audio_fast_path(text) {
            return Ok(Decoded::Message(Self::Audio(audio)));
        }
        decode_text(text, |t| {
            ClientMessage::TYPES.iter().copied().find(|k| *k == t)
        })
    }
}

/// The exact `audio` message every llmrtc client writes (and [`encode_audio`] without
/// attachments): `{"type":"audio","data":"<base64>"}`. Recognized by a scan for the closing
/// quote that is much faster than a JSON string parse; anything else (attachments, other
/// field order, an escape, a control character, whitespace) takes the general path, which
/// gives the same result (the `llmrtc_decode` fuzz target compares the two).
fn audio_fast_path(text: &str) -> Option<AudioRef<'_>> {
    const PREFIX: &str = r#"{"type":"audio","data":""#;
    let rest = text.strip_prefix(PREFIX)?;
    let body = rest.strip_suffix("\"}")?;
    // No quote, backslash or control character inside: a plain JSON string, as is. Branch-
    // free per byte and OR-ed over fixed chunks, so the loop vectorizes.
    let bad = |b: u8| u8::from((b == b'"') | (b == b'\\') | (b < 0x20));
    let bytes = body.as_bytes();
    let mut chunks = bytes.chunks_exact(64);
    for chunk in &mut chunks {
        let mut acc = 0u8;
        for &b in chunk {
            acc |= bad(b);
        }
        if acc != 0 {
            return None;
        }
    }
    if chunks.remainder().iter().any(|&b| bad(b) != 0) {
        return None;
    }
    Some(AudioRef {
        data: std::borrow::Cow::Borrowed(body),
        attachments: None,
    })
}
impl_codec!(ServerMessage, "server → client");

/// Appends `s` as a JSON string literal.
pub(crate) fn write_json_str(out: &mut Vec<u8>, s: &str) {
    // Serializing a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Appends the standard base64 (with padding) of `bytes`, straight into `out`.
pub fn write_base64(out: &mut Vec<u8>, bytes: &[u8]) {
    let start = out.len();
    let n = base64::encoded_len(bytes.len(), true).unwrap_or(0);
    out.resize(start + n, 0);
    let written = base64::engine::general_purpose::STANDARD
        .encode_slice(bytes, &mut out[start..])
        .unwrap_or(0);
    out.truncate(start + written);
}

/// Appends `{"type":"tts-chunk","format":..,"sampleRate":..,"data":"<base64 of audio>"}`,
/// encoding the audio straight into `out` (no intermediate base64 `String`).
pub fn encode_tts_chunk(out: &mut Vec<u8>, format: &str, sample_rate: u32, audio: &[u8]) {
    out.extend_from_slice(br#"{"type":"tts-chunk","format":"#);
    write_json_str(out, format);
    out.extend_from_slice(br#","sampleRate":"#);
    out.extend_from_slice(sample_rate.to_string().as_bytes());
    out.extend_from_slice(br#","data":""#);
    write_base64(out, audio);
    out.extend_from_slice(b"\"}");
}

/// Appends `{"type":"tts","format":..,"data":"<base64 of audio>"}` without an intermediate
/// base64 `String`.
pub fn encode_tts(out: &mut Vec<u8>, format: &str, audio: &[u8]) {
    out.extend_from_slice(br#"{"type":"tts","format":"#);
    write_json_str(out, format);
    out.extend_from_slice(br#","data":""#);
    write_base64(out, audio);
    out.extend_from_slice(b"\"}");
}

/// Appends `{"type":"audio","data":"<base64 of wav>","attachments"?:[..]}`, encoding the WAV
/// file straight into `out`.
pub fn encode_audio(out: &mut Vec<u8>, wav: &[u8], attachments: &[VisionAttachment]) {
    out.extend_from_slice(br#"{"type":"audio","data":""#);
    write_base64(out, wav);
    out.push(b'"');
    if !attachments.is_empty() {
        out.extend_from_slice(br#","attachments":"#);
        encode_into(&attachments, out);
    }
    out.push(b'}');
}

/// Decodes standard base64 (padding optional) into `out`; `None` if it is not base64 or
/// would decode to more than `max_len` bytes (checked before decoding).
pub fn decode_base64(text: &str, max_len: usize, out: &mut Vec<u8>) -> Option<()> {
    let bytes = text.as_bytes();
    let pad = bytes
        .iter()
        .rev()
        .take(2)
        .take_while(|&&b| b == b'=')
        .count();
    // Four characters carry three bytes; this bound is exact for valid input.
    if (bytes.len() - pad) / 4 * 3 + ((bytes.len() - pad) % 4 * 3 / 4) > max_len {
        return None;
    }
    let start = out.len();
    out.resize(start + base64::decoded_len_estimate(bytes.len()), 0);
    match BASE64_LENIENT.decode_slice(bytes, &mut out[start..]) {
        Ok(n) if n <= max_len => {
            out.truncate(start + n);
            Some(())
        }
        _ => {
            out.truncate(start);
            None
        }
    }
}

/// Standard alphabet; padding optional on decode (browsers' `btoa` pads, other encoders may
/// not).
const BASE64_LENIENT: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Ping, TtsChunk};
    use agentwire_core::FrameError;

    #[test]
    fn type_may_come_last_and_unknown_types_are_distinct() {
        let m = ClientMessage::decode_str(r#"{"timestamp":5,"type":"ping"}"#).expect("decode");
        assert_eq!(m, Decoded::Message(ClientMessage::Ping(Ping::new(5))));
        let u = ClientMessage::decode_str(r#"{"type":"future-thing","x":[1,{"y":2}]}"#)
            .expect("decode");
        assert_eq!(
            u,
            Decoded::Unknown {
                type_name: "future-thing".into()
            }
        );
        let u = ClientMessage::decode_str(r#"{"x":[1,{"y":2}],"type":"pong"}"#).expect("decode");
        assert!(matches!(u, Decoded::Unknown { .. }));
    }

    #[test]
    fn the_borrowed_decode_borrows_audio_data_and_agrees_with_the_owned_one() {
        let text = r#"{"type":"audio","data":"UklGRg==","attachments":[{"data":"x"}]}"#;
        let Ok(Decoded::Message(ClientMessageRef::Audio(a))) =
            ClientMessageRef::decode(Frame::Text(text), 1000)
        else {
            panic!("audio")
        };
        assert!(matches!(a.data, std::borrow::Cow::Borrowed("UklGRg==")));
        let owned = ClientMessageRef::Audio(a).into_owned();
        assert_eq!(
            ClientMessage::decode_str(text).expect("decode"),
            Decoded::Message(owned)
        );
        // An escaped slash is decoded (owned), type-last order takes the second pass.
        let text = r#"{"data":"Ukl\/Rg==","type":"audio"}"#;
        let Ok(Decoded::Message(ClientMessageRef::Audio(a))) =
            ClientMessageRef::decode(Frame::Text(text), 1000)
        else {
            panic!("audio")
        };
        assert_eq!(a.data, "Ukl/Rg==");
    }

    #[test]
    fn the_audio_fast_path_agrees_with_the_general_decoder() {
        let cases = [
            r#"{"type":"audio","data":"UklGRg=="}"#,
            r#"{"type":"audio","data":""}"#,
            r#"{"type":"audio","data":"a\/b"}"#,
            r#"{"type":"audio","data":"a"b"}"#,
            r#"{"type":"audio","data":"ab	c"}"#,
            r#"{"type":"audio","data":"abc"} "#,
            r#"{"type":"audio","data":"abc","data":"d"}"#,
            r#"{"type":"audio","data":"é😀0123456789012345678901234567890123456789"}"#,
            r#"{"type":"audio","data":"}"#,
        ];
        for text in cases {
            let fast = ClientMessageRef::decode(Frame::Text(text), 1000)
                .map(|d| d.message().map(ClientMessageRef::into_owned));
            let general = ClientMessage::decode_str(text).map(Decoded::message);
            match (&fast, &general) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{text}"),
                (Err(_), Err(_)) => {}
                _ => panic!("{text}: fast {fast:?} vs general {general:?}"),
            }
        }
        assert!(audio_fast_path(cases[0]).is_some());
        assert!(audio_fast_path(cases[7]).is_some());
        assert!(audio_fast_path(cases[2]).is_none());
    }

    #[test]
    fn error_kinds_are_distinct() {
        let d = |s: &str| ClientMessage::decode(Frame::Text(s), 64);
        assert!(matches!(d("{"), Err(DecodeError::InvalidJson(_))));
        assert!(matches!(d("[1]"), Err(DecodeError::NotAnObject)));
        assert!(matches!(d(r#"{"a":1}"#), Err(DecodeError::MissingType)));
        assert!(matches!(d(r#"{"type":7}"#), Err(DecodeError::MissingType)));
        assert!(matches!(
            d(r#"{"type":"ping"}"#),
            Err(DecodeError::InvalidFields {
                type_name: "ping",
                ..
            })
        ));
        assert!(matches!(
            d(r#"{"timestamp":"x","type":"ping"}"#),
            Err(DecodeError::InvalidFields {
                type_name: "ping",
                ..
            })
        ));
        assert!(matches!(
            ClientMessage::decode(Frame::Binary(&[0xff, 0xfe]), 64),
            Err(DecodeError::Frame(FrameError::NotUtf8))
        ));
        let big = format!(r#"{{"type":"ping","timestamp":{}}}"#, "1".repeat(64));
        assert!(matches!(
            ClientMessage::decode(Frame::Text(&big), 64),
            Err(DecodeError::Frame(FrameError::TooLarge { max: 64, .. }))
        ));
        assert!(matches!(
            d(r#"{"type":"ping","timestamp":1} x"#),
            Err(DecodeError::InvalidJson(_))
        ));
    }

    #[test]
    fn fast_encoders_match_serde() {
        let audio = [1u8, 2, 3, 250, 251, 252, 0];
        let mut fast = Vec::new();
        encode_tts_chunk(&mut fast, "pcm", 24000, &audio);
        let typed = ServerMessage::TtsChunk(TtsChunk {
            format: "pcm".into(),
            sample_rate: 24000,
            data: base64::engine::general_purpose::STANDARD.encode(audio),
        });
        assert_eq!(String::from_utf8(fast).expect("utf8"), typed.to_json());

        let mut out = Vec::new();
        encode_audio(
            &mut out,
            &audio,
            &[VisionAttachment::new("u").with_alt("a")],
        );
        let back = ClientMessage::decode_str(std::str::from_utf8(&out).expect("utf8"))
            .expect("decode")
            .message()
            .expect("known");
        let ClientMessage::Audio(a) = back else {
            panic!("{back:?}")
        };
        let mut pcm = Vec::new();
        decode_base64(&a.data, 100, &mut pcm).expect("base64");
        assert_eq!(pcm, audio);
        assert_eq!(a.attachments.map(|v| v.len()), Some(1));
    }

    #[test]
    fn base64_decode_is_bounded_and_strict_about_the_alphabet() {
        let mut out = Vec::new();
        assert_eq!(decode_base64("AAEC", 3, &mut out), Some(()));
        assert_eq!(out, [0, 1, 2]);
        out.clear();
        assert_eq!(decode_base64("AAEC", 2, &mut out), None);
        assert!(out.is_empty());
        assert_eq!(decode_base64("AA!C", 100, &mut out), None);
        assert_eq!(decode_base64("AAE", 100, &mut out), Some(()));
        assert_eq!(out, [0, 1]);
    }
}

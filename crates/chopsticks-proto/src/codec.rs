//! Decoding and encoding of whole WebSocket message bodies.

use agentwire_core::json::{probe, Probe, Tagged};
use agentwire_core::{Frame, FrameBuf};
use serde::{Deserialize, Deserializer, Serialize};

use crate::error::{DecodeError, InvalidHello};
use crate::message::{AgentMessage, ControllerMessage, HelloWire};

/// What an agent message decodes to first: a `hello` in its lenient shape (so a wrong-typed
/// field can be named), or any other agent message.
enum AgentIn {
    Hello(HelloWire),
    Other(AgentMessage),
}

impl<'de> Tagged<'de> for AgentIn {
    fn decode_variant<D: Deserializer<'de>>(tag: &str, d: D) -> Result<Option<Self>, D::Error> {
        if tag == "hello" {
            return HelloWire::deserialize(d).map(|h| Some(Self::Hello(h)));
        }
        AgentMessage::decode_variant(tag, d).map(|m| m.map(Self::Other))
    }
}

impl AgentIn {
    fn into_message(self) -> Result<AgentMessage, DecodeError> {
        match self {
            Self::Other(m) => Ok(m),
            Self::Hello(wire) => match wire.split() {
                (hello, None) => Ok(AgentMessage::Hello(hello)),
                (hello, Some((field, expected, found))) => Err(DecodeError::InvalidHello(
                    Box::new(InvalidHello::new(hello, field, expected, found.get())),
                )),
            },
        }
    }
}

/// Decodes one body of at most `max_len` bytes, checking the size before parsing.
///
/// Text frames are parsed with `from_str` (no second UTF-8 pass); binary frames must hold
/// UTF-8 JSON, as the real controller accepts them.
fn decode_probe<T>(frame: Frame<'_>, max_len: usize) -> Result<T, DecodeError>
where
    for<'de> T: Tagged<'de>,
{
    let text = frame.text_within(max_len)?;
    match probe::<T>(text) {
        Ok(Probe::Message(m)) => Ok(m),
        Ok(Probe::UnknownType(_) | Probe::MissingType) => Err(DecodeError::UnknownType),
        Ok(Probe::NotAnObject) => Err(DecodeError::NotAnObject),
        Err(e) if e.is_data() => Err(DecodeError::InvalidFields(e)),
        Err(e) => Err(DecodeError::InvalidJson(e)),
    }
}

fn encode_into<T: Serialize>(msg: &T, out: &mut Vec<u8>) {
    // Writing to a Vec cannot fail, and every message type has string keys only, so
    // serialization cannot fail either.
    let _ = serde_json::to_writer(out, msg);
}

/// `decode`, `encode` and `to_frame` for one sender's message enum, and its `Deserialize`
/// (the tagged decode, for callers that embed a message in their own serde types).
macro_rules! impl_codec {
    ($ty:ident, $dir:literal, $first:ty, $finish:expr) => {
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                match Probe::<Self>::deserialize(d)? {
                    Probe::Message(m) => Ok(m),
                    Probe::UnknownType(_) | Probe::MissingType => {
                        Err(serde::de::Error::custom("unknown message type"))
                    }
                    Probe::NotAnObject => Err(serde::de::Error::custom("expected a JSON object")),
                }
            }
        }

        impl $ty {
            #[doc = concat!("Decodes a ", $dir, " message from one WebSocket message body.")]
            ///
            /// Never panics. Checks `max_len` before parsing.
            pub fn decode(frame: Frame<'_>, max_len: usize) -> Result<Self, DecodeError> {
                decode_probe::<$first>(frame, max_len).and_then($finish)
            }

            /// Appends the JSON encoding to `out` (a caller-owned, reusable buffer).
            pub fn encode(&self, out: &mut Vec<u8>) {
                encode_into(self, out);
            }

            /// Encodes into a text frame, using `scratch` as the encode buffer.
            pub fn to_frame(&self, scratch: &mut Vec<u8>) -> FrameBuf {
                scratch.clear();
                self.encode(scratch);
                text_frame(scratch)
            }
        }
    };
}

impl_codec!(
    AgentMessage,
    "agent → controller",
    AgentIn,
    AgentIn::into_message
);
impl_codec!(ControllerMessage, "controller → agent", Self, Ok);

fn text_frame(json: &[u8]) -> FrameBuf {
    // serde_json writes UTF-8 only, so the frame is not checked twice.
    FrameBuf::json_from_slice(json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Hello;
    use agentwire_core::FrameError;

    #[test]
    fn type_may_come_last() {
        let m = AgentMessage::decode(
            Frame::Text(r#"{"agentId":"a","guildIds":["g"],"type":"guilds"}"#),
            1000,
        )
        .expect("decode");
        match m {
            AgentMessage::Guilds(g) => {
                assert_eq!(g.guild_ids, ["g"]);
                assert_eq!(g.agent_id.as_deref(), Some("a"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn version_aliases_are_accepted_and_encode_writes_protocol_version() {
        for key in [
            "protocolVersion",
            "protocol_version",
            "protocolversion",
            "version",
        ] {
            let body = format!(r#"{{"type":"hello","{key}":"1.0.0","agentId":"a"}}"#);
            let Ok(AgentMessage::Hello(h)) = AgentMessage::decode(Frame::Text(&body), 1000) else {
                panic!("{key}");
            };
            assert_eq!(h.protocol_version.as_deref(), Some("1.0.0"), "{key}");
            let mut out = Vec::new();
            AgentMessage::Hello(h).encode(&mut out);
            let s = String::from_utf8(out).expect("utf8");
            assert!(s.contains(r#""protocolVersion":"1.0.0""#), "{s}");
        }
    }

    #[test]
    fn error_kinds_are_distinct() {
        let d = |s: &str| AgentMessage::decode(Frame::Text(s), 64);
        assert!(matches!(d("{"), Err(DecodeError::InvalidJson(_))));
        assert!(matches!(d("[1,2]"), Err(DecodeError::NotAnObject)));
        assert!(matches!(
            d(r#"{"type":"nope"}"#),
            Err(DecodeError::UnknownType)
        ));
        assert!(matches!(d(r#"{"type":7}"#), Err(DecodeError::UnknownType)));
        assert!(matches!(d(r#"{"a":1}"#), Err(DecodeError::UnknownType)));
        assert!(matches!(
            d(r#"{"type":"guilds","guildIds":3}"#),
            Err(DecodeError::InvalidFields(_))
        ));
        assert!(matches!(
            AgentMessage::decode(Frame::Binary(&[0xff, 0x00]), 64),
            Err(DecodeError::Frame(FrameError::NotUtf8))
        ));
        let big = "x".repeat(65);
        assert!(matches!(
            d(&big),
            Err(DecodeError::Frame(FrameError::TooLarge {
                len: 65,
                max: 64
            }))
        ));
    }

    #[test]
    fn binary_frames_carry_json_too() {
        let m = AgentMessage::decode(Frame::Binary(br#"{"type":"guilds","guildIds":[]}"#), 100);
        assert!(matches!(m, Ok(AgentMessage::Guilds(_))));
        let _unused: Option<Hello> = None;
    }
}

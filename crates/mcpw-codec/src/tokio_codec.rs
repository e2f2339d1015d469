//! `tokio_util::codec` support (feature `tokio-util`): MCPW binary frames over any byte
//! stream with `FramedRead`/`FramedWrite`.

use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};

use crate::codec::Codec;
use crate::error::{DecodeError, EncodeError};
use crate::message::Message;

/// A [`Codec`] as a `tokio_util` [`Decoder`] and [`Encoder`] of [`Message`]s.
///
/// Decoding follows [`Codec::decode_stream`]: a frame is consumed only once it is whole, and
/// a bad header ends the stream.
#[derive(Debug, Default)]
pub struct McpwFrames {
    codec: Codec,
    scratch: Vec<u8>,
}

impl McpwFrames {
    /// Wraps `codec`.
    pub fn new(codec: Codec) -> Self {
        Self {
            codec,
            scratch: Vec::new(),
        }
    }

    /// The codec inside.
    pub fn codec_mut(&mut self) -> &mut Codec {
        &mut self.codec
    }
}

/// An error of [`McpwFrames`]: IO from the stream, or the codec's.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// The underlying stream failed.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// A frame could not be decoded.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A message could not be encoded.
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

impl Decoder for McpwFrames {
    type Item = Message;
    type Error = StreamError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Message>, StreamError> {
        Ok(self.codec.decode_stream(src)?)
    }
}

impl Encoder<&Message> for McpwFrames {
    type Error = StreamError;

    fn encode(&mut self, msg: &Message, dst: &mut BytesMut) -> Result<(), StreamError> {
        self.scratch.clear();
        self.codec.encode(msg, &mut self.scratch)?;
        dst.extend_from_slice(&self.scratch);
        Ok(())
    }
}

impl Encoder<Message> for McpwFrames {
    type Error = StreamError;

    fn encode(&mut self, msg: Message, dst: &mut BytesMut) -> Result<(), StreamError> {
        <Self as Encoder<&Message>>::encode(self, &msg, dst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Body, MessageType, OtherCall};

    #[test]
    fn frames_round_trip_through_a_split_stream() {
        let mut frames = McpwFrames::default();
        let msgs: Vec<Message> = (0..3)
            .map(|i| {
                Message::new(
                    MessageType::REQUEST,
                    Body::Other(OtherCall::new("tool.execute", serde_json::json!({"n": i}))),
                )
                .with_seq(i)
            })
            .collect();
        let mut wire = BytesMut::new();
        for m in &msgs {
            frames.encode(m, &mut wire).unwrap();
        }
        // Feed one byte at a time: None until a frame is whole, then exactly that frame.
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for b in wire.iter() {
            buf.extend_from_slice(&[*b]);
            if let Some(m) = frames.decode(&mut buf).unwrap() {
                got.push(m);
                assert!(buf.is_empty());
            }
        }
        assert_eq!(got, msgs);
    }
}

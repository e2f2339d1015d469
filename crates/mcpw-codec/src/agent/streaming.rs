//! Streaming what is too large for one frame (the crate's spec decision 50): the message's
//! JSON form goes out in `stream.part` notifications flagged
//! [`Flags::STREAMING`](crate::Flags::STREAMING).

use agentwire_core::FrameBuf;

use super::Agent;
use crate::error::{AgentCommandError, EncodeError};
use crate::header::{Flags, MessageType};
use crate::message::{Body, Message, OtherCall};
use crate::stream::{split, StreamPart, STREAM_PART};

impl Agent {
    /// Whether `encoded`, a message encoded in the connection's form, is too large for one
    /// frame: over the codec's payload limit (24-byte and 12-byte forms, after gzip) or its
    /// text limit (JSON form).
    pub(super) fn too_large(&self, encoded: &Result<FrameBuf, EncodeError>) -> bool {
        match encoded {
            Err(EncodeError::PayloadTooLarge { .. }) => true,
            Ok(FrameBuf::Text(t)) => t.len() > self.codec.limits().max_text,
            _ => false,
        }
    }

    /// Sends `msg` as a stream: its JSON form in slices of
    /// [`stream_part_bytes`](crate::AgentConfig::stream_part_bytes), numbered from 0; the
    /// last part carries `msg`'s id and sequence id, so the answer names it, the others
    /// none.
    pub(super) fn send_streamed(&mut self, msg: &Message) -> Result<(), AgentCommandError> {
        if msg.body.method() == Some(STREAM_PART) {
            return Err(AgentCommandError::Encode(
                "a stream part too large for one frame".to_owned(),
            ));
        }
        let mut text = Vec::new();
        self.codec
            .encode_json(msg, &mut text)
            .map_err(|e| AgentCommandError::Encode(e.to_string()))?;
        let text = String::from_utf8(text).map_err(|e| AgentCommandError::Encode(e.to_string()))?;
        let parts = split(&text, self.config.stream_part_bytes);
        let stream_id = format!("{}-s{}", self.config.register.agent_id, self.seq);
        let count = parts.len();
        for (index, data) in parts.into_iter().enumerate() {
            let last = index + 1 == count;
            let part = StreamPart {
                stream_id: stream_id.clone(),
                index: u32::try_from(index).unwrap_or(u32::MAX),
                last,
                data: data.to_owned(),
            };
            let params =
                serde_json::to_value(part).map_err(|e| AgentCommandError::Encode(e.to_string()))?;
            let mut m = Message::new(
                MessageType::NOTIFICATION,
                Body::Other(OtherCall::new(STREAM_PART, params)),
            );
            m.flags = Flags::STREAMING;
            if last {
                m.id.clone_from(&msg.id);
                m.seq = msg.seq;
            }
            self.send(&m)?;
        }
        Ok(())
    }
}

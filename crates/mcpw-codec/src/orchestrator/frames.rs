//! What arrives as a frame before it is a message: the rate limit, the size limit, frames
//! the codec refuses, batches, and `protocol.set_binary`, which changes how the connection's
//! frames are written.

use std::time::Instant;

use agentwire_core::{ConnId, Frame};

use super::checks;
use super::texts;
use super::wire::{self, BadFrame, Decoded, Inbound, InboundBatch, ReplyKey};
use super::{Orchestrator, OrchestratorEvent};
use crate::error::ProtocolError;
use crate::error::{ParamError, StreamError};
use crate::json;
use crate::params::SetBinaryResult;
use crate::sequence::{is_numbered, SeqCheck};
use crate::stream::{StreamPart, STREAM_PART};
use crate::{Body, Form, Message, MessageType};

impl Orchestrator {
    /// The protocol version `conn` speaks: the one its upgrade selected (the subprotocol
    /// `mcp.v<n>`, decision 49), 1 when none was; `None` for a connection not open.
    pub fn protocol_version(&self, conn: ConnId) -> Option<u8> {
        self.conns.get(conn).map(|c| c.version)
    }

    /// One frame from `conn`: counted, rate-limited, size-checked, decoded and handled.
    pub(super) fn on_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        let frame_form = wire::form_of(frame);
        let rate = self.config.rate;
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        // Replies follow the form the peer uses.
        c.form = Some(frame_form);
        self.metrics.count_frame(true, frame.len());
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        if c.counted_as != Some(frame_form) {
            let old = c.counted_as.map_or("none", Form::label);
            let label = c.agent_type_label.clone();
            c.counted_as = Some(frame_form);
            self.metrics.add_connection(&label, old, -1);
            self.metrics.add_connection(&label, frame_form.label(), 1);
        }
        self.last_method = None;
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        if let (Some(bucket), Some(rate)) = (c.bucket.as_mut(), rate) {
            if !bucket.take(&rate, now) {
                let retry = bucket.retry_after(&rate, now);
                // The reply names the refused message: its id (JSON) or sequence id.
                let reply = wire::key_of_bad(frame);
                let error = ProtocolError::RateLimited {
                    retry_after_ms: Some(u64::try_from(retry.as_millis()).unwrap_or(u64::MAX)),
                };
                self.refuse(
                    conn,
                    (frame_form, &reply),
                    (MessageType::REQUEST, None),
                    error,
                );
                return;
            }
        }
        // With HMAC on, the tag is checked before anything else is read.
        let frame = match self.config.hmac.as_ref().map(|s| s.open(frame)) {
            None => frame,
            Some(Ok(opened)) => opened,
            Some(Err(e)) => {
                let reply = wire::key_of_bad(frame);
                self.refuse(
                    conn,
                    (frame_form, &reply),
                    (MessageType::REQUEST, None),
                    ProtocolError::BadSignature(e),
                );
                return;
            }
        };
        let max = self.config.limits.max_message_bytes;
        if frame.len() > max.saturating_add(24) || (frame.is_text() && frame.len() > max) {
            let reply = wire::key_of_bad(frame);
            self.refuse(
                conn,
                (frame_form, &reply),
                (MessageType::REQUEST, None),
                ProtocolError::TooLarge { limit: max },
            );
            return;
        }
        let registered = self.conns.agent(conn).is_some();
        match wire::decode(&mut self.codec, frame) {
            Ok(Decoded::One(msg)) => {
                if self.is_fresh(conn, &msg) {
                    self.on_message(conn, *msg, now);
                }
            }
            Ok(Decoded::Batch(batch)) => self.on_batch(conn, batch, now),
            Err(e) => self.on_bad_frame(conn, e, registered),
        }
    }

    /// Checks a numbered message's sequence id (decision 38): a gap is counted and
    /// reported and the message handled; a duplicate is counted, reported and dropped.
    fn is_fresh(&mut self, conn: ConnId, msg: &Inbound) -> bool {
        let ReplyKey::Seq(seq) = msg.reply else {
            return true;
        };
        if msg.form != Form::Binary || !is_numbered(msg.kind, seq) {
            return true;
        }
        let Some(c) = self.conns.get_mut(conn) else {
            return false;
        };
        match c.seq.receive(seq) {
            SeqCheck::InOrder => true,
            SeqCheck::Gap { expected, missing } => {
                self.metrics.count_sequence_gap(missing);
                self.out.event(OrchestratorEvent::SequenceGap {
                    conn,
                    expected,
                    received: seq,
                });
                true
            }
            SeqCheck::Duplicate { .. } => {
                self.metrics.count_sequence_duplicate();
                self.out
                    .event(OrchestratorEvent::SequenceDuplicate { conn, seq });
                false
            }
        }
    }

    /// A part of a streamed message (decision 50): kept until the last, then the whole is
    /// decoded and handled as if it had come alone, answered with the last part's id or
    /// sequence id in its form.
    pub(super) fn on_stream_part(
        &mut self,
        conn: ConnId,
        msg: &Inbound,
        now: Instant,
    ) -> Result<(), ProtocolError> {
        let params = match &msg.body {
            Body::Other(call) => call.params.clone(),
            _ => serde_json::Value::Null,
        };
        let part: StreamPart = serde_json::from_value(params).map_err(|_| {
            ProtocolError::InvalidParams(ParamError::new(
                "params",
                "Not a stream part",
                "object {stream_id, index, final, data}",
                "other",
            ))
        })?;
        let limits = &self.config.limits;
        if part.stream_id.len() > limits.max_id_bytes {
            return Err(ProtocolError::InvalidParams(ParamError::new(
                "stream_id",
                "Too long",
                "string",
                "string",
            )));
        }
        let (max_streams, max_bytes) = (limits.max_streams, limits.max_stream_bytes);
        let Some(c) = self.conns.get_mut(conn) else {
            return Ok(());
        };
        let Some(text) = c
            .streams
            .push(part, max_streams, max_bytes)
            .map_err(ProtocolError::Stream)?
        else {
            return Ok(());
        };
        let mut whole_limits = json::entry_limits(self.codec.limits());
        whole_limits.max_text = max_bytes;
        let whole =
            json::decode(text.as_bytes(), &whole_limits).map_err(|e| ProtocolError::from(&e))?;
        if matches!(whole.body, Body::Batch(_)) || whole.body.method() == Some(STREAM_PART) {
            return Err(ProtocolError::Stream(StreamError::Nested));
        }
        let inbound = Inbound {
            form: msg.form,
            reply: msg.reply.clone(),
            kind: whole.kind,
            body: whole.body,
        };
        self.on_message(conn, inbound, now);
        Ok(())
    }

    /// A frame (or batch entry) the codec refused: its error, with the id it carried.
    fn on_bad_frame(&mut self, conn: ConnId, e: BadFrame, registered: bool) {
        let at = (e.form, &e.reply);
        // Register first: an unregistered peer's bad params for any other method are
        // answered as its other messages are, with 4001.
        if !registered && e.method.is_some_and(|m| m != "agent.register") {
            let kind = (MessageType::REQUEST, e.method);
            self.refuse(conn, at, kind, ProtocolError::RegisterFirst);
            return;
        }
        self.refuse(conn, at, (MessageType::REQUEST, None), e.error);
    }

    /// A batch: each entry handled in order as if it came alone (each beyond the first
    /// takes its own token from the rate limit), and everything sent to this connection
    /// meanwhile goes back as one batch (several if more than the codec's `max_batch`),
    /// with the batch's id or sequence id, in the form and body the peer used.
    fn on_batch(&mut self, conn: ConnId, batch: InboundBatch, now: Instant) {
        self.batching = Some((conn, Vec::new()));
        let rate = self.config.rate;
        for (i, entry) in batch.entries.into_iter().enumerate() {
            let limited = match (rate, self.conns.get_mut(conn)) {
                (Some(rate), Some(c)) if i > 0 => {
                    c.bucket.as_mut().is_some_and(|b| !b.take(&rate, now))
                }
                (_, None) => break,
                _ => false,
            };
            let registered = self.conns.agent(conn).is_some();
            match entry {
                Ok(msg) if limited => {
                    let error = ProtocolError::RateLimited {
                        retry_after_ms: None,
                    };
                    self.refuse(conn, (msg.form, &msg.reply), (msg.kind, None), error);
                }
                Ok(msg) => self.on_message(conn, msg, now),
                Err(e) => self.on_bad_frame(conn, e, registered),
            }
        }
        let Some((_, held)) = self.batching.take() else {
            return;
        };
        if !self.conns.contains(conn) {
            return;
        }
        let max = self.codec.limits().max_batch.max(1);
        for chunk in held.chunks(max) {
            let mut reply = Message::batch(chunk.to_vec());
            batch.reply.stamp(&mut reply);
            self.send_message(conn, batch.form, &reply, batch.body);
        }
    }

    /// `protocol.set_binary` (the real server's request): answered (to a request) in the
    /// current form, then the connection switches.
    pub(super) fn on_set_binary(
        &mut self,
        conn: ConnId,
        msg: &Inbound,
    ) -> Result<(), ProtocolError> {
        let params = match &msg.body {
            Body::Other(call) => &call.params,
            _ => &serde_json::Value::Null,
        };
        let (enabled, compression) =
            checks::set_binary(params).map_err(ProtocolError::InvalidParams)?;
        if msg.kind == MessageType::REQUEST {
            let result = SetBinaryResult {
                binary_enabled: enabled,
                compression_enabled: compression.is_some(),
                status: texts::STATUS_PROTOCOL_UPDATED.to_owned(),
            };
            self.respond(conn, msg.form, &msg.reply, &result);
        }
        self.mode_switch = Some((conn, enabled.then_some(compression)));
        Ok(())
    }
}

//! One socket, one task: the task reads the socket and hands what it read to the owner
//! task in batches, and writes what the owner queued, every frame of a pass in one flush.
//!
//! The owner does not hand frames over one by one. While it drains the machine's outputs it
//! collects each connection's frames in that connection's [`ConnTx`]; at the end of the pass
//! it moves them into the connection's [`Outbox`](shared::Outbox) under one short lock and wakes the task
//! once. The task swaps the whole outbox out, feeds every frame to the WebSocket and flushes
//! once: one wake-up and one write per connection per pass, however many frames.
//!
//! [`tx`] is the owner's end ([`ConnTx`]), [`task`] the connection's task, and [`shared`]
//! what the two share (the outbox, the send-queue counts, the pause flag, how it ended).

mod shared;
mod task;
mod tx;

use std::sync::Arc;

use agentwire_core::{truncate_close_reason, CloseCode, ConnId, FrameBuf};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data as OpData, OpCode};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::WebSocketStream;
use tracing::Instrument;

use crate::config::Limits;
use crate::stats::TransportCounters;
use shared::Shared;
use task::Task;
pub(crate) use tx::{ConnSlot, ConnTx, SendError};

/// What connection tasks tell the owner task.
pub(crate) enum Inbound {
    /// A text, binary or pong message arrived.
    Frame(ConnId, Message),
    /// Several text, binary or pong messages arrived together (one channel send for a
    /// batch).
    Frames(ConnId, Vec<Message>),
    /// The socket is done reading; the owner calls `handle_disconnect_with`.
    Ended(ConnId),
}

impl Inbound {
    /// How many frames this carries (an end counts as one).
    pub(crate) fn frames(&self) -> usize {
        match self {
            Self::Frames(_, msgs) => msgs.len(),
            Self::Frame(..) | Self::Ended(_) => 1,
        }
    }
}

/// Converts a machine frame to a tungstenite message (no copy, no second UTF-8 check).
///
/// A text frame goes as a raw final text frame: [`FrameBuf::Text`] holds UTF-8 by
/// construction, and tungstenite's `Message::Text` would only check it once more (a full
/// scan of every outbound text message).
pub(crate) fn to_message(frame: FrameBuf) -> Message {
    match frame {
        FrameBuf::Binary(b) => Message::Binary(b),
        FrameBuf::Text(t) => Message::Frame(tungstenite::protocol::frame::Frame::message(
            t.into_bytes(),
            OpCode::Data(OpData::Text),
            true,
        )),
    }
}

/// The payload length of a message this module queues or reads (a raw frame counts its
/// payload, not its header).
pub(crate) fn payload_len(msg: &Message) -> usize {
    match msg {
        Message::Frame(f) => f.payload().len(),
        other => other.len(),
    }
}

/// A close frame with `reason` cut to 123 bytes at a character boundary.
pub(crate) fn close_frame(code: CloseCode, reason: &str) -> CloseFrame {
    let code = if code.is_sendable() {
        code
    } else {
        CloseCode::NORMAL
    };
    CloseFrame {
        code: code.0.into(),
        reason: truncate_close_reason(reason).to_owned().into(),
    }
}

/// Spawns the task of an upgraded socket, inside `span`.
pub(crate) fn spawn<S>(
    conn: ConnId,
    ws: WebSocketStream<S>,
    limits: &Limits,
    inbound: mpsc::Sender<Inbound>,
    slot: Option<ConnSlot>,
    span: tracing::Span,
    stats: Arc<TransportCounters>,
) -> ConnTx
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let shared = Arc::new(Shared::new());
    let task = Task::new(conn, ws, Arc::clone(&shared), inbound, limits, stats);
    let task = tokio::spawn(task.run().instrument(span));
    ConnTx::new(shared, task, limits, slot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_reason_is_cut_at_a_char_boundary() {
        let reason = "é".repeat(100); // 200 bytes
        let f = close_frame(CloseCode::POLICY, &reason);
        assert_eq!(f.reason.len(), 122);
        assert_eq!(u16::from(f.code), 1008);
        let f = close_frame(CloseCode::ABNORMAL, "x");
        assert_eq!(u16::from(f.code), 1000);
    }
}

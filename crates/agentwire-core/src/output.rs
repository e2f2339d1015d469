//! What a machine asks its driver to do.

use std::borrow::Cow;
use std::collections::VecDeque;

use crate::{CloseCode, ConnId, FrameBuf};

/// One output of a [`Machine`](crate::Machine), drained with `poll_output`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output<E> {
    /// Send `frame` on connection `conn`. Dropped by the driver if `conn` is gone.
    Send {
        /// The connection to send on.
        conn: ConnId,
        /// The message body.
        frame: FrameBuf,
    },
    /// Close connection `conn` with `code` and `reason` after the frames already queued.
    ///
    /// The driver later calls `handle_disconnect(conn)` once the socket is gone, as for
    /// any other connection end.
    Close {
        /// The connection to close.
        conn: ConnId,
        /// The close code sent in the close frame.
        code: CloseCode,
        /// The close reason (at most 123 bytes on the wire; drivers truncate).
        reason: Cow<'static, str>,
    },
    /// Something the application may want to know (protocol-specific).
    Event(E),
}

impl<E> Output<E> {
    /// The connection this output is addressed to, if any.
    pub fn conn(&self) -> Option<ConnId> {
        match self {
            Self::Send { conn, .. } | Self::Close { conn, .. } => Some(*conn),
            Self::Event(_) => None,
        }
    }

    /// The event, if this is one.
    pub fn into_event(self) -> Option<E> {
        match self {
            Self::Event(e) => Some(e),
            _ => None,
        }
    }
}

/// A FIFO of outputs: what every machine keeps between `handle_*` and `poll_output`.
///
/// Helpers named for the three output kinds keep machine code short.
#[derive(Debug)]
pub struct Outbox<E> {
    queue: VecDeque<Output<E>>,
}

impl<E> Default for Outbox<E> {
    fn default() -> Self {
        Self {
            queue: VecDeque::new(),
        }
    }
}

impl<E> Outbox<E> {
    /// An empty outbox.
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues a frame for `conn`.
    pub fn send(&mut self, conn: ConnId, frame: FrameBuf) {
        self.queue.push_back(Output::Send { conn, frame });
    }

    /// Queues a close of `conn`.
    pub fn close(&mut self, conn: ConnId, code: CloseCode, reason: impl Into<Cow<'static, str>>) {
        self.queue.push_back(Output::Close {
            conn,
            code,
            reason: reason.into(),
        });
    }

    /// Queues an application event.
    pub fn event(&mut self, event: E) {
        self.queue.push_back(Output::Event(event));
    }

    /// Takes the oldest output.
    pub fn pop(&mut self) -> Option<Output<E>> {
        self.queue.pop_front()
    }

    /// Number of queued outputs.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Drops every queued output addressed to `conn` (events stay).
    pub fn forget_conn(&mut self, conn: ConnId) {
        self.queue.retain(|o| o.conn() != Some(conn));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outbox_is_fifo_and_can_forget_a_connection() {
        let mut o: Outbox<u8> = Outbox::new();
        o.send(ConnId::new(1), FrameBuf::text("a"));
        o.event(9);
        o.close(ConnId::new(1), CloseCode::POLICY, "bye");
        o.send(ConnId::new(2), FrameBuf::text("b"));
        o.forget_conn(ConnId::new(1));
        assert_eq!(o.len(), 2);
        assert_eq!(o.pop(), Some(Output::Event(9)));
        assert_eq!(o.pop().and_then(|x| x.conn()), Some(ConnId::new(2)));
        assert!(o.is_empty());
    }
}

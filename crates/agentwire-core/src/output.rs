//! What a machine asks its driver to do.

use std::borrow::Cow;
use std::collections::VecDeque;

use crate::{CloseCode, ConnId, FrameBuf};

/// A flow-control request from a machine to its driver about one connection's input,
/// drained with [`Machine::poll_flow`](crate::Machine::poll_flow).
///
/// It is how a machine applies backpressure: while a connection is paused the driver hands
/// the machine none of its frames and stops reading its socket, so the peer's sends fill the
/// TCP window and slow it down instead of growing the machine's queues. Writing to the
/// connection, closing it, timers and `handle_disconnect` go on as usual. The full contract is
/// rule 8 on [`Machine`](crate::Machine).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flow {
    /// Stop handing `conn`'s frames to the machine and stop reading its socket.
    PauseReading(ConnId),
    /// Hand `conn`'s frames to the machine again (those held back first, in order) and read
    /// its socket again.
    ResumeReading(ConnId),
}

impl Flow {
    /// The connection this request is about.
    pub fn conn(&self) -> ConnId {
        match self {
            Self::PauseReading(conn) | Self::ResumeReading(conn) => *conn,
        }
    }

    /// Whether this asks to pause.
    pub fn is_pause(&self) -> bool {
        matches!(self, Self::PauseReading(_))
    }
}

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
    /// The driver later calls `handle_disconnect_with(conn, Disconnect::Local { .. })` once
    /// the socket is gone, as for any other connection end.
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
///
/// Flow-control requests ([`Flow`]) wait in a third queue, drained with
/// [`pop_flow`](Self::pop_flow) by a machine's [`Machine::poll_flow`](crate::Machine::poll_flow).
///
/// Events wait in a queue of their own and the main queue only marks their place, so a
/// `Send` or `Close` is queued and dequeued as its own few words, not as an `Output<E>` the
/// size of the largest event (protocol events can be a couple of hundred bytes).
#[derive(Debug)]
pub struct Outbox<E> {
    queue: VecDeque<Slot>,
    events: VecDeque<E>,
    flow: VecDeque<Flow>,
}

/// One queued output; an `Event`'s payload is the next one in `Outbox::events`.
#[derive(Debug)]
enum Slot {
    Send {
        conn: ConnId,
        frame: FrameBuf,
    },
    Close {
        conn: ConnId,
        code: CloseCode,
        reason: Cow<'static, str>,
    },
    Event,
}

impl Slot {
    fn conn(&self) -> Option<ConnId> {
        match self {
            Self::Send { conn, .. } | Self::Close { conn, .. } => Some(*conn),
            Self::Event => None,
        }
    }
}

impl<E> Default for Outbox<E> {
    fn default() -> Self {
        Self {
            queue: VecDeque::new(),
            events: VecDeque::new(),
            flow: VecDeque::new(),
        }
    }
}

impl<E> Outbox<E> {
    /// An empty outbox.
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues a frame for `conn`.
    #[inline]
    pub fn send(&mut self, conn: ConnId, frame: FrameBuf) {
        self.queue.push_back(Slot::Send { conn, frame });
    }

    /// Queues a close of `conn`.
    pub fn close(&mut self, conn: ConnId, code: CloseCode, reason: impl Into<Cow<'static, str>>) {
        self.queue.push_back(Slot::Close {
            conn,
            code,
            reason: reason.into(),
        });
    }

    /// Queues an application event.
    #[inline]
    pub fn event(&mut self, event: E) {
        self.events.push_back(event);
        self.queue.push_back(Slot::Event);
    }

    /// Takes the oldest output.
    #[inline]
    pub fn pop(&mut self) -> Option<Output<E>> {
        Some(match self.queue.pop_front()? {
            Slot::Send { conn, frame } => Output::Send { conn, frame },
            Slot::Close { conn, code, reason } => Output::Close { conn, code, reason },
            // Every `Event` slot has its payload queued in the same order.
            Slot::Event => Output::Event(self.events.pop_front()?),
        })
    }

    /// Number of queued outputs.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Drops every queued output and flow request addressed to `conn` (events stay).
    pub fn forget_conn(&mut self, conn: ConnId) {
        self.queue.retain(|o| o.conn() != Some(conn));
        self.flow.retain(|f| f.conn() != conn);
    }

    /// Queues a request to stop reading `conn` ([`Flow::PauseReading`]).
    pub fn pause_reading(&mut self, conn: ConnId) {
        self.flow.push_back(Flow::PauseReading(conn));
    }

    /// Queues a request to read `conn` again ([`Flow::ResumeReading`]).
    pub fn resume_reading(&mut self, conn: ConnId) {
        self.flow.push_back(Flow::ResumeReading(conn));
    }

    /// Takes the oldest flow-control request.
    #[inline]
    pub fn pop_flow(&mut self) -> Option<Flow> {
        self.flow.pop_front()
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

    #[test]
    fn flow_requests_queue_apart_and_are_forgotten_with_their_connection() {
        let mut o: Outbox<u8> = Outbox::new();
        o.pause_reading(ConnId::new(1));
        o.send(ConnId::new(1), FrameBuf::text("a"));
        o.pause_reading(ConnId::new(2));
        o.resume_reading(ConnId::new(1));
        assert_eq!(o.len(), 1, "flow requests are not outputs");
        assert_eq!(o.pop_flow(), Some(Flow::PauseReading(ConnId::new(1))));
        o.forget_conn(ConnId::new(2));
        let next = o.pop_flow();
        assert_eq!(next, Some(Flow::ResumeReading(ConnId::new(1))));
        assert!(next.is_some_and(|f| !f.is_pause() && f.conn() == ConnId::new(1)));
        assert_eq!(o.pop_flow(), None);
    }
}

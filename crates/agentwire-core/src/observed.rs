//! [`Observed`]: a machine whose events are seen by a callback as they leave it.

use std::fmt;
use std::net::SocketAddr;
use std::ops::{Deref, DerefMut};
use std::time::Instant;

use crate::{
    ConnId, DatagramMachine, Disconnect, Flow, Frame, Machine, Output, PeerInfo, Transmit,
};

/// The callback of an [`Observed`] machine: it gets each event and returns it to pass it
/// on, or `None` when it has dealt with it.
pub type Observer<E> = Box<dyn FnMut(E) -> Option<E> + Send>;

/// Wraps a machine so that a callback sees each of its events in
/// [`poll_output`](Machine::poll_output), before a driver does.
///
/// A driver hands events to the application through a channel and a task of its own: one
/// send, and a wake-up of that task, per event. For events that are only counted or logged
/// (a bus emits one per delivery) that hand-off costs more than the counting. The observer
/// runs where the driver polls the machine instead, and keeps (returns `None`) or passes on
/// (returns the event) each one; only what it passes on reaches the driver's channel.
///
/// The observer runs inside the driver's owner task, between two outputs of the machine:
/// it must be quick, must not block, and must never wait on the driver (no
/// `Handle::call` from it), or every connection of the machine waits with it.
///
/// Everything else is the wrapped machine's: each input goes to it unchanged, and
/// [`Deref`]/[`DerefMut`] reach its commands and getters (`observed.stats()`).
pub struct Observed<M: Machine> {
    machine: M,
    observer: Observer<M::Event>,
}

impl<M: Machine> Observed<M> {
    /// `machine`, with `observer` seeing each of its events first.
    pub fn new(
        machine: M,
        observer: impl FnMut(M::Event) -> Option<M::Event> + Send + 'static,
    ) -> Self {
        Self {
            machine,
            observer: Box::new(observer),
        }
    }

    /// The wrapped machine.
    pub fn get_ref(&self) -> &M {
        &self.machine
    }

    /// The wrapped machine, mutably (for its commands).
    pub fn get_mut(&mut self) -> &mut M {
        &mut self.machine
    }

    /// Unwraps the machine; the observer is dropped.
    pub fn into_inner(self) -> M {
        self.machine
    }
}

impl<M: Machine + fmt::Debug> fmt::Debug for Observed<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observed")
            .field("machine", &self.machine)
            .finish_non_exhaustive()
    }
}

impl<M: Machine> Deref for Observed<M> {
    type Target = M;

    fn deref(&self) -> &M {
        &self.machine
    }
}

impl<M: Machine> DerefMut for Observed<M> {
    fn deref_mut(&mut self) -> &mut M {
        &mut self.machine
    }
}

impl<M: Machine> Machine for Observed<M> {
    type Event = M::Event;

    fn handle_connect(&mut self, conn: ConnId, peer: &PeerInfo, now: Instant) {
        self.machine.handle_connect(conn, peer, now);
    }

    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        self.machine.handle_frame(conn, frame, now);
    }

    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        self.machine.handle_disconnect(conn, now);
    }

    fn handle_disconnect_with(&mut self, conn: ConnId, how: &Disconnect, now: Instant) {
        self.machine.handle_disconnect_with(conn, how, now);
    }

    fn handle_pong(&mut self, conn: ConnId, now: Instant) {
        self.machine.handle_pong(conn, now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.machine.handle_timeout(now);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.machine.poll_timeout()
    }

    /// The machine's next frame or close, or the next event its observer passes on; the
    /// events it keeps are not returned.
    fn poll_output(&mut self) -> Option<Output<M::Event>> {
        loop {
            match self.machine.poll_output()? {
                Output::Event(e) => {
                    if let Some(e) = (self.observer)(e) {
                        return Some(Output::Event(e));
                    }
                }
                other => return Some(other),
            }
        }
    }

    fn poll_flow(&mut self) -> Option<Flow> {
        self.machine.poll_flow()
    }

    fn handle_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        self.machine.handle_wall_clock(now, unix_ms);
    }
}

impl<M: DatagramMachine> DatagramMachine for Observed<M> {
    fn handle_datagram(
        &mut self,
        remote: SocketAddr,
        local: SocketAddr,
        contents: &[u8],
        now: Instant,
    ) {
        self.machine.handle_datagram(remote, local, contents, now);
    }

    fn poll_transmit(&mut self) -> Option<Transmit> {
        self.machine.poll_transmit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FrameBuf, Outbox};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Echoes each frame and emits its length as an event.
    struct Echo {
        out: Outbox<usize>,
        disconnects: usize,
        pongs: usize,
        wall: Option<u64>,
    }

    impl Machine for Echo {
        type Event = usize;

        fn handle_connect(&mut self, _: ConnId, _: &PeerInfo, _: Instant) {}

        fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, _: Instant) {
            if let Frame::Text(t) = frame {
                self.out.send(conn, FrameBuf::text(t.to_owned()));
                self.out.event(t.len());
            }
        }

        fn handle_disconnect(&mut self, _: ConnId, _: Instant) {
            self.disconnects += 1;
        }

        fn handle_pong(&mut self, _: ConnId, _: Instant) {
            self.pongs += 1;
        }

        fn handle_timeout(&mut self, _: Instant) {}

        fn poll_timeout(&self) -> Option<Instant> {
            None
        }

        fn poll_output(&mut self) -> Option<Output<usize>> {
            self.out.pop()
        }

        fn handle_wall_clock(&mut self, _: Instant, unix_ms: u64) {
            self.wall = Some(unix_ms);
        }
    }

    #[allow(clippy::disallowed_methods)] // test base time
    fn t0() -> Instant {
        Instant::now()
    }

    fn echo() -> Echo {
        Echo {
            out: Outbox::new(),
            disconnects: 0,
            pongs: 0,
            wall: None,
        }
    }

    #[test]
    fn kept_events_never_reach_the_driver_and_passed_ones_do_in_order() {
        let seen = Arc::new(AtomicUsize::new(0));
        let s = Arc::clone(&seen);
        // Keeps events of even length, passes odd ones on.
        let mut m = Observed::new(echo(), move |len: usize| {
            s.fetch_add(1, Ordering::Relaxed);
            (len % 2 == 1).then_some(len)
        });
        let now = t0();
        let conn = ConnId::new(1);
        for t in ["ab", "abc", "abcd", "a"] {
            m.handle_frame(conn, Frame::Text(t), now);
        }
        let mut outputs = Vec::new();
        while let Some(o) = m.poll_output() {
            outputs.push(match o {
                Output::Send { frame, .. } => format!("send {}", frame.len()),
                Output::Event(len) => format!("event {len}"),
                Output::Close { .. } => "close".to_owned(),
            });
        }
        assert_eq!(
            outputs,
            ["send 2", "send 3", "event 3", "send 4", "send 1", "event 1"]
        );
        assert_eq!(
            seen.load(Ordering::Relaxed),
            4,
            "the observer saw every event"
        );
    }

    #[test]
    fn every_input_reaches_the_wrapped_machine() {
        let mut m = Observed::new(echo(), Some);
        let now = t0();
        let conn = ConnId::new(7);
        m.handle_pong(conn, now);
        m.handle_disconnect_with(conn, &Disconnect::Ended, now);
        m.handle_wall_clock(now, 1_700_000_000_000);
        assert_eq!(m.pongs, 1);
        assert_eq!(m.disconnects, 1);
        assert_eq!(m.get_ref().wall, Some(1_700_000_000_000));
        m.get_mut().pongs = 0;
        assert_eq!(m.into_inner().pongs, 0);
    }
}

//! Client machines that own their reconnect policy.

use std::time::Instant;

use crate::Machine;

/// What a [`Dialer`] wants its driver to do about opening a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dial {
    /// Open nothing now; ask again after the next mutation (a timer, a command, an end).
    Wait,
    /// Start a connection attempt now, unless a socket is open or an attempt is under way.
    Now,
    /// Never connect again: the driver closes what is open and stops.
    Stop,
}

/// A client [`Machine`] that decides itself when its driver dials: reconnect backoff,
/// attempt limits and giving up are the machine's rules, tested with simulated time,
/// instead of the transport's.
///
/// The driver keeps at most one socket or attempt at a time. After every mutation (and
/// draining the outputs) it reads [`poll_dial`](Self::poll_dial) if it has neither: on
/// [`Dial::Now`] it starts an attempt, which ends in [`Machine::handle_connect`] or in
/// [`handle_dial_failed`](Self::handle_dial_failed). [`Dial::Stop`] is read at any time:
/// the driver closes the open socket (1001) and stops. A
/// machine that wants to wait between attempts keeps returning [`Dial::Wait`] and sets a
/// timer ([`Machine::poll_timeout`]); when it fires, it returns [`Dial::Now`].
///
/// A driver may start the attempt later than [`Dial::Now`] asks, never earlier: the tokio
/// driver holds it to its own backoff after connections that ended soon after they opened,
/// so a machine that restarts its delays on every open (or every greeting) still cannot
/// redial a peer that rejects it right away once a second forever.
pub trait Dialer: Machine {
    /// Whether the driver should dial now (acted on only while no socket is open and no
    /// attempt is under way) or stop (acted on at once). Read after every drain; no side
    /// effects.
    fn poll_dial(&self) -> Dial;

    /// An attempt started after [`Dial::Now`] failed before the WebSocket opened (refused,
    /// handshake error or timeout); `reason` is for logs. Drain outputs afterwards.
    fn handle_dial_failed(&mut self, reason: &str, now: Instant);
}

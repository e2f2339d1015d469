//! The one trait every protocol role implements.

use std::time::Instant;

use crate::{ConnId, Disconnect, Flow, Frame, Output, PeerInfo};

/// A sans-IO protocol role: input goes in through `handle_*`, output comes out of `poll_*`.
///
/// A machine never opens a socket, spawns a task, sleeps or reads a clock. The driver (the
/// tokio transport, the `sim` harness (feature `sim`), or your own loop) feeds it frames and
/// time and carries its outputs. Server roles own every connection (like quinn's
/// `Endpoint`); client roles own one connection at a time and keep their state across
/// reconnects.
///
/// # The four kinds of method
///
/// - `handle_*`: input from the network or from time. They return `()`.
/// - `poll_*`: output. Call them after every mutation.
/// - commands: inherent methods named with verbs (`request`, `publish`, ...) that return
///   `Result<Id, CommandError>` at once; their outcome arrives later as an event.
/// - getters: nouns or `is_*`, no side effects.
///
/// # Contract
///
/// Every implementation keeps these rules, and every crate's tests check them (the timer
/// rules through `sim::check_timer_contract` (feature `sim`)):
///
/// 1. **Drain after mutating.** After any `&mut self` call (a `handle_*` or a command), the
///    driver calls [`poll_output`](Self::poll_output) until it returns `None`, then reads
///    [`poll_timeout`](Self::poll_timeout). Several calls before a drain are allowed:
///    outputs are queued in order.
/// 2. **Peer input never panics and never fails the call.** Malformed, oversize, out-of-order
///    or hostile frames become outputs: the spec's error reply and/or a
///    [`Output::Close`], plus a protocol-violation event. Input for an unknown
///    [`ConnId`] is a no-op.
/// 3. **`handle_timeout` is idempotent.** Calling it before the deadline that
///    `poll_timeout` returned is a no-op; calling it twice with the same `now` does
///    nothing the second time.
/// 4. **`poll_timeout` moves forward.** After `handle_timeout(t)`, `poll_timeout()` returns
///    `None` or a time later than `t`, so a driver cannot busy-loop.
/// 5. **Time going backwards is clamped.** A `now` earlier than one already seen is treated
///    as the latest time seen (see [`Monotonic`](crate::Monotonic)).
/// 6. **Determinism.** The same inputs give the same outputs in the same order: ids come
///    from an injected [`IdGen`](crate::IdGen) and no output path iterates a hash map.
/// 7. **Every connection ends once.** The driver calls
///    [`handle_disconnect_with`](Self::handle_disconnect_with) (whose default calls
///    [`handle_disconnect`](Self::handle_disconnect)) exactly once for every connection it
///    reported with `handle_connect`, however it ended, including after the machine's own
///    [`Output::Close`], with a [`Disconnect`] that says how: the peer's close code and
///    reason, this side's close, a slow reader, a pong timeout, a refused frame, or a socket
///    that just ended. Outputs addressed to a connection that has ended are dropped by the
///    driver.
/// 8. **Flow control (backpressure).** A machine may ask its driver to stop reading a
///    connection ([`Flow::PauseReading`]) and to start again ([`Flow::ResumeReading`]),
///    drained with [`poll_flow`](Self::poll_flow). A driver that honours it drains
///    `poll_flow` after every `handle_frame` as well as after `poll_output`, and from a pause
///    to the matching resume it:
///    - hands the machine **no frame** of that connection: frames already read wait in the
///      driver (bounded by its own buffers) and are handed over first, in order, after the
///      resume;
///    - stops reading the socket, so the peer's sends fill the TCP window and it slows down;
///    - keeps writing to the connection, closing it, firing timers, and does not count the
///      silence against the peer (no read or pong timeout for a paused connection).
///
///    A pause of a paused connection, a resume of a reading one, and requests about an
///    unknown or ended connection are no-ops; the last request wins. A connection that ends
///    while paused is reported with `handle_disconnect` as usual (its held frames, read before
///    the end, are handed over first). The machine owns the resume: it must not leave a
///    connection paused once what it waits for is done, and must never wait on a paused
///    connection's own input. Flow control is a request, not a guarantee: a driver may ignore
///    it (the default `poll_flow` says nothing), so a machine still bounds, with its own
///    limits, what one connection can make it hold.
/// 9. **Wall-clock time comes from the driver, again and again.** A machine that writes
///    wall-clock time on the wire or in its events (a bus `ping` timestamp, a study-log
///    record, a dated session id) keeps a [`WallClock`](crate::WallClock) anchored at
///    construction and re-anchors it in [`handle_wall_clock`](Self::handle_wall_clock),
///    which the driver calls again at least every period and whenever the system clock
///    jumps (a suspend, a clock correction), before it hands the machine any input timed
///    after the jump. Monotonic time is untouched: deadlines never move with the wall
///    clock. Wall time may step backwards across a call (a correction can go either way).
/// 10. **Pongs are input too.** A driver that pings at the WebSocket level calls
///     [`handle_pong`](Self::handle_pong) for every pong a connection sends (answers to its
///     pings and unsolicited ones alike), in order with that connection's frames (so a pong
///     read while the connection is paused waits with its frames, rule 8). A machine that
///     keeps a peer's liveness by its messages counts a pong as a sign of life there; the
///     default ignores it.
pub trait Machine {
    /// Protocol-specific events for the application (agent registered, request completed, ...).
    type Event;

    /// A connection opened (server: an accepted upgrade; client: a successful connect).
    ///
    /// `peer` carries the remote address, path, headers and subprotocol of the upgrade.
    fn handle_connect(&mut self, conn: ConnId, peer: &PeerInfo, now: Instant);

    /// A complete WebSocket message arrived on `conn`. Never panics (contract rule 2).
    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant);

    /// Connection `conn` ended (closed by either side, or failed). Called once per
    /// connection, through [`handle_disconnect_with`](Self::handle_disconnect_with) by
    /// drivers that know how it ended.
    fn handle_disconnect(&mut self, conn: ConnId, now: Instant);

    /// Connection `conn` ended, and `how` says how (contract rule 7): the peer's close code
    /// and reason, this side's close, a slow reader, a pong timeout, a refused frame, or a
    /// socket that just ended. Drivers call this one; it is the connection's only end.
    ///
    /// The default calls [`handle_disconnect`](Self::handle_disconnect): a machine that
    /// does not care how a connection ended needs no code. A machine that does overrides
    /// this method and, for callers that know nothing (tests, other drivers), implements
    /// `handle_disconnect` as a call to it with [`Disconnect::Ended`].
    fn handle_disconnect_with(&mut self, conn: ConnId, how: &Disconnect, now: Instant) {
        let _ = how;
        self.handle_disconnect(conn, now);
    }

    /// Connection `conn` sent a WebSocket pong (contract rule 10): the peer is alive.
    ///
    /// The default ignores it: a machine without its own liveness check needs no code.
    fn handle_pong(&mut self, conn: ConnId, now: Instant) {
        let _ = (conn, now);
    }

    /// Time has reached (or passed) the deadline from `poll_timeout`. Idempotent; an early
    /// call is a no-op.
    fn handle_timeout(&mut self, now: Instant);

    /// The next time `handle_timeout` must be called, if any.
    fn poll_timeout(&self) -> Option<Instant>;

    /// The next queued output, if any. Drain until `None` after every mutation.
    fn poll_output(&mut self) -> Option<Output<Self::Event>>;

    /// The next flow-control request ([`Flow`]), if any (contract rule 8). Drain until `None`
    /// after every `handle_frame` and after draining `poll_output`.
    ///
    /// The default asks for nothing: a machine without backpressure needs no code.
    fn poll_flow(&mut self) -> Option<Flow> {
        None
    }

    /// The wall clock reads `unix_ms` milliseconds after the Unix epoch at `now` (contract
    /// rule 9): re-anchor any [`WallClock`](crate::WallClock) to it. Wall-clock values the
    /// machine writes from now on derive from this anchor; deadlines do not change.
    ///
    /// The default ignores it: a machine that writes no wall-clock time needs no code.
    fn handle_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        let _ = (now, unix_ms);
    }
}

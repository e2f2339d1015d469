//! The owner task's state, shared by the server and client drivers: the machine, its
//! connections, and the routing of its outputs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use agentwire_core::{CloseCode, ConnId, Disconnect, Flow, Frame, Machine, Output, PeerInfo};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use crate::clock;
use crate::config::Limits;
use crate::conn::{self, close_frame, ConnSlot, ConnTx, Inbound, SendError};
use crate::handle::Command;
use crate::stats::{DropReason, TransportCounters};
use crate::wall::{WallAnchor, WallClockSync};

/// Capacity of the channel from all connection tasks to the owner task.
const INBOUND_CAPACITY: usize = 256;

/// Inbound frames handled per wake-up before outputs are drained and the owner yields, so
/// connection tasks get to empty their queues between bursts (a burst from a peer that reads is not
/// mistaken for a slow reader).
const INBOUND_FRAME_BUDGET: usize = 64;

/// The machine and everything the owner task knows about its connections.
pub(crate) struct Core<M: Machine> {
    pub(crate) machine: M,
    conns: BTreeMap<ConnId, ConnTx>,
    next_id: u64,
    pub(crate) limits: Limits,
    inbound_tx: mpsc::Sender<Inbound>,
    pub(crate) inbound_rx: mpsc::Receiver<Inbound>,
    events: Option<mpsc::Sender<M::Event>>,
    /// Set once shutdown is requested: events that do not fit are dropped from then on,
    /// so an application that stopped reading cannot block the shutdown.
    stop: watch::Receiver<bool>,
    /// Connections that ended since the last `take_ended`, with their tasks.
    ended: Vec<(ConnId, Option<JoinHandle<()>>)>,
    /// Connections resumed (rule 8 of the `Machine` contract) that may hold frames.
    resumed: Vec<ConnId>,
    /// Connections with frames queued in this pass, handed to their tasks at its end.
    dirty: Vec<ConnId>,
    /// The machine's last wall-clock anchor (rule 9 of the `Machine` contract).
    wall: WallAnchor,
    /// The driver's transport counters ([`Handle::stats`](crate::Handle::stats)).
    stats: Arc<TransportCounters>,
    /// The protocol the `conn` spans name
    /// ([`ServerConfig::with_endpoint`](crate::ServerConfig::with_endpoint)).
    pub(crate) protocol: Option<Arc<str>>,
}

impl<M: Machine> Core<M> {
    pub(crate) fn new(
        machine: M,
        limits: Limits,
        events: mpsc::Sender<M::Event>,
        stop: watch::Receiver<bool>,
        wall: WallClockSync,
        stats: Arc<TransportCounters>,
    ) -> Self {
        let (inbound_tx, inbound_rx) = mpsc::channel(INBOUND_CAPACITY);
        Self {
            machine,
            conns: BTreeMap::new(),
            next_id: 1,
            limits,
            inbound_tx,
            inbound_rx,
            events: Some(events),
            stop,
            ended: Vec::new(),
            resumed: Vec::new(),
            dirty: Vec::new(),
            wall: WallAnchor::new(wall),
            stats,
            protocol: None,
        }
    }

    /// The current time, after re-anchoring the machine's wall clock if that is due (rule 9
    /// of the `Machine` contract): every wake-up that hands the machine input goes through
    /// here first.
    pub(crate) fn wake(&mut self) -> Instant {
        let now = clock::now();
        if let Some(unix_ms) = self.wall.due(now) {
            self.machine.handle_wall_clock(now, unix_ms);
        }
        now
    }

    /// Number of open connections.
    pub(crate) fn len(&self) -> usize {
        self.conns.len()
    }

    /// Registers an upgraded socket: new `ConnId`, its task, `handle_connect`.
    pub(crate) fn open<S>(
        &mut self,
        ws: WebSocketStream<S>,
        peer: PeerInfo,
        slot: Option<ConnSlot>,
    ) -> ConnId
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let conn = ConnId::new(self.next_id);
        self.next_id += 1;
        let span = match peer.remote_addr {
            Some(addr) => tracing::info_span!(
                "conn",
                id = conn.get(),
                peer = %addr,
                protocol = tracing::field::Empty
            ),
            None => tracing::info_span!(
                "conn",
                id = conn.get(),
                peer = "?",
                protocol = tracing::field::Empty
            ),
        };
        if let Some(protocol) = &self.protocol {
            span.record("protocol", &**protocol);
        }
        span.in_scope(|| tracing::debug!(path = %peer.path, "connected"));
        let tx = conn::spawn(
            conn,
            ws,
            &self.limits,
            self.inbound_tx.clone(),
            slot,
            span,
            Arc::clone(&self.stats),
        );
        self.conns.insert(conn, tx);
        self.stats.opened();
        let now = self.wake();
        self.machine.handle_connect(conn, &peer, now);
        conn
    }

    /// Applies one inbound message and whatever else is already waiting, up to
    /// [`INBOUND_FRAME_BUDGET`] frames. Returns whether input is left over (the caller
    /// drains outputs and yields before taking more).
    pub(crate) fn inbound(&mut self, first: Inbound) -> bool {
        let now = self.wake();
        let mut budget = INBOUND_FRAME_BUDGET;
        let mut next = Some(first);
        while let Some(input) = next.take() {
            budget = budget.saturating_sub(input.frames());
            self.apply(input, now);
            if budget == 0 {
                return !self.inbound_rx.is_empty();
            }
            next = self.inbound_rx.try_recv().ok();
        }
        false
    }

    fn apply(&mut self, input: Inbound, now: Instant) {
        match input {
            Inbound::Frame(conn, msg) => {
                if is_data(&msg) {
                    self.stats.received(1, msg.len() as u64);
                }
                self.frame_or_hold(conn, msg, now);
            }
            Inbound::Frames(conn, msgs) => {
                let (mut frames, mut bytes) = (0u64, 0u64);
                for msg in msgs.iter().filter(|m| is_data(m)) {
                    frames += 1;
                    bytes += msg.len() as u64;
                }
                self.stats.received(frames, bytes);
                for msg in msgs {
                    self.frame_or_hold(conn, msg, now);
                }
            }
            Inbound::Ended(conn) => {
                if let Some(mut tx) = self.conns.remove(&conn) {
                    // Frames read before the end still reach the machine, before the end.
                    while let Some(msg) = tx.take_held() {
                        self.frame(conn, &msg, now);
                    }
                    let how = tx.disconnect();
                    self.ended.push((conn, tx.ended()));
                    self.stats.ended();
                    self.machine.handle_disconnect_with(conn, &how, now);
                }
            }
        }
    }

    /// Hands `msg` (a frame or a pong) to the machine, or holds it while `conn` is paused
    /// (or still holds frames that came before it).
    fn frame_or_hold(&mut self, conn: ConnId, msg: Message, now: Instant) {
        let Some(tx) = self.conns.get_mut(&conn) else {
            return;
        };
        if tx.is_paused() || tx.has_held() {
            tx.hold(msg);
        } else {
            self.frame(conn, &msg, now);
        }
    }

    /// Hands one frame (or pong) to the machine, then applies the flow control it asks for,
    /// so a pause takes effect before the next frame.
    fn frame(&mut self, conn: ConnId, msg: &Message, now: Instant) {
        match msg {
            Message::Text(t) => self.machine.handle_frame(conn, Frame::Text(t), now),
            Message::Binary(b) => self.machine.handle_frame(conn, Frame::Binary(b), now),
            Message::Pong(_) => self.machine.handle_pong(conn, now),
            _ => return,
        }
        self.flow();
    }

    /// Applies the machine's flow-control requests: pausing or resuming a reader.
    fn flow(&mut self) {
        while let Some(flow) = self.machine.poll_flow() {
            let conn = flow.conn();
            let Some(tx) = self.conns.get_mut(&conn) else {
                continue; // unknown or ended: a no-op
            };
            match flow {
                Flow::PauseReading(_) => {
                    tracing::trace!(conn = conn.get(), "reading paused");
                    tx.set_paused(true);
                }
                Flow::ResumeReading(_) => {
                    tracing::trace!(conn = conn.get(), "reading resumed");
                    tx.set_paused(false);
                    if tx.has_held() && !self.resumed.contains(&conn) {
                        self.resumed.push(conn);
                    }
                }
            }
        }
    }

    /// Hands the frames held by resumed connections to the machine, in order, until each is
    /// empty or paused again. Returns whether any frame was handed over.
    fn replay_held(&mut self) -> bool {
        let mut any = false;
        let now = clock::now();
        for conn in std::mem::take(&mut self.resumed) {
            while let Some(msg) = self
                .conns
                .get_mut(&conn)
                .filter(|tx| !tx.is_paused())
                .and_then(ConnTx::take_held)
            {
                any = true;
                self.frame(conn, &msg, now);
            }
        }
        any
    }

    /// Runs a command with the machine.
    pub(crate) fn command(&mut self, cmd: Command<M>) {
        let now = self.wake();
        cmd(&mut self.machine, now);
    }

    /// Calls `handle_timeout` with the current time.
    pub(crate) fn timeout(&mut self) {
        let now = self.wake();
        self.machine.handle_timeout(now);
    }

    /// Connections that ended since the last call, with their tasks.
    pub(crate) fn take_ended(&mut self) -> Vec<(ConnId, Option<JoinHandle<()>>)> {
        std::mem::take(&mut self.ended)
    }

    /// Ends `conn` at once (slow reader, or a close that cannot be queued) and reports it
    /// with `how`, unless an end was seen first (see [`ConnTx::kill`]).
    fn kill(&mut self, conn: ConnId, code: CloseCode, reason: &str, how: Disconnect) {
        if let Some(tx) = self.conns.remove(&conn) {
            tracing::debug!(
                conn = conn.get(),
                code = code.0,
                reason,
                "closing connection now"
            );
            let (writer, how) = tx.kill(close_frame(code, reason), how);
            self.ended.push((conn, writer));
            self.stats.ended();
            self.machine
                .handle_disconnect_with(conn, &how, clock::now());
        }
    }

    /// Ends one owner-loop step: drains the outputs, runs `after_drain` (the UDP side sends
    /// the machine's datagrams there), then, if input is still waiting, yields
    /// so the connection tasks can empty their queues before the next slice of input (otherwise a
    /// peer's burst could make its own connection look like a slow reader).
    ///
    /// While an event waits for room in the event channel, commands from `commands` keep
    /// running, so an application that awaits [`Handle::call`](crate::Handle::call) in the
    /// task that reads events cannot deadlock the driver.
    pub(crate) async fn finish_step(
        &mut self,
        more_input: bool,
        commands: &mut mpsc::Receiver<Command<M>>,
        after_drain: impl FnOnce(&mut M),
    ) {
        self.drain(Some(commands)).await;
        after_drain(&mut self.machine);
        if more_input {
            tokio::task::yield_now().await;
        }
    }

    /// Drains the machine's outputs: frames to their queues, closes to their tasks,
    /// events to the application (waiting while the event channel is full, and running
    /// `commands` meanwhile).
    pub(crate) async fn drain(&mut self, mut commands: Option<&mut mpsc::Receiver<Command<M>>>) {
        loop {
            self.drain_outputs(commands.as_deref_mut()).await;
            self.flow();
            if !self.replay_held() {
                break;
            }
        }
    }

    /// Drains the machine's output queue once (see [`drain`](Self::drain)).
    async fn drain_outputs(&mut self, mut commands: Option<&mut mpsc::Receiver<Command<M>>>) {
        while let Some(out) = self.machine.poll_output() {
            match out {
                Output::Send { conn, frame } => {
                    let Some(tx) = self.conns.get_mut(&conn) else {
                        continue;
                    };
                    match tx.send(frame) {
                        Ok(true) => self.dirty.push(conn),
                        Ok(false) => {}
                        Err(SendError::Slow) => {
                            let code = self.limits.slow_reader_close;
                            tracing::warn!(
                                conn = conn.get(),
                                code = code.0,
                                "slow consumer: its send queue is full (the peer is not reading); \
                             closing it"
                            );
                            self.stats.dropped(DropReason::SlowReader);
                            self.kill(
                                conn,
                                code,
                                "send queue full",
                                Disconnect::SlowReader { code },
                            );
                        }
                    }
                }
                Output::Close { conn, code, reason } => {
                    let Some(tx) = self.conns.get_mut(&conn) else {
                        continue;
                    };
                    if let Err(SendError::Slow) = tx.close(close_frame(code, &reason)) {
                        let how = Disconnect::local(code, &reason);
                        self.kill(conn, code, &reason, how);
                    }
                }
                Output::Event(e) => self.event(e, commands.as_deref_mut()).await,
            }
        }
        self.flush_sends();
    }

    /// Hands the frames queued in this pass to their connections' tasks: one lock and one
    /// wake-up per connection, however many frames.
    fn flush_sends(&mut self) {
        for conn in std::mem::take(&mut self.dirty) {
            if let Some(tx) = self.conns.get_mut(&conn) {
                tx.flush();
            }
        }
    }

    /// Hands an event to the application, waiting while the channel is full (until
    /// shutdown is requested; then an event that does not fit is dropped).
    ///
    /// While it waits, commands from `commands` run: the application may be awaiting one in
    /// the very task that would make room. Their outputs join the machine's queue and are
    /// drained after this event, in order.
    async fn event(&mut self, e: M::Event, mut commands: Option<&mut mpsc::Receiver<Command<M>>>) {
        let Some(events) = &self.events else {
            return;
        };
        let e = match events.try_send(e) {
            Ok(()) => return,
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.events = None;
                return;
            }
            Err(mpsc::error::TrySendError::Full(e)) => e,
        };
        if *self.stop.borrow() {
            return; // shutting down: an event that does not fit is dropped
        }
        let events = events.clone();
        // The frames queued so far go out while the application makes room.
        self.flush_sends();
        let mut stop = self.stop.clone();
        loop {
            let next_command = async {
                match commands.as_deref_mut() {
                    Some(c) => c.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                permit = events.reserve() => {
                    match permit {
                        Ok(permit) => permit.send(e),
                        Err(_) => self.events = None,
                    }
                    return;
                }
                Some(cmd) = next_command => self.command(cmd),
                _ = stop.wait_for(|s| *s) => {
                    tracing::debug!("event dropped: shutting down and the event channel is full");
                    return;
                }
            }
        }
    }

    /// Closes every connection with `code`, waits (bounded) until each has ended, and
    /// reports every one with `handle_disconnect`.
    pub(crate) async fn close_all(&mut self, code: CloseCode, reason: &'static str) {
        let ids: Vec<ConnId> = self.conns.keys().copied().collect();
        for conn in ids {
            if let Some(tx) = self.conns.get_mut(&conn) {
                if let Err(SendError::Slow) = tx.close(close_frame(code, reason)) {
                    self.kill(conn, code, reason, Disconnect::local(code, reason));
                }
            }
        }
        self.drain(None).await; // shutting down: events that do not fit are dropped
        let wait = self.limits.close_timeout.saturating_mul(2);
        let deadline = clock::to_tokio(clock::now() + wait);
        while !self.conns.is_empty() {
            tokio::select! {
                Some(i) = self.inbound_rx.recv() => {
                    self.inbound(i);
                }
                () = tokio::time::sleep_until(deadline) => break,
            }
            self.drain(None).await;
        }
        let rest: Vec<ConnId> = self.conns.keys().copied().collect();
        for conn in rest {
            self.kill(conn, code, reason, Disconnect::local(code, reason));
        }
        self.drain(None).await;
    }

    /// The machine's next deadline.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.machine.poll_timeout()
    }
}

/// Whether `msg` is a text or binary frame (what the frame counters count; pongs are not).
fn is_data(msg: &Message) -> bool {
    matches!(msg, Message::Text(_) | Message::Binary(_))
}

/// A reusable sleep that follows the machine's `poll_timeout`.
pub(crate) struct Timer {
    sleep: std::pin::Pin<Box<tokio::time::Sleep>>,
    armed: Option<Instant>,
}

impl Timer {
    pub(crate) fn new() -> Self {
        Self {
            sleep: Box::pin(tokio::time::sleep_until(clock::to_tokio(clock::now()))),
            armed: None,
        }
    }

    /// Points the timer at `deadline` (no-op if unchanged).
    pub(crate) fn set(&mut self, deadline: Option<Instant>) {
        if deadline != self.armed {
            if let Some(at) = deadline {
                self.sleep.as_mut().reset(clock::to_tokio(at));
            }
            self.armed = deadline;
        }
    }

    /// Resolves at the deadline; never while unarmed.
    pub(crate) async fn wait(&mut self) {
        if self.armed.is_some() {
            self.sleep.as_mut().await;
            self.armed = None;
        } else {
            std::future::pending::<()>().await;
        }
    }
}

//! In-memory simulation: one server machine, N client machines, simulated time.
//!
//! [`Sim`] carries every `Send` output to the other side's `handle_frame`, jumps simulated
//! time to the earliest deadline or delivery, can add latency and loss, and fails on
//! livelock (a bounded number of steps per run) and on a broken timer contract. "Raw"
//! peers (no machine; frames injected by the test, replies recorded) exercise a server
//! with hostile or legacy input.
//!
//! Flow control ([`Flow`], rule 8 of the [`Machine`] contract) is honoured: while a machine
//! has paused one of its connections, frames and closes arriving on it wait, in order, and
//! are handed over after the resume ([`Sim::held`] counts them).
//!
//! Connection ends reach the machines through [`Machine::handle_disconnect_with`] with a
//! [`Disconnect`] that says how, as a socket driver reports them: a machine's own close is
//! [`Disconnect::Local`] on its side and [`Disconnect::Peer`] (same code and reason) on the
//! other; an abrupt drop is [`Disconnect::Ended`]. WebSocket pongs ([`Sim::pong`],
//! [`Sim::raw_pong`]) travel like frames and reach [`Machine::handle_pong`].
//!
//! [`check_timer_contract`] drives one machine through an arbitrary input sequence and checks
//! the timer rules of the [`Machine`] contract; every crate runs it under proptest.

mod config;
mod dial;
mod link;
#[cfg(test)]
mod tests;
mod timer_contract;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use crate::{CloseCode, ConnId, Disconnect, Flow, FrameBuf, Machine, Output, PeerInfo};

pub use config::{SimConfig, SimError};
use link::{ClientSlot, Dest, Link, Payload, RawSlot, Reader};
pub use timer_contract::{check_timer_contract, TimerInput};

/// A server machine and N client machines joined by simulated links.
pub struct Sim<S: Machine, C: Machine> {
    server: S,
    clients: Vec<ClientSlot<C>>,
    raws: Vec<RawSlot>,
    links: BTreeMap<ConnId, Link>,
    in_flight: BTreeMap<(Instant, u64), (Dest, Payload)>,
    server_events: Vec<S::Event>,
    now: Instant,
    seq: u64,
    next_conn: u64,
    rng: u64,
    cfg: SimConfig,
    lost: usize,
    /// Receiving ends whose machine asked to pause reading them.
    paused: BTreeSet<Reader>,
    /// What arrived on a paused receiving end, in arrival order.
    held: BTreeMap<Reader, VecDeque<Payload>>,
}

impl<S: Machine, C: Machine> Sim<S, C> {
    /// A simulation of `server` starting at `start`, with no clients yet.
    pub fn new(server: S, start: Instant, cfg: SimConfig) -> Self {
        let rng = cfg.seed;
        Self {
            server,
            clients: Vec::new(),
            raws: Vec::new(),
            links: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            server_events: Vec::new(),
            now: start,
            seq: 0,
            next_conn: 1,
            rng,
            cfg,
            lost: 0,
            paused: BTreeSet::new(),
            held: BTreeMap::new(),
        }
    }

    /// Frames and closes waiting on paused connections (rule 8 of the [`Machine`] contract).
    pub fn held(&self) -> usize {
        self.held.values().map(VecDeque::len).sum()
    }

    /// Whether the server has paused reading its connection `conn`.
    pub fn is_server_paused(&self, conn: ConnId) -> bool {
        self.paused.contains(&Reader::Server(conn))
    }

    /// Current simulated time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The server machine (read-only).
    pub fn server(&self) -> &S {
        &self.server
    }

    /// Client `idx` (read-only).
    pub fn client(&self, idx: usize) -> &C {
        &self.clients[idx].machine
    }

    /// Number of frames lost so far.
    pub fn lost_frames(&self) -> usize {
        self.lost
    }

    /// Runs a command on the server at the current time, then routes its outputs.
    pub fn call_server<R>(&mut self, f: impl FnOnce(&mut S, Instant) -> R) -> R {
        let r = f(&mut self.server, self.now);
        self.flush();
        r
    }

    /// Runs a command on client `idx` at the current time, then routes its outputs.
    pub fn call_client<R>(&mut self, idx: usize, f: impl FnOnce(&mut C, Instant) -> R) -> R {
        let r = f(&mut self.clients[idx].machine, self.now);
        self.flush();
        r
    }

    /// Moves the wall clock of every machine (server and clients) to `unix_ms` at the
    /// current simulated time, through [`Machine::handle_wall_clock`], as a driver does
    /// after a suspend or a clock correction; then routes their outputs.
    pub fn set_wall_clock(&mut self, unix_ms: u64) {
        let now = self.now;
        self.server.handle_wall_clock(now, unix_ms);
        for slot in &mut self.clients {
            slot.machine.handle_wall_clock(now, unix_ms);
        }
        self.flush();
    }

    /// Takes the server's events so far.
    pub fn take_server_events(&mut self) -> Vec<S::Event> {
        std::mem::take(&mut self.server_events)
    }

    /// Takes client `idx`'s events so far.
    pub fn take_client_events(&mut self, idx: usize) -> Vec<C::Event> {
        std::mem::take(&mut self.clients[idx].events)
    }

    /// Adds a client machine (not yet connected); returns its index. Each client gets its
    /// own remote address `127.0.0.1:(40000 + index)`.
    pub fn add_client(&mut self, machine: C) -> usize {
        let idx = self.clients.len();
        let port = 40_000u16.wrapping_add(idx as u16);
        self.add_client_at(machine, SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
    }

    /// Adds a client machine whose connections come from `addr` (for per-IP limits).
    pub fn add_client_at(&mut self, machine: C, addr: SocketAddr) -> usize {
        self.clients.push(ClientSlot {
            machine,
            link: None,
            events: Vec::new(),
            addr,
        });
        self.clients.len() - 1
    }

    fn alloc_conn(&mut self) -> ConnId {
        let c = ConnId::new(self.next_conn);
        self.next_conn += 1;
        c
    }

    /// Connects client `idx` (a no-op if it already is). Both machines see `handle_connect`.
    pub fn connect(&mut self, idx: usize) {
        let peer = PeerInfo::new(Some(self.clients[idx].addr));
        self.connect_with(idx, peer);
    }

    /// Connects client `idx`, presenting `peer` to the server.
    pub fn connect_with(&mut self, idx: usize, peer: PeerInfo) {
        if self.clients[idx].link.is_some() {
            return;
        }
        let sconn = self.alloc_conn();
        let cconn = self.alloc_conn();
        self.links.insert(sconn, Link::Client { idx, conn: cconn });
        self.clients[idx].link = Some((cconn, sconn));
        let now = self.now;
        self.server.handle_connect(sconn, &peer, now);
        let server_side = PeerInfo::new(None).with_path(peer.path.clone());
        self.clients[idx]
            .machine
            .handle_connect(cconn, &server_side, now);
        self.flush();
    }

    /// Whether client `idx` is connected.
    pub fn is_connected(&self, idx: usize) -> bool {
        self.clients[idx].link.is_some()
    }

    /// The server-side connection id of client `idx`, while connected.
    pub fn server_conn_of(&self, idx: usize) -> Option<ConnId> {
        self.clients[idx].link.map(|(_, s)| s)
    }

    /// Drops client `idx`'s connection abruptly (a network failure): both sides see
    /// `handle_disconnect_with(Disconnect::Ended)` now; frames in flight are lost.
    pub fn disconnect(&mut self, idx: usize) {
        let Some((cconn, sconn)) = self.clients[idx].link.take() else {
            return;
        };
        self.links.remove(&sconn);
        self.forget(Reader::Server(sconn));
        self.forget(Reader::Client(idx, cconn));
        let now = self.now;
        self.server
            .handle_disconnect_with(sconn, &Disconnect::Ended, now);
        self.clients[idx]
            .machine
            .handle_disconnect_with(cconn, &Disconnect::Ended, now);
        self.flush();
    }

    /// Client `idx`'s connection sends the server a WebSocket pong (after the configured
    /// latency, never lost, held like a frame while the server has paused the
    /// connection): the server sees [`Machine::handle_pong`].
    pub fn pong(&mut self, idx: usize) {
        if let Some((_, sconn)) = self.clients[idx].link {
            self.schedule(Dest::Server(sconn), Payload::Pong, false);
        }
    }

    /// The server's side of client `idx`'s connection sends it a WebSocket pong (as
    /// [`pong`](Self::pong), the other way): the client sees [`Machine::handle_pong`].
    pub fn pong_to_client(&mut self, idx: usize) {
        if let Some((cconn, _)) = self.clients[idx].link {
            self.schedule(Dest::Client(idx, cconn), Payload::Pong, false);
        }
    }

    /// Opens a raw connection presenting `peer`; returns its index.
    pub fn connect_raw(&mut self, peer: PeerInfo) -> usize {
        let sconn = self.alloc_conn();
        let idx = self.raws.len();
        self.raws.push(RawSlot {
            server_conn: Some(sconn),
            ..RawSlot::default()
        });
        self.links.insert(sconn, Link::Raw { idx });
        let now = self.now;
        self.server.handle_connect(sconn, &peer, now);
        self.flush();
        idx
    }

    /// The server-side connection id of raw peer `idx`, while open.
    pub fn raw_conn(&self, idx: usize) -> Option<ConnId> {
        self.raws[idx].server_conn
    }

    /// Sends `frame` from raw peer `idx` (after the configured latency; never lost).
    pub fn raw_send(&mut self, idx: usize, frame: FrameBuf) {
        if let Some(sconn) = self.raws[idx].server_conn {
            self.schedule(Dest::Server(sconn), Payload::Frame(frame), false);
        }
    }

    /// Frames raw peer `idx` has received so far.
    pub fn raw_received(&self, idx: usize) -> &[FrameBuf] {
        &self.raws[idx].received
    }

    /// Takes the frames raw peer `idx` has received so far.
    pub fn raw_take(&mut self, idx: usize) -> Vec<FrameBuf> {
        std::mem::take(&mut self.raws[idx].received)
    }

    /// The close code and reason the server sent raw peer `idx`, if it closed it.
    pub fn raw_closed(&self, idx: usize) -> Option<(CloseCode, &str)> {
        self.raws[idx]
            .closed
            .as_ref()
            .map(|(c, r)| (*c, r.as_str()))
    }

    /// Whether raw peer `idx` is still connected.
    pub fn raw_is_open(&self, idx: usize) -> bool {
        self.raws[idx].server_conn.is_some()
    }

    /// Closes raw peer `idx`'s connection with 1000 and no reason behind the frames it
    /// already sent (see [`raw_close`](Self::raw_close)).
    pub fn raw_disconnect_graceful(&mut self, idx: usize) {
        self.raw_close(idx, CloseCode::NORMAL, "");
    }

    /// Raw peer `idx` sends a close frame with `code` and `reason` behind the frames it
    /// already sent (after the configured latency, like a frame): the server sees
    /// `handle_disconnect_with(Disconnect::Peer { code, reason })` (the reason cut to 123
    /// bytes) when the close arrives, or, if it paused the connection, after the resume and
    /// the held frames.
    pub fn raw_close(&mut self, idx: usize, code: CloseCode, reason: &str) {
        if let Some(sconn) = self.raws[idx].server_conn {
            let close = Payload::Close(code, reason.to_owned());
            self.schedule(Dest::Server(sconn), close, false);
        }
    }

    /// Raw peer `idx` sends a WebSocket pong (as [`pong`](Self::pong)).
    pub fn raw_pong(&mut self, idx: usize) {
        if let Some(sconn) = self.raws[idx].server_conn {
            self.schedule(Dest::Server(sconn), Payload::Pong, false);
        }
    }

    /// Drops raw peer `idx`'s connection; the server sees
    /// `handle_disconnect_with(Disconnect::Ended)` now.
    pub fn raw_disconnect(&mut self, idx: usize) {
        if let Some(sconn) = self.raws[idx].server_conn.take() {
            self.links.remove(&sconn);
            self.forget(Reader::Server(sconn));
            let now = self.now;
            self.server
                .handle_disconnect_with(sconn, &Disconnect::Ended, now);
            self.flush();
        }
    }

    fn rand_per_mille(&mut self) -> u16 {
        // splitmix64: deterministic for a given seed, well mixed even for small seeds.
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z % 1000) as u16
    }

    fn schedule(&mut self, dest: Dest, payload: Payload, lossy: bool) {
        if lossy && self.cfg.loss_per_mille > 0 && self.rand_per_mille() < self.cfg.loss_per_mille {
            self.lost += 1;
            return;
        }
        let at = self.now + self.cfg.latency;
        self.seq += 1;
        self.in_flight.insert((at, self.seq), (dest, payload));
    }

    /// A receiving end is gone: nothing more is held for it.
    fn forget(&mut self, reader: Reader) {
        self.paused.remove(&reader);
        self.held.remove(&reader);
    }

    /// Routes every queued output and flow request of every machine until all are drained,
    /// handing over what resumed connections held, one item at a time (so a new pause takes
    /// effect before the next frame).
    pub fn flush(&mut self) {
        loop {
            let mut progressed = false;
            while let Some(out) = self.server.poll_output() {
                progressed = true;
                self.route_server(out);
            }
            while let Some(flow) = self.server.poll_flow() {
                progressed = true;
                self.apply_flow(Reader::Server(flow.conn()), flow);
            }
            for idx in 0..self.clients.len() {
                while let Some(out) = self.clients[idx].machine.poll_output() {
                    progressed = true;
                    self.route_client(idx, out);
                }
                while let Some(flow) = self.clients[idx].machine.poll_flow() {
                    progressed = true;
                    self.apply_flow(Reader::Client(idx, flow.conn()), flow);
                }
            }
            let ready = self.held.keys().copied().find(|r| !self.paused.contains(r));
            if let Some(reader) = ready {
                let next = self.held.get_mut(&reader).and_then(VecDeque::pop_front);
                if self.held.get(&reader).is_some_and(VecDeque::is_empty) {
                    self.held.remove(&reader);
                }
                if let Some(payload) = next {
                    progressed = true;
                    self.deliver_now(reader.dest(), payload);
                }
            }
            if !progressed {
                break;
            }
        }
    }

    fn apply_flow(&mut self, reader: Reader, flow: Flow) {
        let live = match reader {
            Reader::Server(c) => self.links.contains_key(&c),
            Reader::Client(idx, c) => self.clients[idx].link.map(|(cc, _)| cc) == Some(c),
        };
        if !live {
            return; // an unknown or ended connection: a no-op
        }
        match flow {
            Flow::PauseReading(_) => {
                self.paused.insert(reader);
            }
            Flow::ResumeReading(_) => {
                self.paused.remove(&reader);
            }
        }
    }

    fn route_server(&mut self, out: Output<S::Event>) {
        match out {
            Output::Event(e) => self.server_events.push(e),
            Output::Send { conn, frame } => match self.links.get(&conn).copied() {
                Some(Link::Client { idx, conn: cconn }) => {
                    self.schedule(Dest::Client(idx, cconn), Payload::Frame(frame), true)
                }
                Some(Link::Raw { idx }) => {
                    self.schedule(Dest::Raw(idx), Payload::Frame(frame), false)
                }
                None => {}
            },
            Output::Close { conn, code, reason } => {
                let Some(link) = self.links.remove(&conn) else {
                    return;
                };
                self.forget(Reader::Server(conn));
                let dest = match link {
                    Link::Client { idx, conn: cconn } => Dest::Client(idx, cconn),
                    Link::Raw { idx } => {
                        self.raws[idx].server_conn = None;
                        Dest::Raw(idx)
                    }
                };
                let how = Disconnect::local(code, &reason);
                self.schedule(dest, Payload::Close(code, reason.into_owned()), false);
                let now = self.now;
                self.server.handle_disconnect_with(conn, &how, now);
            }
        }
    }

    fn route_client(&mut self, idx: usize, out: Output<C::Event>) {
        let link = self.clients[idx].link;
        match out {
            Output::Event(e) => self.clients[idx].events.push(e),
            Output::Send { conn, frame } => {
                if let Some((cconn, sconn)) = link {
                    if cconn == conn {
                        self.schedule(Dest::Server(sconn), Payload::Frame(frame), true);
                    }
                }
            }
            Output::Close { conn, code, reason } => {
                if let Some((cconn, sconn)) = link {
                    if cconn == conn {
                        self.clients[idx].link = None;
                        self.forget(Reader::Client(idx, cconn));
                        let how = Disconnect::local(code, &reason);
                        self.schedule(
                            Dest::Server(sconn),
                            Payload::Close(code, reason.into_owned()),
                            false,
                        );
                        let now = self.now;
                        self.clients[idx]
                            .machine
                            .handle_disconnect_with(cconn, &how, now);
                    }
                }
            }
        }
    }

    /// Delivers `payload`, or holds it while its receiving end is paused (or still has
    /// held items ahead of it).
    fn deliver(&mut self, dest: Dest, payload: Payload) {
        if let Some(reader) = Reader::of(dest) {
            if self.paused.contains(&reader) || self.held.contains_key(&reader) {
                self.held.entry(reader).or_default().push_back(payload);
                return;
            }
        }
        self.deliver_now(dest, payload);
    }

    fn deliver_now(&mut self, dest: Dest, payload: Payload) {
        let now = self.now;
        match (dest, payload) {
            (Dest::Server(sconn), Payload::Frame(f)) => {
                if self.links.contains_key(&sconn) {
                    self.server.handle_frame(sconn, f.as_frame(), now);
                }
            }
            (Dest::Server(sconn), Payload::Pong) => {
                if self.links.contains_key(&sconn) {
                    self.server.handle_pong(sconn, now);
                }
            }
            (Dest::Server(sconn), Payload::Close(code, reason)) => {
                self.forget(Reader::Server(sconn));
                if let Some(link) = self.links.remove(&sconn) {
                    if let Link::Raw { idx } = link {
                        self.raws[idx].server_conn = None;
                    }
                    let how = Disconnect::peer(code, &reason);
                    self.server.handle_disconnect_with(sconn, &how, now);
                }
            }
            (Dest::Client(idx, cconn), payload) => {
                if self.clients[idx].link.map(|(c, _)| c) != Some(cconn) {
                    return;
                }
                match payload {
                    Payload::Frame(f) => {
                        self.clients[idx]
                            .machine
                            .handle_frame(cconn, f.as_frame(), now)
                    }
                    Payload::Pong => self.clients[idx].machine.handle_pong(cconn, now),
                    Payload::Close(code, reason) => {
                        self.clients[idx].link = None;
                        self.forget(Reader::Client(idx, cconn));
                        let how = Disconnect::peer(code, &reason);
                        self.clients[idx]
                            .machine
                            .handle_disconnect_with(cconn, &how, now);
                    }
                }
            }
            (Dest::Raw(idx), Payload::Frame(f)) => self.raws[idx].received.push(f),
            (Dest::Raw(_), Payload::Pong) => {}
            (Dest::Raw(idx), Payload::Close(code, reason)) => {
                self.raws[idx].closed = Some((code, reason));
            }
        }
    }

    /// The earliest time something is due: a frame or close in flight, or a machine's
    /// deadline.
    pub fn next_due(&self) -> Option<Instant> {
        let mut due = self.in_flight.keys().next().map(|(t, _)| *t);
        let timers = std::iter::once(self.server.poll_timeout())
            .chain(self.clients.iter().map(|c| c.machine.poll_timeout()))
            .flatten();
        for t in timers {
            due = Some(due.map_or(t, |d| d.min(t)));
        }
        due
    }

    /// One step at the current time: deliver the earliest due frame, else fire due timers.
    /// Returns whether anything was due.
    fn step_now(&mut self) -> Result<bool, SimError> {
        let now = self.now;
        if let Some(entry) = self.in_flight.first_entry() {
            if entry.key().0 <= now {
                let (dest, payload) = entry.remove();
                self.deliver(dest, payload);
                self.flush();
                return Ok(true);
            }
        }
        let mut fired = false;
        if self.server.poll_timeout().is_some_and(|t| t <= now) {
            fired = true;
            self.server.handle_timeout(now);
            if self.server.poll_timeout().is_some_and(|t| t <= now) {
                return Err(SimError::TimerStuck {
                    machine: "server".into(),
                });
            }
        }
        for idx in 0..self.clients.len() {
            let m = &mut self.clients[idx].machine;
            if m.poll_timeout().is_some_and(|t| t <= now) {
                fired = true;
                m.handle_timeout(now);
                if m.poll_timeout().is_some_and(|t| t <= now) {
                    return Err(SimError::TimerStuck {
                        machine: format!("client {idx}"),
                    });
                }
            }
        }
        self.flush();
        Ok(fired)
    }

    /// Runs every delivery and timer up to `now + d`, then sets the clock to `now + d`.
    pub fn try_run_for(&mut self, d: Duration) -> Result<usize, SimError> {
        self.flush();
        self.run_until(self.now + d, |_| {})
    }

    /// The loop of the `run_*for` methods: `before_step` runs before each step and once
    /// more before the clock is set to `deadline`; fails after `max_steps` steps.
    pub(super) fn run_until(
        &mut self,
        deadline: Instant,
        mut before_step: impl FnMut(&mut Self),
    ) -> Result<usize, SimError> {
        let mut steps = 0;
        loop {
            before_step(self);
            let Some(t) = self.next_due() else { break };
            if t > deadline {
                break;
            }
            self.now = self.now.max(t);
            steps += 1;
            if steps > self.cfg.max_steps {
                return Err(SimError::Livelock { steps });
            }
            self.step_now()?;
        }
        self.now = deadline;
        Ok(steps)
    }

    /// [`try_run_for`](Self::try_run_for), panicking on livelock or a stuck timer.
    pub fn run_for(&mut self, d: Duration) -> usize {
        match self.try_run_for(d) {
            Ok(steps) => steps,
            Err(e) => panic!("simulation failed: {e}"),
        }
    }

    /// Delivers everything in flight (time advances only as far as deliveries need, firing
    /// timers due on the way) and stops when nothing is in flight or due. Fails after
    /// `max_steps` steps.
    pub fn run_bounded(&mut self, max_steps: usize) -> Result<usize, SimError> {
        self.flush();
        let mut steps = 0;
        while let Some(t) = self.next_due() {
            if t > self.now && self.in_flight.is_empty() {
                break;
            }
            self.now = self.now.max(t);
            steps += 1;
            if steps > max_steps {
                return Err(SimError::Livelock { steps });
            }
            self.step_now()?;
        }
        Ok(steps)
    }

    /// [`run_bounded`](Self::run_bounded) with the configured step bound, panicking on failure.
    pub fn settle(&mut self) -> usize {
        let max = self.cfg.max_steps;
        match self.run_bounded(max) {
            Ok(steps) => steps,
            Err(e) => panic!("simulation failed: {e}"),
        }
    }
}

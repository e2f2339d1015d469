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

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use crate::{
    CloseCode, ConnId, Dial, Dialer, Disconnect, Flow, FrameBuf, Machine, Output, PeerInfo,
};

/// Knobs of a simulation.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SimConfig {
    /// One-way delay of every frame and close. Default: zero.
    pub latency: Duration,
    /// Probability, per thousand, that a frame is lost (closes are never lost). Default: 0.
    pub loss_per_mille: u16,
    /// Seed of the loss generator. Default: 1.
    pub seed: u64,
    /// Steps one `run_*` call may take before it reports livelock. Default: 1,000,000.
    pub max_steps: usize,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            latency: Duration::ZERO,
            loss_per_mille: 0,
            seed: 1,
            max_steps: 1_000_000,
        }
    }
}

impl SimConfig {
    /// Sets the one-way latency.
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// Sets the frame loss probability in per mille (clamped to 1000).
    pub fn with_loss_per_mille(mut self, loss: u16) -> Self {
        self.loss_per_mille = loss.min(1000);
        self
    }

    /// Sets the random seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Sets the step bound.
    pub fn with_max_steps(mut self, max_steps: usize) -> Self {
        self.max_steps = max_steps;
        self
    }
}

/// Why a simulation run stopped early.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SimError {
    /// More than `max_steps` steps without reaching the target time: a livelock.
    Livelock {
        /// Steps taken.
        steps: usize,
    },
    /// A machine's `poll_timeout` did not move past `now` after `handle_timeout(now)`.
    TimerStuck {
        /// Which machine: `"server"` or `"client N"`.
        machine: String,
    },
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Livelock { steps } => write!(f, "livelock: {steps} steps without settling"),
            Self::TimerStuck { machine } => write!(
                f,
                "{machine}: poll_timeout did not move past now after handle_timeout"
            ),
        }
    }
}

impl std::error::Error for SimError {}

#[derive(Debug, Clone, Copy)]
enum Link {
    Client { idx: usize, conn: ConnId },
    Raw { idx: usize },
}

#[derive(Debug, Clone, Copy)]
enum Dest {
    Server(ConnId),
    Client(usize, ConnId),
    Raw(usize),
}

/// A connection's receiving end, as a machine names it: the server's `ConnId`, or client
/// `idx`'s own `ConnId`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Reader {
    Server(ConnId),
    Client(usize, ConnId),
}

impl Reader {
    fn of(dest: Dest) -> Option<Self> {
        match dest {
            Dest::Server(c) => Some(Self::Server(c)),
            Dest::Client(idx, c) => Some(Self::Client(idx, c)),
            Dest::Raw(_) => None,
        }
    }

    fn dest(self) -> Dest {
        match self {
            Self::Server(c) => Dest::Server(c),
            Self::Client(idx, c) => Dest::Client(idx, c),
        }
    }
}

#[derive(Debug)]
enum Payload {
    Frame(FrameBuf),
    /// A WebSocket pong.
    Pong,
    Close(CloseCode, String),
}

struct ClientSlot<C: Machine> {
    machine: C,
    /// (client-side conn, server-side conn) while connected.
    link: Option<(ConnId, ConnId)>,
    events: Vec<C::Event>,
    addr: SocketAddr,
}

/// A raw peer: the test sends frames by hand and reads what the server sent back.
#[derive(Debug, Default)]
struct RawSlot {
    server_conn: Option<ConnId>,
    received: Vec<FrameBuf>,
    closed: Option<(CloseCode, String)>,
}

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
        let deadline = self.now + d;
        self.flush();
        let mut steps = 0;
        while let Some(t) = self.next_due() {
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

impl<S: Machine, C: Dialer> Sim<S, C> {
    /// Dials for every client whose [`Dialer::poll_dial`] says [`Dial::Now`] and that has
    /// no connection: connects it if `reachable(idx)`, else reports
    /// [`Dialer::handle_dial_failed`] ("unreachable"). Returns how many attempts were made.
    pub fn dial_pending(&mut self, reachable: &mut impl FnMut(usize) -> bool) -> usize {
        let mut attempts = 0;
        for idx in 0..self.clients.len() {
            // A refused attempt may ask for another one at once; bound the retries per call.
            for _ in 0..16 {
                if self.clients[idx].link.is_some()
                    || self.clients[idx].machine.poll_dial() != Dial::Now
                {
                    break;
                }
                attempts += 1;
                if reachable(idx) {
                    self.connect(idx);
                } else {
                    let now = self.now;
                    self.clients[idx]
                        .machine
                        .handle_dial_failed("unreachable", now);
                    self.flush();
                }
            }
        }
        attempts
    }

    /// As [`try_run_for`](Self::try_run_for), dialing the way a client driver does:
    /// after every step, [`dial_pending`](Self::dial_pending) with `reachable`.
    pub fn try_run_dialing_for(
        &mut self,
        d: Duration,
        mut reachable: impl FnMut(usize) -> bool,
    ) -> Result<usize, SimError> {
        let deadline = self.now + d;
        let mut steps = 0;
        loop {
            self.flush();
            self.dial_pending(&mut reachable);
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

    /// [`try_run_dialing_for`](Self::try_run_dialing_for), panicking on livelock or a
    /// stuck timer.
    pub fn run_dialing_for(&mut self, d: Duration, reachable: impl FnMut(usize) -> bool) -> usize {
        match self.try_run_dialing_for(d, reachable) {
            Ok(steps) => steps,
            Err(e) => panic!("simulation failed: {e}"),
        }
    }
}

/// One input of [`check_timer_contract`].
#[derive(Debug, Clone)]
pub enum TimerInput {
    /// Open a new connection (ids are never reused).
    Connect,
    /// A frame on the `n % open`-th connection ever opened (closed ones included: must be a no-op).
    Frame(usize, FrameBuf),
    /// Disconnect the `n % open`-th connection ever opened (again: must be a no-op), with
    /// [`Disconnect::Ended`].
    Disconnect(usize),
    /// A WebSocket pong on the `n % open`-th connection ever opened (closed ones included:
    /// must be a no-op), at the latest time the machine has seen: the default
    /// `handle_pong` ignores its time, so a later one would leave the check unsure what
    /// the machine clamps to.
    Pong(usize),
    /// Advance the driver's clock.
    Advance(Duration),
    /// Move the driver's clock backwards (the machine must clamp).
    Rewind(Duration),
    /// Call `handle_timeout(now)` whatever `poll_timeout` says.
    Timeout,
    /// Jump to `poll_timeout()` (if any) and call `handle_timeout` there.
    FireDue,
}

/// Drives `m` through `inputs` and checks the timer rules of the [`Machine`] contract:
///
/// - after `handle_timeout(t)`, `poll_timeout()` is `None` or later than the latest time seen;
/// - a second `handle_timeout` at the same time produces no output and leaves
///   `poll_timeout` unchanged (idempotent);
/// - `handle_timeout` before the deadline produces no output and leaves `poll_timeout`
///   unchanged (an early call is a no-op), also when time went backwards.
///
/// Outputs are drained after every input. Returns a description of the first violation.
pub fn check_timer_contract<M: Machine>(
    m: &mut M,
    start: Instant,
    inputs: &[TimerInput],
) -> Result<(), String> {
    let mut driver_now = start;
    // The latest time the machine has been given (what it clamps to), not the driver's clock.
    let mut latest: Option<Instant> = None;
    let mut conns: Vec<ConnId> = Vec::new();
    let drain = |m: &mut M| {
        let mut n = 0usize;
        while m.poll_output().is_some() {
            n += 1;
        }
        n
    };
    for (i, input) in inputs.iter().enumerate() {
        match input {
            TimerInput::Connect => {
                let conn = ConnId::new(conns.len() as u64 + 1);
                conns.push(conn);
                let port = 50_000u16.wrapping_add(conns.len() as u16);
                let peer = PeerInfo::new(Some(SocketAddr::from((Ipv4Addr::LOCALHOST, port))));
                m.handle_connect(conn, &peer, driver_now);
                latest = latest.max(Some(driver_now));
            }
            TimerInput::Frame(n, f) => {
                if !conns.is_empty() {
                    m.handle_frame(conns[n % conns.len()], f.as_frame(), driver_now);
                    latest = latest.max(Some(driver_now));
                }
            }
            TimerInput::Disconnect(n) => {
                if !conns.is_empty() {
                    let conn = conns[n % conns.len()];
                    m.handle_disconnect_with(conn, &Disconnect::Ended, driver_now);
                    latest = latest.max(Some(driver_now));
                }
            }
            TimerInput::Pong(n) => {
                if let Some(seen) = latest.filter(|_| !conns.is_empty()) {
                    m.handle_pong(conns[n % conns.len()], seen);
                }
            }
            TimerInput::Advance(d) => driver_now += *d,
            TimerInput::Rewind(d) => {
                driver_now = driver_now.checked_sub(*d).unwrap_or(driver_now);
            }
            TimerInput::Timeout | TimerInput::FireDue => {
                drain(m);
                if matches!(input, TimerInput::FireDue) {
                    if let Some(t) = m.poll_timeout() {
                        driver_now = driver_now.max(t);
                    }
                }
                let before = m.poll_timeout();
                m.handle_timeout(driver_now);
                latest = latest.max(Some(driver_now));
                let produced = drain(m);
                let after = m.poll_timeout();
                let latest = latest.unwrap_or(driver_now);
                if let Some(d) = before {
                    if d > latest && (produced > 0 || after != before) {
                        return Err(format!(
                            "input {i}: early handle_timeout (deadline {:?} after now) was not a no-op: {produced} outputs, poll_timeout {:?} -> {:?}",
                            d - latest, before.map(|b| b - start), after.map(|a| a - start)
                        ));
                    }
                }
                if let Some(a) = after {
                    if a <= latest {
                        return Err(format!(
                            "input {i}: poll_timeout {:?} did not move past now {:?} after handle_timeout",
                            a - start,
                            latest - start
                        ));
                    }
                }
                m.handle_timeout(driver_now);
                let again = drain(m);
                if again > 0 || m.poll_timeout() != after {
                    return Err(format!(
                        "input {i}: handle_timeout is not idempotent: second call gave {again} outputs"
                    ));
                }
            }
        }
        drain(m);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Frame, Monotonic, Outbox, TimerSet};

    /// Echoes every frame; sends "tick" to every connection every second.
    #[derive(Default)]
    struct Echo {
        out: Outbox<String>,
        conns: Vec<ConnId>,
        timers: TimerSet<u8>,
        clock: Monotonic,
    }

    impl Machine for Echo {
        type Event = String;
        fn handle_connect(&mut self, conn: ConnId, _: &PeerInfo, now: Instant) {
            let now = self.clock.observe(now);
            self.conns.push(conn);
            self.timers.set(0, now + Duration::from_secs(1));
        }
        fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
            self.clock.observe(now);
            if let Frame::Text(t) = frame {
                self.out.event(format!("{conn:?}:{t}"));
                if t != "tick" {
                    self.out.send(conn, FrameBuf::text(t.to_owned()));
                }
            }
        }
        fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
            self.clock.observe(now);
            self.conns.retain(|c| *c != conn);
            self.out.event(format!("{conn:?}:gone"));
        }
        fn handle_timeout(&mut self, now: Instant) {
            let now = self.clock.observe(now);
            while self.timers.pop_expired(now).is_some() {
                for c in &self.conns {
                    self.out.send(*c, FrameBuf::text("tick"));
                }
                if !self.conns.is_empty() {
                    self.timers.set(0, now + Duration::from_secs(1));
                }
            }
        }
        fn poll_timeout(&self) -> Option<Instant> {
            self.timers.next_deadline()
        }
        fn poll_output(&mut self) -> Option<Output<String>> {
            self.out.pop()
        }
    }

    /// A broken machine whose deadline never moves.
    struct Stuck(Instant);
    impl Machine for Stuck {
        type Event = ();
        fn handle_connect(&mut self, _: ConnId, _: &PeerInfo, _: Instant) {}
        fn handle_frame(&mut self, _: ConnId, _: Frame<'_>, _: Instant) {}
        fn handle_disconnect(&mut self, _: ConnId, _: Instant) {}
        fn handle_timeout(&mut self, _: Instant) {}
        fn poll_timeout(&self) -> Option<Instant> {
            Some(self.0)
        }
        fn poll_output(&mut self) -> Option<Output<()>> {
            None
        }
    }

    #[allow(clippy::disallowed_methods)] // the one base time of a test
    fn t0() -> Instant {
        Instant::now()
    }

    /// Dials at once, then 1 s after every failure or disconnect; gives up after 3 failures.
    #[derive(Default)]
    struct Redialer {
        out: Outbox<String>,
        retry_at: Option<Instant>,
        want: bool,
        failures: u32,
        clock: Monotonic,
    }

    impl Machine for Redialer {
        type Event = String;
        fn handle_connect(&mut self, conn: ConnId, _: &PeerInfo, now: Instant) {
            self.clock.observe(now);
            self.want = false;
            self.out.event(format!("up {conn:?}"));
        }
        fn handle_frame(&mut self, _: ConnId, _: Frame<'_>, _: Instant) {}
        fn handle_disconnect(&mut self, _: ConnId, now: Instant) {
            let now = self.clock.observe(now);
            self.retry_at = Some(now + Duration::from_secs(1));
        }
        fn handle_timeout(&mut self, now: Instant) {
            let now = self.clock.observe(now);
            if self.retry_at.is_some_and(|t| t <= now) {
                self.retry_at = None;
                self.want = true;
            }
        }
        fn poll_timeout(&self) -> Option<Instant> {
            self.retry_at
        }
        fn poll_output(&mut self) -> Option<Output<String>> {
            self.out.pop()
        }
    }

    impl Dialer for Redialer {
        fn poll_dial(&self) -> Dial {
            if self.failures >= 3 {
                Dial::Stop
            } else if self.want {
                Dial::Now
            } else {
                Dial::Wait
            }
        }
        fn handle_dial_failed(&mut self, _: &str, now: Instant) {
            let now = self.clock.observe(now);
            self.failures += 1;
            self.want = false;
            self.out.event("failed".to_owned());
            self.retry_at = Some(now + Duration::from_secs(1));
        }
    }

    /// Answers every frame with its wall clock's Unix milliseconds at that time.
    struct Clocked {
        out: Outbox<()>,
        wall: crate::WallClock,
    }

    impl Machine for Clocked {
        type Event = ();
        fn handle_connect(&mut self, _: ConnId, _: &PeerInfo, _: Instant) {}
        fn handle_frame(&mut self, conn: ConnId, _: Frame<'_>, now: Instant) {
            let ms = self.wall.unix_ms(now);
            self.out.send(conn, FrameBuf::text(ms.to_string()));
        }
        fn handle_disconnect(&mut self, _: ConnId, _: Instant) {}
        fn handle_timeout(&mut self, _: Instant) {}
        fn poll_timeout(&self) -> Option<Instant> {
            None
        }
        fn poll_output(&mut self) -> Option<Output<()>> {
            self.out.pop()
        }
        fn handle_wall_clock(&mut self, now: Instant, unix_ms: u64) {
            self.wall.set(now, unix_ms);
        }
    }

    #[test]
    fn set_wall_clock_moves_the_machines_wall_time_and_not_their_deadlines() {
        let start = t0();
        let clocked = Clocked {
            out: Outbox::new(),
            wall: crate::WallClock::new(start, 1_000_000),
        };
        let mut sim: Sim<Clocked, Echo> = Sim::new(clocked, start, SimConfig::default());
        let r = sim.connect_raw(PeerInfo::new(None));
        let ask = |sim: &mut Sim<Clocked, Echo>| {
            sim.raw_send(r, FrameBuf::text("time?"));
            sim.settle();
            let got = sim.raw_take(r);
            got.last().and_then(|f| f.as_text()).map(str::to_owned)
        };
        sim.run_for(Duration::from_secs(2));
        assert_eq!(ask(&mut sim).as_deref(), Some("1002000"));
        // A suspend: the wall clock moved an hour, monotonic time did not.
        sim.set_wall_clock(1_002_000 + 3_600_000);
        assert_eq!(sim.now(), start + Duration::from_secs(2));
        assert_eq!(ask(&mut sim).as_deref(), Some("4602000"));
        sim.run_for(Duration::from_secs(1));
        assert_eq!(ask(&mut sim).as_deref(), Some("4603000"));
        // A correction backwards.
        sim.set_wall_clock(500);
        assert_eq!(ask(&mut sim).as_deref(), Some("500"));
    }

    #[test]
    fn dialing_follows_the_machine_and_stops_when_it_says_so() {
        let start = t0();
        let mut sim: Sim<Echo, Redialer> = Sim::new(Echo::default(), start, SimConfig::default());
        sim.add_client(Redialer {
            want: true,
            ..Redialer::default()
        });
        // Reachable: one attempt, connected at once.
        sim.run_dialing_for(Duration::from_millis(10), |_| true);
        assert!(sim.is_connected(0));
        sim.disconnect(0);
        // Unreachable: a failed attempt every second after the first retry, then Stop.
        let mut tries = 0;
        sim.run_dialing_for(Duration::from_secs(10), |_| {
            tries += 1;
            false
        });
        assert_eq!(tries, 3);
        assert_eq!(sim.client(0).poll_dial(), Dial::Stop);
        assert!(!sim.is_connected(0));
        assert_eq!(sim.take_client_events(0).len(), 4); // up + three failures
    }

    #[test]
    fn frames_flow_both_ways_with_latency() {
        let start = t0();
        let cfg = SimConfig::default().with_latency(Duration::from_millis(10));
        let mut sim: Sim<Echo, Echo> = Sim::new(Echo::default(), start, cfg);
        let a = sim.add_client(Echo::default());
        sim.connect(a);
        sim.call_client(a, |m, _| {
            let c = m.conns[0];
            m.out.send(c, FrameBuf::text("hi"));
        });
        sim.run_for(Duration::from_millis(15));
        assert_eq!(sim.take_server_events().len(), 1);
        assert!(sim.take_client_events(a).is_empty(), "echo not back yet");
        sim.run_for(Duration::from_millis(10));
        let ev = sim.take_client_events(a);
        assert_eq!(ev.len(), 1);
        assert!(ev[0].ends_with(":hi"));
    }

    #[test]
    fn timers_fire_and_disconnect_reaches_both_sides() {
        let mut sim: Sim<Echo, Echo> = Sim::new(Echo::default(), t0(), SimConfig::default());
        let a = sim.add_client(Echo::default());
        sim.connect(a);
        sim.run_for(Duration::from_millis(3500));
        let ticks = sim
            .take_client_events(a)
            .iter()
            .filter(|e| e.ends_with(":tick"))
            .count();
        assert_eq!(ticks, 3);
        sim.disconnect(a);
        assert!(!sim.is_connected(a));
        assert!(sim
            .take_server_events()
            .iter()
            .any(|e| e.ends_with(":gone")));
    }

    #[test]
    fn raw_peer_sees_server_frames_and_close() {
        let mut sim: Sim<Echo, Echo> = Sim::new(Echo::default(), t0(), SimConfig::default());
        let r = sim.connect_raw(PeerInfo::new(None));
        sim.raw_send(r, FrameBuf::text("x"));
        sim.settle();
        assert_eq!(sim.raw_received(r)[0].as_text(), Some("x"));
        let conn = sim.raw_conn(r).expect("open");
        sim.call_server(|m, _| m.out.close(conn, CloseCode::POLICY, "bye"));
        sim.settle();
        assert_eq!(sim.raw_closed(r), Some((CloseCode::POLICY, "bye")));
        assert!(!sim.raw_is_open(r));
    }

    #[test]
    fn loss_drops_frames_deterministically() {
        let run = |seed| {
            let cfg = SimConfig::default()
                .with_loss_per_mille(500)
                .with_seed(seed);
            let mut sim: Sim<Echo, Echo> = Sim::new(Echo::default(), t0(), cfg);
            let a = sim.add_client(Echo::default());
            sim.connect(a);
            sim.run_for(Duration::from_secs(100));
            sim.lost_frames()
        };
        let lost = run(7);
        assert!(lost > 10 && lost < 90, "{lost}");
        assert_eq!(lost, run(7));
    }

    #[test]
    fn stuck_timer_is_reported_not_spun() {
        let start = t0();
        let mut sim: Sim<Stuck, Echo> = Sim::new(Stuck(start), start, SimConfig::default());
        let err = sim.try_run_for(Duration::from_secs(1)).unwrap_err();
        assert!(matches!(err, SimError::TimerStuck { .. }));
        let mut m = Stuck(start);
        assert!(check_timer_contract(&mut m, start, &[TimerInput::Timeout]).is_err());
    }

    #[test]
    fn echo_keeps_the_timer_contract() {
        let start = t0();
        let inputs = vec![
            TimerInput::Connect,
            TimerInput::Timeout,
            TimerInput::Advance(Duration::from_millis(400)),
            TimerInput::Rewind(Duration::from_secs(3)),
            TimerInput::Timeout,
            TimerInput::FireDue,
            TimerInput::Frame(0, FrameBuf::text("a")),
            TimerInput::Disconnect(0),
            TimerInput::FireDue,
            TimerInput::Frame(0, FrameBuf::text("late")),
        ];
        check_timer_contract(&mut Echo::default(), start, &inputs).expect("contract");
    }

    /// Records frames; pauses the sender on "pause"; resumes on command.
    #[derive(Default)]
    struct Gate {
        out: Outbox<String>,
        seen: Vec<String>,
        ended: Vec<ConnId>,
    }

    impl Machine for Gate {
        type Event = String;
        fn handle_connect(&mut self, _: ConnId, _: &PeerInfo, _: Instant) {}
        fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, _: Instant) {
            if let Frame::Text(t) = frame {
                self.seen.push(t.to_owned());
                if t == "pause" {
                    self.out.pause_reading(conn);
                }
            }
        }
        fn handle_disconnect(&mut self, conn: ConnId, _: Instant) {
            self.ended.push(conn);
        }
        fn handle_timeout(&mut self, _: Instant) {}
        fn poll_timeout(&self) -> Option<Instant> {
            None
        }
        fn poll_output(&mut self) -> Option<Output<String>> {
            self.out.pop()
        }
        fn poll_flow(&mut self) -> Option<Flow> {
            self.out.pop_flow()
        }
    }

    #[test]
    fn a_paused_connection_holds_its_frames_and_close_until_resumed() {
        let mut sim: Sim<Gate, Echo> = Sim::new(Gate::default(), t0(), SimConfig::default());
        let r = sim.connect_raw(PeerInfo::new(None));
        let conn = sim.raw_conn(r).expect("open");
        for t in ["a", "pause", "b", "c"] {
            sim.raw_send(r, FrameBuf::text(t));
        }
        sim.settle();
        assert_eq!(sim.server().seen, ["a", "pause"], "nothing after the pause");
        assert!(sim.is_server_paused(conn));
        assert_eq!(sim.held(), 2);
        // The peer closes behind its unread frames: the close waits too.
        sim.raw_disconnect_graceful(r);
        sim.settle();
        assert!(sim.server().ended.is_empty());
        assert_eq!(sim.held(), 3);

        sim.call_server(|m, _| m.out.resume_reading(conn));
        sim.settle();
        assert_eq!(sim.server().seen, ["a", "pause", "b", "c"], "in order");
        assert_eq!(sim.server().ended, [conn], "then the end");
        assert_eq!(sim.held(), 0);
        assert!(!sim.is_server_paused(conn));
    }

    /// Records pongs and how each connection ended; closes a connection that sends "bye"
    /// with 4000 "see you".
    #[derive(Default)]
    struct Ends {
        out: Outbox<String>,
        log: Vec<String>,
    }

    impl Machine for Ends {
        type Event = String;
        fn handle_connect(&mut self, _: ConnId, _: &PeerInfo, _: Instant) {}
        fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, _: Instant) {
            if frame == Frame::Text("bye") {
                self.out.close(conn, CloseCode(4000), "see you");
            }
        }
        fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
            self.handle_disconnect_with(conn, &Disconnect::Ended, now);
        }
        fn handle_disconnect_with(&mut self, _: ConnId, how: &Disconnect, _: Instant) {
            self.log.push(format!("end {how:?}"));
        }
        fn handle_pong(&mut self, _: ConnId, _: Instant) {
            self.log.push("pong".to_owned());
        }
        fn handle_timeout(&mut self, _: Instant) {}
        fn poll_timeout(&self) -> Option<Instant> {
            None
        }
        fn poll_output(&mut self) -> Option<Output<String>> {
            self.out.pop()
        }
    }

    #[test]
    fn pongs_and_the_way_a_connection_ended_reach_both_sides() {
        let cfg = SimConfig::default().with_latency(Duration::from_millis(5));
        let mut sim: Sim<Ends, Ends> = Sim::new(Ends::default(), t0(), cfg);
        let c = sim.add_client(Ends::default());
        sim.connect(c);
        sim.pong(c);
        sim.pong_to_client(c);
        sim.settle();
        assert_eq!(sim.server().log, ["pong"]);
        assert_eq!(sim.client(c).log, ["pong"]);
        // The client closes: it sees its own close, the server the client's code and reason.
        sim.call_client(c, |m, _| {
            let conn = ConnId::new(2);
            m.out.close(conn, CloseCode(4001), "done");
        });
        sim.settle();
        let peer = Disconnect::peer(CloseCode(4001), "done");
        assert_eq!(
            sim.server().log,
            ["pong".to_owned(), format!("end {peer:?}")]
        );
        let local = Disconnect::local(CloseCode(4001), "done");
        assert_eq!(
            sim.client(c).log,
            ["pong".to_owned(), format!("end {local:?}")]
        );

        // A raw peer: a server-side close, a peer close with a long reason, a bare drop.
        let raws: Vec<usize> = (0..3)
            .map(|_| sim.connect_raw(PeerInfo::new(None)))
            .collect();
        sim.raw_pong(raws[0]);
        sim.raw_send(raws[0], FrameBuf::text("bye"));
        sim.raw_close(raws[1], CloseCode::GOING_AWAY, &"x".repeat(300));
        sim.raw_disconnect(raws[2]);
        sim.settle();
        assert_eq!(sim.raw_closed(raws[0]), Some((CloseCode(4000), "see you")));
        let log = &sim.server().log[2..];
        assert_eq!(log.len(), 4, "{log:?}");
        assert_eq!(
            log[0],
            format!("end {:?}", Disconnect::Ended),
            "the drop is at once"
        );
        assert_eq!(log[1], "pong");
        let local = Disconnect::local(CloseCode(4000), "see you");
        assert_eq!(log[2], format!("end {local:?}"));
        let cut = Disconnect::peer(CloseCode::GOING_AWAY, &"x".repeat(123));
        assert_eq!(
            log[3],
            format!("end {cut:?}"),
            "the reason is cut to 123 bytes"
        );
    }
}

//! The machines the reference server and client drive: llmrtc over the WebSocket alone, or
//! with WebRTC ([`WebrtcServer`] / [`WebrtcClient`]: a data channel and audio tracks over
//! UDP).
//!
//! Each shape has one type, so the apps, the server's provider loop and the tests that run
//! commands on them (`app.handle.call(|m, _| m.history(..))`) are the same with WebRTC on or
//! off: [`ServerMachine`] dereferences to the wrapped [`LlmrtcServer`], [`ClientMachine`]
//! to the wrapped [`LlmrtcClient`]. Both are a [`Dual`].

use std::net::SocketAddr;
use std::ops::{Deref, DerefMut};
use std::time::Instant;

use agentwire::core::{
    ConnId, DatagramMachine, Dial, Dialer, Disconnect, Flow, Frame, Machine, Output, PeerInfo,
    Transmit,
};
use agentwire::llmrtc::{LlmrtcClient, LlmrtcServer};
use llmrtc_webrtc::{WebrtcClient, WebrtcClientEvent, WebrtcServer, WebrtcServerEvent};

/// The reference server's machine: an [`LlmrtcServer`], with or without WebRTC.
///
/// Its events are [`WebrtcServerEvent`]s: without WebRTC only
/// [`WebrtcServerEvent::Llmrtc`]. Commands for the llmrtc server (provider answers, getters)
/// reach it through `Deref`/`DerefMut` or [`llmrtc`](Dual::llmrtc).
pub type ServerMachine = Dual<LlmrtcServer, WebrtcServer>;

/// The reference client's machine: an [`LlmrtcClient`], over the WebSocket alone or with
/// WebRTC ([`WebrtcClient`]: it offers a peer connection and takes payloads from the data
/// channel once it is open).
///
/// Its events are [`WebrtcClientEvent`]s: without WebRTC only
/// [`WebrtcClientEvent::Llmrtc`]. It dereferences to the wrapped [`LlmrtcClient`].
pub type ClientMachine = Dual<LlmrtcClient, WebrtcClient>;

/// A machine that is either `W` (the WebSocket alone) or `R` (`W` wrapped with WebRTC),
/// with `R`'s events: `W`'s are wrapped as `R` would wrap them.
///
/// The WebSocket shape is never given a UDP socket; as a [`DatagramMachine`] it drops any
/// datagram and sends none.
pub struct Dual<W: Machine, R: Machine> {
    inner: Shape<W, R>,
    /// How `W`'s events become `R`'s.
    wrap: fn(W::Event) -> R::Event,
}

impl<W: Machine, R: Machine> std::fmt::Debug for Dual<W, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.inner {
            Shape::WebSocket(_) => "Dual::WebSocket",
            Shape::Webrtc(_) => "Dual::Webrtc",
        })
    }
}

enum Shape<W, R> {
    /// No WebRTC.
    WebSocket(Box<W>),
    /// WebRTC on the driver's UDP socket.
    Webrtc(Box<R>),
}

impl<W: Machine, R: Machine> Dual<W, R> {
    fn with(inner: Shape<W, R>, wrap: fn(W::Event) -> R::Event) -> Self {
        Self { inner, wrap }
    }

    /// The WebRTC machine, when WebRTC is on.
    pub fn webrtc_ref(&self) -> Option<&R> {
        match &self.inner {
            Shape::WebSocket(_) => None,
            Shape::Webrtc(r) => Some(r),
        }
    }

    /// The WebRTC machine, when WebRTC is on.
    pub fn webrtc_mut(&mut self) -> Option<&mut R> {
        match &mut self.inner {
            Shape::WebSocket(_) => None,
            Shape::Webrtc(r) => Some(r),
        }
    }
}

impl ServerMachine {
    /// The llmrtc server over the WebSocket alone: every `offer` gets `error
    /// WEBRTC_UNAVAILABLE` (unless its `ServerConfig::webrtc` is on).
    pub fn websocket(server: LlmrtcServer) -> Self {
        Self::with(
            Shape::WebSocket(Box::new(server)),
            WebrtcServerEvent::Llmrtc,
        )
    }

    /// The llmrtc server with WebRTC.
    pub fn webrtc(server: WebrtcServer) -> Self {
        Self::with(Shape::Webrtc(Box::new(server)), WebrtcServerEvent::Llmrtc)
    }

    /// The wrapped llmrtc server (what it sends comes out of this machine's outputs).
    pub fn llmrtc(&mut self) -> &mut LlmrtcServer {
        match &mut self.inner {
            Shape::WebSocket(s) => s,
            Shape::Webrtc(w) => w.llmrtc(),
        }
    }

    /// The wrapped llmrtc server, for its getters.
    pub fn llmrtc_ref(&self) -> &LlmrtcServer {
        match &self.inner {
            Shape::WebSocket(s) => s,
            Shape::Webrtc(w) => w.llmrtc_ref(),
        }
    }
}

impl Deref for ServerMachine {
    type Target = LlmrtcServer;

    fn deref(&self) -> &LlmrtcServer {
        self.llmrtc_ref()
    }
}

impl DerefMut for ServerMachine {
    fn deref_mut(&mut self) -> &mut LlmrtcServer {
        self.llmrtc()
    }
}

impl ClientMachine {
    /// The llmrtc client over the WebSocket alone.
    pub fn websocket(client: LlmrtcClient) -> Self {
        Self::with(
            Shape::WebSocket(Box::new(client)),
            WebrtcClientEvent::Llmrtc,
        )
    }

    /// The llmrtc client with WebRTC.
    pub fn webrtc(client: WebrtcClient) -> Self {
        Self::with(Shape::Webrtc(Box::new(client)), WebrtcClientEvent::Llmrtc)
    }

    /// The wrapped llmrtc client (what it sends comes out of this machine's outputs).
    pub fn llmrtc(&mut self) -> &mut LlmrtcClient {
        match &mut self.inner {
            Shape::WebSocket(c) => c,
            Shape::Webrtc(w) => w.llmrtc(),
        }
    }

    /// The wrapped llmrtc client, for its getters.
    pub fn llmrtc_ref(&self) -> &LlmrtcClient {
        match &self.inner {
            Shape::WebSocket(c) => c,
            Shape::Webrtc(w) => w.llmrtc_ref(),
        }
    }
}

impl Deref for ClientMachine {
    type Target = LlmrtcClient;

    fn deref(&self) -> &LlmrtcClient {
        self.llmrtc_ref()
    }
}

impl DerefMut for ClientMachine {
    fn deref_mut(&mut self) -> &mut LlmrtcClient {
        self.llmrtc()
    }
}

impl<W: Machine, R: Machine> Machine for Dual<W, R> {
    type Event = R::Event;

    fn handle_connect(&mut self, conn: ConnId, peer: &PeerInfo, now: Instant) {
        match &mut self.inner {
            Shape::WebSocket(w) => w.handle_connect(conn, peer, now),
            Shape::Webrtc(r) => r.handle_connect(conn, peer, now),
        }
    }

    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        match &mut self.inner {
            Shape::WebSocket(w) => w.handle_frame(conn, frame, now),
            Shape::Webrtc(r) => r.handle_frame(conn, frame, now),
        }
    }

    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        match &mut self.inner {
            Shape::WebSocket(w) => w.handle_disconnect(conn, now),
            Shape::Webrtc(r) => r.handle_disconnect(conn, now),
        }
    }

    fn handle_disconnect_with(&mut self, conn: ConnId, how: &Disconnect, now: Instant) {
        match &mut self.inner {
            Shape::WebSocket(w) => w.handle_disconnect_with(conn, how, now),
            Shape::Webrtc(r) => r.handle_disconnect_with(conn, how, now),
        }
    }

    fn handle_pong(&mut self, conn: ConnId, now: Instant) {
        match &mut self.inner {
            Shape::WebSocket(w) => w.handle_pong(conn, now),
            Shape::Webrtc(r) => r.handle_pong(conn, now),
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        match &mut self.inner {
            Shape::WebSocket(w) => w.handle_timeout(now),
            Shape::Webrtc(r) => r.handle_timeout(now),
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match &self.inner {
            Shape::WebSocket(w) => w.poll_timeout(),
            Shape::Webrtc(r) => r.poll_timeout(),
        }
    }

    fn poll_output(&mut self) -> Option<Output<R::Event>> {
        match &mut self.inner {
            Shape::WebSocket(w) => w.poll_output().map(|o| match o {
                Output::Send { conn, frame } => Output::Send { conn, frame },
                Output::Close { conn, code, reason } => Output::Close { conn, code, reason },
                Output::Event(e) => Output::Event((self.wrap)(e)),
            }),
            Shape::Webrtc(r) => r.poll_output(),
        }
    }

    fn poll_flow(&mut self) -> Option<Flow> {
        match &mut self.inner {
            Shape::WebSocket(w) => w.poll_flow(),
            Shape::Webrtc(r) => r.poll_flow(),
        }
    }

    fn handle_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        match &mut self.inner {
            Shape::WebSocket(w) => w.handle_wall_clock(now, unix_ms),
            Shape::Webrtc(r) => r.handle_wall_clock(now, unix_ms),
        }
    }
}

impl<W: Dialer, R: Dialer> Dialer for Dual<W, R> {
    fn poll_dial(&self) -> Dial {
        match &self.inner {
            Shape::WebSocket(w) => w.poll_dial(),
            Shape::Webrtc(r) => r.poll_dial(),
        }
    }

    fn handle_dial_failed(&mut self, reason: &str, now: Instant) {
        match &mut self.inner {
            Shape::WebSocket(w) => w.handle_dial_failed(reason, now),
            Shape::Webrtc(r) => r.handle_dial_failed(reason, now),
        }
    }
}

impl<W: Machine, R: DatagramMachine> DatagramMachine for Dual<W, R> {
    /// The WebSocket shape has no UDP socket; a datagram (none is ever given) is dropped.
    fn handle_datagram(
        &mut self,
        remote: SocketAddr,
        local: SocketAddr,
        contents: &[u8],
        now: Instant,
    ) {
        if let Shape::Webrtc(r) = &mut self.inner {
            r.handle_datagram(remote, local, contents, now);
        }
    }

    fn poll_transmit(&mut self) -> Option<Transmit> {
        match &mut self.inner {
            Shape::WebSocket(_) => None,
            Shape::Webrtc(r) => r.poll_transmit(),
        }
    }
}

//! The machines the reference server and client drive: llmrtc over the WebSocket alone, or
//! with WebRTC ([`WebrtcServer`] / [`WebrtcClient`]: a data channel and audio tracks over
//! UDP).
//!
//! Each shape has one type, so the apps, the server's provider loop and the tests that run
//! commands on them (`app.handle.call(|m, _| m.history(..))`) are the same with WebRTC on or
//! off: [`ServerMachine`] dereferences to the wrapped [`LlmrtcServer`], [`ClientMachine`]
//! to the wrapped [`LlmrtcClient`].

use std::net::SocketAddr;
use std::ops::{Deref, DerefMut};
use std::time::Instant;

use agentwire::core::{
    ConnId, DatagramMachine, Dial, Dialer, Flow, Frame, Machine, Output, PeerInfo, Transmit,
};
use agentwire::llmrtc::{LlmrtcClient, LlmrtcServer};
use llmrtc_webrtc::{WebrtcClient, WebrtcClientEvent, WebrtcServer, WebrtcServerEvent};

/// The reference server's machine: an [`LlmrtcServer`], with or without WebRTC.
///
/// Its events are [`WebrtcServerEvent`]s: without WebRTC only
/// [`WebrtcServerEvent::Llmrtc`]. Commands for the llmrtc server (provider answers, getters)
/// reach it through `Deref`/`DerefMut` or [`llmrtc`](Self::llmrtc).
#[derive(Debug)]
pub struct ServerMachine {
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    /// No WebRTC: every `offer` gets `error WEBRTC_UNAVAILABLE` (or, with
    /// `ServerConfig::webrtc` on, is left to the application), and the machine is never
    /// given a UDP socket.
    WebSocket(Box<LlmrtcServer>),
    /// WebRTC: offers get peers on the driver's UDP socket.
    Webrtc(Box<WebrtcServer>),
}

impl ServerMachine {
    /// The llmrtc server over the WebSocket alone.
    pub fn websocket(server: LlmrtcServer) -> Self {
        Self {
            inner: Inner::WebSocket(Box::new(server)),
        }
    }

    /// The llmrtc server with WebRTC.
    pub fn webrtc(server: WebrtcServer) -> Self {
        Self {
            inner: Inner::Webrtc(Box::new(server)),
        }
    }

    /// The wrapped llmrtc server (what it sends comes out of this machine's outputs).
    pub fn llmrtc(&mut self) -> &mut LlmrtcServer {
        match &mut self.inner {
            Inner::WebSocket(s) => s,
            Inner::Webrtc(w) => w.llmrtc(),
        }
    }

    /// The wrapped llmrtc server, for its getters.
    pub fn llmrtc_ref(&self) -> &LlmrtcServer {
        match &self.inner {
            Inner::WebSocket(s) => s,
            Inner::Webrtc(w) => w.llmrtc_ref(),
        }
    }

    /// The WebRTC machine, when WebRTC is on (peers, candidates, drop counters).
    pub fn webrtc_ref(&self) -> Option<&WebrtcServer> {
        match &self.inner {
            Inner::WebSocket(_) => None,
            Inner::Webrtc(w) => Some(w),
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

impl Machine for ServerMachine {
    type Event = WebrtcServerEvent;

    fn handle_connect(&mut self, conn: ConnId, peer: &PeerInfo, now: Instant) {
        match &mut self.inner {
            Inner::WebSocket(s) => s.handle_connect(conn, peer, now),
            Inner::Webrtc(w) => w.handle_connect(conn, peer, now),
        }
    }

    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        match &mut self.inner {
            Inner::WebSocket(s) => s.handle_frame(conn, frame, now),
            Inner::Webrtc(w) => w.handle_frame(conn, frame, now),
        }
    }

    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        match &mut self.inner {
            Inner::WebSocket(s) => s.handle_disconnect(conn, now),
            Inner::Webrtc(w) => w.handle_disconnect(conn, now),
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        match &mut self.inner {
            Inner::WebSocket(s) => s.handle_timeout(now),
            Inner::Webrtc(w) => w.handle_timeout(now),
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match &self.inner {
            Inner::WebSocket(s) => s.poll_timeout(),
            Inner::Webrtc(w) => w.poll_timeout(),
        }
    }

    fn poll_output(&mut self) -> Option<Output<WebrtcServerEvent>> {
        match &mut self.inner {
            Inner::WebSocket(s) => s.poll_output().map(|o| match o {
                Output::Send { conn, frame } => Output::Send { conn, frame },
                Output::Close { conn, code, reason } => Output::Close { conn, code, reason },
                Output::Event(e) => Output::Event(WebrtcServerEvent::Llmrtc(e)),
            }),
            Inner::Webrtc(w) => w.poll_output(),
        }
    }

    fn poll_flow(&mut self) -> Option<Flow> {
        match &mut self.inner {
            Inner::WebSocket(s) => s.poll_flow(),
            Inner::Webrtc(w) => w.poll_flow(),
        }
    }

    fn handle_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        match &mut self.inner {
            Inner::WebSocket(s) => s.handle_wall_clock(now, unix_ms),
            Inner::Webrtc(w) => w.handle_wall_clock(now, unix_ms),
        }
    }
}

impl DatagramMachine for ServerMachine {
    /// Without WebRTC the machine has no UDP socket; a datagram (none is ever given) is
    /// dropped.
    fn handle_datagram(
        &mut self,
        remote: SocketAddr,
        local: SocketAddr,
        contents: &[u8],
        now: Instant,
    ) {
        if let Inner::Webrtc(w) = &mut self.inner {
            w.handle_datagram(remote, local, contents, now);
        }
    }

    fn poll_transmit(&mut self) -> Option<Transmit> {
        match &mut self.inner {
            Inner::WebSocket(_) => None,
            Inner::Webrtc(w) => w.poll_transmit(),
        }
    }
}

/// The reference client's machine: an [`LlmrtcClient`], over the WebSocket alone or with
/// WebRTC ([`WebrtcClient`]: it offers a peer connection and takes payloads from the data
/// channel once it is open).
///
/// Its events are [`WebrtcClientEvent`]s: without WebRTC only
/// [`WebrtcClientEvent::Llmrtc`]. It dereferences to the wrapped [`LlmrtcClient`].
#[derive(Debug)]
pub struct ClientMachine {
    inner: ClientInner,
}

#[derive(Debug)]
enum ClientInner {
    WebSocket(Box<LlmrtcClient>),
    Webrtc(Box<WebrtcClient>),
}

impl ClientMachine {
    /// The llmrtc client over the WebSocket alone.
    pub fn websocket(client: LlmrtcClient) -> Self {
        Self {
            inner: ClientInner::WebSocket(Box::new(client)),
        }
    }

    /// The llmrtc client with WebRTC.
    pub fn webrtc(client: WebrtcClient) -> Self {
        Self {
            inner: ClientInner::Webrtc(Box::new(client)),
        }
    }

    /// The wrapped llmrtc client (what it sends comes out of this machine's outputs).
    pub fn llmrtc(&mut self) -> &mut LlmrtcClient {
        match &mut self.inner {
            ClientInner::WebSocket(c) => c,
            ClientInner::Webrtc(w) => w.llmrtc(),
        }
    }

    /// The wrapped llmrtc client, for its getters.
    pub fn llmrtc_ref(&self) -> &LlmrtcClient {
        match &self.inner {
            ClientInner::WebSocket(c) => c,
            ClientInner::Webrtc(w) => w.llmrtc_ref(),
        }
    }

    /// The WebRTC machine, when WebRTC is on.
    pub fn webrtc_mut(&mut self) -> Option<&mut WebrtcClient> {
        match &mut self.inner {
            ClientInner::WebSocket(_) => None,
            ClientInner::Webrtc(w) => Some(w),
        }
    }

    /// The WebRTC machine, for its getters, when WebRTC is on.
    pub fn webrtc_ref(&self) -> Option<&WebrtcClient> {
        match &self.inner {
            ClientInner::WebSocket(_) => None,
            ClientInner::Webrtc(w) => Some(w),
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

impl Machine for ClientMachine {
    type Event = WebrtcClientEvent;

    fn handle_connect(&mut self, conn: ConnId, peer: &PeerInfo, now: Instant) {
        match &mut self.inner {
            ClientInner::WebSocket(c) => c.handle_connect(conn, peer, now),
            ClientInner::Webrtc(w) => w.handle_connect(conn, peer, now),
        }
    }

    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        match &mut self.inner {
            ClientInner::WebSocket(c) => c.handle_frame(conn, frame, now),
            ClientInner::Webrtc(w) => w.handle_frame(conn, frame, now),
        }
    }

    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        match &mut self.inner {
            ClientInner::WebSocket(c) => c.handle_disconnect(conn, now),
            ClientInner::Webrtc(w) => w.handle_disconnect(conn, now),
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        match &mut self.inner {
            ClientInner::WebSocket(c) => c.handle_timeout(now),
            ClientInner::Webrtc(w) => w.handle_timeout(now),
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match &self.inner {
            ClientInner::WebSocket(c) => c.poll_timeout(),
            ClientInner::Webrtc(w) => w.poll_timeout(),
        }
    }

    fn poll_output(&mut self) -> Option<Output<WebrtcClientEvent>> {
        match &mut self.inner {
            ClientInner::WebSocket(c) => c.poll_output().map(|o| match o {
                Output::Send { conn, frame } => Output::Send { conn, frame },
                Output::Close { conn, code, reason } => Output::Close { conn, code, reason },
                Output::Event(e) => Output::Event(WebrtcClientEvent::Llmrtc(e)),
            }),
            ClientInner::Webrtc(w) => w.poll_output(),
        }
    }

    fn poll_flow(&mut self) -> Option<Flow> {
        match &mut self.inner {
            ClientInner::WebSocket(c) => c.poll_flow(),
            ClientInner::Webrtc(w) => w.poll_flow(),
        }
    }

    fn handle_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        match &mut self.inner {
            ClientInner::WebSocket(c) => c.handle_wall_clock(now, unix_ms),
            ClientInner::Webrtc(w) => w.handle_wall_clock(now, unix_ms),
        }
    }
}

impl Dialer for ClientMachine {
    fn poll_dial(&self) -> Dial {
        match &self.inner {
            ClientInner::WebSocket(c) => c.poll_dial(),
            ClientInner::Webrtc(w) => w.poll_dial(),
        }
    }

    fn handle_dial_failed(&mut self, reason: &str, now: Instant) {
        match &mut self.inner {
            ClientInner::WebSocket(c) => c.handle_dial_failed(reason, now),
            ClientInner::Webrtc(w) => w.handle_dial_failed(reason, now),
        }
    }
}

impl DatagramMachine for ClientMachine {
    /// Without WebRTC the machine has no UDP socket; a datagram (none is ever given) is
    /// dropped.
    fn handle_datagram(
        &mut self,
        remote: SocketAddr,
        local: SocketAddr,
        contents: &[u8],
        now: Instant,
    ) {
        if let ClientInner::Webrtc(w) = &mut self.inner {
            w.handle_datagram(remote, local, contents, now);
        }
    }

    fn poll_transmit(&mut self) -> Option<Transmit> {
        match &mut self.inner {
            ClientInner::WebSocket(_) => None,
            ClientInner::Webrtc(w) => w.poll_transmit(),
        }
    }
}

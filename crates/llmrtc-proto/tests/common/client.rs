//! A direct harness for the `LlmrtcClient`: connections are plain ids, the server is
//! scripted JSON values.

use std::time::{Duration, Instant};

use agentwire_core::{CloseCode, ConnId, Dial, Dialer, Frame, Machine, Output, PeerInfo};
use llmrtc_proto::{ClientConfig, ClientEvent, ConnectionState, FixedJitter, LlmrtcClient};
use serde_json::{json, Value};

pub use super::t0;

/// One second.
pub const S: Duration = Duration::from_secs(1);

/// The client under test with everything it did recorded.
pub struct H {
    /// The client under test.
    pub c: LlmrtcClient,
    /// The simulated time.
    pub now: Instant,
    next: u64,
    /// Every frame sent, in order (cleared by the tests as they read it).
    pub sent: Vec<(ConnId, Value)>,
    /// Every close, in order.
    pub closes: Vec<(ConnId, CloseCode, String)>,
    /// Every event, in order.
    pub events: Vec<ClientEvent>,
}

impl H {
    /// A client with `config` and no jitter, not started.
    pub fn new(config: ClientConfig) -> Self {
        Self {
            c: LlmrtcClient::new(config, FixedJitter(0)),
            now: t0(),
            next: 1,
            sent: Vec::new(),
            closes: Vec::new(),
            events: Vec::new(),
        }
    }

    /// A default client, started, with the start recorded and cleared.
    pub fn default_started() -> Self {
        let mut h = Self::new(ClientConfig::default());
        h.c.start(h.now).expect("start");
        h.drain();
        h.events.clear();
        h
    }

    /// Records every output; closes are reported back as the driver does.
    pub fn drain(&mut self) {
        while let Some(out) = self.c.poll_output() {
            match out {
                Output::Send { conn, frame } => {
                    let v = serde_json::from_slice(frame.as_bytes()).expect("client sent JSON");
                    self.sent.push((conn, v));
                }
                Output::Close { conn, code, reason } => {
                    self.closes.push((conn, code, reason.into_owned()));
                    // The driver reports the end of every connection, ours included.
                    self.c.handle_disconnect(conn, self.now);
                }
                Output::Event(e) => self.events.push(e),
            }
        }
    }

    /// Opens a connection (as the driver does after `Dial::Now`).
    pub fn connect(&mut self) -> ConnId {
        assert_eq!(self.c.poll_dial(), Dial::Now, "dialing only when asked");
        let conn = ConnId::new(self.next);
        self.next += 1;
        self.c.handle_connect(conn, &PeerInfo::new(None), self.now);
        self.drain();
        conn
    }

    /// Delivers `v` on the WebSocket `conn`.
    pub fn recv(&mut self, conn: ConnId, v: Value) {
        self.c
            .handle_frame(conn, Frame::Text(&v.to_string()), self.now);
        self.drain();
    }

    /// Delivers `v` on the data channel.
    pub fn recv_dc(&mut self, v: Value) {
        self.c
            .handle_data_channel_frame(Frame::Text(&v.to_string()), self.now);
        self.drain();
    }

    /// Delivers `ready{id}` with protocol version 1 and one ICE server.
    pub fn ready(&mut self, conn: ConnId, id: &str) {
        self.recv(
            conn,
            json!({"type":"ready","id":id,"protocolVersion":1,"iceServers":[{"urls":"stun:x"}]}),
        );
    }

    /// Connects and receives `ready{id}`; clears what was recorded.
    pub fn connected(&mut self, id: &str) -> ConnId {
        let c = self.connect();
        self.ready(c, id);
        assert_eq!(self.c.state(), ConnectionState::Connected);
        self.sent.clear();
        self.events.clear();
        c
    }

    /// Advances time by `d`, firing every deadline on the way, in order.
    pub fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        for _ in 0..10_000 {
            match self.c.poll_timeout() {
                Some(t) if t <= end => {
                    self.now = self.now.max(t);
                    self.c.handle_timeout(self.now);
                    self.drain();
                }
                _ => break,
            }
        }
        self.now = end;
    }

    /// The `type`s of the frames sent so far (taken).
    pub fn types(&mut self) -> Vec<String> {
        self.sent
            .drain(..)
            .map(|(_, v)| v["type"].as_str().unwrap_or("?").to_owned())
            .collect()
    }

    /// Takes the events so far.
    pub fn take_events(&mut self) -> Vec<ClientEvent> {
        std::mem::take(&mut self.events)
    }

    /// The states entered so far, from the `StateChanged` events.
    pub fn states(&mut self) -> Vec<ConnectionState> {
        self.events
            .iter()
            .filter_map(|e| match e {
                ClientEvent::StateChanged { to, .. } => Some(*to),
                _ => None,
            })
            .collect()
    }

    /// The reconnect delays announced so far.
    pub fn delays(&self) -> Vec<Duration> {
        self.events
            .iter()
            .filter_map(|e| match e {
                ClientEvent::Reconnecting { delay, .. } => Some(*delay),
                _ => None,
            })
            .collect()
    }

    /// The types of the server messages surfaced so far (TTS chunks as `tts-chunk`).
    pub fn messages(&self) -> Vec<&'static str> {
        self.events
            .iter()
            .filter_map(|e| match e {
                ClientEvent::Message(m) => Some(m.type_name()),
                ClientEvent::TtsChunk { .. } => Some("tts-chunk"),
                _ => None,
            })
            .collect()
    }
}

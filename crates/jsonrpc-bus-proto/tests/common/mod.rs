//! A direct harness for the `Bus`: connections are plain ids, frames are JSON values.
//! The simulated-time harness for `BusClient` is in [`client`].
#![allow(dead_code, unreachable_pub)]

pub mod client;

use std::time::{Duration, Instant};

use agentwire_core::{CloseCode, ConnId, Frame, Machine, Output, PeerInfo, SequentialIds};
use jsonrpc_bus_proto::{Bus, BusConfig, BusEvent};
use serde_json::{json, Value};

#[allow(clippy::disallowed_methods)] // the one base time of a test
pub fn t0() -> Instant {
    Instant::now()
}

/// 2025-02-14T12:00:00Z, the spec's ping example.
pub const UNIX_MS: u64 = 1_739_534_400_000;

pub struct Harness {
    pub bus: Bus,
    pub now: Instant,
    next: u64,
    pub frames: Vec<(ConnId, Value)>,
    pub closes: Vec<(ConnId, CloseCode, String)>,
    pub events: Vec<BusEvent>,
}

impl Harness {
    pub fn new(config: BusConfig) -> Self {
        let now = t0();
        Self {
            bus: Bus::new(config, SequentialIds::new(7), now, UNIX_MS),
            now,
            next: 1,
            frames: Vec::new(),
            closes: Vec::new(),
            events: Vec::new(),
        }
    }

    pub fn default_config() -> Self {
        Self::new(BusConfig::default())
    }

    pub fn drain(&mut self) {
        while let Some(out) = self.bus.poll_output() {
            match out {
                Output::Send { conn, frame } => {
                    let v: Value = serde_json::from_slice(frame.as_bytes())
                        .unwrap_or_else(|e| panic!("bus sent invalid JSON ({e}): {frame:?}"));
                    self.frames.push((conn, v));
                }
                Output::Close { conn, code, reason } => {
                    self.closes.push((conn, code, reason.into_owned()))
                }
                Output::Event(e) => self.events.push(e),
            }
        }
    }

    pub fn connect(&mut self) -> ConnId {
        let conn = ConnId::new(self.next);
        self.next += 1;
        self.bus
            .handle_connect(conn, &PeerInfo::new(None), self.now);
        self.drain();
        conn
    }

    /// Connects and initializes; clears what that produced.
    pub fn client(&mut self) -> ConnId {
        let c = self.connect();
        self.send(
            c,
            json!({"jsonrpc":"2.0","method":"initialize","params":{"clientId":format!("c{c}")},"id":0}),
        );
        self.take(c);
        c
    }

    pub fn send_text(&mut self, conn: ConnId, text: &str) {
        self.bus.handle_frame(conn, Frame::Text(text), self.now);
        self.drain();
    }

    pub fn send(&mut self, conn: ConnId, v: Value) {
        self.send_text(conn, &v.to_string());
    }

    pub fn disconnect(&mut self, conn: ConnId) {
        self.bus.handle_disconnect(conn, self.now);
        self.drain();
    }

    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        self.bus.handle_timeout(self.now);
        self.drain();
    }

    /// Takes every frame sent to `conn`.
    pub fn take(&mut self, conn: ConnId) -> Vec<Value> {
        let mut out = Vec::new();
        self.frames.retain(|(c, v)| {
            if *c == conn {
                out.push(v.clone());
                false
            } else {
                true
            }
        });
        out
    }

    /// Takes the one frame sent to `conn`.
    pub fn one(&mut self, conn: ConnId) -> Value {
        let mut v = self.take(conn);
        assert_eq!(v.len(), 1, "expected one frame for {conn}, got {v:?}");
        v.remove(0)
    }

    pub fn take_events(&mut self) -> Vec<BusEvent> {
        std::mem::take(&mut self.events)
    }

    pub fn request(&mut self, conn: ConnId, id: u64, method: &str, params: Value) -> Value {
        self.send(
            conn,
            json!({"jsonrpc":"2.0","method":method,"params":params,"id":id}),
        );
        self.one(conn)
    }

    pub fn subscribe(&mut self, conn: ConnId, topic: &str) {
        let r = self.request(conn, 1000, "subscribe", json!({"topic": topic}));
        assert_eq!(r["result"]["success"], true, "{r}");
    }

    pub fn publish(&mut self, conn: ConnId, id: u64, topic: &str, payload: Value) {
        self.send(
            conn,
            json!({"jsonrpc":"2.0","method":"sendMessage","params":{"topic":topic,"payload":payload},"id":id}),
        );
    }

    /// Answers the delivery request `req` (a frame the bus sent to `conn`).
    pub fn answer(&mut self, conn: ConnId, req: &Value, stop: bool) {
        assert_eq!(req["method"], "sendMessage", "{req}");
        self.send(
            conn,
            json!({"jsonrpc":"2.0","result":{"success":true,"stopPropagation":stop},"id":req["id"]}),
        );
    }
}

pub fn error_code(v: &Value) -> i64 {
    v["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {v}"))
}

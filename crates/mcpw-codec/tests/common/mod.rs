//! The simulated-time harness for the Orchestrator: the machine is driven directly with
//! frames and time, no sockets, no clock, and what it sends is read back as JSON; and what
//! the `Agent` tests share ([`agent`]).
#![allow(dead_code, unreachable_pub)]

pub mod agent;

use std::time::{Duration, Instant};

use agentwire_core::{CloseCode, ConnId, Frame, Machine, Output, PeerInfo, SequentialIds};
use mcpw_codec::orchestrator::{Orchestrator, OrchestratorConfig, OrchestratorEvent};
use serde_json::{json, Value};

/// A sent frame in the JSON form, decoded with the codec (so binary frames, gzip included,
/// must be what the codec reads).
pub fn json_of(frame: &agentwire_core::FrameBuf) -> Value {
    let f = match frame.as_text() {
        Some(t) => Frame::Text(t),
        None => Frame::Binary(frame.as_bytes()),
    };
    let mut codec = mcpw_codec::Codec::default();
    let (msg, _) = codec
        .decode_ws(f)
        .expect("the orchestrator sends what the codec reads");
    let mut out = Vec::new();
    codec.encode_json(&msg, &mut out).expect("re-encode");
    serde_json::from_slice(&out).expect("JSON")
}

#[allow(clippy::disallowed_methods)] // the one base time of a test
pub fn t0() -> Instant {
    Instant::now()
}

pub struct Env {
    pub o: Orchestrator,
    pub now: Instant,
    pub sent: Vec<(ConnId, Value)>,
    pub closed: Vec<(ConnId, CloseCode, String)>,
    pub events: Vec<OrchestratorEvent>,
}

impl Env {
    pub fn new(cfg: OrchestratorConfig) -> Self {
        let now = t0();
        Self {
            o: Orchestrator::new(cfg, SequentialIds::new(1), now, 1_735_140_600_000),
            now,
            sent: Vec::new(),
            closed: Vec::new(),
            events: Vec::new(),
        }
    }

    pub fn drain(&mut self) {
        while let Some(out) = self.o.poll_output() {
            match out {
                Output::Send { conn, frame } => {
                    let v = json_of(&frame);
                    self.sent.push((conn, v));
                }
                Output::Close { conn, code, reason } => {
                    self.closed.push((conn, code, reason.into_owned()));
                }
                Output::Event(e) => self.events.push(e),
            }
        }
    }

    pub fn connect(&mut self, n: u64) -> ConnId {
        let c = ConnId::new(n);
        let peer = PeerInfo::new(None)
            .with_subprotocol("mcp.v1")
            .with_header("X-Agent-Type", "tester");
        self.o.handle_connect(c, &peer, self.now);
        self.drain();
        c
    }

    pub fn send(&mut self, c: ConnId, v: Value) {
        let text = v.to_string();
        self.o.handle_frame(c, Frame::Text(&text), self.now);
        self.drain();
    }

    pub fn advance(&mut self, d: Duration) {
        let until = self.now + d;
        while let Some(t) = self.o.poll_timeout().filter(|t| *t <= until) {
            self.now = self.now.max(t);
            self.o.handle_timeout(self.now);
            self.drain();
        }
        self.now = until;
        self.o.handle_timeout(self.now);
        self.drain();
    }

    pub fn take(&mut self, c: ConnId) -> Vec<Value> {
        let (mine, rest) = std::mem::take(&mut self.sent)
            .into_iter()
            .partition(|(k, _)| *k == c);
        self.sent = rest;
        mine.into_iter().map(|(_, v)| v).collect()
    }

    pub fn register(&mut self, n: u64, id: &str, caps: Value) -> ConnId {
        let c = self.connect(n);
        self.send(
            c,
            json!({"id": format!("r-{id}"), "type": 0, "method": "agent.register",
            "params": {"agent_id": id, "agent_type": "tester", "capabilities": caps,
                       "resources": {"max_concurrent_tasks": 2}}}),
        );
        let replies = self.take(c);
        assert_eq!(
            replies[0]["method"], "registration.confirmed",
            "{replies:?}"
        );
        c
    }
}

pub fn review(confidence: f64) -> Value {
    json!([{"name": "code_review", "confidence": confidence, "specialties": ["security"]}])
}

/// A 4 KiB string of pseudo-random printable ASCII (about 6.2 bits per byte): a payload
/// that looks incompressible to an entropy cut-off below that.
pub fn noise() -> String {
    let mut x: u32 = 12345;
    (0..4096)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            char::from(b'0' + ((x >> 16) % 75) as u8)
        })
        .filter(|c| *c != '\\')
        .collect()
}

/// Whether a 24-byte frame's header has the compressed flag.
pub fn is_compressed(frame: &[u8]) -> bool {
    u16::from_be_bytes([frame[6], frame[7]]) & 1 == 1
}

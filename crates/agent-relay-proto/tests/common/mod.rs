//! A direct harness for the `Relay`: connections are plain ids, frames are JSON values, and
//! every output is recorded in order (so tests can check that a log record precedes its send).
//! The Host's harness is [`host`].
#![allow(dead_code, unreachable_pub)]

pub mod host;

use std::time::{Duration, Instant};

use agent_relay_proto::{
    Direction, Limits, LogRecord, Relay, RelayConfig, RelayEvent, ENDPOINT_PATH,
};
use agentwire_core::{CloseCode, ConnId, Frame, Machine, Output, PeerInfo, SequentialIds};
use serde_json::{json, Value};

#[allow(clippy::disallowed_methods)] // the one base time of a test
pub fn t0() -> Instant {
    Instant::now()
}

/// 2026-02-13T10:22:17.123Z, the spec's log example.
pub const UNIX_MS: u64 = 1_770_978_137_123;

/// One output, as recorded.
#[derive(Debug, Clone)]
pub enum Out {
    Send(ConnId, Value),
    Close(ConnId, CloseCode, String),
    Event(RelayEvent),
}

pub struct Harness {
    pub relay: Relay,
    pub now: Instant,
    next: u64,
    /// Every output since the last `clear`, in order.
    pub outs: Vec<Out>,
}

impl Harness {
    pub fn new(config: RelayConfig) -> Self {
        let now = t0();
        Self {
            relay: Relay::new(config, SequentialIds::new(0), now, UNIX_MS),
            now,
            next: 1,
            outs: Vec::new(),
        }
    }

    /// The default config without `relay.hello` and `relay.presence`, so tests see only what
    /// they are about.
    pub fn quiet() -> Self {
        Self::new(
            RelayConfig::default()
                .with_hello(false)
                .with_presence(false),
        )
    }

    pub fn drain(&mut self) {
        while let Some(out) = self.relay.poll_output() {
            self.outs.push(match out {
                Output::Send { conn, frame } => {
                    let v: Value = serde_json::from_slice(frame.as_bytes())
                        .unwrap_or_else(|e| panic!("relay sent invalid JSON ({e}): {frame:?}"));
                    Out::Send(conn, v)
                }
                Output::Close { conn, code, reason } => Out::Close(conn, code, reason.into_owned()),
                Output::Event(e) => Out::Event(e),
            });
        }
    }

    pub fn clear(&mut self) {
        self.outs.clear();
    }

    pub fn connect_at(&mut self, path: &str) -> ConnId {
        let conn = ConnId::new(self.next);
        self.next += 1;
        let peer = PeerInfo::new(None).with_path(path);
        self.relay.handle_connect(conn, &peer, self.now);
        self.drain();
        conn
    }

    pub fn connect(&mut self) -> ConnId {
        self.connect_at(ENDPOINT_PATH)
    }

    pub fn send_text(&mut self, conn: ConnId, text: &str) {
        self.relay.handle_frame(conn, Frame::Text(text), self.now);
        self.drain();
    }

    pub fn send(&mut self, conn: ConnId, v: Value) {
        self.send_text(conn, &v.to_string());
    }

    /// `{"v":"mvp-0.2","type":t,"id"?:id,"payload":p}`.
    pub fn msg(&mut self, conn: ConnId, t: &str, id: Option<&str>, payload: Value) {
        let mut m = json!({"v": "mvp-0.2", "type": t, "payload": payload});
        if let Some(id) = id {
            m["id"] = json!(id);
        }
        self.send(conn, m);
    }

    /// A host reply `{"v":..,"type":t,"replyTo":r,"payload":p}`.
    pub fn reply(&mut self, conn: ConnId, t: &str, reply_to: &str, payload: Value) {
        self.send(
            conn,
            json!({"v": "mvp-0.2", "type": t, "replyTo": reply_to, "payload": payload}),
        );
    }

    pub fn disconnect(&mut self, conn: ConnId) {
        self.relay.handle_disconnect(conn, self.now);
        self.drain();
    }

    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        self.relay.handle_timeout(self.now);
        self.drain();
    }

    /// Connects and joins `session` as `role`; clears what that produced.
    pub fn join(&mut self, role: &str, session: &str) -> ConnId {
        let c = self.connect();
        self.msg(
            c,
            "relay.join",
            Some("join-1"),
            json!({"role": role, "sessionId": session}),
        );
        let got = self.take(c);
        assert!(
            got.iter().any(|v| v["type"] == "relay.joined"),
            "join failed: {got:?}"
        );
        self.clear();
        c
    }

    pub fn host(&mut self) -> ConnId {
        self.join("host", "default")
    }

    pub fn agent(&mut self) -> ConnId {
        self.join("agent", "default")
    }

    /// Frames sent to `conn` since the last `clear` (and takes them).
    pub fn take(&mut self, conn: ConnId) -> Vec<Value> {
        let mut taken = Vec::new();
        self.outs.retain(|o| match o {
            Out::Send(c, v) if *c == conn => {
                taken.push(v.clone());
                false
            }
            _ => true,
        });
        taken
    }

    /// The one frame sent to `conn`.
    pub fn one(&mut self, conn: ConnId) -> Value {
        let mut v = self.take(conn);
        assert_eq!(v.len(), 1, "expected one frame for {conn:?}, got {v:#?}");
        v.remove(0)
    }

    pub fn closes(&self) -> Vec<(ConnId, CloseCode, String)> {
        self.outs
            .iter()
            .filter_map(|o| match o {
                Out::Close(c, code, r) => Some((*c, *code, r.clone())),
                _ => None,
            })
            .collect()
    }

    pub fn events(&self) -> Vec<RelayEvent> {
        self.outs
            .iter()
            .filter_map(|o| match o {
                Out::Event(RelayEvent::Log(_)) => None,
                Out::Event(e) => Some(e.clone()),
                _ => None,
            })
            .collect()
    }

    pub fn logs(&self) -> Vec<LogRecord> {
        self.outs
            .iter()
            .filter_map(|o| match o {
                Out::Event(RelayEvent::Log(r)) => Some(r.clone()),
                _ => None,
            })
            .collect()
    }

    /// `(direction, type, payload)` of every log record, for compact assertions.
    pub fn log_lines(&self) -> Vec<(Direction, &'static str, Value)> {
        self.logs()
            .into_iter()
            .map(|r| {
                let payload: Value = serde_json::from_str(r.payload.as_str())
                    .unwrap_or_else(|e| panic!("log payload is not JSON ({e}): {r:?}"));
                (r.direction, r.msg_type, payload)
            })
            .collect()
    }
}

/// A quiet relay config (no hello, no presence) with the default limits changed by `f`.
pub fn limits(f: impl FnOnce(&mut Limits)) -> RelayConfig {
    let mut l = Limits::default();
    f(&mut l);
    RelayConfig::default()
        .with_hello(false)
        .with_presence(false)
        .with_limits(l)
}

/// `(code, message, replyTo)` of an `error` frame.
pub fn error_of(v: &Value) -> (String, String, Option<String>) {
    assert_eq!(v["type"], "error", "not an error: {v}");
    assert_eq!(v["v"], "mvp-0.2", "{v}");
    (
        v["payload"]["code"].as_str().unwrap_or_default().to_owned(),
        v["payload"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        v.get("replyTo").and_then(Value::as_str).map(str::to_owned),
    )
}

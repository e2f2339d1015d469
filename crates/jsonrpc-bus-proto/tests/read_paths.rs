//! The bus reads plain hop replies in one pass and everything else the general way (crate
//! docs, "How messages are read"). The two readers are held to each other message by message
//! in the crate's unit tests and fuzz target; this holds the whole bus to itself: the same
//! scenario, sent once in the plain shape and once in a shape that only the general path
//! takes, gives byte-identical frames, closes and events.

use std::time::Duration;

use agentwire_core::{ConnId, Frame, Machine, Output, PeerInfo, SequentialIds};
use jsonrpc_bus_proto::{Bus, BusConfig};

mod common;

/// How a scenario's publishes and replies are written.
#[derive(Clone, Copy)]
enum Shape {
    /// Compact, in the one-pass reader's shape.
    Plain,
    /// The same members plus one the bus ignores, which the one-pass reader refuses.
    General,
}

struct Run {
    bus: Bus,
    now: std::time::Instant,
    shape: Shape,
    /// Everything the bus put out, in order, as text.
    log: Vec<String>,
    /// Hop requests not yet answered: (subscriber, request id).
    hops: Vec<(ConnId, String)>,
}

impl Run {
    fn new(shape: Shape) -> Self {
        let mut config = BusConfig::default();
        config.limits.max_pending_per_publisher = 2;
        config.limits.max_topic_bytes = 16;
        let now = common::t0();
        Self {
            bus: Bus::new(config, SequentialIds::new(3), now, common::UNIX_MS),
            now,
            shape,
            log: Vec::new(),
            hops: Vec::new(),
        }
    }

    fn drain(&mut self) {
        while let Some(out) = self.bus.poll_output() {
            match out {
                Output::Send { conn, frame } => {
                    let text = frame.as_text().expect("text").to_owned();
                    if text.contains(r#""method":"sendMessage""#) {
                        let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
                        self.hops
                            .push((conn, v["id"].as_str().expect("id").to_owned()));
                    }
                    self.log.push(format!("send {conn}: {text}"));
                }
                Output::Close { conn, code, reason } => {
                    self.log.push(format!("close {conn}: {code:?} {reason}"));
                }
                Output::Event(e) => self.log.push(format!("event: {e:?}")),
            }
        }
    }

    fn text(&mut self, conn: ConnId, text: &str) {
        self.bus.handle_frame(conn, Frame::Text(text), self.now);
        self.drain();
    }

    fn connect(&mut self, n: u64, init: bool) -> ConnId {
        let conn = ConnId::new(n);
        self.bus
            .handle_connect(conn, &PeerInfo::new(None), self.now);
        if init {
            let text = format!(
                r#"{{"jsonrpc":"2.0","method":"initialize","params":{{"clientId":"c{n}"}},"id":0}}"#
            );
            self.text(conn, &text);
        }
        self.drain();
        conn
    }

    /// A publish; `id` is the raw JSON id, or `None` for a notification.
    fn publish(&mut self, conn: ConnId, id: Option<&str>, topic: &str, payload: &str) {
        let extra = match self.shape {
            Shape::Plain => "",
            Shape::General => r#","x":1"#,
        };
        let id = id.map_or(String::new(), |id| format!(r#","id":{id}"#));
        let text = format!(
            r#"{{"jsonrpc":"2.0","method":"sendMessage","params":{{"topic":"{topic}","payload":{payload}}}{id}{extra}}}"#
        );
        self.text(conn, &text);
    }

    /// Answers the oldest unanswered hop.
    fn answer(&mut self, stop: bool) {
        let (conn, id) = self.hops.remove(0);
        let extra = match self.shape {
            Shape::Plain => "",
            Shape::General => r#","x":1"#,
        };
        let text = format!(
            r#"{{"jsonrpc":"2.0","result":{{"success":true,"stopPropagation":{stop}}},"id":"{id}"{extra}}}"#
        );
        self.text(conn, &text);
    }

    fn scenario(mut self) -> Vec<String> {
        let publisher = self.connect(1, true);
        let b = self.connect(2, true);
        let c = self.connect(3, true);
        let stranger = self.connect(4, false);
        for sub in [b, c] {
            self.text(
                sub,
                r#"{"jsonrpc":"2.0","method":"subscribe","params":{"topic":"inbound:*"},"id":1}"#,
            );
        }
        // A chain of two, stopped by the second; a string id.
        self.publish(publisher, Some(r#""p-1""#), "inbound:a", r#"{"text":"hi"}"#);
        self.answer(false);
        self.answer(true);
        // A notification; two publishes in flight at once, a third over the limit.
        self.publish(publisher, None, "inbound:b", r#"{"n":[1,2]}"#);
        self.publish(publisher, Some("7"), "inbound:c", r#"{"n":null}"#);
        self.publish(publisher, Some("8"), "inbound:d", r#"{"n":"s"}"#);
        for _ in 0..4 {
            self.answer(false);
        }
        // Payloads the bus refuses: not an object (a request and a notification), too deep.
        self.publish(publisher, Some("14"), "inbound:f", "[1]");
        self.publish(publisher, None, "inbound:g", "1");
        let deep = format!(r#"{{"a":{}1{}}}"#, "[".repeat(200), "]".repeat(200));
        self.publish(publisher, Some("15"), "inbound:h", &deep);
        // A topic over the 16-byte limit, an empty topic, a publish before `initialize`.
        self.publish(publisher, Some("9"), "inbound:0123456789", "{}");
        self.publish(publisher, Some("10"), "", "{}");
        self.publish(stranger, Some("11"), "inbound:e", "{}");
        // A subscriber that never answers: its hop times out.
        self.publish(publisher, Some("12"), "outbound:x", "{}");
        self.text(
            c,
            r#"{"jsonrpc":"2.0","method":"subscribe","params":{"topic":"outbound:*"},"id":2}"#,
        );
        self.publish(publisher, Some("13"), "outbound:y", "{}");
        self.now += Duration::from_secs(31);
        self.bus.handle_timeout(self.now);
        self.drain();
        assert!(self.hops.len() == 1, "the silent hop");
        self.log
    }
}

#[test]
fn plain_and_general_shapes_give_the_same_frames_and_events() {
    let plain = Run::new(Shape::Plain).scenario();
    let general = Run::new(Shape::General).scenario();
    assert!(plain.len() > 30, "the scenario ran: {plain:#?}");
    for (i, (p, g)) in plain.iter().zip(&general).enumerate() {
        assert_eq!(p, g, "output {i}");
    }
    assert_eq!(plain.len(), general.len());
    // The scenario reached each rule it means to.
    let all = plain.join("\n");
    for needle in [
        r#""stopPropagation":true"#,
        "max_pending_per_publisher",
        "max_topic_bytes",
        "-32600",
        "Not initialized",
        "timeouts\":1",
    ] {
        assert!(all.contains(needle), "{needle} not in {all}");
    }
}

//! Hostile input: truncated, oversize, wrong-type and garbage frames get the error the relay
//! promises, never a panic or a close, and never disturb another connection.

mod common;

use agent_relay_proto::{texts, Limits, RateLimit, RelayConfig, RelayEvent};
use agentwire_core::{ConnId, Frame, Machine};
use common::{error_of, Harness};
use serde_json::json;

/// A host and an agent in session "default", and a second pair in "other", to check that
/// nobody else is disturbed.
struct World {
    h: Harness,
    host: ConnId,
    agent: ConnId,
    other_host: ConnId,
    other_agent: ConnId,
}

impl World {
    fn new(config: RelayConfig) -> Self {
        let mut h = Harness::new(config.with_hello(false).with_presence(false));
        let host = h.host();
        let agent = h.agent();
        let other_host = h.join("host", "other");
        let other_agent = h.join("agent", "other");
        Self {
            h,
            host,
            agent,
            other_host,
            other_agent,
        }
    }

    /// Both pairs still work both ways.
    fn assert_unharmed(&mut self) {
        let h = &mut self.h;
        h.clear();
        for (host, agent) in [(self.host, self.agent), (self.other_host, self.other_agent)] {
            h.msg(agent, "snapshot.get", Some("probe"), json!({}));
            assert_eq!(h.one(host)["id"], "probe");
            h.reply(host, "snapshot.state", "probe", json!({"ok":1}));
            assert_eq!(h.one(agent)["replyTo"], "probe");
        }
        assert!(h.closes().is_empty(), "{:?}", h.closes());
    }
}

#[test]
fn garbage_gets_invalid_message_with_the_reference_text_and_the_connection_stays() {
    let mut w = World::new(RelayConfig::default());
    for bad in [
        "",
        " ",
        "{",
        "nope",
        "\u{0}",
        "[]",
        "[{\"type\":\"tool.call\"}]",
        "5",
        "null",
        "\"tool.call\"",
        "{}",
        "{\"type\":5,\"v\":\"mvp-0.2\",\"payload\":{}}",
        "{\"type\":null}",
        "{\"v\":\"mvp-0.2\",\"payload\":{}}",
        "{}}",
        "{\"type\":\"tool.call\"} trailing",
    ] {
        w.h.send_text(w.agent, bad);
        let (code, text, _) = error_of(&w.h.one(w.agent));
        assert_eq!(
            (code.as_str(), text.as_str()),
            ("INVALID_MESSAGE", texts::INVALID_JSON),
            "{bad:?}"
        );
        assert!(w.h.take(w.host).is_empty(), "{bad:?} reached the host");
    }
    assert!(w
        .h
        .events()
        .iter()
        .all(|e| !matches!(e, RelayEvent::Forwarded { .. })));
    w.assert_unharmed();
}

#[test]
fn every_truncation_of_a_valid_message_is_refused_without_panic() {
    let mut w = World::new(RelayConfig::default());
    let full = r#"{"v":"mvp-0.2","type":"tool.call","id":"req-003","payload":{"toolName":"select","params":{"itemId":"m1"},"reason":"Pick the first."}}"#;
    for cut in 0..full.len() {
        w.h.send_text(w.agent, &full[..cut]);
        let reply = w.h.one(w.agent);
        assert_eq!(error_of(&reply).0, "INVALID_MESSAGE", "cut at {cut}");
        assert!(w.h.take(w.host).is_empty());
    }
    w.h.send_text(w.agent, full);
    assert_eq!(w.h.one(w.host)["id"], "req-003");
    w.h.reply(w.host, "tool.result", "req-003", json!({}));
    w.assert_unharmed();
}

#[test]
fn oversize_messages_are_limit_exceeded_before_parsing_and_the_limit_itself_passes() {
    let mut limits = Limits::default();
    limits.max_message_bytes = 1024;
    let mut w = World::new(RelayConfig::default().with_limits(limits));
    let frame_of = |len: usize| {
        let head = r#"{"v":"mvp-0.2","type":"agent.message","payload":{"text":""#;
        let tail = r#""}}"#;
        format!("{head}{}{tail}", "x".repeat(len - head.len() - tail.len()))
    };
    w.h.send_text(w.agent, &frame_of(1025));
    assert_eq!(
        error_of(&w.h.one(w.agent)),
        (
            "LIMIT_EXCEEDED".into(),
            "Message of 1025 bytes exceeds the limit of 1024 bytes.".into(),
            None
        )
    );
    assert!(w.h.take(w.host).is_empty());
    // Not even JSON: the size is checked first.
    w.h.send_text(w.agent, &"{".repeat(5000));
    assert_eq!(error_of(&w.h.one(w.agent)).0, "LIMIT_EXCEEDED");
    w.h.send_text(w.agent, &frame_of(1024));
    assert_eq!(w.h.one(w.host)["type"], "agent.message");
    w.assert_unharmed();
}

#[test]
fn non_utf8_binary_is_invalid_message() {
    let mut w = World::new(RelayConfig::default());
    let now = w.h.now;
    w.h.relay
        .handle_frame(w.agent, Frame::Binary(&[0xff, 0xfe, b'{', b'}']), now);
    w.h.drain();
    assert_eq!(error_of(&w.h.one(w.agent)).1, texts::INVALID_JSON);
    w.assert_unharmed();
}

#[test]
fn wrong_envelope_field_types_are_invalid_message_with_the_id_recovered() {
    let mut w = World::new(RelayConfig::default());
    let cases = [
        (
            json!({"v":"mvp-0.2","type":"snapshot.get","id":7,"payload":{}}),
            texts::BAD_ID,
            None,
        ),
        (
            json!({"v":"mvp-0.2","type":"snapshot.get","id":"r1","replyTo":{"a":1},"payload":{}}),
            texts::BAD_REPLY_TO,
            Some("r1"),
        ),
        (
            json!({"v":"mvp-0.2","type":"snapshot.get","id":"r2","payload":[]}),
            texts::BAD_PAYLOAD,
            Some("r2"),
        ),
        (
            json!({"v":"mvp-0.2","type":"snapshot.get","id":"r3","payload":"x"}),
            texts::BAD_PAYLOAD,
            Some("r3"),
        ),
        (
            json!({"v":"mvp-0.2","type":"snapshot.get","id":"r4"}),
            texts::BAD_PAYLOAD,
            Some("r4"),
        ),
        (
            json!({"v":"mvp-0.2","type":"snapshot.get","id":"r5","payload":null}),
            texts::BAD_PAYLOAD,
            Some("r5"),
        ),
        (
            json!({"v":2,"type":"snapshot.get","id":"r6","payload":{}}),
            texts::BAD_VERSION,
            Some("r6"),
        ),
        (
            json!({"v":"MVP-0.2","type":"snapshot.get","id":"r7","payload":{}}),
            texts::BAD_VERSION,
            Some("r7"),
        ),
        (
            json!({"type":["tool.call"],"id":"r8"}),
            texts::INVALID_JSON,
            Some("r8"),
        ),
    ];
    for (msg, text, reply_to) in cases {
        w.h.send(w.agent, msg.clone());
        assert_eq!(
            error_of(&w.h.one(w.agent)),
            (
                "INVALID_MESSAGE".into(),
                text.into(),
                reply_to.map(str::to_owned)
            ),
            "{msg}"
        );
        assert!(w.h.take(w.host).is_empty());
    }
    // Duplicate envelope fields are ambiguous: refused rather than guessed.
    w.h.send_text(
        w.agent,
        r#"{"v":"mvp-0.2","type":"snapshot.get","type":"tool.call","payload":{}}"#,
    );
    assert_eq!(error_of(&w.h.one(w.agent)).0, "INVALID_MESSAGE");
    w.assert_unharmed();
}

/// `{"v":..,"type":t,"id":"deep-1","payload":{"x":[[...]]}}`, nested `depth` levels in all
/// (the envelope object counts as one).
fn nested_message(t: &str, depth: usize) -> String {
    let inner = depth - 2; // the envelope and the payload object
    format!(
        r#"{{"v":"mvp-0.2","type":"{t}","id":"deep-1","payload":{{"x":{}{}}}}}"#,
        "[".repeat(inner),
        "]".repeat(inner)
    )
}

#[test]
fn messages_nested_deeper_than_the_limit_are_refused_never_forwarded_or_logged() {
    // The relay skips payloads without building a tree (no stack cost), but what it forwards
    // and logs must read back: a message deeper than `max_json_depth` (127, what serde_json
    // reads) is INVALID_MESSAGE with replyTo, reaches nobody and leaves no study record but
    // the refusal's, which holds its type and size and none of its payload.
    let mut w = World::new(RelayConfig::default());
    let limit = Limits::default().max_json_depth;
    assert_eq!(limit, agentwire_core::DEFAULT_MAX_JSON_DEPTH - 1);
    for (who, to) in [(w.agent, w.host), (w.host, w.agent)] {
        let t = if who == w.agent {
            "agent.message"
        } else {
            "state.updated"
        };
        for depth in [limit + 1, limit + 2, 100_000] {
            let deep = nested_message(t, depth);
            w.h.clear();
            w.h.send_text(who, &deep);
            let (code, text, reply_to) = error_of(&w.h.one(who));
            assert_eq!(code, "INVALID_MESSAGE", "{depth}");
            assert!(
                text.contains(&format!("deeper than {limit} levels")),
                "{text}"
            );
            assert_eq!(reply_to.as_deref(), Some("deep-1"));
            assert!(w.h.take(to).is_empty(), "forwarded at depth {depth}");
            let logs = w.h.logs();
            assert_eq!(logs.len(), 1, "only the refusal is recorded: {logs:?}");
            let record: serde_json::Value =
                serde_json::from_str(logs[0].payload.as_str()).expect("record reads back");
            assert_eq!(record["refusedType"], t);
            assert_eq!(record["refusedBytes"], deep.len());
            assert!(!logs[0].payload.as_str().contains("[["));
        }
    }
    // A deep unterminated one is refused as invalid JSON.
    let deep = nested_message("agent.message", 100_000);
    w.h.send_text(w.agent, &deep[..deep.len() - 10]);
    assert_eq!(error_of(&w.h.one(w.agent)).0, "INVALID_MESSAGE");
    w.assert_unharmed();
}

#[test]
fn a_message_at_the_depth_limit_is_forwarded_and_its_log_line_reads_back() {
    let mut w = World::new(RelayConfig::default());
    let limit = Limits::default().max_json_depth;
    let at = nested_message("agent.message", limit);
    w.h.clear();
    w.h.send_text(w.agent, &at);
    assert_eq!(w.h.one(w.host)["id"], "deep-1");
    let logs = w.h.logs();
    assert_eq!(logs.len(), 2, "in and out");
    for (i, record) in logs.iter().enumerate() {
        let mut line = Vec::new();
        record.write_jsonl(i as u64, &mut line);
        let v: serde_json::Value =
            serde_json::from_slice(&line).expect("the study-log line parses with serde_json");
        assert_eq!(v["type"], "agent.message");
    }
    w.assert_unharmed();
}

#[test]
fn a_long_type_is_echoed_cut_to_128_bytes() {
    let mut w = World::new(RelayConfig::default());
    let t = "t".repeat(10_000);
    w.h.msg(w.agent, &t, None, json!({}));
    let (_, text, _) = error_of(&w.h.one(w.agent));
    assert_eq!(
        text,
        format!(
            "Unsupported message type for agent role: {}",
            "t".repeat(128)
        )
    );
}

#[test]
fn an_agent_cannot_answer_or_push_to_other_agents() {
    let mut w = World::new(RelayConfig::default());
    let second = w.h.agent();
    w.h.msg(w.agent, "snapshot.get", Some("victim"), json!({}));
    w.h.clear();
    // Another agent sends host-only types, or a message carrying replyTo: none reach agents.
    w.h.send(
        second,
        json!({"v":"mvp-0.2","type":"snapshot.state","replyTo":"victim","payload":{}}),
    );
    assert_eq!(error_of(&w.h.one(second)).0, "INVALID_MESSAGE");
    w.h.send(
        second,
        json!({"v":"mvp-0.2","type":"agent.message","replyTo":"victim","payload":{"text":"x"}}),
    );
    assert_eq!(w.h.one(w.host)["type"], "agent.message");
    assert!(w.h.take(w.agent).is_empty());
    assert_eq!(w.h.relay.pending_requests(w.agent), 1);
}

#[test]
fn a_flooding_connection_is_rate_limited_and_nobody_else_is() {
    let mut limits = Limits::default();
    limits.rate = Some(RateLimit {
        per_second: 10,
        burst: 20,
    });
    let mut w = World::new(RelayConfig::default().with_limits(limits));
    for i in 0..500 {
        w.h.msg(w.agent, "agent.message", None, json!({"text": i}));
    }
    let to_host = w.h.take(w.host).len();
    assert!(to_host < 20, "{to_host}");
    let errors = w.h.take(w.agent);
    assert!(errors.len() > 480);
    assert!(errors.iter().all(|e| error_of(e).1 == texts::RATE_LIMITED));
    // The other session is untouched; the flooder's own budget refills with time.
    w.h.clear();
    w.h.msg(w.other_agent, "snapshot.get", Some("p"), json!({}));
    assert_eq!(w.h.one(w.other_host)["id"], "p");
    w.h.now += std::time::Duration::from_secs(1);
    w.assert_unharmed();
}

#[test]
fn frames_on_unknown_connections_are_ignored() {
    let mut w = World::new(RelayConfig::default());
    w.h.clear();
    let ghost = ConnId::new(999);
    w.h.msg(ghost, "relay.join", None, json!({"role":"host"}));
    w.h.disconnect(ghost);
    w.h.relay.handle_timeout(w.h.now);
    w.h.drain();
    assert!(w.h.outs.is_empty(), "{:?}", w.h.outs);
    w.assert_unharmed();
}

//! The orchestrator's wire-level features: HMAC authentication (decision 37), sequence ids
//! and loss detection (38), priority (39), adaptive compression and the protocol
//! analytics beside the spec's Prometheus families.

mod common;

use agentwire_core::{ConnId, Frame, FrameBuf, Machine, Output, PeerInfo, SequentialIds};
use common::{is_compressed, noise, t0};
use mcpw_codec::orchestrator::{Orchestrator, OrchestratorConfig, OrchestratorEvent, TaskSpec};
use mcpw_codec::signing::Signer;
use mcpw_codec::{
    AgentHeartbeat, AgentRegister, Body, Codec, CompressPolicy, ErrorCode, Flags, Form, Message,
    MessageType, OtherCall,
};
use serde_json::{json, Value};

/// An orchestrator with `cfg` and no rate limit, and what it sent, raw.
struct Wire {
    o: Orchestrator,
    now: std::time::Instant,
    codec: Codec,
    events: Vec<OrchestratorEvent>,
}

impl Wire {
    fn new(cfg: OrchestratorConfig) -> Self {
        let now = t0();
        Self {
            o: Orchestrator::new(cfg.with_rate(None), SequentialIds::new(1), now, 0),
            now,
            codec: Codec::default(),
            events: Vec::new(),
        }
    }

    fn connect(&mut self, n: u64) -> ConnId {
        let c = ConnId::new(n);
        self.o.handle_connect(c, &PeerInfo::new(None), self.now);
        self.frames();
        c
    }

    /// Frames sent since the last call, by connection; events are kept.
    fn frames(&mut self) -> Vec<(ConnId, FrameBuf)> {
        let mut v = Vec::new();
        while let Some(out) = self.o.poll_output() {
            match out {
                Output::Send { conn, frame } => v.push((conn, frame)),
                Output::Event(e) => self.events.push(e),
                Output::Close { .. } => {}
            }
        }
        v
    }

    /// `msg` as a 24-byte frame (`signer`: sealed).
    fn binary(&mut self, msg: &Message, signer: Option<&Signer>) -> FrameBuf {
        let f = self.codec.encode_ws(msg, Form::Binary).unwrap();
        signer.map_or(f.clone(), |s| s.seal(f))
    }

    fn feed(&mut self, c: ConnId, f: &FrameBuf) -> Vec<Message> {
        self.o.handle_frame(c, f.as_frame(), self.now);
        let frames = self.frames();
        frames
            .into_iter()
            .filter(|(k, _)| *k == c)
            .map(|(_, f)| self.codec.decode_ws(f.as_frame()).unwrap().0)
            .collect()
    }
}

fn register(id: &str, caps: Value) -> Message {
    let p: AgentRegister = serde_json::from_value(json!({
        "agent_id": id, "capabilities": caps, "resources": {"max_concurrent_tasks": 4}
    }))
    .unwrap();
    Message::new(MessageType::REQUEST, Body::AgentRegister(p))
}

fn ping() -> Message {
    Message::new(
        MessageType::REQUEST,
        Body::Other(OtherCall::new("ping", Value::Null)),
    )
}

fn error_code(m: &Message) -> Option<ErrorCode> {
    match &m.body {
        Body::Error(e) => Some(e.code),
        _ => None,
    }
}

#[test]
fn unsigned_or_badly_signed_frames_are_refused_with_4001_and_good_ones_are_answered_signed() {
    let key = Signer::new(b"shared secret");
    let mut w = Wire::new(OrchestratorConfig::default().with_hmac_secret(b"shared secret"));
    let c = w.connect(1);

    // Unsigned text: refused with 4001 naming the message, in a signed reply.
    let text = r#"{"id":"r1","type":0,"method":"agent.register","params":{"agent_id":"a"}}"#;
    w.o.handle_frame(c, Frame::Text(text), w.now);
    let sent = w.frames();
    assert_eq!(sent.len(), 1);
    let reply = &sent[0].1;
    assert_eq!(key.open(reply.as_frame()), Ok(reply.as_frame()), "signed");
    let (m, _) = w.codec.decode_ws(reply.as_frame()).unwrap();
    assert_eq!(error_code(&m), Some(ErrorCode::AUTHENTICATION_FAILED));
    assert_eq!(m.id.as_deref(), Some("r1"));
    assert!(w.o.agent("a").is_none(), "not handled");

    // Signed with another key: refused too.
    let other = Signer::new(b"guess");
    let forged = other.seal(FrameBuf::text(text));
    w.o.handle_frame(c, forged.as_frame(), w.now);
    let sent = w.frames();
    let (m, _) = w.codec.decode_ws(sent[0].1.as_frame()).unwrap();
    assert_eq!(error_code(&m), Some(ErrorCode::AUTHENTICATION_FAILED));

    // A binary frame with a flipped tag bit: refused, named by its sequence id.
    let reg = register("a", json!([])).with_seq(1);
    let good = w.binary(&reg, Some(&key));
    let mut bad = good.as_bytes().to_vec();
    *bad.last_mut().unwrap() ^= 1;
    w.o.handle_frame(c, Frame::Binary(&bad), w.now);
    let sent = w.frames();
    let opened = key.open(sent[0].1.as_frame()).expect("signed");
    let m = w.codec.decode_ws(opened).unwrap().0;
    assert_eq!(error_code(&m), Some(ErrorCode::AUTHENTICATION_FAILED));
    assert_eq!(m.seq, 1);

    // Well signed: handled, answered with a good tag.
    w.o.handle_frame(c, good.as_frame(), w.now);
    let sent = w.frames();
    let opened = key.open(sent[0].1.as_frame()).expect("signed");
    let m = w.codec.decode_ws(opened).unwrap().0;
    assert!(matches!(m.body, Body::RegistrationConfirmed(_)), "{m:?}");
    assert!(w.o.agent("a").is_some());
    assert_eq!(w.o.metrics().errors(ErrorCode::AUTHENTICATION_FAILED), 3);
}

#[test]
fn sequence_gaps_are_counted_and_reported_and_duplicates_are_dropped() {
    let mut w = Wire::new(OrchestratorConfig::default());
    let c = w.connect(1);
    let reg = register("a", json!([])).with_seq(10);
    let f = w.binary(&reg, None);
    assert_eq!(w.feed(c, &f).len(), 1, "registered");

    let p = w.binary(&ping().with_seq(11), None);
    assert_eq!(w.feed(c, &p).len(), 1, "in order: answered");
    assert_eq!(w.feed(c, &p).len(), 0, "the same id again: dropped");
    let old = w.binary(&ping().with_seq(3), None);
    assert_eq!(w.feed(c, &old).len(), 0, "an older id: dropped");

    let later = w.binary(&ping().with_seq(14), None);
    assert_eq!(w.feed(c, &later).len(), 1, "after a gap: still answered");
    assert!(w.events.contains(&OrchestratorEvent::SequenceGap {
        conn: c,
        expected: 12,
        received: 14
    }));
    assert!(w
        .events
        .contains(&OrchestratorEvent::SequenceDuplicate { conn: c, seq: 11 }));
    let m = w.o.metrics();
    assert_eq!((m.sequence_gaps(), m.sequence_duplicates()), (2, 2));
    let text = m.render();
    assert!(text.contains("mcpw_sequence_gaps_total 2\n"), "{text}");
    assert!(
        text.contains("mcpw_sequence_duplicates_total 2\n"),
        "{text}"
    );

    // Answers echo the request's id and are not numbered: the same answer id twice is fine.
    let beat = Message::new(
        MessageType::NOTIFICATION,
        Body::AgentHeartbeat(AgentHeartbeat {
            agent_id: "a".into(),
            status: None,
            metrics: None,
            workload: None,
        }),
    );
    let pong = Message::new(
        MessageType::PONG,
        Body::Other(OtherCall::new("", json!({"pong": true}))),
    )
    .with_seq(14);
    for m in [pong.clone(), pong, beat.with_seq(15)] {
        let f = w.binary(&m, None);
        w.feed(c, &f);
    }
    assert_eq!(w.o.metrics().sequence_duplicates(), 2);
    assert_eq!(w.o.metrics().sequence_gaps(), 2);
}

#[test]
fn what_the_orchestrator_starts_is_numbered_per_connection_from_1() {
    let mut w = Wire::new(OrchestratorConfig::default());
    let caps = json!([{"name": "code_review", "confidence": 0.9}]);
    let mut conns = Vec::new();
    for (n, id) in [(1, "a"), (2, "b")] {
        let c = w.connect(n);
        let f = w.binary(&register(id, caps.clone()).with_seq(1), None);
        w.feed(c, &f);
        conns.push(c);
    }
    for i in 0..6 {
        let spec = TaskSpec::new("code_review").with_id(format!("t{i}"));
        w.o.submit_task(spec, w.now).unwrap();
    }
    let mut seqs: Vec<(ConnId, u64)> = Vec::new();
    for (c, f) in w.frames() {
        let m = w.codec.decode_ws(f.as_frame()).unwrap().0;
        assert!(matches!(m.body, Body::TaskAssigned(_)));
        seqs.push((c, m.seq));
    }
    for c in conns {
        let mine: Vec<u64> = seqs.iter().filter(|(k, _)| *k == c).map(|s| s.1).collect();
        assert!(!mine.is_empty());
        assert_eq!(
            mine,
            (1..=mine.len() as u64).collect::<Vec<_>>(),
            "{seqs:?}"
        );
    }
}

#[test]
fn errors_carry_the_priority_flag_and_answers_do_not() {
    let mut w = Wire::new(OrchestratorConfig::default());
    let c = w.connect(1);
    let unknown = Message::new(
        MessageType::REQUEST,
        Body::Other(OtherCall::new("no.such", Value::Null)),
    )
    .with_seq(1);
    let f = w.binary(&unknown, None);
    let got = w.feed(c, &f);
    assert_eq!(error_code(&got[0]), Some(ErrorCode::METHOD_NOT_FOUND));
    assert!(got[0].flags.contains(Flags::PRIORITY), "{:?}", got[0].flags);
    let f = w.binary(&ping().with_seq(2), None);
    let got = w.feed(c, &f);
    assert!(!got[0].flags.contains(Flags::PRIORITY));
}

/// The `task.assigned` frame sent for a task whose context is `context`.
fn assigned_frame(policy: CompressPolicy, context: Value) -> Vec<u8> {
    let mut w = Wire::new(OrchestratorConfig::default().with_compression(policy));
    let c = w.connect(1);
    let caps = json!([{"name": "code_review", "confidence": 0.9}]);
    let f = w.binary(&register("a", caps).with_seq(1), None);
    w.feed(c, &f);
    let spec = TaskSpec::new("code_review").with_context(context);
    w.o.submit_task(spec, w.now).unwrap();
    let sent = w.frames();
    sent[0].1.as_bytes().to_vec()
}

#[test]
fn adaptive_compression_skips_payloads_that_look_incompressible() {
    let repetitive = json!({"files": vec!["src/main.go"; 300]});
    let random = json!({ "blob": noise() });
    let cutoff = CompressPolicy::Entropy {
        max_bits_per_byte: 5.0,
    };
    assert!(is_compressed(&assigned_frame(cutoff, repetitive.clone())));
    assert!(!is_compressed(&assigned_frame(cutoff, random.clone())));
    // The reference's rule tries gzip on both and keeps what is smaller.
    assert!(is_compressed(&assigned_frame(
        CompressPolicy::IfSmaller,
        repetitive
    )));
    assert!(is_compressed(&assigned_frame(
        CompressPolicy::IfSmaller,
        random.clone()
    )));
    // JSON text never reaches the spec's 6.5 bits per byte: its cut-off compresses it.
    assert!(is_compressed(&assigned_frame(
        CompressPolicy::SPEC_ENTROPY,
        random
    )));
}

#[test]
fn protocol_analytics_sit_beside_the_spec_families() {
    let mut w = Wire::new(OrchestratorConfig::default());
    let a = w.connect(1);
    let b = w.connect(2);
    w.o.handle_disconnect(b, w.now);
    w.frames();
    // A compressed request in, a compressed task out.
    let caps = json!([{"name": "code_review", "confidence": 0.9}]);
    let mut reg = register("a", caps);
    if let Body::AgentRegister(p) = &mut reg.body {
        p.metadata = Some(json!({"notes": vec!["the same words again"; 200]}));
    }
    let f = w.binary(&reg.with_seq(1), None);
    let in_bytes = f.len();
    w.feed(a, &f);
    let spec = TaskSpec::new("code_review").with_context(json!({"f": vec!["x.go"; 500]}));
    w.o.submit_task(spec, w.now).unwrap();
    w.frames();
    // Two errors of one code, one of another.
    for (i, text) in ["{", "[]"].iter().enumerate() {
        w.o.handle_frame(a, Frame::Text(text), w.now);
        let _ = i;
    }
    let unknown = r#"{"id":"u","type":0,"method":"no.such"}"#;
    w.o.handle_frame(a, Frame::Text(unknown), w.now);
    w.frames();

    let m = w.o.metrics();
    assert_eq!(m.peak_connections(), 2);
    assert_eq!(m.errors(ErrorCode::INVALID_MESSAGE), 2);
    assert_eq!(m.errors(ErrorCode::METHOD_NOT_FOUND), 1);
    assert!((m.error_rate(ErrorCode::INVALID_MESSAGE) - 0.5).abs() < 1e-9);
    let avg_in = (in_bytes + 1 + 2 + unknown.len()) as f64 / 4.0;
    assert!((m.average_message_size(true) - avg_in).abs() < 1e-9);
    let c = m.compression();
    assert!(c.ratio_in().unwrap() > 5.0, "{c:?}");
    assert!(c.ratio_out().unwrap() > 5.0, "{c:?}");

    let text = m.render();
    for family in [
        "# TYPE websocket_connections_active gauge",
        "# TYPE websocket_messages_total counter",
        "# TYPE websocket_message_latency_seconds histogram",
        "# TYPE mcpw_compression_ratio gauge",
        "# TYPE mcpw_errors_total counter",
        "# TYPE mcpw_error_rate gauge",
        "# TYPE mcpw_message_size_bytes_avg gauge",
        "# TYPE mcpw_connections_peak gauge",
    ] {
        assert!(text.contains(family), "{family} missing from\n{text}");
    }
    assert!(
        text.contains("mcpw_errors_total{code=\"4000\"} 2\n"),
        "{text}"
    );
    assert!(
        text.contains("mcpw_errors_total{code=\"4004\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("mcpw_error_rate{code=\"4000\"} 0.5\n"),
        "{text}"
    );
    assert!(text.contains("mcpw_connections_peak 2\n"), "{text}");
    assert!(
        text.contains(&format!(
            "mcpw_message_size_bytes_avg{{direction=\"in\"}} {avg_in}\n"
        )),
        "{text}"
    );
    assert!(
        text.contains("mcpw_frames_total{direction=\"in\"} 4\n"),
        "{text}"
    );
}

#[test]
fn queued_tasks_go_out_by_priority_then_in_submission_order() {
    let mut e = common::Env::new(OrchestratorConfig::default());
    for (id, priority) in [
        ("low", 1),
        ("high", 5),
        ("mid", 3),
        ("high-2", 5),
        ("low-2", 1),
    ] {
        let spec = TaskSpec::new("code_review")
            .with_id(id)
            .with_priority(priority);
        e.o.submit_task(spec, e.now).unwrap();
    }
    e.drain();
    // One agent with room for all of them: they are assigned in queue order.
    let c = e.connect(1);
    e.send(
        c,
        json!({"id": "r", "type": 0, "method": "agent.register", "params": {
            "agent_id": "a", "capabilities": [{"name": "code_review", "confidence": 0.9}],
            "resources": {"max_concurrent_tasks": 8}}}),
    );
    let order: Vec<String> = e
        .take(c)
        .iter()
        .filter(|m| m["method"] == "task.assigned")
        .map(|m| m["params"]["task_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(order, ["high", "high-2", "mid", "low", "low-2"]);
}

#[test]
fn each_connection_keeps_the_version_its_upgrade_selected() {
    let mut w = Wire::new(OrchestratorConfig::default());
    let two = ConnId::new(1);
    let peer = PeerInfo::new(None).with_subprotocol("mcp.v2");
    w.o.handle_connect(two, &peer, w.now);
    let one = ConnId::new(2);
    let peer = PeerInfo::new(None).with_subprotocol("mcp.v1");
    w.o.handle_connect(one, &peer, w.now);
    let none = w.connect(3);
    assert_eq!(w.o.protocol_version(two), Some(2));
    assert_eq!(w.o.protocol_version(one), Some(1));
    assert_eq!(
        w.o.protocol_version(none),
        Some(1),
        "no subprotocol: the header's 1"
    );
    assert_eq!(w.o.protocol_version(ConnId::new(9)), None);
}

#[test]
fn with_a_linger_small_notifications_leave_together_and_errors_do_not_wait() {
    use std::time::Duration;
    let linger = Duration::from_millis(20);
    let mut e = common::Env::new(OrchestratorConfig::default().with_batch_linger(Some(linger)));
    let c = e.connect(1);
    e.send(
        c,
        json!({"id": "r", "type": 0, "method": "agent.register", "params": {
            "agent_id": "a", "capabilities": [{"name": "code_review", "confidence": 0.9}],
            "resources": {"max_concurrent_tasks": 8}}}),
    );
    let got = e.take(c);
    assert_eq!(got.len(), 1, "the answer does not wait: {got:?}");
    for i in 0..3 {
        let spec = TaskSpec::new("code_review").with_id(format!("t{i}"));
        e.o.submit_task(spec, e.now).unwrap();
    }
    e.drain();
    assert!(e.take(c).is_empty(), "held for the linger");
    // An error goes at once, ahead of what waits.
    e.send(c, json!({"id": "u", "type": 0, "method": "no.such"}));
    let got = e.take(c);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["error"]["code"], 4004);
    e.advance(linger - Duration::from_millis(1));
    assert!(e.take(c).is_empty(), "not before the linger ends");
    e.advance(Duration::from_millis(1));
    let got = e.take(c);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["type"], 6, "one batch: {got:?}");
    let ids: Vec<&str> = got[0]["params"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["params"]["task_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["t0", "t1", "t2"]);
    // Off (the default), the same tasks leave one by one at once.
    let mut e = common::Env::new(OrchestratorConfig::default());
    let c = e.register(1, "a", common::review(0.9));
    let spec = TaskSpec::new("code_review").with_id("now");
    e.o.submit_task(spec, e.now).unwrap();
    e.drain();
    assert_eq!(e.take(c)[0]["method"], "task.assigned");
}

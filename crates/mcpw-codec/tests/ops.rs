//! What the real Go server does that peers rely on, and what no peer may do to us: the ping
//! reply's body, error replies that name their message, the batch limit's real count, and
//! the nesting bound on everything the orchestrator reads, forwards or stores. Simulated
//! time, no sockets.

use std::time::{Duration, Instant};

use agentwire_core::{ConnId, Frame, FrameBuf, Machine, Output, PeerInfo, Rate, SequentialIds};
use mcpw_codec::orchestrator::{CommandError, Orchestrator, OrchestratorConfig, TaskSpec};
use mcpw_codec::{
    Body, Codec, CodecConfig, DecodeError, ErrorCode, Message, MessageType, OtherCall,
};
use serde_json::{json, Value};

/// The wall clock (Unix ms) at the orchestrator's start.
const START_MS: u64 = 1_735_140_600_000;

#[allow(clippy::disallowed_methods)] // the one base time of a test
fn t0() -> Instant {
    Instant::now()
}

/// A reply as the test sees it: its form, id or sequence id, type, and body (params,
/// result or error object).
#[derive(Debug, Clone, PartialEq)]
struct Reply {
    binary: bool,
    id: Option<String>,
    seq: u64,
    kind: u8,
    body: Value,
}

fn reply_of(frame: &FrameBuf) -> Reply {
    if let Some(text) = frame.as_text() {
        let v: Value = serde_json::from_str(text).expect("a JSON reply");
        let body = ["params", "result", "error"]
            .iter()
            .find_map(|k| v.get(*k).cloned())
            .unwrap_or(Value::Null);
        return Reply {
            binary: false,
            id: v["id"].as_str().map(str::to_owned),
            seq: 0,
            kind: u8::try_from(v["type"].as_u64().expect("type")).expect("u8"),
            body,
        };
    }
    let msg = Codec::default()
        .decode(frame.as_bytes())
        .expect("the orchestrator writes what the codec reads");
    let body = match msg.body {
        Body::Error(e) => serde_json::to_value(e).expect("error"),
        Body::Other(c) => c.params,
        other => panic!("unexpected body {other:?}"),
    };
    Reply {
        binary: true,
        id: msg.id,
        seq: msg.seq,
        kind: msg.kind.0,
        body,
    }
}

struct Env {
    o: Orchestrator,
    now: Instant,
}

impl Env {
    fn new(cfg: OrchestratorConfig) -> Self {
        let now = t0();
        Self {
            o: Orchestrator::new(cfg, SequentialIds::new(1), now, START_MS),
            now,
        }
    }

    /// Drains the outputs: frames per connection (events and closes are not looked at).
    fn drain(&mut self) -> Vec<(ConnId, FrameBuf)> {
        let mut sent = Vec::new();
        while let Some(out) = self.o.poll_output() {
            if let Output::Send { conn, frame } = out {
                sent.push((conn, frame));
            }
        }
        sent
    }

    fn connect(&mut self, n: u64) -> ConnId {
        let c = ConnId::new(n);
        let peer = PeerInfo::new(None).with_subprotocol("mcp.v1");
        self.o.handle_connect(c, &peer, self.now);
        self.drain();
        c
    }

    fn text(&mut self, c: ConnId, text: &str) -> Vec<(ConnId, Reply)> {
        self.o.handle_frame(c, Frame::Text(text), self.now);
        self.replies()
    }

    fn json(&mut self, c: ConnId, v: &Value) -> Vec<(ConnId, Reply)> {
        self.text(c, &v.to_string())
    }

    fn binary(&mut self, c: ConnId, frame: &[u8]) -> Vec<(ConnId, Reply)> {
        self.o.handle_frame(c, Frame::Binary(frame), self.now);
        self.replies()
    }

    fn replies(&mut self) -> Vec<(ConnId, Reply)> {
        self.drain()
            .iter()
            .map(|(c, f)| (*c, reply_of(f)))
            .collect()
    }

    fn advance(&mut self, d: Duration) {
        self.now += d;
        self.o.handle_timeout(self.now);
        self.drain();
    }

    fn register(&mut self, n: u64, agent: &str) -> ConnId {
        let c = self.connect(n);
        let r = self.json(
            c,
            &json!({"id": format!("r-{agent}"), "type": 0, "method": "agent.register",
                "params": {"agent_id": agent, "capabilities": [{"name": "code_review", "confidence": 0.9}]}}),
        );
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(r[0].1.body["agent_id"], agent, "{r:?}");
        c
    }
}

/// A binary (24-byte header) frame of `msg`.
fn frame_of(msg: &Message) -> Vec<u8> {
    let mut out = Vec::new();
    Codec::default().encode(msg, &mut out).expect("encode");
    out
}

fn ping_frame(seq: u64) -> Vec<u8> {
    frame_of(
        &Message::new(
            MessageType::PING,
            Body::Other(OtherCall::new("ping", Value::Null)),
        )
        .with_seq(seq),
    )
}

/// `n` arrays nested in one another.
fn nested(n: usize) -> Value {
    let text = format!("{}{}", "[".repeat(n), "]".repeat(n));
    // serde_json parses at most 127 levels; build deeper values by hand.
    if n < 120 {
        return serde_json::from_str(&text).expect("JSON");
    }
    let mut v = json!([]);
    for _ in 1..n {
        v = json!([v]);
    }
    v
}

fn nested_text(n: usize) -> String {
    format!("{}{}", "[".repeat(n), "]".repeat(n))
}

// ---- ping ---------------------------------------------------------------------------------

#[test]
fn ping_reply_carries_pong_and_the_unix_ms_timestamp() {
    let mut e = Env::new(OrchestratorConfig::default());
    let c = e.connect(1);
    e.advance(Duration::from_millis(1_500));
    let expected = json!({"pong": true, "timestamp": START_MS + 1_500});

    // A type-4 ping message (JSON form) gets a type-5 pong with its id.
    let r = e.json(c, &json!({"id": "p1", "type": 4}));
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0].1.kind, 5);
    assert_eq!(r[0].1.id.as_deref(), Some("p1"));
    assert_eq!(r[0].1.body, expected);

    // The `ping` method (a request) gets a response with the same body; allowed before
    // agent.register.
    e.advance(Duration::from_millis(250));
    let r = e.json(c, &json!({"id": "p2", "type": 0, "method": "ping"}));
    assert_eq!(r[0].1.kind, 1);
    assert_eq!(r[0].1.id.as_deref(), Some("p2"));
    assert_eq!(
        r[0].1.body,
        json!({"pong": true, "timestamp": START_MS + 1_750})
    );

    // A binary ping gets a binary pong with its sequence id and the same body.
    let r = e.binary(c, &ping_frame(42));
    assert!(r[0].1.binary);
    assert_eq!((r[0].1.kind, r[0].1.seq), (5, 42));
    assert_eq!(
        r[0].1.body,
        json!({"pong": true, "timestamp": START_MS + 1_750})
    );
}

// ---- errors name their message ------------------------------------------------------------

#[test]
fn every_error_reply_names_the_message_that_caused_it() {
    let cfg = OrchestratorConfig::default().with_rate(Some(Rate::per_minute(60, 3)));
    let mut e = Env::new(cfg);
    let c = e.connect(1);
    let b = e.connect(2);
    for i in 0..3 {
        let r = e.json(c, &json!({"id": format!("ok-{i}"), "type": 4}));
        assert_eq!(r[0].1.kind, 5, "{r:?}");
    }
    // Rate limit, JSON form: the refused message's id.
    let r = e.json(c, &json!({"id": "over", "type": 0, "method": "ping"}));
    assert_eq!(r[0].1.kind, 3);
    assert_eq!(r[0].1.body["code"], 4002);
    assert_eq!(r[0].1.id.as_deref(), Some("over"));
    assert!(r[0].1.body["data"]["retry_after_ms"].as_u64().is_some());
    // ... even when the rest of the message is not valid (the id is still readable).
    let r = e.text(c, r#"{"id":"half","type":0,"method":"ping","params":"#);
    assert_eq!(r[0].1.body["code"], 4002);
    assert_eq!(
        r[0].1.id.as_deref(),
        None,
        "an unparsable message has no id"
    );

    // Rate limit, binary form: the sequence id.
    for i in 0..3 {
        let r = e.binary(b, &ping_frame(i + 1));
        assert_eq!(r[0].1.kind, 5);
    }
    let r = e.binary(b, &ping_frame(4242));
    assert!(r[0].1.binary);
    assert_eq!((r[0].1.kind, r[0].1.seq), (3, 4242));
    assert_eq!(r[0].1.body["code"], 4002);
}

#[test]
fn size_and_decode_errors_name_the_message_too() {
    let mut cfg = OrchestratorConfig::default();
    cfg.limits.max_message_bytes = 512;
    let mut e = Env::new(cfg);
    let c = e.connect(1);
    let big =
        json!({"id": "big-1", "type": 0, "method": "ping", "params": {"pad": "x".repeat(600)}});
    let r = e.json(c, &big);
    assert_eq!(r[0].1.body["code"], 4007);
    assert_eq!(r[0].1.id.as_deref(), Some("big-1"));

    let mut bin = ping_frame(77);
    bin.extend_from_slice(&[b' '; 600]);
    let r = e.binary(c, &bin);
    assert_eq!(r[0].1.body["code"], 4007);
    assert_eq!(r[0].1.seq, 77);

    // An unknown method before registering, and unknown message type: still named.
    let r = e.json(c, &json!({"id": "u-1", "type": 0, "method": "no.such"}));
    assert_eq!(r[0].1.body["code"], 4004);
    assert_eq!(r[0].1.id.as_deref(), Some("u-1"));
    let r = e.json(c, &json!({"id": "t-9", "type": 9, "method": "ping"}));
    assert_eq!(r[0].1.kind, 3);
    assert_eq!(r[0].1.id.as_deref(), Some("t-9"));
}

// ---- batch limit --------------------------------------------------------------------------

#[test]
fn the_batch_limit_error_reports_the_real_count() {
    let entry = json!({"id": "x", "type": 4});
    let batch = |n: usize| {
        json!({"id": "b", "type": 6, "params": {"messages": vec![entry.clone(); n]}}).to_string()
    };
    let codec = Codec::default();
    let err = codec.decode_json(batch(1000).as_bytes()).unwrap_err();
    assert!(
        matches!(
            err,
            DecodeError::BatchTooLarge {
                count: 1000,
                max: 100
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "batch of 1000 messages exceeds 100");
    assert_eq!(err.code(), ErrorCode::CONTEXT_TOO_LARGE);
    let err = codec.decode_json(batch(101).as_bytes()).unwrap_err();
    assert_eq!(err.to_string(), "batch of 101 messages exceeds 100");
    assert!(codec.decode_json(batch(100).as_bytes()).is_ok());

    // The orchestrator answers with that message and the batch's id.
    let mut e = Env::new(OrchestratorConfig::default());
    let c = e.connect(1);
    let r = e.text(c, &batch(1000));
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0].1.body["code"], 4007);
    assert_eq!(r[0].1.body["message"], "batch of 1000 messages exceeds 100");
    assert_eq!(r[0].1.id.as_deref(), Some("b"));
}

// ---- nesting depth ------------------------------------------------------------------------

#[test]
fn json_nested_deeper_than_the_limit_is_refused_with_4007() {
    let codec = Codec::default();
    // A 100,000-deep params, and one just over the limit (params are level 2).
    for depth in [100_000, 128] {
        let text = format!(
            r#"{{"id":"d","type":0,"method":"tool.execute","params":{}}}"#,
            nested_text(depth)
        );
        let err = codec.decode_json(text.as_bytes()).unwrap_err();
        assert!(
            matches!(err, DecodeError::TooDeep { limit: 128 }),
            "{err:?}"
        );
        assert_eq!(err.code(), ErrorCode::CONTEXT_TOO_LARGE);
        assert_eq!(err.to_string(), "message nested deeper than 128 levels");
    }
    // 128 levels in all (envelope + 127) pass the bound.
    let text = format!(
        r#"{{"id":"d","type":0,"method":"tool.execute","params":{}}}"#,
        nested_text(127)
    );
    assert!(codec.decode_json(text.as_bytes()).is_ok());

    // A smaller configured limit counts the same way.
    let mut config = CodecConfig::default();
    config.limits.max_json_depth = 10;
    let mut small = Codec::new(config);
    let at = format!(r#"{{"type":0,"method":"a.b","params":{}}}"#, nested_text(9));
    let over = format!(
        r#"{{"type":0,"method":"a.b","params":{}}}"#,
        nested_text(10)
    );
    assert!(small.decode_json(at.as_bytes()).is_ok());
    assert!(matches!(
        small.decode_json(over.as_bytes()),
        Err(DecodeError::TooDeep { limit: 10 })
    ));

    // A 24-byte frame's payload is the params: one level less than in the JSON form, so
    // that what is accepted in one form can be forwarded in the other.
    let frame = |depth: usize| {
        frame_of(&Message::new(
            MessageType::REQUEST,
            Body::Other(OtherCall::new("tool.execute", nested(depth))),
        ))
    };
    assert!(small.decode(&frame(9)).is_ok());
    assert!(matches!(
        small.decode(&frame(10)),
        Err(DecodeError::TooDeep { limit: 10 })
    ));
    // gzip does not hide depth: a 200-deep payload over the compression threshold.
    let deep = frame_of(&Message::new(
        MessageType::REQUEST,
        Body::Other(OtherCall::new(
            "tool.execute",
            json!({"pad": "x".repeat(2_000), "deep": nested(200)}),
        )),
    ));
    assert!(
        mcpw_codec::Header::parse(deep[..24].try_into().unwrap(), &Default::default())
            .unwrap()
            .flags
            .contains(mcpw_codec::Flags::COMPRESSED)
    );
    assert!(matches!(
        Codec::default().decode(&deep),
        Err(DecodeError::TooDeep { limit: 128 })
    ));
}

#[test]
fn deep_params_are_never_forwarded_or_stored() {
    let mut cfg = OrchestratorConfig::default();
    cfg.limits.max_json_depth = 12;
    let mut e = Env::new(cfg);
    let a = e.register(1, "agent-a");
    let b = e.register(2, "agent-b");
    let collab = |id: &str, depth: usize| {
        json!({"id": id, "type": 0, "method": "collaboration.request",
            "params": {"task_id": "t-1", "requesting_agent": "agent-a",
                "collaboration_type": "consensus", "required_agents": ["agent-b"],
                "context": nested(depth)}})
    };
    // envelope 1, params 2, then the context's own levels: depth 10 makes 12 (the limit),
    // 11 makes 13.
    let r = e.json(a, &collab("deep", 11));
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0].0, a, "nothing reaches agent-b: {r:?}");
    assert_eq!(r[0].1.body["code"], 4007);
    assert_eq!(r[0].1.id.as_deref(), Some("deep"));

    let r = e.json(a, &collab("ok", 10));
    let to_b: Vec<_> = r.iter().filter(|(c, _)| *c == b).collect();
    assert_eq!(to_b.len(), 1, "forwarded at the limit: {r:?}");
    assert_eq!(to_b[0].1.body["context"], nested(10));

    // state.sync (stored in the CRDT store) is refused the same way.
    let sync = json!({"id": "s", "type": 2, "method": "state.sync",
        "params": {"agent_id": "agent-a", "vector_clock": {"agent-a": 1},
            "operations": [{"type": "g-counter", "key": "k", "increment": 1,
                "actor": "agent-a", "meta": nested(11)}]}});
    let r = e.json(a, &sync);
    assert_eq!(r[0].1.body["code"], 4007, "{r:?}");
    assert!(e.o.state().clock().is_empty(), "nothing was merged");
}

#[test]
fn task_payloads_deeper_than_task_assigned_allows_are_refused() {
    let mut cfg = OrchestratorConfig::default();
    cfg.limits.max_json_depth = 12;
    let mut e = Env::new(cfg);
    let a = e.register(1, "agent-a");
    // context travels at level 3 (envelope, params): 10 levels of its own at most.
    let deep = TaskSpec::new("code_review").with_context(nested(11));
    assert_eq!(
        e.o.submit_task(deep, e.now),
        Err(CommandError::TooDeep {
            field: "context",
            limit: 10
        })
    );
    let deep = TaskSpec::new("code_review").with_requirements(json!({"x": nested(10)}));
    assert!(matches!(
        e.o.submit_task(deep, e.now),
        Err(CommandError::TooDeep {
            field: "requirements",
            ..
        })
    ));
    assert_eq!(e.o.task_count(), 0);
    let ok = TaskSpec::new("code_review")
        .with_id("t-ok")
        .with_context(nested(10));
    assert_eq!(e.o.submit_task(ok, e.now).as_deref(), Ok("t-ok"));
    let sent = e.replies();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, a);
    assert_eq!(sent[0].1.body["context"], nested(10));
    // And the agent's codec, with the same limit, reads what was sent.
    let mut config = CodecConfig::default();
    config.limits.max_json_depth = 12;
    let text = json!({"id": "x", "type": 2, "method": "task.assigned",
        "params": {"task_id": "t-ok", "type": "code_review", "context": nested(10)}})
    .to_string();
    assert!(Codec::new(config).decode_json(text.as_bytes()).is_ok());
}

#[test]
fn a_collaboration_answer_too_deep_to_forward_is_refused_not_forwarded() {
    let mut cfg = OrchestratorConfig::default();
    cfg.limits.max_json_depth = 12;
    let mut e = Env::new(cfg);
    let a = e.register(1, "agent-a");
    let b = e.register(2, "agent-b");
    let c = e.register(3, "agent-c");
    let r = e.json(
        a,
        &json!({"id": "ask", "type": 0, "method": "collaboration.request",
            "params": {"task_id": "t-1", "requesting_agent": "agent-a",
                "collaboration_type": "consensus", "required_agents": ["agent-b", "agent-c"]}}),
    );
    let id_for = |who: ConnId| {
        r.iter()
            .find(|(to, _)| *to == who)
            .and_then(|(_, m)| m.id.clone())
            .expect("forwarded")
    };
    let (to_b, to_c) = (id_for(b), id_for(c));
    // agent-b's answer reads fine where it arrives (2 + 10 levels) but would sit 3 + 10
    // levels down in agent-a's result: agent-b is told, agent-a gets an error in its place.
    let r = e.json(
        b,
        &json!({"id": to_b, "type": 1, "result": {"vote": nested(9)}}),
    );
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0].0, b);
    assert_eq!(r[0].1.body["code"], 4007);
    assert_eq!(r[0].1.id.as_deref(), Some(to_b.as_str()));
    // agent-c's answer fits (3 + 9 levels) and is forwarded as it is.
    let r = e.json(
        c,
        &json!({"id": to_c, "type": 1, "result": {"vote": nested(8)}}),
    );
    let to_a: Vec<_> = r.iter().filter(|(to, _)| *to == a).collect();
    assert_eq!(to_a.len(), 1, "{r:?}");
    let result = &to_a[0].1.body;
    assert_eq!(to_a[0].1.id.as_deref(), Some("ask"));
    assert_eq!(result["responses"]["agent-c"]["vote"], nested(8));
    assert_eq!(result["responses"]["agent-b"]["error"]["code"], 4007);
    assert_eq!(result["complete"], true);
}

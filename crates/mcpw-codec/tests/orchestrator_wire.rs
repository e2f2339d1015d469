//! The orchestrator reads what the real Go code writes: batches (the spec's JSON body and
//! the real binary body), `protocol.set_binary` and the 12-byte form it switches to, and
//! method codes (code 0 with the name in the payload; unknown codes get 4004).

use std::time::Instant;

use agentwire_core::{ConnId, Frame, FrameBuf, Machine, Output, PeerInfo, Rate, SequentialIds};
use mcpw_codec::orchestrator::{Orchestrator, OrchestratorConfig, OrchestratorEvent, TaskSpec};
use mcpw_codec::{Codec, Flags, Form, Header, Message, MessageType, Method};
use serde_json::{json, Value};

#[allow(clippy::disallowed_methods)] // the one base time of a test
fn t0() -> Instant {
    Instant::now()
}

struct Env {
    o: Orchestrator,
    now: Instant,
    conn: ConnId,
    events: Vec<OrchestratorEvent>,
}

impl Env {
    fn new(cfg: OrchestratorConfig) -> Self {
        let now = t0();
        let mut o = Orchestrator::new(cfg, SequentialIds::new(1), now, 1_735_140_600_000);
        let conn = ConnId::new(1);
        o.handle_connect(conn, &PeerInfo::new(None).with_subprotocol("mcp.v1"), now);
        let mut env = Self {
            o,
            now,
            conn,
            events: Vec::new(),
        };
        env.frames();
        env
    }

    /// The frames sent since the last call (events kept aside).
    fn frames(&mut self) -> Vec<FrameBuf> {
        let mut frames = Vec::new();
        while let Some(out) = self.o.poll_output() {
            match out {
                Output::Send { frame, .. } => frames.push(frame),
                Output::Event(e) => self.events.push(e),
                Output::Close { .. } => panic!("unexpected close"),
            }
        }
        frames
    }

    fn text(&mut self, v: &Value) -> Vec<FrameBuf> {
        let t = v.to_string();
        self.o.handle_frame(self.conn, Frame::Text(&t), self.now);
        self.frames()
    }

    fn binary(&mut self, b: &[u8]) -> Vec<FrameBuf> {
        self.o.handle_frame(self.conn, Frame::Binary(b), self.now);
        self.frames()
    }
}

/// A sent frame decoded with the codec: the message, its form, and its JSON form.
fn decode(frame: &FrameBuf) -> (Message, Form, Value) {
    let f = match frame.as_text() {
        Some(t) => Frame::Text(t),
        None => Frame::Binary(frame.as_bytes()),
    };
    let mut codec = Codec::default();
    let (msg, form) = codec
        .decode_ws(f)
        .expect("the orchestrator sends what the codec reads");
    let mut out = Vec::new();
    codec.encode_json(&msg, &mut out).expect("re-encode");
    (msg, form, serde_json::from_slice(&out).expect("JSON"))
}

fn register(id: &str) -> Value {
    json!({"id": id, "type": 0, "method": "agent.register", "params": {
        "agent_id": "agent-1", "agent_type": "reviewer",
        "capabilities": [{"name": "code_review", "confidence": 0.9}]}})
}

#[test]
fn a_batch_is_handled_entry_by_entry_and_answered_as_one_batch() {
    let mut env = Env::new(OrchestratorConfig::default());
    let batch = json!({"id": "b-1", "type": 6, "method": "batch", "params": {"count": 4, "messages": [
        register("r"),
        {"id": "h", "type": 0, "method": "agent.heartbeat", "params": {"agent_id": "agent-1", "status": "healthy"}},
        {"id": "u", "type": 0, "method": "no.such.method", "params": {}},
        {"id": "p", "type": 0, "method": "task.progress", "params": {"task_id": 5}},
    ]}});
    let frames = env.text(&batch);
    assert_eq!(frames.len(), 1, "one batch reply");
    let (msg, form, v) = decode(&frames[0]);
    assert_eq!((msg.kind, form), (MessageType::BATCH, Form::Json));
    assert_eq!(v["id"], "b-1");
    assert_eq!(v["params"]["count"], 4);
    let replies = v["params"]["messages"].as_array().unwrap();
    assert_eq!(replies[0]["id"], "r");
    assert_eq!(replies[0]["method"], "registration.confirmed");
    assert_eq!(replies[1]["id"], "h");
    assert_eq!(replies[1]["type"], 1);
    assert_eq!(replies[1]["params"]["status"], "ok");
    assert_eq!(
        (&replies[2]["id"], &replies[2]["error"]["code"]),
        (&json!("u"), &json!(4004))
    );
    assert_eq!(
        (&replies[3]["id"], &replies[3]["error"]["code"]),
        (&json!("p"), &json!(4005))
    );
    assert!(
        env.o.agent("agent-1").is_some(),
        "the batch's register took effect"
    );
    // A bad entry is answered alone; the others are still handled.
    let frames = env.text(&json!({"id": "b-2", "type": 6, "params": {"messages": [
        {"id": "x", "type": 6, "params": {"messages": []}},
        {"id": "y", "type": 4},
    ]}}));
    let (_, _, v) = decode(&frames[0]);
    let replies = v["params"]["messages"].as_array().unwrap();
    assert_eq!(
        (&replies[0]["id"], &replies[0]["error"]["code"]),
        (&json!("x"), &json!(4000))
    );
    assert_eq!(
        (&replies[1]["id"], &replies[1]["type"]),
        (&json!("y"), &json!(5))
    );
}

/// `createBinaryBatch`: 24-byte header (type 6, flag BATCH, sequence 41), body = count,
/// then length + JSON per message.
fn real_binary_batch(entries: &[&str]) -> Vec<u8> {
    let mut body = (entries.len() as u32).to_be_bytes().to_vec();
    for e in entries {
        body.extend_from_slice(&(e.len() as u32).to_be_bytes());
        body.extend_from_slice(e.as_bytes());
    }
    let mut h = Header::new(MessageType::BATCH, 41, Method::UNKNOWN);
    h.flags = Flags::BATCH;
    h.size = body.len() as u32;
    let mut f = h.to_bytes().to_vec();
    f.extend_from_slice(&body);
    f
}

#[test]
fn a_real_binary_batch_gets_a_binary_batch_reply() {
    let mut env = Env::new(OrchestratorConfig::default());
    let reg = register("r").to_string();
    let frames = env.binary(&real_binary_batch(&[r#"{"id":"m-1","type":4}"#, &reg]));
    assert_eq!(frames.len(), 1);
    let bytes = frames[0].as_bytes();
    assert_eq!(&bytes[..4], b"MCPW");
    assert_eq!(bytes[5], 6, "type batch");
    assert_eq!(&bytes[6..8], &[0, 4], "flag BATCH");
    assert_eq!(
        &bytes[8..16],
        &41u64.to_be_bytes(),
        "the batch's sequence id"
    );
    assert_eq!(
        &bytes[24..28],
        &2u32.to_be_bytes(),
        "the real binary body: count 2"
    );
    let (_, form, v) = decode(&frames[0]);
    assert_eq!(form, Form::Binary);
    let replies = v["params"]["messages"].as_array().unwrap();
    assert_eq!(
        (&replies[0]["id"], &replies[0]["type"]),
        (&json!("m-1"), &json!(5))
    );
    assert_eq!(replies[0]["params"]["pong"], true);
    assert_eq!(replies[1]["method"], "registration.confirmed");
    // The spec's JSON body in a 24-byte frame is answered with the spec's body.
    let mut codec = Codec::default();
    let ping = Message::new(
        MessageType::PING,
        mcpw_codec::Body::Other(mcpw_codec::OtherCall::new("", Value::Null)),
    )
    .with_id("m-2");
    let mut f = Vec::new();
    codec
        .encode(&Message::batch(vec![ping]).with_seq(42), &mut f)
        .unwrap();
    let frames = env.binary(&f);
    assert_eq!(frames[0].as_bytes()[24], b'{');
}

#[test]
fn batch_entries_each_take_a_token_from_the_rate_limit() {
    let cfg = OrchestratorConfig::default().with_rate(Some(Rate::per_minute(60, 3)));
    let mut env = Env::new(cfg);
    let pings: Vec<Value> = (0..5)
        .map(|i| json!({"id": format!("p{i}"), "type": 4}))
        .collect();
    let frames = env.text(&json!({"id": "b", "type": 6, "params": {"messages": pings}}));
    let (_, _, v) = decode(&frames[0]);
    let replies = v["params"]["messages"].as_array().unwrap();
    let codes: Vec<Value> = replies.iter().map(|r| r["error"]["code"].clone()).collect();
    assert_eq!(
        codes,
        [
            Value::Null,
            Value::Null,
            Value::Null,
            json!(4002),
            json!(4002)
        ]
    );
    assert_eq!(replies[4]["id"], "p4", "the refused entry is named");
}

#[test]
fn set_binary_switches_the_connection_to_the_12_byte_form_after_its_reply() {
    let mut env = Env::new(OrchestratorConfig::default());
    let frames = env.text(
        &json!({"id": "s-1", "type": 0, "method": "protocol.set_binary",
        "params": {"enabled": true, "compression": {"enabled": true, "threshold": 64}}}),
    );
    // The reply still goes in the old form.
    let (_, form, v) = decode(&frames[0]);
    assert_eq!(form, Form::Json);
    assert_eq!(
        v,
        json!({"id": "s-1", "type": 1, "params": {"binary_enabled": true,
            "compression_enabled": true, "status": "protocol_updated"}})
    );
    // From now on, text requests are answered in the 12-byte form, gzipped above 64 bytes.
    let frames = env.text(&register("r"));
    let bytes = frames[0].as_bytes();
    assert_eq!((bytes[0], bytes[1]), (1, 1), "version 1, gzip");
    assert_eq!(&bytes[2..4], &[0, 1], "type response");
    let (_, form, v) = decode(&frames[0]);
    assert_eq!(form, Form::Compact);
    assert_eq!(
        (&v["id"], &v["method"]),
        (&json!("r"), &json!("registration.confirmed"))
    );
    // Messages the server starts go in that form too.
    env.o
        .submit_task(TaskSpec::new("code_review").with_id("t-1"), env.now)
        .unwrap();
    let frames = env.frames();
    let (_, form, v) = decode(&frames[0]);
    assert_eq!(
        (form, &v["method"]),
        (Form::Compact, &json!("task.assigned"))
    );
    // A 12-byte request is answered in kind; a 24-byte one in the 24-byte form.
    let mut codec = Codec::default();
    let ping = Message::new(
        MessageType::PING,
        mcpw_codec::Body::Other(mcpw_codec::OtherCall::new("", Value::Null)),
    )
    .with_id("c-1");
    let mut f = Vec::new();
    codec.encode_compact(&ping, &mut f).unwrap();
    let (_, form, v) = decode(&env.binary(&f)[0]);
    assert_eq!(
        (form, &v["id"], &v["type"]),
        (Form::Compact, &json!("c-1"), &json!(5))
    );
    let mut f = Vec::new();
    codec.encode(&ping.clone().with_seq(9), &mut f).unwrap();
    assert_eq!(decode(&env.binary(&f)[0]).1, Form::Binary);
    // Empty params switch it off, after the (12-byte) reply.
    let frames =
        env.text(&json!({"id": "s-2", "type": 0, "method": "protocol.set_binary", "params": null}));
    let (_, form, v) = decode(&frames[0]);
    assert_eq!(form, Form::Compact);
    assert_eq!(v["params"]["binary_enabled"], false);
    let frames = env.text(&json!({"id": "p", "type": 4}));
    assert_eq!(decode(&frames[0]).1, Form::Json);
    // Bad params are 4005 naming the field.
    let frames = env.text(
        &json!({"id": "s-3", "type": 0, "method": "protocol.set_binary",
        "params": {"enabled": "yes"}}),
    );
    let (_, _, v) = decode(&frames[0]);
    assert_eq!(
        (&v["error"]["code"], &v["error"]["data"]["field"]),
        (&json!(4005), &json!("enabled"))
    );
}

#[test]
fn set_binary_without_compression_never_gzips_and_needs_no_registration() {
    let mut env = Env::new(OrchestratorConfig::default());
    env.text(&json!({"id": "s", "type": 0, "method": "protocol.set_binary", "params": {"enabled": true}}));
    let frames = env.text(&register("r"));
    let bytes = frames[0].as_bytes();
    assert_eq!((bytes[0], bytes[1]), (1, 0), "12-byte form, not gzipped");
    // Over 1 KiB of reply, still plain: compression was not enabled.
    let caps: Vec<Value> = (0..40)
        .map(|i| json!({"name": format!("capability_number_{i:03}"), "confidence": 0.5}))
        .collect();
    let frames = env.text(
        &json!({"id": "r2", "type": 0, "method": "agent.register", "params": {
        "agent_id": "agent-1", "capabilities": caps}}),
    );
    let bytes = frames[0].as_bytes();
    assert!(bytes.len() > 1024 + 12);
    assert_eq!((bytes[0], bytes[1]), (1, 0));
}

#[test]
fn method_codes_name_or_miss_their_method() {
    let mut env = Env::new(OrchestratorConfig::default());
    let mut codec = Codec::default();
    // Code 0 with the name in the payload is the named method.
    let payload = json!({"method": "agent.register", "params": register("x")["params"]});
    let mut h = Header::new(MessageType::REQUEST, 12, Method::UNKNOWN);
    let mut f = Vec::new();
    codec
        .encode_frame(h, payload.to_string().as_bytes(), &mut f)
        .unwrap();
    let frames = env.binary(&f);
    let (msg, form, v) = decode(&frames[0]);
    assert_eq!((form, msg.seq), (Form::Binary, 12));
    assert_eq!(v["method"], "registration.confirmed");
    // An unknown code is 4004 (not 4000) and names the request's sequence id.
    h = Header::new(MessageType::REQUEST, 77, Method(999));
    let mut f = Vec::new();
    codec.encode_frame(h, b"{}", &mut f).unwrap();
    let frames = env.binary(&f);
    let (msg, _, v) = decode(&frames[0]);
    assert_eq!(msg.seq, 77);
    assert_eq!(v["error"]["code"], 4004);
    assert_eq!(v["error"]["message"], "method not found: code 999");
}

#[test]
fn a_deferred_answer_to_an_entry_of_a_24_byte_batch_keeps_its_id() {
    let mut env = Env::new(OrchestratorConfig::default());
    env.text(&register("r"));
    let other = ConnId::new(2);
    let peer = PeerInfo::new(None).with_subprotocol("mcp.v1");
    env.o.handle_connect(other, &peer, env.now);
    let reg2 = json!({"id": "r2", "type": 0, "method": "agent.register", "params": {
        "agent_id": "agent-2", "capabilities": [{"name": "code_review", "confidence": 0.5}]}})
    .to_string();
    env.o.handle_frame(other, Frame::Text(&reg2), env.now);
    env.frames();
    // A collaboration request inside a 24-byte batch: its answer comes later, alone.
    let collab = json!({"id": "c", "type": 0, "method": "collaboration.request", "params": {
        "task_id": "t-9", "requesting_agent": "agent-1", "collaboration_type": "consensus",
        "required_agents": ["agent-2"]}})
    .to_string();
    let mut sent = Vec::new();
    env.o.handle_frame(
        env.conn,
        Frame::Binary(&real_binary_batch(&[&collab])),
        env.now,
    );
    while let Some(out) = env.o.poll_output() {
        if let Output::Send { conn, frame } = out {
            sent.push((conn, frame));
        }
    }
    assert!(
        sent.iter().all(|(c, _)| *c == other),
        "nothing to answer yet"
    );
    let (_, _, forwarded) = decode(&sent[0].1);
    let answer =
        json!({"id": forwarded["id"], "type": 1, "params": {"vote": "approve"}}).to_string();
    env.o.handle_frame(other, Frame::Text(&answer), env.now);
    let frames = env.frames();
    // The entry was a JSON-form message matched by its id: its answer keeps the id, so it
    // travels in the JSON form (a 24-byte frame has no place for an id).
    let (_, form, v) = decode(&frames[0]);
    assert_eq!((form, &v["id"]), (Form::Json, &json!("c")));
    assert_eq!(v["params"]["responses"]["agent-2"]["vote"], "approve");
}

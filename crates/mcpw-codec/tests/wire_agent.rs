//! The agent's wire-level features: HMAC authentication (decision 37) and the check of the
//! server's sequence ids (38), driven frame by frame.

mod common;

use std::time::Instant;

use agentwire_core::{ConnId, Frame, FrameBuf, Machine, Output, PeerInfo};
use mcpw_codec::agent::AgentEvent;
use mcpw_codec::signing::Signer;
use mcpw_codec::{
    Agent, AgentConfig, AgentRegister, Body, Codec, ErrorCode, Form, Message, MessageType,
    RegistrationConfirmed, TaskAssigned,
};
use serde_json::json;

#[allow(clippy::disallowed_methods)] // the one base time of a test
fn t0() -> Instant {
    Instant::now()
}

fn config() -> AgentConfig {
    let register: AgentRegister = serde_json::from_value(json!({
        "agent_id": "agent-1", "capabilities": [{"name": "code_review", "confidence": 0.9}]
    }))
    .unwrap();
    AgentConfig::new(register).with_binary(true)
}

fn drain(agent: &mut Agent) -> (Vec<FrameBuf>, Vec<AgentEvent>) {
    let (mut frames, mut events) = (Vec::new(), Vec::new());
    while let Some(out) = agent.poll_output() {
        match out {
            Output::Send { frame, .. } => frames.push(frame),
            Output::Event(e) => events.push(e),
            Output::Close { .. } => {}
        }
    }
    (frames, events)
}

/// The server's `registration.confirmed`, answering sequence id `seq`.
fn confirmed(seq: u64) -> Message {
    let c: RegistrationConfirmed = serde_json::from_value(json!({"agent_id": "agent-1"})).unwrap();
    Message::new(MessageType::RESPONSE, Body::RegistrationConfirmed(c)).with_seq(seq)
}

fn assigned(task: &str, seq: u64) -> Message {
    let t: TaskAssigned =
        serde_json::from_value(json!({"task_id": task, "type": "code_review"})).unwrap();
    Message::new(MessageType::NOTIFICATION, Body::TaskAssigned(t)).with_seq(seq)
}

fn binary(msg: &Message) -> FrameBuf {
    Codec::default().encode_ws(msg, Form::Binary).unwrap()
}

#[test]
fn the_agent_drops_duplicates_and_reports_gaps_of_the_servers_ids() {
    let now = t0();
    let mut a = Agent::new(config());
    let c = ConnId::new(1);
    a.handle_connect(c, &PeerInfo::new(None), now);
    let (sent, _) = drain(&mut a);
    let register = Codec::default().decode_ws(sent[0].as_frame()).unwrap().0;
    a.handle_frame(c, binary(&confirmed(register.seq)).as_frame(), now);
    for (task, seq) in [("t1", 1), ("t2", 2), ("t2-again", 2), ("t5", 5)] {
        a.handle_frame(c, binary(&assigned(task, seq)).as_frame(), now);
    }
    let (_, events) = drain(&mut a);
    let tasks: Vec<&str> = a.tasks().collect();
    assert_eq!(tasks, ["t1", "t2", "t5"], "{events:?}");
    assert!(events.contains(&AgentEvent::SequenceDuplicate { seq: 2 }));
    assert!(events.contains(&AgentEvent::SequenceGap {
        expected: 3,
        received: 5
    }));

    // A new connection starts a new count; what the agent starts keeps rising.
    a.handle_disconnect(c, now);
    drain(&mut a);
    let sent_before = register.seq;
    let c2 = ConnId::new(2);
    a.handle_connect(c2, &PeerInfo::new(None), now);
    let (sent, _) = drain(&mut a);
    let again = Codec::default().decode_ws(sent[0].as_frame()).unwrap().0;
    assert!(again.seq > sent_before);
    a.handle_frame(c2, binary(&confirmed(again.seq)).as_frame(), now);
    a.handle_frame(c2, binary(&assigned("t9", 1)).as_frame(), now);
    let (_, events) = drain(&mut a);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, AgentEvent::SequenceDuplicate { .. })),
        "{events:?}"
    );
    assert_eq!(a.tasks().collect::<Vec<_>>(), ["t9"]);
}

#[test]
fn the_agent_signs_what_it_sends_and_refuses_unsigned_server_frames() {
    let now = t0();
    let key = Signer::new(b"shared");
    let mut a = Agent::new(config().with_hmac_secret(b"shared"));
    let c = ConnId::new(1);
    a.handle_connect(c, &PeerInfo::new(None), now);
    let (sent, _) = drain(&mut a);
    let opened = key
        .open(sent[0].as_frame())
        .expect("the register is signed");
    let register = Codec::default().decode_ws(opened).unwrap().0;
    assert!(matches!(register.body, Body::AgentRegister(_)));

    // Unsigned: reported with 4001, not handled.
    a.handle_frame(c, binary(&confirmed(register.seq)).as_frame(), now);
    let (_, events) = drain(&mut a);
    assert!(
        matches!(&events[..], [AgentEvent::ProtocolViolation(e)] if e.code == ErrorCode::AUTHENTICATION_FAILED),
        "{events:?}"
    );
    assert!(!a.is_registered());
    // Signed with the shared key: handled.
    let good = key.seal(binary(&confirmed(register.seq)));
    a.handle_frame(c, good.as_frame(), now);
    assert!(a.is_registered());
    // Text frames carry the tag as their first member.
    let text = key.seal(FrameBuf::text(r#"{"type":4,"id":"p1"}"#));
    a.handle_frame(c, text.as_frame(), now);
    let (sent, _) = drain(&mut a);
    let pong = key.open(sent[0].as_frame()).expect("signed pong");
    assert!(matches!(pong, Frame::Binary(_)));
}

#[test]
fn the_agent_offers_its_versions_and_keeps_the_one_the_server_selected() {
    let config = config().with_protocol_versions([1, 2]);
    assert_eq!(config.subprotocols(), ["mcp.v2", "mcp.v1"]);
    assert_eq!(
        AgentConfig::new(config.register.clone()).subprotocols(),
        ["mcp.v1"],
        "by default only version 1"
    );
    let now = t0();
    let mut a = Agent::new(config);
    assert_eq!(a.protocol_version(), None);
    let c = ConnId::new(1);
    a.handle_connect(c, &PeerInfo::new(None).with_subprotocol("mcp.v2"), now);
    assert_eq!(a.protocol_version(), Some(2));
    a.handle_disconnect(c, now);
    assert_eq!(a.protocol_version(), None);
}

#[test]
fn the_agent_batches_what_it_starts_within_its_linger() {
    use mcpw_codec::TaskProgress;
    use std::time::Duration;
    let now = t0();
    let linger = Duration::from_millis(50);
    let mut a = Agent::new(config().with_binary(false).with_batch_linger(Some(linger)));
    let c = ConnId::new(1);
    a.handle_connect(c, &PeerInfo::new(None), now);
    let (sent, _) = drain(&mut a);
    assert_eq!(sent.len(), 1, "the register does not wait");
    let register = Codec::default().decode_ws(sent[0].as_frame()).unwrap().0;
    let reply = Codec::default()
        .encode_ws(
            &confirmed(0).with_id(register.id.clone().unwrap()),
            Form::Json,
        )
        .unwrap();
    a.handle_frame(c, reply.as_frame(), now);
    let task = Codec::default()
        .encode_ws(&assigned("t1", 0), Form::Json)
        .unwrap();
    a.handle_frame(c, task.as_frame(), now);
    drain(&mut a);
    for p in [0.25, 0.5] {
        let report: TaskProgress =
            serde_json::from_value(json!({"task_id": "t1", "agent_id": "", "progress": p}))
                .unwrap();
        a.report_progress(report).unwrap();
    }
    let (sent, _) = drain(&mut a);
    assert!(sent.is_empty(), "held for the linger");
    // A ping's answer does not wait.
    a.handle_frame(c, Frame::Text(r#"{"id":"p","type":4}"#), now);
    let (sent, _) = drain(&mut a);
    assert_eq!(sent.len(), 1);
    assert!(a.poll_timeout().is_some_and(|t| t <= now + linger));
    a.handle_timeout(now + linger);
    let (sent, _) = drain(&mut a);
    assert_eq!(sent.len(), 1, "one batch");
    let batch = Codec::default().decode_ws(sent[0].as_frame()).unwrap().0;
    match batch.body {
        Body::Batch(entries) => assert_eq!(entries.len(), 2),
        other => panic!("not a batch: {other:?}"),
    }
}

/// The 24-byte frame an agent with compression `policy` sends for a `task.complete` whose
/// result summary is `summary`.
fn completion_frame(policy: mcpw_codec::CompressPolicy, summary: String) -> Vec<u8> {
    use mcpw_codec::{TaskComplete, TaskResult};
    let now = t0();
    let mut a = Agent::new(config().with_compression(policy));
    let c = ConnId::new(1);
    a.handle_connect(c, &PeerInfo::new(None), now);
    let (sent, _) = drain(&mut a);
    let register = Codec::default().decode_ws(sent[0].as_frame()).unwrap().0;
    a.handle_frame(c, binary(&confirmed(register.seq)).as_frame(), now);
    a.handle_frame(c, binary(&assigned("t1", 1)).as_frame(), now);
    drain(&mut a);
    let done = TaskComplete {
        task_id: "t1".into(),
        agent_id: "agent-1".into(),
        status: Some("completed".into()),
        duration_ms: None,
        result: Some(TaskResult {
            summary: Some(summary),
            findings: None,
            metrics: None,
        }),
        resource_usage: None,
        idempotency_key: None,
    };
    a.complete_task(done).unwrap();
    let (sent, _) = drain(&mut a);
    assert_eq!(sent.len(), 1);
    sent[0].as_bytes().to_vec()
}

#[test]
fn the_agents_adaptive_compression_skips_payloads_that_look_incompressible() {
    use common::{is_compressed, noise};
    use mcpw_codec::CompressPolicy;
    let repetitive = "src/main.go ".repeat(300);
    let random = noise();
    let cutoff = CompressPolicy::Entropy {
        max_bits_per_byte: 5.0,
    };
    let frame = completion_frame(cutoff, repetitive.clone());
    assert!(is_compressed(&frame));
    // What goes gzipped is still the whole completion.
    let (msg, _) = Codec::default()
        .decode_ws(Frame::Binary(&frame))
        .expect("decodes");
    assert!(
        matches!(&msg.body, Body::TaskComplete(t) if t.result.as_ref().and_then(|r| r.summary.as_deref()) == Some(repetitive.as_str())),
        "{msg:?}"
    );
    assert!(!is_compressed(&completion_frame(cutoff, random.clone())));
    // The reference's rule tries gzip on both and keeps what is smaller; never is never.
    assert!(is_compressed(&completion_frame(
        CompressPolicy::IfSmaller,
        random.clone()
    )));
    assert!(!is_compressed(&completion_frame(
        CompressPolicy::Never,
        repetitive
    )));
    // JSON text never reaches the spec's 6.5 bits per byte: its cut-off compresses it.
    assert!(is_compressed(&completion_frame(
        CompressPolicy::SPEC_ENTROPY,
        random
    )));
}

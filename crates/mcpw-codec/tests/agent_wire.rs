//! What the `Agent` writes and how it answers what a server sends it, frame by frame: ids
//! per form, pings, requests it does not serve, batches, undecodable frames, reconnect
//! waits. Driven directly with frames and simulated time.

use std::time::{Duration, Instant};

use agentwire_core::{ConnId, Dial, Dialer, Frame, FrameBuf, Machine, Output, PeerInfo};
use mcpw_codec::agent::AgentEvent;
use mcpw_codec::{
    Agent, AgentConfig, AgentRegister, Body, Capability, Codec, Form, Message, MessageType,
    Reconnect,
};
use serde_json::{json, Value};

#[allow(clippy::disallowed_methods)] // the one base time of a test
fn t0() -> Instant {
    Instant::now()
}

fn config(binary: bool) -> AgentConfig {
    AgentConfig::new(AgentRegister {
        agent_id: "agent-1".into(),
        agent_type: Some("tester".into()),
        capabilities: vec![Capability::new("code_review", 0.9)],
        model: None,
        resources: None,
        metadata: None,
    })
    .with_binary(binary)
}

/// The frames and events a machine has queued.
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

/// A frame decoded with the codec, and its form.
fn decode(frame: &FrameBuf) -> (Message, Form) {
    Codec::default()
        .decode_ws(frame.as_frame())
        .expect("the agent sends what the codec reads")
}

/// The JSON form of a frame.
fn json_of(frame: &FrameBuf) -> Value {
    let (msg, _) = decode(frame);
    let mut out = Vec::new();
    Codec::default().encode_json(&msg, &mut out).expect("JSON");
    serde_json::from_slice(&out).expect("JSON")
}

/// An agent connected on conn 1 at `now`, its `agent.register` taken.
fn connected(binary: bool, now: Instant) -> (Agent, FrameBuf) {
    let mut agent = Agent::new(config(binary));
    agent.handle_connect(ConnId::new(1), &PeerInfo::new(None), now);
    let (mut frames, _) = drain(&mut agent);
    assert_eq!(frames.len(), 1);
    (agent, frames.remove(0))
}

fn text(agent: &mut Agent, v: Value, now: Instant) -> (Vec<FrameBuf>, Vec<AgentEvent>) {
    agent.handle_frame(ConnId::new(1), Frame::Text(&v.to_string()), now);
    drain(agent)
}

#[test]
fn ids_follow_the_form_json_ids_and_24_byte_sequence_ids() {
    let now = t0();
    let (_, register) = connected(false, now);
    let (msg, form) = decode(&register);
    assert_eq!(form, Form::Json);
    assert_eq!(msg.id.as_deref(), Some("agent-1-1"));
    assert!(matches!(msg.body, Body::AgentRegister(r) if r.agent_id == "agent-1"));

    let (_, register) = connected(true, now);
    let (msg, form) = decode(&register);
    assert_eq!(form, Form::Binary);
    assert_eq!((msg.id, msg.seq), (None, 1));
}

#[test]
fn pings_are_answered_and_unknown_requests_get_4004() {
    let now = t0();
    let (mut agent, _) = connected(false, now);
    agent.set_wall_clock(now, 1_735_140_600_000);
    let later = now + Duration::from_millis(1500);
    let (frames, _) = text(&mut agent, json!({"id": "p-1", "type": 4}), later);
    assert_eq!(
        json_of(&frames[0]),
        json!({"id": "p-1", "type": 5, "params": {"pong": true, "timestamp": 1_735_140_601_500u64}})
    );
    let (frames, _) = text(
        &mut agent,
        json!({"id": "p-2", "type": 0, "method": "ping"}),
        later,
    );
    assert_eq!(json_of(&frames[0])["type"], 1);
    assert_eq!(json_of(&frames[0])["id"], "p-2");
    assert_eq!(json_of(&frames[0])["params"]["pong"], true);

    let (frames, events) = text(
        &mut agent,
        json!({"id": "x-1", "type": 0, "method": "tool.execute", "params": {}}),
        later,
    );
    assert_eq!(
        json_of(&frames[0]),
        json!({"id": "x-1", "type": 3, "error": {"code": 4004, "message": "method not found: tool.execute",
            "data": {"field": "method", "reason": "Method not found",
                     "expected": "a method this agent serves", "received": "tool.execute"}}})
    );
    assert!(events.is_empty());
    // A notification it has no use for is not answered.
    let (frames, _) = text(
        &mut agent,
        json!({"type": 2, "method": "tool.list", "params": {}}),
        later,
    );
    assert!(frames.is_empty());
}

#[test]
fn undecodable_frames_are_reported_and_the_connection_stays() {
    let now = t0();
    let (mut agent, _) = connected(false, now);
    agent.handle_frame(ConnId::new(1), Frame::Text("not json"), now);
    agent.handle_frame(ConnId::new(1), Frame::Binary(b"MCPW garbage"), now);
    let (frames, events) = drain(&mut agent);
    assert!(frames.is_empty());
    assert_eq!(events.len(), 2);
    for e in &events {
        assert!(
            matches!(e, AgentEvent::ProtocolViolation(b) if b.code.0 == 4000),
            "{e:?}"
        );
    }
    // Still on the same connection: a confirmation registers it.
    let (_, events) = text(
        &mut agent,
        json!({"id": "agent-1-1", "type": 1, "method": "registration.confirmed",
            "params": {"agent_id": "agent-1"}}),
        now,
    );
    assert!(matches!(&events[..], [AgentEvent::Registered(_)]));
    assert!(agent.is_registered());
    // Frames of another connection are not this agent's.
    agent.handle_frame(ConnId::new(9), Frame::Text("not json"), now);
    assert!(drain(&mut agent).1.is_empty());
}

#[test]
fn a_batch_is_read_entry_by_entry() {
    let now = t0();
    let (mut agent, _) = connected(false, now);
    let batch = json!({"type": 6, "method": "batch", "params": {"count": 2, "messages": [
        {"id": "agent-1-1", "type": 1, "method": "registration.confirmed", "params": {"agent_id": "agent-1"}},
        {"type": 2, "method": "task.assigned", "params": {"task_id": "t-1", "type": "code_review"}},
    ]}});
    let (_, events) = text(&mut agent, batch, now);
    assert!(
        matches!(&events[..], [AgentEvent::Registered(_), AgentEvent::TaskAssigned(t)] if t.task_id == "t-1"),
        "{events:?}"
    );
    assert_eq!(agent.tasks().collect::<Vec<_>>(), ["t-1"]);
}

#[test]
fn heartbeats_start_at_the_confirmation_and_follow_a_shorter_server_period() {
    let now = t0();
    let (mut agent, _) = connected(false, now);
    assert_eq!(
        agent.poll_timeout(),
        None,
        "no heartbeat before registration"
    );
    let (_, _) = text(
        &mut agent,
        json!({"id": "agent-1-1", "type": 1, "method": "registration.confirmed",
            "params": {"agent_id": "agent-1", "heartbeat_interval_ms": 5000}}),
        now,
    );
    assert_eq!(agent.poll_timeout(), Some(now + Duration::from_secs(5)));
    agent.set_load(Some(0.25));
    agent.handle_timeout(now + Duration::from_secs(5));
    let (frames, _) = drain(&mut agent);
    assert_eq!(
        json_of(&frames[0])["params"],
        json!({"agent_id": "agent-1", "status": "healthy", "metrics": {"active_tasks": 0},
            "workload": {"current_load": 0.25, "queue_depth": 0}})
    );
    assert_eq!(json_of(&frames[0])["type"], 2);
    assert_eq!(agent.poll_timeout(), Some(now + Duration::from_secs(10)));
}

#[test]
fn tasks_beyond_the_limit_are_dropped_and_reported() {
    let now = t0();
    let mut agent = Agent::new(config(false).with_max_tasks(1));
    agent.handle_connect(ConnId::new(1), &PeerInfo::new(None), now);
    drain(&mut agent);
    for id in ["t-1", "t-2"] {
        agent.handle_frame(
            ConnId::new(1),
            Frame::Text(
                &json!({"type": 2, "method": "task.assigned", "params": {"task_id": id}})
                    .to_string(),
            ),
            now,
        );
    }
    let (_, events) = drain(&mut agent);
    assert!(
        matches!(&events[..], [AgentEvent::TaskAssigned(_), AgentEvent::TaskDropped { task_id }] if task_id == "t-2"),
        "{events:?}"
    );
}

#[test]
fn collaboration_requests_are_answered_with_the_applications_vote() {
    let now = t0();
    let (mut agent, _) = connected(true, now);
    let mut frame = Vec::new();
    let request = Message::new(
        MessageType::REQUEST,
        Body::CollaborationRequest(mcpw_codec::CollaborationRequest {
            task_id: "t-1".into(),
            requesting_agent: "agent-2".into(),
            collaboration_type: Some("consensus".into()),
            required_agents: vec!["agent-1".into()],
            coordination_pattern: None,
            timeout_ms: None,
            context: None,
            idempotency_key: None,
        }),
    )
    .with_seq(77);
    Codec::default()
        .encode(&request, &mut frame)
        .expect("frame");
    agent.handle_frame(ConnId::new(1), Frame::Binary(&frame), now);
    let (_, events) = drain(&mut agent);
    let [AgentEvent::CollaborationRequested { id, request }] = &events[..] else {
        panic!("{events:?}");
    };
    assert_eq!(request.requesting_agent, "agent-2");
    agent.answer_collaboration(*id, "approve").expect("answer");
    let (frames, _) = drain(&mut agent);
    let (msg, _) = decode(&frames[0]);
    assert_eq!((msg.kind, msg.seq), (MessageType::RESPONSE, 77));
    assert!(
        matches!(&msg.body, Body::Other(c) if c.params == json!({"agent_id": "agent-1", "vote": "approve"}))
    );
    assert_eq!(
        agent.answer_collaboration(*id, "approve"),
        Err(mcpw_codec::AgentCommandError::UnknownCollaboration),
        "answered once"
    );
}

#[test]
fn reconnect_waits_double_and_reset_only_after_a_connection_stayed_up() {
    fn waits(m: &mut Agent) -> Vec<Duration> {
        drain(m)
            .1
            .into_iter()
            .filter_map(|e| match e {
                AgentEvent::ConnectFailed { retry_in, .. }
                | AgentEvent::Disconnected { retry_in } => Some(retry_in),
                _ => None,
            })
            .collect()
    }
    let mut now = t0();
    let second = Duration::from_secs(1);
    let policy = Reconnect::new(second, Duration::from_secs(30));
    let stable = policy.stable_after;
    let mut m = Agent::new(config(false).with_reconnect(policy));
    let peer = PeerInfo::new(None);
    assert_eq!(m.poll_dial(), Dial::Now);
    m.handle_dial_failed("HTTP error: 401 Unauthorized", now);
    assert_eq!(waits(&mut m), [second]);
    assert_eq!(
        m.poll_dial(),
        Dial::Wait,
        "nothing is dialled until the wait is over"
    );
    assert_eq!(m.poll_timeout(), Some(now + second));
    now += second;
    m.handle_timeout(now);
    assert_eq!(m.poll_dial(), Dial::Now);
    // A connection refused right after the upgrade does not start the waits over.
    m.handle_connect(ConnId::new(1), &peer, now);
    m.handle_disconnect(ConnId::new(1), now + second);
    assert_eq!(waits(&mut m), [2 * second]);
    now += 3 * second;
    m.handle_timeout(now);
    m.handle_dial_failed("connection refused", now);
    assert_eq!(waits(&mut m), [4 * second]);
    assert_eq!(m.failures(), 3);
    now += 4 * second;
    m.handle_timeout(now);
    // One that stayed up does.
    m.handle_connect(ConnId::new(2), &peer, now);
    assert_eq!(m.poll_dial(), Dial::Wait);
    m.handle_disconnect(ConnId::new(2), now + stable);
    assert_eq!(waits(&mut m), [second]);
}

#[test]
fn close_stops_at_once_with_1000() {
    let now = t0();
    let (mut agent, _) = connected(false, now);
    agent.close(now);
    let mut closed = None;
    let mut events = Vec::new();
    while let Some(out) = agent.poll_output() {
        match out {
            Output::Close { conn, code, .. } => closed = Some((conn, code.0)),
            Output::Event(e) => events.push(e),
            Output::Send { .. } => {}
        }
    }
    assert_eq!(closed, Some((ConnId::new(1), 1000)));
    assert_eq!(events, [AgentEvent::Stopped]);
    assert_eq!(agent.poll_dial(), Dial::Stop);
    // The driver's disconnect afterwards changes nothing.
    agent.handle_disconnect(ConnId::new(1), now);
    assert!(drain(&mut agent).1.is_empty());
}

//! Simulated-time tests of every server rule of the Orchestrator: the machine is driven
//! directly with frames and time, no sockets, no clock.

use std::time::{Duration, Instant};

use agentwire_core::{CloseCode, ConnId, Frame, Machine, Output, PeerInfo, SequentialIds};
use mcpw_codec::orchestrator::{
    Health, Orchestrator, OrchestratorConfig, OrchestratorEvent, RemovalReason, TaskFailure,
    TaskSpec, TaskState,
};
use serde_json::{json, Value};

/// A sent frame in the JSON form, decoded with the codec (so binary frames, gzip included,
/// must be what the codec reads).
fn json_of(frame: &agentwire_core::FrameBuf) -> Value {
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
fn t0() -> Instant {
    Instant::now()
}

struct Env {
    o: Orchestrator,
    now: Instant,
    sent: Vec<(ConnId, Value)>,
    closed: Vec<(ConnId, CloseCode, String)>,
    events: Vec<OrchestratorEvent>,
}

impl Env {
    fn new(cfg: OrchestratorConfig) -> Self {
        let now = t0();
        Self {
            o: Orchestrator::new(cfg, SequentialIds::new(1), now, 1_735_140_600_000),
            now,
            sent: Vec::new(),
            closed: Vec::new(),
            events: Vec::new(),
        }
    }

    fn drain(&mut self) {
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

    fn connect(&mut self, n: u64) -> ConnId {
        let c = ConnId::new(n);
        let peer = PeerInfo::new(None)
            .with_subprotocol("mcp.v1")
            .with_header("X-Agent-Type", "tester");
        self.o.handle_connect(c, &peer, self.now);
        self.drain();
        c
    }

    fn send(&mut self, c: ConnId, v: Value) {
        let text = v.to_string();
        self.o.handle_frame(c, Frame::Text(&text), self.now);
        self.drain();
    }

    fn advance(&mut self, d: Duration) {
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

    fn take(&mut self, c: ConnId) -> Vec<Value> {
        let (mine, rest) = std::mem::take(&mut self.sent)
            .into_iter()
            .partition(|(k, _)| *k == c);
        self.sent = rest;
        mine.into_iter().map(|(_, v)| v).collect()
    }

    fn register(&mut self, n: u64, id: &str, caps: Value) -> ConnId {
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

fn review(confidence: f64) -> Value {
    json!([{"name": "code_review", "confidence": confidence, "specialties": ["security"]}])
}

#[test]
fn register_is_confirmed_in_the_form_of_the_request() {
    let mut e = Env::new(OrchestratorConfig::default());
    let c = e.connect(1);
    e.send(
        c,
        json!({"id": "550e8400", "type": 0, "method": "agent.register",
        "params": {"agent_id": "agent-123", "capabilities": review(0.9)}}),
    );
    let r = e.take(c);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0]["id"], "550e8400");
    assert_eq!(r[0]["type"], 1);
    assert_eq!(r[0]["method"], "registration.confirmed");
    assert_eq!(r[0]["params"]["agent_id"], "agent-123");
    assert_eq!(r[0]["params"]["heartbeat_interval_ms"], 30_000);
    assert!(e.o.agent("agent-123").is_some());
    assert!(e.events.iter().any(
        |ev| matches!(ev, OrchestratorEvent::Registered { agent_id, .. } if agent_id == "agent-123")
    ));
    assert!(e
        .o
        .metrics()
        .render()
        .contains("websocket_connections_active{agent_type=\"tester\",protocol=\"json\"} 1"));
}

#[test]
fn errors_4004_4005_4000_and_register_first() {
    let mut e = Env::new(OrchestratorConfig::default());
    let c = e.connect(1);
    e.send(
        c,
        json!({"id": "1", "method": "task.complete", "params": {}}),
    );
    assert_eq!(e.take(c)[0]["error"]["code"], 4001, "register first");
    e.send(
        c,
        json!({"id": "2", "method": "agent.register", "params": {"capabilities": []}}),
    );
    let r = e.take(c);
    assert_eq!(r[0]["type"], 3);
    assert_eq!(r[0]["id"], "2");
    assert_eq!(r[0]["error"]["code"], 4005);
    assert_eq!(r[0]["error"]["data"]["field"], "agent_id");
    e.send(
        c,
        json!({"id": "3", "method": "tool.teleport", "params": {}}),
    );
    assert_eq!(e.take(c)[0]["error"]["code"], 4004);
    e.o.handle_frame(c, Frame::Text("{nope"), e.now);
    e.drain();
    assert_eq!(e.take(c)[0]["error"]["code"], 4000);
    e.o.handle_frame(c, Frame::Binary(b"not a header"), e.now);
    e.drain();
    assert_eq!(e.take(c)[0]["error"]["code"], 4000);
    // The connection still works.
    e.send(
        c,
        json!({"id": "4", "method": "agent.register", "params": {"agent_id": "a"}}),
    );
    assert_eq!(e.take(c)[0]["method"], "registration.confirmed");
    assert_eq!(e.o.metrics().messages_with_status("invalid_params"), 1);
}

#[test]
fn oversize_is_4007() {
    let mut cfg = OrchestratorConfig::default();
    cfg.limits.max_message_bytes = 64;
    let mut e = Env::new(cfg);
    let c = e.connect(1);
    let big = format!(
        r#"{{"id":"1","method":"agent.register","params":{{"agent_id":"{}"}}}}"#,
        "x".repeat(100)
    );
    e.o.handle_frame(c, Frame::Text(&big), e.now);
    e.drain();
    assert_eq!(e.take(c)[0]["error"]["code"], 4007);
}

#[test]
fn rate_limit_is_4002_after_the_burst_and_refills() {
    let mut e = Env::new(OrchestratorConfig::default());
    let c = e.register(1, "a", review(0.9));
    let ping = json!({"id": "p", "type": 0, "method": "ping"});
    for _ in 0..99 {
        e.send(c, ping.clone());
    }
    assert!(
        e.take(c).iter().all(|r| r["type"] == 1),
        "the burst of 100 (register included) passes"
    );
    e.send(c, ping.clone());
    let r = e.take(c);
    assert_eq!(r[0]["error"]["code"], 4002);
    assert_eq!(r[0]["error"]["data"]["retry_after_ms"], 60);
    e.advance(Duration::from_millis(60));
    e.send(c, ping);
    assert_eq!(e.take(c)[0]["type"], 1, "1000/min: one more every 60 ms");
}

#[test]
fn missed_heartbeats_make_an_agent_unhealthy_then_remove_it() {
    let mut e = Env::new(OrchestratorConfig::default());
    let c = e.register(1, "a", review(0.9));
    e.advance(Duration::from_secs(59));
    assert_eq!(e.o.agent("a").unwrap().health, Health::Healthy);
    e.advance(Duration::from_secs(1));
    assert_eq!(e.o.agent("a").unwrap().health, Health::Unhealthy);
    // An unhealthy agent gets no task.
    e.o.submit_task(TaskSpec::new("code_review").with_id("t1"), e.now)
        .unwrap();
    e.drain();
    assert_eq!(e.o.task("t1").unwrap().state, TaskState::Queued);
    // A heartbeat brings it back, and the queued task follows.
    e.send(c, json!({"id": "h", "method": "agent.heartbeat", "params": {"agent_id": "a", "status": "healthy"}}));
    assert!(e
        .events
        .iter()
        .any(|ev| matches!(ev, OrchestratorEvent::Recovered { .. })));
    assert_eq!(
        e.o.task("t1").unwrap().state,
        TaskState::Assigned("a".into())
    );
    e.advance(Duration::from_secs(89));
    assert!(e.o.agent("a").is_some());
    e.advance(Duration::from_secs(1));
    assert!(e.o.agent("a").is_none(), "removed after 3 missed periods");
    assert!(e
        .closed
        .iter()
        .any(|(k, code, r)| *k == c && *code == CloseCode::POLICY && r == "heartbeat-timeout"));
    assert!(e.events.iter().any(|ev| matches!(
        ev,
        OrchestratorEvent::AgentRemoved {
            reason: RemovalReason::HeartbeatTimeout,
            ..
        }
    )));
}

#[test]
fn tasks_route_by_capability_and_flow_to_completion() {
    let mut e = Env::new(OrchestratorConfig::default());
    let strong = e.register(1, "strong", review(0.95));
    let weak = e.register(2, "weak", review(0.5));
    let other = e.register(
        3,
        "other",
        json!([{"name": "translation", "confidence": 1.0}]),
    );
    let id =
        e.o.submit_task(
            TaskSpec::new("code_review")
                .with_id("task-456")
                .with_deadline(Duration::from_secs(600))
                .with_requirements(json!({"focus_areas": ["security"]})),
            e.now,
        )
        .unwrap();
    e.drain();
    let assigned = e.take(strong);
    assert_eq!(assigned[0]["method"], "task.assigned");
    assert_eq!(assigned[0]["type"], 2);
    let p = &assigned[0]["params"];
    assert_eq!(p["task_id"], "task-456");
    assert_eq!(p["deadline"], "2024-12-25T15:40:00Z");
    assert_eq!(p["routing_metadata"]["assigned_by"], "capability-router");
    assert_eq!(p["routing_metadata"]["alternative_agents"], json!(["weak"]));
    assert!(e.take(weak).is_empty() && e.take(other).is_empty());

    e.send(strong, json!({"type": 7, "method": "task.progress", "params": {"task_id": id, "agent_id": "strong", "progress": 0.65, "status": "analyzing"}}));
    assert!(
        e.take(strong).is_empty(),
        "progress notifications get no reply"
    );
    assert_eq!(e.o.task(&id).unwrap().progress, 0.65);
    // Only the assigned agent may complete it.
    e.send(weak, json!({"id": "x", "method": "task.complete", "params": {"task_id": id, "agent_id": "weak", "status": "completed"}}));
    assert_eq!(e.take(weak)[0]["error"]["code"], 4008);
    e.send(strong, json!({"id": "c", "method": "task.complete", "params": {"task_id": id, "agent_id": "strong", "status": "completed", "result": {"summary": "ok"}}}));
    let r = e.take(strong);
    assert_eq!(
        r[0]["params"],
        json!({"task_id": "task-456", "status": "accepted"})
    );
    assert!(e.o.task(&id).is_none());
    assert!(e.events.iter().any(|ev| matches!(ev, OrchestratorEvent::TaskCompleted { result, .. } if result["summary"] == "ok")));
}

#[test]
fn a_vanished_agents_task_is_reassigned_and_a_missed_deadline_fails_it() {
    let mut e = Env::new(OrchestratorConfig::default());
    let a = e.register(1, "a", review(0.95));
    let b = e.register(2, "b", review(0.5));
    e.o.submit_task(
        TaskSpec::new("code_review")
            .with_id("t")
            .with_deadline(Duration::from_secs(100)),
        e.now,
    )
    .unwrap();
    e.drain();
    assert_eq!(e.take(a)[0]["method"], "task.assigned");
    e.o.handle_disconnect(a, e.now);
    e.drain();
    assert_eq!(e.take(b)[0]["params"]["task_id"], "t");
    assert_eq!(e.o.task("t").unwrap().attempts, 2);
    e.advance(Duration::from_secs(50));
    e.send(
        b,
        json!({"method": "agent.heartbeat", "type": 2, "params": {"agent_id": "b"}}),
    );
    e.advance(Duration::from_secs(50));
    assert!(e.o.task("t").is_none());
    assert!(e.events.iter().any(|ev| matches!(
        ev,
        OrchestratorEvent::TaskFailed {
            reason: TaskFailure::DeadlineExceeded,
            ..
        }
    )));
    assert_eq!(
        e.take(b)[0]["error"]["code"],
        4006,
        "the agent is told the task is cancelled"
    );
}

#[test]
fn shutdown_transfers_tasks_and_ends_after_the_grace_period() {
    let mut e = Env::new(OrchestratorConfig::default());
    let a = e.register(1, "a", review(0.95));
    let b = e.register(2, "b", review(0.5));
    e.o.submit_task(TaskSpec::new("code_review").with_id("t"), e.now)
        .unwrap();
    e.drain();
    e.take(a);
    e.send(a, json!({"id": "s", "method": "agent.shutdown", "params": {"agent_id": "a", "reason": "scheduled_maintenance", "graceful_timeout_ms": 5000, "transfer_tasks": true}}));
    let r = e.take(a);
    assert_eq!(
        r[0]["params"]["transferred_tasks"],
        json!([{"task_id": "t", "agent_id": "b"}])
    );
    assert_eq!(e.take(b)[0]["method"], "task.assigned");
    assert_eq!(
        e.o.task("t").unwrap().attempts,
        1,
        "a transfer is not a failed attempt"
    );
    e.advance(Duration::from_secs(5));
    assert!(e.o.agent("a").is_none());
    assert!(e
        .closed
        .iter()
        .any(|(k, code, _)| *k == a && *code == CloseCode::NORMAL));
}

#[test]
fn capability_update_changes_routing() {
    let mut e = Env::new(OrchestratorConfig::default());
    let a = e.register(1, "a", json!([]));
    e.o.submit_task(TaskSpec::new("rust_analysis").with_id("t"), e.now)
        .unwrap();
    e.drain();
    assert_eq!(e.o.task("t").unwrap().state, TaskState::Queued);
    e.send(a, json!({"id": "u", "method": "agent.capability.update", "params": {"agent_id": "a", "operation": "add",
        "capability": {"name": "rust_analysis", "confidence": 0.75, "languages": ["rust"]}, "reason": "fine-tuned"}}));
    let r = e.take(a);
    assert_eq!(r[0]["params"]["capabilities"], json!(["rust_analysis"]));
    assert_eq!(r[1]["method"], "task.assigned");
    e.send(a, json!({"id": "v", "method": "agent.capability.update", "params": {"agent_id": "a", "operation": "explode", "capability": {"name": "x"}}}));
    assert_eq!(e.take(a)[0]["error"]["data"]["field"], "operation");
}

#[test]
fn collaboration_is_fanned_out_and_answered_after_all_reply_or_the_timeout() {
    let mut e = Env::new(OrchestratorConfig::default());
    let a = e.register(1, "a", json!([]));
    let b = e.register(2, "b", json!([]));
    let c = e.register(3, "c", json!([]));
    let req = json!({"id": "col", "method": "collaboration.request", "params": {"task_id": "task-789", "requesting_agent": "a",
        "collaboration_type": "consensus", "required_agents": ["b", "c", "ghost"], "timeout_ms": 30000}});
    e.send(a, req);
    assert!(e.take(a).is_empty(), "answered later");
    let to_b = e.take(b);
    assert_eq!(to_b[0]["method"], "collaboration.request");
    assert_eq!(to_b[0]["params"]["task_id"], "task-789");
    let to_c = e.take(c);
    e.send(
        b,
        json!({"id": to_b[0]["id"], "type": 1, "result": {"vote": "approve"}}),
    );
    assert!(e.take(a).is_empty(), "c has not answered yet");
    e.advance(Duration::from_secs(30));
    let r = e.take(a);
    assert_eq!(r[0]["id"], "col");
    assert_eq!(
        r[0]["params"]["responses"],
        json!({"b": {"vote": "approve"}})
    );
    assert_eq!(r[0]["params"]["missing"], json!(["c", "ghost"]));
    // c's late answer is dropped.
    e.send(
        c,
        json!({"id": to_c[0]["id"], "type": 1, "result": {"vote": "reject"}}),
    );
    assert!(e.take(a).is_empty() && e.take(c).is_empty());
}

#[test]
fn state_sync_merges_into_the_crdt_store_once() {
    let mut e = Env::new(OrchestratorConfig::default());
    let a = e.register(1, "agent-123", json!([]));
    let sync = json!({"id": "s", "type": 0, "method": "state.sync", "params": {
        "agent_id": "agent-123", "vector_clock": {"agent-123": 42, "agent-456": 38},
        "operations": [
            {"type": "g-counter", "key": "tasks_completed", "increment": 1, "actor": "agent-123"},
            {"type": "or-set", "key": "active_collaborations", "operation": "add", "element": "collab-xyz", "unique_id": "u-1"}],
        "merkle_root": "a1b2c3"}});
    e.send(a, sync.clone());
    assert_eq!(e.take(a)[0]["params"]["applied"], true);
    e.send(a, sync);
    let r = e.take(a);
    assert_eq!(r[0]["params"]["applied"], false);
    assert_eq!(
        r[0]["params"]["vector_clock"],
        json!({"agent-123": 42, "agent-456": 38})
    );
    let st = e.o.state();
    assert_eq!(st.counter("tasks_completed").unwrap().value(), 1);
    assert!(st
        .set("active_collaborations")
        .unwrap()
        .contains("collab-xyz"));
    // The same key as another kind is a conflict (4008).
    e.send(a, json!({"id": "k", "method": "state.sync", "params": {"agent_id": "agent-123", "vector_clock": {"agent-123": 43},
        "operations": [{"type": "or-set", "key": "tasks_completed", "operation": "add", "element": "x", "unique_id": "u"}]}}));
    assert_eq!(e.take(a)[0]["error"]["code"], 4008);
}

#[test]
fn binary_peers_get_binary_replies() {
    let mut e = Env::new(OrchestratorConfig::default());
    let c = e.connect(1);
    let payload = json!({"method": "agent.register", "params": {"agent_id": "bin"}}).to_string();
    let mut frame = b"MCPW\x01\x00\x00\x00".to_vec();
    frame.extend_from_slice(&77u64.to_be_bytes());
    frame.extend_from_slice(&[0, 0, 0, 0]);
    frame.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_be_bytes());
    frame.extend_from_slice(payload.as_bytes());
    e.o.handle_frame(c, Frame::Binary(&frame), e.now);
    let mut got = None;
    while let Some(out) = e.o.poll_output() {
        if let Output::Send { frame, .. } = out {
            got = Some(frame);
        }
    }
    let f = got.unwrap();
    assert!(f.as_text().is_none());
    let b = f.as_bytes();
    assert_eq!(&b[0..5], b"MCPW\x01");
    assert_eq!(b[5], 1, "a response");
    assert_eq!(
        u64::from_be_bytes(b[8..16].try_into().unwrap()),
        77,
        "same sequence id"
    );
    assert!(e.o.metrics().render().contains("protocol=\"binary\"} 1"));
}

#[test]
fn unregistered_connections_are_closed_after_the_register_timeout() {
    let mut e = Env::new(OrchestratorConfig::default());
    let c = e.connect(1);
    e.advance(Duration::from_secs(30));
    assert_eq!(
        e.closed,
        [(c, CloseCode::POLICY, "register-required".to_owned())]
    );
}

/// Binary frames sent to `c`, as raw bytes.
fn binary_frames_to(o: &mut Orchestrator, c: ConnId) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    while let Some(out) = o.poll_output() {
        if let Output::Send { conn, frame } = out {
            if conn == c {
                assert!(
                    frame.as_text().is_none(),
                    "a binary peer gets binary frames"
                );
                v.push(frame.as_bytes().to_vec());
            }
        }
    }
    v
}

#[test]
fn binary_frames_carry_the_codecs_method_codes_and_large_payloads_travel_gzipped() {
    use mcpw_codec::{
        AgentRegister, Body, Capability, Codec, Flags, Header, Limits, Message, MessageType, Method,
    };
    let mut e = Env::new(OrchestratorConfig::default());
    let c = e.connect(1);
    let mut agent = Codec::default();
    // A register request whose params are well over 1024 bytes: the codec gzips it.
    let params = AgentRegister {
        agent_id: "big-bin".into(),
        agent_type: Some("tester".into()),
        capabilities: vec![Capability::new("code_review", 0.9)],
        model: None,
        resources: None,
        metadata: Some(json!({"notes": "compressible ".repeat(200)})),
    };
    let register = Message::new(MessageType::REQUEST, Body::AgentRegister(params)).with_seq(5);
    let mut frame = Vec::new();
    let sent = agent.encode(&register, &mut frame).unwrap();
    assert_eq!(sent.method, Method::AGENT_REGISTER);
    assert!(sent.flags.contains(Flags::COMPRESSED), "{sent:?}");
    assert!(sent.size < 1024, "compressed to {} bytes", sent.size);
    e.o.handle_frame(c, Frame::Binary(&frame), e.now);
    let replies = binary_frames_to(&mut e.o, c);
    assert_eq!(replies.len(), 1);
    let h = Header::parse_slice(&replies[0], &Limits::default()).unwrap();
    assert_eq!(
        (h.kind, h.method, h.seq),
        (MessageType::RESPONSE, Method::REGISTRATION_CONFIRMED, 5)
    );
    let Body::RegistrationConfirmed(ok) = agent.decode(&replies[0]).unwrap().body else {
        panic!("registration.confirmed decodes as the codec's type");
    };
    assert_eq!(ok.agent_id, "big-bin");
    assert_eq!(
        ok.accepted_capabilities,
        Some(vec!["code_review".to_owned()])
    );
    assert!(e.o.agent("big-bin").is_some());

    // The server's large task.assigned is gzipped too, and decodes to the typed params.
    let context = json!({"diff": "+ fn main() {}\n".repeat(300)});
    e.o.submit_task(
        TaskSpec::new("code_review")
            .with_id("big")
            .with_context(context.clone()),
        e.now,
    )
    .unwrap();
    let frames = binary_frames_to(&mut e.o, c);
    assert_eq!(frames.len(), 1);
    let h = Header::parse_slice(&frames[0], &Limits::default()).unwrap();
    assert_eq!(
        (h.kind, h.method),
        (MessageType::NOTIFICATION, Method::TASK_ASSIGNED)
    );
    assert!(h.flags.contains(Flags::COMPRESSED), "{h:?}");
    let Body::TaskAssigned(t) = agent.decode(&frames[0]).unwrap().body else {
        panic!("task.assigned decodes as the codec's type");
    };
    assert_eq!((t.task_id.as_str(), t.context), ("big", Some(context)));
    assert_eq!(t.task_type.as_deref(), Some("code_review"));
}

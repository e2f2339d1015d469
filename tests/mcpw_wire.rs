//! The `mcpw_agent` example's machine reads what the real Go server writes (method code 0
//! with the name in the payload, the 12-byte form after `protocol.set_binary`) and talks to
//! our orchestrator in that form. Driven in memory with simulated time: no sockets, no clock.

use std::time::{Duration, Instant};

use agentwire::core::{ConnId, Frame, FrameBuf, Machine, Output, PeerInfo, SequentialIds};
use agentwire::mcpw::orchestrator::{Orchestrator, OrchestratorConfig, TaskSpec};
use agentwire::mcpw::{Capability, Codec, Flags, Form, Header, MessageType, Method};
use agentwire_server::mcpw;
use mcpw::agent_app::{AgentEvent, AgentMachine, AgentSettings};
use serde_json::json;

#[allow(clippy::disallowed_methods)] // the one base time of a test
fn t0() -> Instant {
    Instant::now()
}

fn settings(binary: bool) -> AgentSettings {
    AgentSettings {
        agent_id: "agent-1".into(),
        agent_type: "reviewer".into(),
        capabilities: vec![Capability::new("code_review", 0.9)],
        binary,
        heartbeat: Duration::from_secs(10),
        steps: 1,
        step: Duration::from_millis(100),
        hmac_secret: None,
    }
}

/// Drains a machine: its frames and its events.
fn drain<M: Machine>(m: &mut M) -> (Vec<FrameBuf>, Vec<M::Event>) {
    let (mut frames, mut events) = (Vec::new(), Vec::new());
    while let Some(out) = m.poll_output() {
        match out {
            Output::Send { frame, .. } => frames.push(frame),
            Output::Event(e) => events.push(e),
            Output::Close { .. } => {}
        }
    }
    (frames, events)
}

fn frame_of(f: &FrameBuf) -> Frame<'_> {
    match f.as_text() {
        Some(t) => Frame::Text(t),
        None => Frame::Binary(f.as_bytes()),
    }
}

/// A 24-byte frame as the real code writes a method it has no code for: method 0, payload
/// `{"method": name, "params": ...}`.
fn code_0_frame(kind: MessageType, seq: u64, method: &str, params: serde_json::Value) -> Vec<u8> {
    let payload = json!({"method": method, "params": params}).to_string();
    let mut h = Header::new(kind, seq, Method::UNKNOWN);
    h.flags = Flags::NONE;
    let mut f = Vec::new();
    Codec::default()
        .encode_frame(h, payload.as_bytes(), &mut f)
        .expect("frame");
    f
}

#[test]
fn the_agent_accepts_registration_and_tasks_named_in_a_code_0_payload() {
    let now = t0();
    let mut agent = AgentMachine::new(settings(true));
    let conn = ConnId::new(1);
    agent.handle_connect(conn, &PeerInfo::new(None), now);
    drain(&mut agent);
    let confirmed = code_0_frame(
        MessageType::RESPONSE,
        1,
        "registration.confirmed",
        json!({"agent_id": "agent-1", "session_id": "s-1", "heartbeat_interval_ms": 10000}),
    );
    agent.handle_frame(conn, Frame::Binary(&confirmed), now);
    let (_, events) = drain(&mut agent);
    assert!(
        matches!(&events[..], [AgentEvent::Registered(c)] if c.session_id.as_deref() == Some("s-1")),
        "{events:?}"
    );
    let assigned = code_0_frame(
        MessageType::NOTIFICATION,
        2,
        "task.assigned",
        json!({"task_id": "t-1", "type": "code_review"}),
    );
    agent.handle_frame(conn, Frame::Binary(&assigned), now);
    let (_, events) = drain(&mut agent);
    assert!(
        matches!(&events[..], [AgentEvent::TaskAssigned(t)] if t.task_id == "t-1"),
        "{events:?}"
    );
    // It works on the task: its progress report follows.
    agent.handle_timeout(now + Duration::from_millis(100));
    let (frames, _) = drain(&mut agent);
    assert_eq!(frames.len(), 1);
    let (msg, _) = Codec::default().decode_ws(frame_of(&frames[0])).unwrap();
    assert_eq!(msg.method(), Some("task.progress"));
}

/// Delivers frames both ways until neither side has anything to send.
fn pump(
    agent: &mut AgentMachine,
    server: &mut Orchestrator,
    conn: ConnId,
    now: Instant,
) -> Vec<AgentEvent> {
    let mut events = Vec::new();
    for _ in 0..100 {
        let (to_server, ev) = drain(agent);
        events.extend(ev);
        for f in &to_server {
            server.handle_frame(conn, frame_of(f), now);
        }
        let (to_agent, _) = drain(server);
        for f in &to_agent {
            agent.handle_frame(conn, frame_of(f), now);
        }
        if to_server.is_empty() && to_agent.is_empty() {
            let (_, ev) = drain(agent);
            events.extend(ev);
            return events;
        }
    }
    panic!("no quiescence");
}

#[test]
fn the_agent_switches_to_the_12_byte_form_with_set_binary_and_works_in_it() {
    let mut now = t0();
    let mut server =
        Orchestrator::new(OrchestratorConfig::default(), SequentialIds::new(1), now, 0);
    let mut agent = AgentMachine::new(settings(false));
    let conn = ConnId::new(7);
    let peer = PeerInfo::new(None).with_subprotocol("mcp.v1");
    server.handle_connect(conn, &peer, now);
    agent.handle_connect(conn, &peer, now);
    let events = pump(&mut agent, &mut server, conn, now);
    assert!(events
        .iter()
        .any(|e| matches!(e, AgentEvent::Registered(_))));
    assert!(!agent.is_compact());

    assert!(agent.set_binary(true, Some(256)));
    let events = pump(&mut agent, &mut server, conn, now);
    assert!(agent.is_compact(), "switched after the server's reply");
    assert!(events.contains(&AgentEvent::BinaryMode { enabled: true }));

    // A task now arrives in the 12-byte form, and the agent answers in it.
    server
        .submit_task(TaskSpec::new("code_review").with_id("t-1"), now)
        .unwrap();
    let (to_agent, _) = drain(&mut server);
    assert_eq!(to_agent.len(), 1);
    let bytes = to_agent[0].as_bytes();
    assert_eq!(bytes[0], 1, "12-byte form");
    let (_, form) = Codec::default().decode_ws(frame_of(&to_agent[0])).unwrap();
    assert_eq!(form, Form::Compact);
    agent.handle_frame(conn, frame_of(&to_agent[0]), now);
    let mut all = Vec::new();
    for _ in 0..3 {
        now += Duration::from_millis(100);
        agent.handle_timeout(now);
        let (to_server, ev) = drain(&mut agent);
        all.extend(ev);
        for f in &to_server {
            assert_eq!(
                f.as_bytes().first(),
                Some(&1),
                "the agent sends 12-byte frames"
            );
            server.handle_frame(conn, frame_of(f), now);
        }
        let (to_agent, _) = drain(&mut server);
        for f in &to_agent {
            assert_eq!(f.as_bytes().first(), Some(&1), "the server answers in kind");
            agent.handle_frame(conn, frame_of(f), now);
        }
        all.extend(drain(&mut agent).1);
    }
    assert!(
        all.iter()
            .any(|e| matches!(e, AgentEvent::CompletionAccepted(_))),
        "{all:?}"
    );
    assert!(server.task("t-1").is_none(), "the task finished");

    // And back to JSON text.
    assert!(agent.set_binary(false, None));
    let events = pump(&mut agent, &mut server, conn, now);
    assert!(!agent.is_compact());
    assert!(events.contains(&AgentEvent::BinaryMode { enabled: false }));
}

/// Waits (at most 10 s, a guard against a hang, not a timing assertion) for the first
/// event `pick` accepts from `rx`.
macro_rules! next {
    ($rx:expr, $pick:expr) => {
        tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let x = $rx.recv().await.expect("running");
                if $pick(&x) {
                    return x;
                }
            }
        })
        .await
        .expect("timed out waiting for an event")
    };
}

#[tokio::test]
async fn over_loopback_the_agent_switches_to_the_12_byte_form_and_completes_a_task() {
    use agentwire::mcpw::orchestrator::{OrchestratorEvent, UpgradeConfig};
    let (tx, mut ev) = tokio::sync::mpsc::unbounded_channel();
    let app = mcpw::server_app::start(
        "127.0.0.1:0",
        None,
        OrchestratorConfig::default(),
        UpgradeConfig::default(),
        move |e| {
            let _ = tx.send(e.clone());
        },
    )
    .await
    .expect("bind");
    let (agent, mut a) =
        mcpw::agent_app::connect(&app.url(), settings(false), None).expect("agent");
    next!(a, |e: &AgentEvent| matches!(e, AgentEvent::Registered(_)));
    assert!(agent
        .call(|m, _| m.set_binary(true, Some(1024)))
        .await
        .expect("call"));
    next!(a, |e: &AgentEvent| *e
        == AgentEvent::BinaryMode { enabled: true });
    assert!(agent.call(|m, _| m.is_compact()).await.expect("call"));
    let spec = TaskSpec::new("code_review").with_id("t-compact");
    app.handle
        .call(move |m, now| m.inner.submit_task(spec, now))
        .await
        .expect("call")
        .expect("submitted");
    let done = next!(ev, |e: &OrchestratorEvent| matches!(
        e,
        OrchestratorEvent::TaskCompleted { .. }
    ));
    assert!(
        matches!(&done, OrchestratorEvent::TaskCompleted { task_id, .. } if task_id == "t-compact")
    );
    next!(a, |e: &AgentEvent| matches!(
        e,
        AgentEvent::CompletionAccepted(_)
    ));
    agent.shutdown().await;
    app.shutdown().await;
}

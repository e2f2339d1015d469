//! The agent target.

use std::time::Duration;

use agentwire_core::fuzzing::{checked_wall_clock, FuzzClock};
use agentwire_core::{ConnId, Dial, Dialer, FrameBuf, Machine, Output, PeerInfo};
use arbitrary::Unstructured;
use serde_json::Value;

use crate::agent::CollaborationId;
use crate::crdt::{CrdtOp, CrdtStore, VectorClock};
use crate::params::StateSync;
use crate::{
    Agent, AgentConfig, AgentEvent, AgentRegister, AgentShutdown, Body, Capability,
    CapabilityOperation, Codec, CollaborationRequest, ErrorBody, ErrorCode, Form, Message,
    MessageType, OtherCall, RegistrationConfirmed, TaskAssigned, TaskComplete, TaskProgress,
};

/// Most steps one input drives.
const MAX_OPS: usize = 256;
/// The agent's task limit.
const MAX_TASKS: usize = 4;

/// Drives an [`Agent`](crate::Agent) through arbitrary connects (one connection at a time,
/// a new `ConnId` each), server frames (typed messages in all three forms, batches, or raw
/// bytes; on the current or a stale connection), disconnects, failed dials, clock moves and
/// commands, draining after every step.
///
/// Checks: no panic; every frame the agent sends decodes with the codec and goes to the
/// current connection; a connect sends exactly one `agent.register`; input on a stale
/// connection is a no-op; commands succeed only while connected, and a successful one sends
/// exactly one frame; held tasks stay within `max_tasks`; once stopped, the agent asks the
/// driver to stop and says nothing more; the timer rules of the `Machine` contract
/// (`poll_timeout` moves past now after `handle_timeout`, an early call is a no-op).
///
/// The same input then runs a second time with a replica of the shared state
/// ([`AgentConfig::shared_state`]): the server may also send `state.sync` notifications and
/// whole snapshots (good or with a wrong root), and the steps may also change the state;
/// a state change succeeds only while connected with the full sync in, and sends one
/// frame (a remove of nothing, none). Those choices exist only in the second run, so every
/// committed seed keeps its meaning in the first.
pub fn agent(data: &[u8]) {
    run(data, false);
    run(data, true);
}

fn run(data: &[u8], shared: bool) {
    let mut u = Unstructured::new(data);
    let register = AgentRegister {
        agent_id: "agent-1".into(),
        agent_type: Some("tester".into()),
        capabilities: vec![Capability::new("code_review", 0.9)],
        model: None,
        resources: None,
        metadata: None,
    };
    let binary = u.arbitrary().unwrap_or(false);
    let mut a = Agent::new(
        AgentConfig::new(register)
            .with_binary(binary)
            .with_max_tasks(MAX_TASKS)
            .with_shared_state(shared)
            .with_heartbeat_interval(Duration::from_millis(
                u.int_in_range(0..=20_000u64).unwrap_or(1000),
            )),
    );
    let mut h = Harness {
        clock: FuzzClock::new(),
        next_conn: 1,
        current: None,
        codec: Codec::default(),
        collaborations: Vec::new(),
        stopped: false,
        requests: 0,
        shared,
    };
    for _ in 0..MAX_OPS {
        if u.is_empty() || step(&mut h, &mut a, &mut u).is_err() {
            break;
        }
    }
    h.timeout(&mut a);
}

/// The driver's side: its clock, connections and what it has seen.
struct Harness {
    clock: FuzzClock,
    next_conn: u64,
    current: Option<ConnId>,
    codec: Codec,
    collaborations: Vec<CollaborationId>,
    stopped: bool,
    /// The agent's own requests made so far (capability updates and collaboration
    /// requests take turns).
    requests: u64,
    /// The second run: the agent keeps a replica of the shared state.
    shared: bool,
}

impl Harness {
    /// Drains `a`: (frames sent, events); checks every frame decodes and goes to the
    /// current connection, and that a stopped agent says nothing more.
    fn drain(&mut self, a: &mut Agent) -> (Vec<Message>, Vec<AgentEvent>) {
        let (mut sent, mut events) = (Vec::new(), Vec::new());
        while let Some(out) = a.poll_output() {
            match out {
                Output::Send { conn, frame } => {
                    assert!(!self.stopped, "a stopped agent sent a frame");
                    assert_eq!(Some(conn), self.current, "sent to a stale connection");
                    let (msg, _) = self
                        .codec
                        .decode_ws(frame.as_frame())
                        .expect("the agent sends what the codec reads");
                    sent.push(msg);
                }
                Output::Close { conn, .. } => {
                    assert_eq!(Some(conn), self.current, "closed a stale connection");
                    self.current = None;
                }
                Output::Event(e) => {
                    match &e {
                        AgentEvent::CollaborationRequested { id, .. } => {
                            self.collaborations.push(*id);
                        }
                        AgentEvent::Stopped => self.stopped = true,
                        AgentEvent::TaskCancelled { task_id, .. } => {
                            assert!(
                                !a.tasks().any(|t| t == task_id.as_str()),
                                "a cancelled task is still held"
                            );
                        }
                        _ => {}
                    }
                    events.push(e);
                }
            }
        }
        assert!(a.tasks().count() <= MAX_TASKS, "held tasks over the limit");
        if self.stopped {
            assert_eq!(a.poll_dial(), Dial::Stop);
        }
        (sent, events)
    }

    fn timeout(&mut self, a: &mut Agent) {
        self.drain(a);
        if let Some(unix_ms) = self.clock.wall_jump() {
            let now = self.clock.t();
            checked_wall_clock(a, now, unix_ms);
            self.drain(a);
        }
        let before = a.poll_timeout();
        a.handle_timeout(self.clock.t());
        let (sent, events) = self.drain(a);
        let after = a.poll_timeout();
        if let Some(d) = before {
            if d > self.clock.seen() {
                assert!(
                    sent.is_empty() && events.is_empty() && after == before,
                    "early handle_timeout was not a no-op"
                );
            }
        }
        if let Some(t) = after {
            assert!(t > self.clock.seen(), "poll_timeout did not move past now");
        }
    }

    /// A message a server might send.
    fn server_message(&self, u: &mut Unstructured<'_>) -> arbitrary::Result<Message> {
        let task_id = format!("t-{}", u.int_in_range(0..=5u8)?);
        let reply_id = format!("agent-1-{}", u.int_in_range(0..=12u8)?);
        let kind = MessageType(u.int_in_range(0..=8u8)?);
        let last = if self.shared { 9 } else { 7 };
        let body = match u.int_in_range(0..=last)? {
            8 => Body::StateSync(state_sync(u)?),
            9 => Body::Other(OtherCall::new("", snapshot(u)?)),
            0 => Body::RegistrationConfirmed(RegistrationConfirmed {
                agent_id: "agent-1".into(),
                session_id: Some("s-1".into()),
                heartbeat_interval_ms: Some(u.int_in_range(0..=40_000u64)?),
                accepted_capabilities: None,
                status: None,
                server_time: None,
            }),
            1 => Body::TaskAssigned(TaskAssigned {
                task_id,
                task_type: Some("code_review".into()),
                priority: None,
                deadline: None,
                context: None,
                requirements: None,
                routing_metadata: None,
            }),
            2 => Body::CollaborationRequest(CollaborationRequest {
                task_id,
                requesting_agent: "agent-2".into(),
                collaboration_type: Some("consensus".into()),
                required_agents: vec!["agent-1".into()],
                coordination_pattern: None,
                timeout_ms: None,
                context: None,
                idempotency_key: None,
            }),
            // Naming a task (a 4006 cancels it when held) and a wait (a 4002 or 4003 that
            // refuses a request is retried after it); no more input is read for them.
            3 => Body::Error(
                ErrorBody::new(ErrorCode(u.int_in_range(4000..=4008)?), "refused")
                    .with_data(serde_json::json!({"task_id": task_id, "retry_after_ms": 250})),
            ),
            4 => Body::Other(OtherCall::new(
                "",
                serde_json::json!({"binary_enabled": u.arbitrary::<bool>()?, "status": "accepted", "task_id": task_id}),
            )),
            5 => Body::Other(OtherCall::new("ping", Value::Null)),
            6 => Body::Other(OtherCall::new("tool.execute", serde_json::json!({}))),
            _ => Body::AgentShutdown(AgentShutdown {
                agent_id: "agent-2".into(),
                reason: None,
                graceful_timeout_ms: None,
                transfer_tasks: None,
                final_state: None,
            }),
        };
        let kind = match &body {
            Body::Error(_) => MessageType::ERROR,
            _ if kind == MessageType::ERROR || kind == MessageType::BATCH => MessageType::RESPONSE,
            _ => kind,
        };
        let mut msg = Message::new(kind, body).with_seq(u.int_in_range(0..=12u64)?);
        if u.arbitrary()? {
            msg = msg.with_id(reply_id);
        }
        Ok(msg)
    }

    /// A frame a server might send: a typed message (or a batch of them) in one of
    /// the three forms, or raw bytes.
    fn server_frame(&mut self, u: &mut Unstructured<'_>) -> arbitrary::Result<FrameBuf> {
        if u.ratio(1u8, 6u8)? {
            let bytes: Vec<u8> = u.arbitrary()?;
            return Ok(match String::from_utf8(bytes) {
                Ok(s) if u.arbitrary()? => FrameBuf::text(s),
                Ok(s) => FrameBuf::binary(s.into_bytes()),
                Err(e) => FrameBuf::binary(e.into_bytes()),
            });
        }
        let msg = if u.ratio(1u8, 8u8)? {
            let n = u.int_in_range(1..=4)?;
            let mut entries = Vec::new();
            for _ in 0..n {
                let mut m = self.server_message(u)?;
                m.seq = 0;
                entries.push(m);
            }
            Message::batch(entries)
        } else {
            self.server_message(u)?
        };
        let form = match u.int_in_range(0..=2u8)? {
            0 => Form::Json,
            1 => Form::Binary,
            _ => Form::Compact,
        };
        Ok(self
            .codec
            .encode_ws(&msg, form)
            .unwrap_or_else(|_| FrameBuf::text("{}")))
    }
}

/// One arbitrary operation.
fn step(h: &mut Harness, a: &mut Agent, u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
    let last = if h.shared { 14 } else { 13 };
    match u.int_in_range(0..=last)? {
        0 => {
            if let Some(old) = h.current {
                a.handle_disconnect(old, h.clock.t());
                h.current = None;
                h.drain(a);
            }
            let conn = ConnId::new(h.next_conn);
            h.next_conn += 1;
            h.current = Some(conn);
            a.handle_connect(conn, &PeerInfo::new(None), h.clock.t());
            if h.stopped {
                // A stopped agent closes what the driver opens anyway.
                h.drain(a);
                h.current = None;
                return Ok(());
            }
            let (sent, _) = h.drain(a);
            assert_eq!(sent.len(), 1, "a connect sends one message");
            assert!(
                matches!(sent[0].body, Body::AgentRegister(_)),
                "a connect sends agent.register"
            );
        }
        1..=5 => {
            let stale = h.current.is_none() || u.ratio(1u8, 8u8)?;
            let conn = match h.current {
                Some(c) if !stale => c,
                _ => ConnId::new(u.int_in_range(0..=h.next_conn)?),
            };
            let live = h.current == Some(conn);
            let frame = h.server_frame(u)?;
            a.handle_frame(conn, frame.as_frame(), h.clock.t());
            let (sent, events) = h.drain(a);
            assert!(
                live || (sent.is_empty() && events.is_empty()),
                "a frame on a stale connection was not a no-op"
            );
        }
        6 => {
            if let Some(conn) = h.current {
                a.handle_disconnect(conn, h.clock.t());
                h.current = None;
                h.drain(a);
                a.handle_disconnect(conn, h.clock.t());
                let (sent, events) = h.drain(a);
                assert!(sent.is_empty() && events.is_empty(), "second disconnect");
            } else if a.poll_dial() == Dial::Now {
                a.handle_dial_failed("refused", h.clock.t());
                h.drain(a);
            }
        }
        7 => {
            h.clock
                .advance(Duration::from_millis(u.int_in_range(0..=60_000u64)?));
            if u.arbitrary()? {
                h.timeout(a);
            }
        }
        8 => h
            .clock
            .rewind(Duration::from_millis(u.int_in_range(0..=60_000u64)?)),
        9 => {
            if let Some(t) = a.poll_timeout() {
                h.clock.jump_to(t);
            }
            h.timeout(a);
        }
        10 => {
            let held: Vec<String> = a.tasks().map(str::to_owned).collect();
            let task_id = match held.get(usize::from(u.arbitrary::<u8>()?)) {
                Some(t) => t.clone(),
                None => format!("t-{}", u.int_in_range(0..=5u8)?),
            };
            let holds = held.contains(&task_id);
            let r = if u.arbitrary()? {
                a.report_progress(TaskProgress {
                    task_id,
                    agent_id: String::new(),
                    progress: Some(0.5),
                    status: None,
                    current_step: None,
                    steps_completed: None,
                    estimated_completion: None,
                    intermediate_results: None,
                    idempotency_key: None,
                })
            } else {
                a.complete_task(TaskComplete {
                    task_id,
                    agent_id: String::new(),
                    status: Some("completed".into()),
                    duration_ms: None,
                    result: None,
                    resource_usage: None,
                    idempotency_key: None,
                })
            };
            assert_eq!(r.is_ok(), holds && h.current.is_some() && !h.stopped);
            let (sent, _) = h.drain(a);
            assert_eq!(sent.len(), usize::from(r.is_ok()), "one frame per command");
        }
        11 => {
            let threshold = if u.arbitrary()? {
                Some(usize::from(u.arbitrary::<u16>()?))
            } else {
                None
            };
            let r = a.set_binary(u.arbitrary()?, threshold);
            assert!(r.is_err() || h.current.is_some(), "set_binary while closed");
            let (sent, _) = h.drain(a);
            assert_eq!(sent.len(), usize::from(r.is_ok()), "one frame per command");
        }
        12 => {
            if h.collaborations.is_empty() {
                // No input read: the agent's own requests, in turn.
                h.requests += 1;
                let r = if h.requests % 2 == 0 {
                    a.update_capability(
                        CapabilityOperation::Add,
                        Capability::new("bug_detection", 0.5),
                        None,
                    )
                } else {
                    a.request_collaboration(CollaborationRequest {
                        task_id: "t-0".into(),
                        requesting_agent: String::new(),
                        collaboration_type: Some("review".into()),
                        required_agents: vec!["agent-2".into()],
                        coordination_pattern: None,
                        timeout_ms: None,
                        context: None,
                        idempotency_key: None,
                    })
                };
                assert!(r.is_err() || h.current.is_some(), "a request while closed");
                let (sent, _) = h.drain(a);
                assert_eq!(sent.len(), usize::from(r.is_ok()), "one frame per command");
                return Ok(());
            }
            let i = u.choose_index(h.collaborations.len())?;
            let id = h.collaborations.swap_remove(i);
            let r = a.answer_collaboration(id, "approve");
            let (sent, _) = h.drain(a);
            assert_eq!(sent.len(), usize::from(r.is_ok()), "one frame per command");
        }
        14 => {
            let ready = h.current.is_some() && !h.stopped && a.is_state_ready();
            let key = format!("k-{}", u.int_in_range(0..=3u8)?);
            let element = format!("e-{}", u.int_in_range(0..=3u8)?);
            let frames = match u.int_in_range(0..=2u8)? {
                0 => a
                    .state_increment(&key, u.int_in_range(0..=5u64)?)
                    .map(|()| 1),
                1 => a.state_add(&key, &element).map(|_| 1),
                _ => a.state_remove(&key, &element).map(|n| usize::from(n > 0)),
            };
            assert!(frames.is_err() || ready, "a state change while not ready");
            let (sent, _) = h.drain(a);
            assert_eq!(
                sent.len(),
                frames.unwrap_or(0),
                "one frame per state change"
            );
        }
        _ => {
            if u.arbitrary()? {
                let _ = a.shutdown("bye", u.arbitrary()?, h.clock.t());
            } else {
                a.close(h.clock.t());
            }
            h.drain(a);
        }
    }
    Ok(())
}

/// Small CRDT operations, on keys shared with the agent's own changes.
fn ops(u: &mut Unstructured<'_>) -> arbitrary::Result<Vec<CrdtOp>> {
    let mut ops = Vec::new();
    for _ in 0..u.int_in_range(0..=3u8)? {
        let key = format!("k-{}", u.int_in_range(0..=3u8)?);
        let element = format!("e-{}", u.int_in_range(0..=3u8)?);
        let tag = format!(
            "agent-{}-{}",
            u.int_in_range(1..=2u8)?,
            u.int_in_range(0..=9u8)?
        );
        ops.push(match u.int_in_range(0..=2u8)? {
            0 => CrdtOp::Increment {
                key,
                actor: "agent-2".into(),
                by: u.int_in_range(0..=3u64)?,
            },
            1 => CrdtOp::Add { key, element, tag },
            _ => CrdtOp::Remove {
                key,
                element,
                tag: u.arbitrary::<bool>()?.then_some(tag),
            },
        });
    }
    Ok(ops)
}

/// A `state.sync` another agent (or, now and then, this one) made.
fn state_sync(u: &mut Unstructured<'_>) -> arbitrary::Result<StateSync> {
    let origin = if u.ratio(1u8, 6u8)? {
        "agent-1"
    } else {
        "agent-2"
    };
    let clock: VectorClock = [(origin, u.int_in_range(0..=6u64)?)].into_iter().collect();
    let ops = ops(u)?;
    let root = match u.int_in_range(0..=2u8)? {
        0 => None,
        1 => Some(String::from("00")),
        _ => {
            let mut s = CrdtStore::default();
            let _ = s.apply_sync(origin, &clock, &ops);
            Some(s.merkle_root())
        }
    };
    Ok(crate::crdt_wire::sync_params(origin, &clock, &ops, root))
}

/// The answer to a `state.get`: a snapshot of a small store, its root now and then wrong.
fn snapshot(u: &mut Unstructured<'_>) -> arbitrary::Result<Value> {
    let mut store = CrdtStore::default();
    for seq in 1..=u.int_in_range(0..=3u64)? {
        let clock: VectorClock = [("agent-2", seq)].into_iter().collect();
        let _ = store.apply_sync("agent-2", &clock, &ops(u)?);
    }
    let mut snap = store.snapshot();
    if u.ratio(1u8, 4u8)? {
        snap.merkle_root = "00".into();
    }
    Ok(serde_json::to_value(snap).unwrap_or_default())
}

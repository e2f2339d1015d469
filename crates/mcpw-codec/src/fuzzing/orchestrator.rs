//! The orchestrator target.

use std::collections::BTreeSet;
use std::time::Duration;

use agentwire_core::fuzzing::{checked_wall_clock, FuzzClock};
use agentwire_core::{ConnId, Frame, Machine, Output, PeerInfo, SequentialIds};
use arbitrary::Unstructured;
use serde_json::{json, Value};

use crate::config::{BatchForm, OrchestratorConfig, OrchestratorLimits};
use crate::crdt::CrdtLimits;
use crate::orchestrator::{Orchestrator, TaskSpec, TaskState};
use crate::{Codec, CodecConfig, Form, Message, MessageType};

/// Most steps one input drives.
const MAX_OPS: usize = 64;
/// Agent ids the messages name (so registrations, tasks and collaborations meet).
const AGENTS: [&str; 3] = ["a1", "a2", "a3"];
/// Task ids the messages and commands name.
const TASKS: [&str; 3] = ["t1", "t2", "t3"];
/// Capability names, which are also task types.
const CAPS: [&str; 2] = ["review", "test"];

/// Drives an [`Orchestrator`] (small limits, [`SequentialIds`]) through arbitrary connects,
/// frames (well-formed messages of every method in all three forms, batches, and garbage),
/// disconnects, clock moves and `submit_task`, draining after every step.
///
/// Checks: no panic; every frame the orchestrator sends decodes with the codec; nothing is
/// sent to a connection that never opened or has ended, and input on such a connection is a
/// no-op; every assigned task is held by a registered agent that lists it, and every task
/// an agent lists is assigned to it; no more tasks than the limit; after
/// `handle_timeout(now)`, `poll_timeout()` is `None` or later than now, and a second call
/// is a no-op.
///
/// The same input then runs a second time in which messages may also be `state.get` and
/// `voting` or `consensus` collaborations (with a quorum or threshold, in range or not, or
/// an unknown pattern) whose forwarded requests are answered with votes. Those choices
/// exist only in the second run, so every committed seed keeps its meaning in the first.
pub fn orchestrator(data: &[u8]) {
    run(data, false);
    run(data, true);
}

fn run(data: &[u8], extended: bool) {
    let mut u = Unstructured::new(data);
    let limits = OrchestratorLimits {
        max_connections: 6,
        max_agents: 2,
        max_tasks: 4,
        max_collaborations: 2,
        max_message_bytes: 16 * 1024,
        max_json_depth: 16,
        // Streams reach their limits within a few parts.
        max_stream_bytes: 4096,
        max_streams: 2,
        ..OrchestratorLimits::default()
    };
    let crdt = CrdtLimits {
        max_keys: 4,
        ..CrdtLimits::default()
    };
    let config = OrchestratorConfig::default()
        .with_limits(limits)
        .with_crdt_limits(crdt)
        .with_heartbeat_interval(Duration::from_secs(5));
    let mut clock = FuzzClock::new();
    let mut o = Orchestrator::new(config, SequentialIds::new(0), clock.t(), 1_735_140_600_000);
    let mut h = Harness {
        clock,
        codec: reader(),
        conns: Vec::new(),
        open: BTreeSet::new(),
        asked: Vec::new(),
        extended,
    };
    for _ in 0..MAX_OPS {
        if u.is_empty() || h.step(&mut o, &mut u).is_err() {
            break;
        }
    }
    h.timeout(&mut o);
}

/// A codec that reads whatever the orchestrator may send.
fn reader() -> Codec {
    let mut config = CodecConfig::default();
    config.limits.max_payload = 1 << 20;
    config.limits.max_text = 1 << 20;
    Codec::new(config)
}

struct Harness {
    clock: FuzzClock,
    codec: Codec,
    /// Every connection ever opened, in order.
    conns: Vec<ConnId>,
    /// Connections open now.
    open: BTreeSet<ConnId>,
    /// Ids of the requests the orchestrator sent (forwarded collaborations), for answers.
    asked: Vec<String>,
    /// The second run: shared-state reads and votes too.
    extended: bool,
}

impl Harness {
    fn step(&mut self, o: &mut Orchestrator, u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
        match u.int_in_range(0..=11)? {
            0 => {
                let conn = ConnId::new(self.conns.len() as u64 + 1);
                let mut peer = PeerInfo::new(None);
                if u.arbitrary()? {
                    peer = peer.with_header("x-protocol", "mcpw-binary-v1");
                }
                if u.arbitrary()? {
                    peer = peer.with_header("x-agent-type", "fuzzer");
                }
                // Every third connection names an agent in `X-Agent-ID` (no input read).
                if conn.get() % 3 == 0 {
                    let named = AGENTS[conn.get() as usize % AGENTS.len()];
                    peer = peer.with_header("x-agent-id", named);
                }
                self.conns.push(conn);
                self.open.insert(conn);
                o.handle_connect(conn, &peer, self.clock.t());
                self.drain(o);
            }
            1..=5 => {
                let conn = self.conn(u)?;
                let dead = !self.open.contains(&conn);
                let frame = self.frame(u)?;
                match &frame {
                    Wire::Text(t) => o.handle_frame(conn, Frame::Text(t), self.clock.t()),
                    Wire::Binary(b) => o.handle_frame(conn, Frame::Binary(b), self.clock.t()),
                }
                let n = self.drain(o);
                assert!(!dead || n == 0, "frame on ended {conn:?} gave {n} outputs");
            }
            6 => {
                let conn = self.conn(u)?;
                let dead = !self.open.contains(&conn);
                self.disconnect(o, conn);
                let n = self.drain(o);
                assert!(
                    !dead || n == 0,
                    "disconnect of ended {conn:?} gave {n} outputs"
                );
            }
            7 => {
                let ms = u.int_in_range(0..=40_000u64)?;
                self.clock.advance(Duration::from_millis(ms));
                if u.arbitrary()? {
                    self.timeout(o);
                }
            }
            8 => {
                let ms = u.int_in_range(0..=40_000u64)?;
                self.clock.rewind(Duration::from_millis(ms));
            }
            9 => {
                if let Some(t) = o.poll_timeout() {
                    self.clock.jump_to(t);
                }
                self.timeout(o);
            }
            _ => {
                let mut spec = TaskSpec::new(*u.choose(&CAPS)?)
                    .with_deadline(Duration::from_millis(u.int_in_range(1..=60_000u64)?));
                if u.arbitrary()? {
                    spec = spec.with_id(*u.choose(&TASKS)?);
                }
                if u.arbitrary()? {
                    spec = spec.with_requirements(json!({"focus_areas": [*u.choose(&CAPS)?]}));
                }
                let held = o.task_count();
                let named = spec.task_id.clone();
                match o.submit_task(spec, self.clock.t()) {
                    Ok(id) => assert!(o.task(&id).is_some(), "submitted task {id} is held"),
                    Err(_) => assert_eq!(o.task_count(), held, "a refused task is not held"),
                }
                // A task submitted twice is cancelled instead (no input read).
                if let Some(id) = named.filter(|_| o.task_count() == held) {
                    if o.cancel_task(&id, self.clock.t()).is_ok() {
                        assert!(o.task(&id).is_none(), "cancelled task {id} is not held");
                    }
                }
                self.drain(o);
            }
        }
        self.check(o);
        Ok(())
    }

    /// Tasks and agents agree, and limits hold.
    fn check(&self, o: &Orchestrator) {
        assert!(o.task_count() <= o.config().limits.max_tasks, "task limit");
        assert!(
            o.agents().count() <= o.config().limits.max_agents,
            "agent limit"
        );
        for (agent_id, a) in o.agents() {
            for t in &a.tasks {
                let state = o.task(t).map(|t| &t.state);
                assert_eq!(
                    state,
                    Some(&TaskState::Assigned(agent_id.to_owned())),
                    "{agent_id} lists {t}"
                );
            }
        }
        for t in TASKS {
            if let Some(TaskState::Assigned(a)) = o.task(t).map(|t| &t.state) {
                let holder = o.agent(a).map(|a| a.tasks.contains(t));
                assert_eq!(
                    holder,
                    Some(true),
                    "{t} assigned to {a} which does not list it"
                );
            }
        }
    }

    /// A connection: usually one ever opened, sometimes one that never was.
    fn conn(&self, u: &mut Unstructured<'_>) -> arbitrary::Result<ConnId> {
        if self.conns.is_empty() || u.ratio(1u8, 16u8)? {
            return Ok(ConnId::new(1_000_000 + u.int_in_range(0..=3)?));
        }
        u.choose(&self.conns).copied()
    }

    fn disconnect(&mut self, o: &mut Orchestrator, conn: ConnId) {
        self.open.remove(&conn);
        o.handle_disconnect(conn, self.clock.t());
    }

    /// A frame: a message of a method the orchestrator knows (in one of the three forms,
    /// alone or in a batch), or raw bytes.
    fn frame(&mut self, u: &mut Unstructured<'_>) -> arbitrary::Result<Wire> {
        if u.ratio(1u8, 8u8)? {
            let bytes: Vec<u8> = u.arbitrary()?;
            return Ok(match String::from_utf8(bytes) {
                Ok(s) => Wire::Text(s),
                Err(e) => Wire::Binary(e.into_bytes()),
            });
        }
        let text = if u.ratio(1u8, 6u8)? {
            let n = u.int_in_range(1..=3)?;
            let entries = (0..n)
                .map(|_| message(u, &self.asked, self.extended))
                .collect::<arbitrary::Result<Vec<_>>>()?;
            json!({"id": "b", "type": 6, "params": {"messages": entries, "count": n}})
        } else {
            message(u, &self.asked, self.extended)?
        };
        let text = text.to_string();
        let form = *u.choose(&[Form::Json, Form::Binary, Form::Compact])?;
        if form == Form::Json {
            return Ok(Wire::Text(text));
        }
        let Ok((msg, _)) = self.codec.decode_ws(Frame::Text(&text)) else {
            return Ok(Wire::Text(text));
        };
        let mut out = Vec::new();
        let encoded = match form {
            Form::Compact => self
                .codec
                .encode_compact_with(&msg, Some(64), &mut out)
                .is_ok(),
            _ => {
                let batch = *u.choose(&[BatchForm::Json, BatchForm::Binary])?;
                let msg: Message = msg.with_seq(u.int_in_range(0..=3)?);
                self.codec.encode_with_batch(&msg, batch, &mut out).is_ok()
            }
        };
        Ok(if encoded {
            Wire::Binary(out)
        } else {
            Wire::Text(text)
        })
    }

    /// Drains every output; returns how many sends and closes there were. Every frame
    /// sent decodes, and goes to an open connection; a close ends the connection as the
    /// driver would.
    fn drain(&mut self, o: &mut Orchestrator) -> usize {
        let mut n = 0;
        let mut closed = Vec::new();
        while let Some(out) = o.poll_output() {
            match out {
                Output::Send { conn, frame } => {
                    n += 1;
                    assert!(self.open.contains(&conn), "sent to {conn:?}, not open");
                    match self.codec.decode_ws(frame.as_frame()) {
                        Ok((m, _)) if m.kind == MessageType::REQUEST => {
                            if let Some(id) = m.id {
                                self.asked.push(id);
                            }
                        }
                        Ok(_) => {}
                        Err(e) => panic!("sent a frame the codec refuses: {e}: {frame:?}"),
                    }
                }
                Output::Close { conn, .. } => {
                    n += 1;
                    closed.push(conn);
                }
                Output::Event(_) => {}
            }
        }
        for conn in closed {
            if self.open.contains(&conn) {
                self.disconnect(o, conn);
                self.drain(o);
            }
        }
        n
    }

    /// `handle_timeout(now)` with the timer checks.
    fn timeout(&mut self, o: &mut Orchestrator) {
        self.drain(o);
        let now = self.clock.t();
        if let Some(unix_ms) = self.clock.wall_jump() {
            checked_wall_clock(o, now, unix_ms);
            self.drain(o);
        }
        o.handle_timeout(now);
        self.drain(o);
        if let Some(next) = o.poll_timeout() {
            assert!(
                next > now,
                "poll_timeout {next:?} not after handle_timeout({now:?})"
            );
        }
        o.handle_timeout(now);
        let mut again = 0;
        while let Some(out) = o.poll_output() {
            if !matches!(out, Output::Event(_)) {
                again += 1;
            }
        }
        assert_eq!(
            again, 0,
            "a second handle_timeout at the same time sent something"
        );
    }
}

/// One frame's content.
enum Wire {
    Text(String),
    Binary(Vec<u8>),
}

/// One message of a method the orchestrator handles (or answers), in its JSON form.
fn message(u: &mut Unstructured<'_>, asked: &[String], extended: bool) -> arbitrary::Result<Value> {
    let agent = *u.choose(&AGENTS)?;
    let other = *u.choose(&AGENTS)?;
    let task = *u.choose(&TASKS)?;
    let cap = *u.choose(&CAPS)?;
    let id = format!("m{}", u.int_in_range(0..=3u8)?);
    let last = if extended { 15 } else { 13 };
    let (method, params) = match u.int_in_range(0..=last)? {
        14 => ("state.get", json!({})),
        15 => {
            let pattern = *u.choose(&["voting", "consensus", "parallel", "lottery"])?;
            let criteria = match u.int_in_range(0..=2u8)? {
                0 => json!({}),
                1 => json!({"quorum": u.int_in_range(0..=3u8)?}),
                _ => json!({"threshold": u.int_in_range(0..=12u8)? as f64 / 10.0}),
            };
            (
                "collaboration.request",
                json!({"task_id": task, "requesting_agent": agent, "collaboration_type": "approval",
                       "coordination_pattern": pattern, "context": {"criteria": criteria},
                       "required_agents": [other, *u.choose(&AGENTS)?], "timeout_ms": u.int_in_range(0..=9_000u32)?}),
            )
        }
        0 | 1 => (
            "agent.register",
            json!({"agent_id": agent, "capabilities": [{"name": cap, "confidence": u.int_in_range(0..=10u8)? as f64 / 10.0}],
                   "resources": {"max_concurrent_tasks": u.int_in_range(0..=2u8)?}}),
        ),
        2 => (
            "agent.heartbeat",
            json!({"agent_id": agent, "workload": {"current_load": u.int_in_range(0..=10u8)? as f64 / 10.0}}),
        ),
        3 => (
            "agent.capability.update",
            json!({"agent_id": agent, "operation": *u.choose(&["add", "update", "remove"])?, "capability": {"name": cap},
                   "idempotency_key": format!("k-{id}")}),
        ),
        4 => (
            "agent.shutdown",
            json!({"agent_id": agent, "graceful_timeout_ms": u.int_in_range(0..=5_000u32)?, "transfer_tasks": u.arbitrary::<bool>()?}),
        ),
        5 => (
            "task.progress",
            json!({"task_id": task, "agent_id": agent, "progress": u.int_in_range(0..=12u8)? as f64 / 10.0,
                   "idempotency_key": format!("k-{id}")}),
        ),
        6 => (
            "task.complete",
            json!({"task_id": task, "agent_id": agent, "status": "completed", "result": {"summary": "ok"},
                   "idempotency_key": format!("k-{id}")}),
        ),
        7 => (
            "collaboration.request",
            json!({"task_id": task, "requesting_agent": agent, "collaboration_type": "vote",
                   "required_agents": [other, *u.choose(&AGENTS)?], "timeout_ms": u.int_in_range(0..=9_000u32)?}),
        ),
        8 => (
            "state.sync",
            json!({"agent_id": agent, "vector_clock": {agent: u.int_in_range(0..=3u8)?},
                   "operations": [{"type": "g-counter", "key": cap, "increment": 1, "actor": agent},
                                  {"type": "or-set", "key": task, "operation": *u.choose(&["add", "remove"])?,
                                   "element": other, "unique_id": id}]}),
        ),
        9 => ("ping", Value::Null),
        10 => (
            "protocol.set_binary",
            json!({"enabled": u.arbitrary::<bool>()?, "compression": {"enabled": u.arbitrary::<bool>()?, "threshold": 64}}),
        ),
        11 => {
            // An answer to a forwarded collaboration request (an id the server gave).
            let id = match asked {
                [] => id,
                ids => u.choose(ids)?.clone(),
            };
            return Ok(if extended && u.arbitrary()? {
                let vote = *u.choose(&["approve", "reject", "abstain", "maybe"])?;
                json!({"id": id, "type": 1, "result": {"vote": vote}})
            } else if u.arbitrary()? {
                json!({"id": id, "type": 1, "result": {"vote": "yes"}})
            } else {
                json!({"id": id, "type": 3, "error": {"code": 4003, "message": "no"}})
            });
        }
        12 => ("no.such.method", json!({})),
        _ => return Ok(json!({"id": id, "type": u.int_in_range(0..=9u8)?, "method": "ping"})),
    };
    let kind = *u.choose(&[0u8, 0, 0, 2, 7])?;
    let mut m = json!({"id": id, "type": kind, "method": method});
    if !params.is_null() {
        m["params"] = params;
    }
    Ok(m)
}

//! The [`Orchestrator`]: the server role that owns every agent connection.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use agentwire_core::{
    CloseCode, ConnId, Frame, IdGen, Machine, Monotonic, Outbox, Output, PeerInfo, TimerSet,
    TokenBucket,
};
use serde_json::{json, Value};

use super::config::OrchestratorConfig;
use super::event::{OrchestratorEvent, RemovalReason, TaskFailure};
use super::metrics::Metrics;
use super::params::{self, CapabilityOp, ParamError};
use super::routing::{self, Candidate, CapabilityProfile};
use super::wallclock::rfc3339;
use super::wire::{
    self, codes, form_label, types, Decoded, Form, Inbound, InboundBatch, Outbound, ReplyKey,
};
use crate::crdt::{CrdtStore, StoreError, SyncOutcome};
use crate::{BatchForm, Codec};

/// Methods the orchestrator handles (and the only ones counted by name in metrics).
pub const METHODS: &[&str] = &[
    "agent.register",
    "agent.heartbeat",
    "agent.capability.update",
    "agent.shutdown",
    "task.progress",
    "task.complete",
    "collaboration.request",
    "state.sync",
    "ping",
];

/// A task to route, given to [`Orchestrator::submit_task`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TaskSpec {
    /// The task id; `None`: one is generated (`task-<uuid>`).
    pub task_id: Option<String>,
    /// The task type, matched against capability names (`code_review`).
    pub task_type: String,
    /// `priority` of `task.assigned`. Default 1.
    pub priority: u32,
    /// Time allowed from submission to `task.complete`; `None`: the configured default.
    pub deadline: Option<Duration>,
    /// `context` of `task.assigned`.
    pub context: Value,
    /// `requirements` of `task.assigned`; its `focus_areas` (strings) weigh in routing.
    pub requirements: Value,
}

impl TaskSpec {
    /// A task of `task_type` with empty context and requirements.
    pub fn new(task_type: impl Into<String>) -> Self {
        Self {
            task_id: None,
            task_type: task_type.into(),
            priority: 1,
            deadline: None,
            context: json!({}),
            requirements: json!({}),
        }
    }

    /// Sets the task id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.task_id = Some(id.into());
        self
    }

    /// Sets the deadline (relative to submission).
    pub fn with_deadline(mut self, d: Duration) -> Self {
        self.deadline = Some(d);
        self
    }

    /// Sets `context`.
    pub fn with_context(mut self, context: Value) -> Self {
        self.context = context;
        self
    }

    /// Sets `requirements`.
    pub fn with_requirements(mut self, requirements: Value) -> Self {
        self.requirements = requirements;
        self
    }

    /// Sets `priority`.
    pub fn with_priority(mut self, priority: u32) -> Self {
        self.priority = priority;
        self
    }

    fn focus(&self) -> Vec<String> {
        self.requirements
            .get("focus_areas")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A command the orchestrator refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// [`Limits::max_tasks`](super::Limits::max_tasks) tasks are held already.
    #[error("too many tasks")]
    TooManyTasks,
    /// A task with this id is held already.
    #[error("duplicate task id {0:?}")]
    DuplicateTask(String),
    /// The task's `context` or `requirements` nests deeper than
    /// [`Limits::max_json_depth`](super::Limits::max_json_depth) allows in `task.assigned`.
    #[error("task {field} nested deeper than {limit} levels")]
    TooDeep {
        /// `context` or `requirements`.
        field: &'static str,
        /// The deepest nesting allowed for it.
        limit: usize,
    },
}

/// Health of a registered agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// Heartbeats arrive in time.
    Healthy,
    /// It missed heartbeats; it gets no new tasks.
    Unhealthy,
    /// It announced `agent.shutdown`; it gets no new tasks.
    ShuttingDown,
}

/// What the orchestrator knows about one registered agent.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentInfo {
    /// Its connection.
    pub conn: ConnId,
    /// `agent_type` from `agent.register` (or `X-Agent-Type`).
    pub agent_type: Option<String>,
    /// Its capabilities.
    pub capabilities: Vec<CapabilityProfile>,
    /// `resources.max_concurrent_tasks` (0: not given).
    pub max_concurrent: usize,
    /// Its last `workload.current_load`.
    pub load: f64,
    /// Its last heartbeat `status`.
    pub status: Option<String>,
    /// Its health.
    pub health: Health,
    /// Tasks assigned to it.
    pub tasks: BTreeSet<String>,
    last_heartbeat: Instant,
}

/// Where a task is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskState {
    /// Waiting for an agent that can take it.
    Queued,
    /// Sent to this agent.
    Assigned(String),
}

/// A task the orchestrator holds.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskInfo {
    /// What was submitted.
    pub spec: TaskSpec,
    /// Where it is.
    pub state: TaskState,
    /// Agents it was assigned to so far.
    pub attempts: u32,
    /// The last reported progress.
    pub progress: f64,
    /// Agents that held it and vanished (not tried again).
    tried: BTreeSet<String>,
    deadline: Instant,
}

/// One connection.
#[derive(Debug)]
struct Conn {
    form: Option<Form>,
    /// After `protocol.set_binary` enabled it: every reply to a text frame goes in the
    /// 12-byte form, gzipped above this threshold (`None`: never).
    compact: Option<Option<usize>>,
    bucket: Option<TokenBucket>,
    agent: Option<String>,
    agent_type_label: String,
    counted_as: Option<Form>,
}

/// A collaboration in flight.
#[derive(Debug)]
struct Collab {
    origin: ConnId,
    origin_reply: ReplyKey,
    origin_form: Form,
    task_id: String,
    collaboration_type: String,
    asked: Vec<String>,
    waiting: BTreeSet<String>,
    responses: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    Register(ConnId),
    Heartbeat(String),
    Task(String),
    Collab(u64),
    Shutdown(String),
}

/// The orchestration server (spec: "the orchestration server"): agents register, heartbeat,
/// receive routed tasks and report progress and completion, ask each other for
/// collaboration, and sync replicated state.
///
/// # The four kinds of method
///
/// - `handle_*` ([`Machine`]): frames, connects, disconnects and time.
/// - `poll_*`: output (frames in the form each peer uses, closes, [`OrchestratorEvent`]s).
/// - commands: [`submit_task`](Self::submit_task).
/// - getters: [`agent`](Self::agent), [`agents`](Self::agents), [`task`](Self::task),
///   [`state`](Self::state), [`metrics`](Self::metrics) (and [`metrics_mut`](Self::metrics_mut)
///   for the driver's latency samples), [`last_method`](Self::last_method).
pub struct Orchestrator {
    config: OrchestratorConfig,
    ids: Box<dyn IdGen>,
    out: Outbox<OrchestratorEvent>,
    clock: Monotonic,
    /// `now` and the wall clock (Unix ms) at that instant, for RFC 3339 deadlines.
    epoch: (Instant, u64),
    conns: BTreeMap<ConnId, Conn>,
    agents: BTreeMap<String, AgentInfo>,
    tasks: BTreeMap<String, TaskInfo>,
    /// Queued task ids in submission order.
    queue: Vec<String>,
    collabs: BTreeMap<u64, Collab>,
    /// Forwarded collaboration requests awaiting a response: (agent conn, key) -> (collab, agent).
    pending: BTreeMap<(ConnId, ReplyKey), (u64, String)>,
    next_seq: u64,
    timers: TimerSet<Timer>,
    state: CrdtStore,
    metrics: Metrics,
    last_method: Option<&'static str>,
    /// Queued tasks may be routable now (drained after the current reply is sent).
    queue_dirty: bool,
    /// One codec for every connection: it keeps nothing between frames, only its gzip
    /// state and buffers, which would cost hundreds of KiB per connection if each had one.
    codec: Codec,
    /// While a batch is handled: its connection and the messages for it, sent as one batch
    /// reply once every entry is handled.
    batching: Option<(ConnId, Vec<crate::Message>)>,
    /// A `protocol.set_binary` to apply once its reply has been sent.
    mode_switch: Option<(ConnId, Option<Option<usize>>)>,
}

impl std::fmt::Debug for Orchestrator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Orchestrator")
            .field("connections", &self.conns.len())
            .field("agents", &self.agents.len())
            .field("tasks", &self.tasks.len())
            .finish_non_exhaustive()
    }
}

fn method_label(m: Option<&str>) -> &'static str {
    m.and_then(|m| METHODS.iter().find(|k| **k == m).copied())
        .unwrap_or("unknown")
}

impl Orchestrator {
    /// A server with `config`, ids from `ids`, started at `now` when the wall clock read
    /// `unix_ms` (deadlines in `task.assigned` are wall-clock times).
    pub fn new(
        config: OrchestratorConfig,
        ids: impl IdGen + 'static,
        now: Instant,
        unix_ms: u64,
    ) -> Self {
        let metrics = Metrics::new(config.limits.max_metric_series);
        let state = CrdtStore::new(config.crdt.clone());
        let codec = wire::codec_for(
            config.limits.max_message_bytes,
            config.limits.max_json_depth,
        );
        let mut clock = Monotonic::new();
        clock.observe(now);
        Self {
            config,
            ids: Box::new(ids),
            out: Outbox::new(),
            clock,
            epoch: (now, unix_ms),
            conns: BTreeMap::new(),
            agents: BTreeMap::new(),
            tasks: BTreeMap::new(),
            queue: Vec::new(),
            collabs: BTreeMap::new(),
            pending: BTreeMap::new(),
            next_seq: 1,
            timers: TimerSet::new(),
            state,
            metrics,
            last_method: None,
            queue_dirty: false,
            codec,
            batching: None,
            mode_switch: None,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &OrchestratorConfig {
        &self.config
    }

    /// A registered agent.
    pub fn agent(&self, agent_id: &str) -> Option<&AgentInfo> {
        self.agents.get(agent_id)
    }

    /// Registered agents, by id.
    pub fn agents(&self) -> impl Iterator<Item = (&str, &AgentInfo)> {
        self.agents.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// A task held (queued or assigned); finished and failed tasks are forgotten.
    pub fn task(&self, task_id: &str) -> Option<&TaskInfo> {
        self.tasks.get(task_id)
    }

    /// Tasks held.
    pub fn task_count(&self) -> usize {
        self.tasks.len()
    }

    /// The replicated state `state.sync` merges into.
    pub fn state(&self) -> &CrdtStore {
        &self.state
    }

    /// The metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The metrics, for the driver to add latency samples.
    pub fn metrics_mut(&mut self) -> &mut Metrics {
        &mut self.metrics
    }

    /// The method label (see [`METHODS`], else `unknown`) of the last frame handled, so a
    /// driver timing `handle_frame` can record `websocket_message_latency_seconds`.
    pub fn last_method(&self) -> Option<&'static str> {
        self.last_method
    }

    /// Open connections.
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// Submits a task: it is routed at once (`task.assigned` to the best agent) or queued
    /// until an agent can take it. Its deadline starts now.
    pub fn submit_task(&mut self, spec: TaskSpec, now: Instant) -> Result<String, CommandError> {
        let now = self.clock.observe(now);
        if self.tasks.len() >= self.config.limits.max_tasks {
            return Err(CommandError::TooManyTasks);
        }
        let task_id = match &spec.task_id {
            Some(id) => id.clone(),
            None => format!("task-{}", self.ids.next_id().hyphenated().as_str()),
        };
        if self.tasks.contains_key(&task_id) {
            return Err(CommandError::DuplicateTask(task_id));
        }
        // `task.assigned` carries them two levels down (envelope, params): a receiver must
        // be able to read what we send.
        let limit = self.config.limits.max_json_depth.saturating_sub(2);
        for (field, value) in [
            ("context", &spec.context),
            ("requirements", &spec.requirements),
        ] {
            let text = serde_json::to_vec(value).unwrap_or_default();
            if agentwire_core::check_json_depth(&text, limit).is_err() {
                return Err(CommandError::TooDeep { field, limit });
            }
        }
        let deadline = now + spec.deadline.unwrap_or(self.config.default_task_deadline);
        self.tasks.insert(
            task_id.clone(),
            TaskInfo {
                spec,
                state: TaskState::Queued,
                attempts: 0,
                progress: 0.0,
                tried: BTreeSet::new(),
                deadline,
            },
        );
        self.timers.set(Timer::Task(task_id.clone()), deadline);
        if !self.try_assign(&task_id) {
            self.queue.push(task_id.clone());
            self.out.event(OrchestratorEvent::TaskQueued {
                task_id: task_id.clone(),
            });
        }
        Ok(task_id)
    }

    // ---- output helpers -------------------------------------------------------------------

    fn form_of(&self, conn: ConnId) -> Form {
        if self.batching.as_ref().is_some_and(|(c, _)| *c == conn) {
            // Messages inside a batch travel in their JSON form, matched by id.
            return Form::Json;
        }
        self.conns
            .get(&conn)
            .and_then(|c| c.form)
            .unwrap_or(Form::Json)
    }

    fn send(
        &mut self,
        conn: ConnId,
        form: Form,
        msg_type: u8,
        method: Option<&str>,
        reply: &ReplyKey,
        body: &Value,
    ) {
        let m = wire::message(&Outbound {
            msg_type,
            method,
            reply,
            body,
        });
        if let Some((c, held)) = &mut self.batching {
            if *c == conn {
                held.push(m);
                return;
            }
        }
        self.send_message(conn, form, &m, BatchForm::Json);
    }

    /// Encodes `m` for `conn` in `form` (a text-frame form turns into the 12-byte form on a
    /// connection in binary mode) and queues it.
    fn send_message(&mut self, conn: ConnId, form: Form, m: &crate::Message, batch: BatchForm) {
        let compact = self.conns.get(&conn).and_then(|c| c.compact);
        let (form, threshold) = match (form, compact) {
            (Form::Json, Some(t)) | (Form::Compact, Some(t)) => (Form::Compact, t),
            (f, _) => (f, Some(self.codec.config().compression.threshold)),
        };
        let frame = wire::encode_message(&mut self.codec, form, m, threshold, batch);
        self.out.send(conn, frame);
    }

    /// Sends error `code` in reply to `reply`, and reports it.
    #[allow(clippy::too_many_arguments)]
    fn send_error(
        &mut self,
        conn: ConnId,
        form: Form,
        reply: &ReplyKey,
        msg_type: u8,
        method: Option<&str>,
        code: u16,
        message: &str,
        data: Option<Value>,
    ) {
        let body = wire::error_body(code, message, data);
        self.send(conn, form, types::ERROR, None, reply, &body);
        self.metrics.count_message(
            types::name(msg_type),
            method_label(method),
            codes::status(code),
        );
        self.out.event(OrchestratorEvent::ProtocolViolation {
            conn,
            code,
            detail: message.to_owned(),
        });
    }

    /// A new server-side message key for `conn` (a JSON id or a sequence id).
    fn new_key(&mut self, form: Form) -> ReplyKey {
        let seq = self.next_seq;
        self.next_seq += 1;
        match form {
            Form::Json | Form::Compact => {
                ReplyKey::Id(self.ids.next_id().hyphenated().as_str().to_owned())
            }
            Form::Binary => ReplyKey::Seq(seq),
        }
    }

    /// The body of a ping's reply, as the reference server writes it:
    /// `{"pong": true, "timestamp": <unix ms at now>}`.
    fn pong(&self, now: Instant) -> Value {
        json!({"pong": true, "timestamp": self.wall_ms(now)})
    }

    fn wall_ms(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.epoch.0);
        self.epoch
            .1
            .saturating_add(u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
    }

    // ---- routing and tasks -------------------------------------------------------------------

    /// Routes task `task_id` (queued) to the best agent; `false` if none can take it.
    fn try_assign(&mut self, task_id: &str) -> bool {
        let Some(task) = self.tasks.get(task_id) else {
            return false;
        };
        let focus = task.spec.focus();
        let candidates: Vec<Candidate<'_>> = self
            .agents
            .iter()
            .filter(|(id, a)| a.health == Health::Healthy && !task.tried.contains(*id))
            .map(|(id, a)| Candidate {
                agent_id: id,
                capabilities: &a.capabilities,
                active_tasks: a.tasks.len(),
                max_concurrent: a.max_concurrent,
                reported_load: a.load,
            })
            .collect();
        let Some(route) = routing::route(
            &candidates,
            &task.spec.task_type,
            &focus,
            &self.config.routing,
        ) else {
            return false;
        };
        let deadline = self.wall_ms(task.deadline);
        let params = json!({
            "task_id": task_id,
            "type": task.spec.task_type,
            "priority": task.spec.priority,
            "deadline": rfc3339(deadline),
            "context": task.spec.context,
            "requirements": task.spec.requirements,
            "routing_metadata": {
                "assigned_by": "capability-router",
                "score": route.score,
                "alternative_agents": route.alternatives,
            }
        });
        let Some(agent) = self.agents.get_mut(&route.agent_id) else {
            return false;
        };
        agent.tasks.insert(task_id.to_owned());
        let conn = agent.conn;
        let form = self.form_of(conn);
        let key = self.new_key(form);
        self.send(
            conn,
            form,
            types::NOTIFICATION,
            Some("task.assigned"),
            &key,
            &params,
        );
        self.metrics
            .count_message("notification", "task.assigned", "sent");
        let Some(task) = self.tasks.get_mut(task_id) else {
            return false;
        };
        task.state = TaskState::Assigned(route.agent_id.clone());
        task.attempts += 1;
        task.progress = 0.0;
        self.out.event(OrchestratorEvent::TaskAssigned {
            task_id: task_id.to_owned(),
            agent_id: route.agent_id,
            score: route.score,
            alternatives: route.alternatives,
            attempt: task.attempts,
        });
        true
    }

    /// Tries every queued task, in submission order.
    fn drain_queue(&mut self) {
        let queued = std::mem::take(&mut self.queue);
        for task_id in queued {
            if self.tasks.contains_key(&task_id) && !self.try_assign(&task_id) {
                self.queue.push(task_id);
            }
        }
    }

    /// Moves `task_id` off `agent_id`: to another agent, to the queue, or (attempts
    /// exhausted) to failure.
    fn reassign(&mut self, task_id: &str, agent_id: &str) {
        let Some(task) = self.tasks.get_mut(task_id) else {
            return;
        };
        task.tried.insert(agent_id.to_owned());
        task.state = TaskState::Queued;
        if task.attempts >= self.config.max_task_attempts {
            self.fail_task(task_id, TaskFailure::AttemptsExhausted);
            return;
        }
        if !self.try_assign(task_id) {
            self.queue.push(task_id.to_owned());
            self.out.event(OrchestratorEvent::TaskQueued {
                task_id: task_id.to_owned(),
            });
        }
    }

    fn fail_task(&mut self, task_id: &str, reason: TaskFailure) {
        let Some(task) = self.tasks.remove(task_id) else {
            return;
        };
        self.timers.cancel(&Timer::Task(task_id.to_owned()));
        self.queue.retain(|t| t != task_id);
        if let TaskState::Assigned(agent_id) = &task.state {
            if let Some(agent) = self.agents.get_mut(agent_id) {
                agent.tasks.remove(task_id);
                let conn = agent.conn;
                let form = self.form_of(conn);
                let key = self.new_key(form);
                let body = wire::error_body(
                    codes::OPERATION_CANCELLED,
                    "task cancelled: deadline exceeded",
                    Some(json!({"task_id": task_id})),
                );
                self.send(conn, form, types::ERROR, None, &key, &body);
            }
        }
        self.out.event(OrchestratorEvent::TaskFailed {
            task_id: task_id.to_owned(),
            reason,
        });
    }

    /// Removes agent `agent_id`: its tasks move on, collaborations stop waiting for it.
    fn remove_agent(&mut self, agent_id: &str, reason: RemovalReason) {
        let Some(agent) = self.agents.remove(agent_id) else {
            return;
        };
        self.timers.cancel(&Timer::Heartbeat(agent_id.to_owned()));
        self.timers.cancel(&Timer::Shutdown(agent_id.to_owned()));
        if let Some(c) = self.conns.get_mut(&agent.conn) {
            c.agent = None;
        }
        self.out.event(OrchestratorEvent::AgentRemoved {
            agent_id: agent_id.to_owned(),
            reason,
        });
        for task_id in &agent.tasks {
            self.reassign(task_id, agent_id);
        }
        let waiting: Vec<u64> = self
            .collabs
            .iter()
            .filter(|(_, c)| c.waiting.contains(agent_id))
            .map(|(id, _)| *id)
            .collect();
        for id in waiting {
            if let Some(c) = self.collabs.get_mut(&id) {
                c.waiting.remove(agent_id);
                if c.waiting.is_empty() {
                    self.finish_collab(id);
                }
            }
        }
        self.pending.retain(|(conn, _), _| *conn != agent.conn);
    }

    fn finish_collab(&mut self, id: u64) {
        let Some(c) = self.collabs.remove(&id) else {
            return;
        };
        self.timers.cancel(&Timer::Collab(id));
        self.pending.retain(|_, (cid, _)| *cid != id);
        let responded: Vec<String> = c.responses.keys().cloned().collect();
        let missing: Vec<String> = c
            .asked
            .iter()
            .filter(|a| !c.responses.contains_key(*a))
            .cloned()
            .collect();
        let result = json!({
            "task_id": c.task_id,
            "collaboration_type": c.collaboration_type,
            "responses": c.responses,
            "missing": missing,
            "complete": missing.is_empty(),
        });
        if self.conns.contains_key(&c.origin) {
            self.send(
                c.origin,
                c.origin_form,
                types::RESPONSE,
                None,
                &c.origin_reply,
                &result,
            );
        }
        self.out.event(OrchestratorEvent::CollaborationFinished {
            task_id: c.task_id,
            responded,
            missing,
        });
    }

    fn arm_heartbeat(&mut self, agent_id: &str, from: Instant, missed: u32) {
        let at = from + self.config.heartbeat_interval.saturating_mul(missed);
        self.timers.set(Timer::Heartbeat(agent_id.to_owned()), at);
    }

    // ---- inbound -----------------------------------------------------------------------------

    fn on_message(&mut self, conn: ConnId, msg: Inbound, now: Instant) {
        let method = msg.method.clone();
        let label = method_label(method.as_deref());
        self.last_method = Some(label);
        let t = msg.msg_type;
        match t {
            types::PING => {
                let pong = self.pong(now);
                self.send(
                    conn,
                    msg.form,
                    types::PONG,
                    msg.method.as_deref(),
                    &msg.reply,
                    &pong,
                );
                self.metrics.count_message("ping", label, "ok");
                return;
            }
            types::PONG => {
                self.metrics.count_message("pong", label, "ok");
                return;
            }
            types::RESPONSE | types::ERROR => {
                self.on_reply(conn, msg);
                return;
            }
            types::REQUEST | types::NOTIFICATION | types::PROGRESS => {}
            _ => {
                self.send_error(
                    conn,
                    msg.form,
                    &msg.reply,
                    t,
                    None,
                    codes::INVALID_MESSAGE,
                    "unsupported message type",
                    None,
                );
                return;
            }
        }
        let Some(method) = method else {
            // A method code this side has no name for is an unknown method, not a
            // malformed message.
            let (code, detail) = if msg.code == 0 {
                (codes::INVALID_MESSAGE, "method required".to_owned())
            } else {
                (
                    codes::METHOD_NOT_FOUND,
                    format!("method not found: code {}", msg.code),
                )
            };
            self.send_error(conn, msg.form, &msg.reply, t, None, code, &detail, None);
            return;
        };
        if method == "protocol.set_binary" {
            // Transport-level, like ping: allowed before agent.register.
            match self.on_set_binary(conn, &msg) {
                Ok(_) => self.metrics.count_message(types::name(t), label, "ok"),
                Err(r) => self.send_error(
                    conn,
                    msg.form,
                    &msg.reply,
                    t,
                    Some(&method),
                    r.code,
                    &r.message,
                    r.data,
                ),
            }
            return;
        }
        let registered = self.conns.get(&conn).and_then(|c| c.agent.clone());
        if method != "agent.register"
            && method != "ping"
            && label != "unknown"
            && registered.is_none()
        {
            self.send_error(
                conn,
                msg.form,
                &msg.reply,
                t,
                Some(&method),
                codes::AUTHENTICATION_FAILED,
                "agent.register required first",
                None,
            );
            return;
        }
        let result = match method.as_str() {
            "ping" => Ok(self.pong(now)),
            "agent.register" => self.on_register(conn, &msg, now),
            "agent.heartbeat" => self.on_heartbeat(conn, &msg, now),
            "agent.capability.update" => self.on_capability(conn, &msg),
            "agent.shutdown" => self.on_shutdown(conn, &msg, now),
            "task.progress" => self.on_progress(conn, &msg),
            "task.complete" => self.on_complete(conn, &msg),
            "collaboration.request" => self.on_collaboration(conn, &msg, now),
            "state.sync" => self.on_state_sync(conn, &msg),
            _ => Err(Refuse::new(
                codes::METHOD_NOT_FOUND,
                format!("method not found: {method}"),
            )),
        };
        match result {
            Ok(Value::Null) => {
                // Answered already (registration.confirmed) or deferred (collaboration).
                self.metrics.count_message(types::name(t), label, "ok");
            }
            Ok(body) => {
                if t == types::REQUEST {
                    // A response names no method: its id / sequence id matches it.
                    self.send(conn, msg.form, types::RESPONSE, None, &msg.reply, &body);
                }
                self.metrics.count_message(types::name(t), label, "ok");
            }
            Err(r) => {
                self.send_error(
                    conn,
                    msg.form,
                    &msg.reply,
                    t,
                    Some(&method),
                    r.code,
                    &r.message,
                    r.data,
                );
            }
        }
        if std::mem::take(&mut self.queue_dirty) {
            self.drain_queue();
        }
    }

    /// A response or error from an agent: the answer to a forwarded collaboration request.
    fn on_reply(&mut self, conn: ConnId, msg: Inbound) {
        let status = if msg.msg_type == types::ERROR {
            "error"
        } else {
            "ok"
        };
        self.metrics.count_message(
            types::name(msg.msg_type),
            method_label(msg.method.as_deref()),
            status,
        );
        let reply = msg.reply.clone();
        let Some((id, agent)) = self.pending.remove(&(conn, msg.reply)) else {
            return; // unsolicited or late: dropped
        };
        if !self.collabs.contains_key(&id) {
            return;
        }
        let mut answer = if msg.msg_type == types::ERROR {
            json!({"error": msg.body})
        } else {
            msg.body
        };
        // The answer goes on in the requester's result under `params.responses.<agent>`,
        // three levels down: deeper than the bound allows there, it is not forwarded.
        let limit = self.config.limits.max_json_depth.saturating_sub(3);
        let text = serde_json::to_vec(&answer).unwrap_or_default();
        if agentwire_core::check_json_depth(&text, limit).is_err() {
            let message = format!("collaboration response nested deeper than {limit} levels");
            let form = self.form_of(conn);
            self.send_error(
                conn,
                form,
                &reply,
                msg.msg_type,
                None,
                codes::CONTEXT_TOO_LARGE,
                &message,
                None,
            );
            answer = json!({"error": wire::error_body(codes::CONTEXT_TOO_LARGE, &message, None)});
        }
        let Some(c) = self.collabs.get_mut(&id) else {
            return;
        };
        c.waiting.remove(&agent);
        c.responses.insert(agent, answer);
        if c.waiting.is_empty() {
            self.finish_collab(id);
        }
    }

    fn agent_of(&self, conn: ConnId, claimed: &str) -> Result<String, Refuse> {
        match self.conns.get(&conn).and_then(|c| c.agent.as_deref()) {
            Some(a) if a == claimed => Ok(a.to_owned()),
            Some(_) => Err(Refuse::param(&ParamError {
                field: "agent_id".into(),
                reason: "Not this connection's agent",
                expected: "the registered agent_id",
                received: "string".into(),
            })),
            None => Err(Refuse::new(
                codes::AUTHENTICATION_FAILED,
                "agent.register required first".into(),
            )),
        }
    }

    fn on_register(&mut self, conn: ConnId, msg: &Inbound, now: Instant) -> Result<Value, Refuse> {
        let l = &self.config.limits;
        let r = params::register(&msg.body, l.max_id_bytes, l.max_capabilities)
            .map_err(|e| Refuse::param(&e))?;
        let current = self.conns.get(&conn).and_then(|c| c.agent.clone());
        if let Some(cur) = &current {
            if *cur != r.agent_id {
                return Err(Refuse::new(
                    codes::CONFLICT,
                    format!("this connection is registered as {cur:?}"),
                ));
            }
        }
        if current.is_none()
            && !self.agents.contains_key(&r.agent_id)
            && self.agents.len() >= l.max_agents
        {
            return Err(Refuse::new(codes::SERVER_ERROR, "too many agents".into()));
        }
        // The same agent id on another connection: the newer registration wins.
        if let Some(old) = self.agents.get(&r.agent_id).map(|a| a.conn) {
            if old != conn {
                self.remove_agent(&r.agent_id, RemovalReason::Replaced);
                self.out
                    .close(old, CloseCode::POLICY, "replaced by a newer registration");
            }
        }
        self.timers.cancel(&Timer::Register(conn));
        let agent_type = r.agent_type.clone().or_else(|| {
            self.conns
                .get(&conn)
                .map(|c| c.agent_type_label.clone())
                .filter(|t| t != "unknown")
        });
        let tasks = self
            .agents
            .get(&r.agent_id)
            .map(|a| a.tasks.clone())
            .unwrap_or_default();
        self.agents.insert(
            r.agent_id.clone(),
            AgentInfo {
                conn,
                agent_type,
                capabilities: r.capabilities.clone(),
                max_concurrent: r.max_concurrent,
                load: 0.0,
                status: None,
                health: Health::Healthy,
                tasks,
                last_heartbeat: now,
            },
        );
        if let Some(c) = self.conns.get_mut(&conn) {
            c.agent = Some(r.agent_id.clone());
        }
        self.arm_heartbeat(&r.agent_id, now, self.config.unhealthy_after);
        let interval_ms =
            u64::try_from(self.config.heartbeat_interval.as_millis()).unwrap_or(u64::MAX);
        let body = json!({
            "agent_id": r.agent_id,
            "session_id": format!("session-{}", conn.get()),
            "heartbeat_interval_ms": interval_ms,
            "accepted_capabilities": r.capabilities.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            "status": "registered",
            "server_time": rfc3339(self.wall_ms(now)),
        });
        // Replied as `registration.confirmed` whatever the request's type.
        self.send(
            conn,
            msg.form,
            types::RESPONSE,
            Some("registration.confirmed"),
            &msg.reply,
            &body,
        );
        self.out.event(OrchestratorEvent::Registered {
            conn,
            agent_id: r.agent_id,
            capabilities: r.capabilities.into_iter().map(|c| c.name).collect(),
            form: msg.form,
        });
        self.drain_queue();
        Ok(Value::Null)
    }

    fn on_heartbeat(&mut self, conn: ConnId, msg: &Inbound, now: Instant) -> Result<Value, Refuse> {
        let h = params::heartbeat(&msg.body, self.config.limits.max_id_bytes)
            .map_err(|e| Refuse::param(&e))?;
        let agent_id = self.agent_of(conn, &h.agent_id)?;
        let Some(a) = self.agents.get_mut(&agent_id) else {
            return Err(Refuse::new(codes::SERVER_ERROR, "agent vanished".into()));
        };
        a.last_heartbeat = now;
        a.status = h.status;
        if let Some(load) = h.load {
            a.load = load;
        }
        let recovered = a.health == Health::Unhealthy;
        if recovered {
            a.health = Health::Healthy;
        }
        if a.health != Health::ShuttingDown {
            self.arm_heartbeat(&agent_id, now, self.config.unhealthy_after);
        }
        if recovered {
            self.out.event(OrchestratorEvent::Recovered {
                agent_id: agent_id.clone(),
            });
            self.queue_dirty = true;
        }
        Ok(json!({"agent_id": agent_id, "status": "ok"}))
    }

    fn on_capability(&mut self, conn: ConnId, msg: &Inbound) -> Result<Value, Refuse> {
        let u = params::capability_update(&msg.body, self.config.limits.max_id_bytes)
            .map_err(|e| Refuse::param(&e))?;
        let agent_id = self.agent_of(conn, &u.agent_id)?;
        let max = self.config.limits.max_capabilities;
        let Some(a) = self.agents.get_mut(&agent_id) else {
            return Err(Refuse::new(codes::SERVER_ERROR, "agent vanished".into()));
        };
        let name = u.capability.name.clone();
        let pos = a.capabilities.iter().position(|c| c.name == name);
        match (u.op, pos) {
            (CapabilityOp::Remove, Some(i)) => {
                a.capabilities.remove(i);
            }
            (CapabilityOp::Remove, None) => {
                return Err(Refuse::new(
                    codes::CONFLICT,
                    format!("no capability {name:?} to remove"),
                ));
            }
            (_, Some(i)) => a.capabilities[i] = u.capability,
            (_, None) if a.capabilities.len() >= max => {
                return Err(Refuse::param(&ParamError {
                    field: "capability".into(),
                    reason: "Too many",
                    expected: "fewer capabilities",
                    received: "object".into(),
                }));
            }
            (_, None) => a.capabilities.push(u.capability),
        }
        let names: Vec<&str> = a.capabilities.iter().map(|c| c.name.as_str()).collect();
        let body = json!({"agent_id": agent_id, "capabilities": names});
        self.out.event(OrchestratorEvent::CapabilityChanged {
            agent_id,
            operation: u.op,
            capability: name,
        });
        self.queue_dirty = true;
        Ok(body)
    }

    fn on_shutdown(&mut self, conn: ConnId, msg: &Inbound, now: Instant) -> Result<Value, Refuse> {
        let s = params::shutdown(&msg.body, self.config.limits.max_id_bytes)
            .map_err(|e| Refuse::param(&e))?;
        let agent_id = self.agent_of(conn, &s.agent_id)?;
        let grace = Duration::from_millis(s.graceful_timeout_ms.unwrap_or(0))
            .min(self.config.max_shutdown_grace);
        let Some(a) = self.agents.get_mut(&agent_id) else {
            return Err(Refuse::new(codes::SERVER_ERROR, "agent vanished".into()));
        };
        a.health = Health::ShuttingDown;
        let tasks: Vec<String> = if s.transfer_tasks {
            std::mem::take(&mut a.tasks).into_iter().collect()
        } else {
            Vec::new()
        };
        self.timers.cancel(&Timer::Heartbeat(agent_id.clone()));
        self.timers
            .set(Timer::Shutdown(agent_id.clone()), now + grace);
        let mut moved = Vec::new();
        for task_id in &tasks {
            // A transfer is not a failure of the task: the attempt is given back.
            if let Some(t) = self.tasks.get_mut(task_id) {
                t.attempts = t.attempts.saturating_sub(1);
            }
            self.reassign(task_id, &agent_id);
            if let Some(TaskState::Assigned(to)) = self.tasks.get(task_id).map(|t| &t.state) {
                moved.push(json!({"task_id": task_id, "agent_id": to}));
            } else {
                moved.push(json!({"task_id": task_id, "agent_id": null}));
            }
        }
        self.out.event(OrchestratorEvent::ShutdownRequested {
            agent_id: agent_id.clone(),
            transferred: tasks.len(),
        });
        Ok(json!({
            "agent_id": agent_id,
            "status": "shutting_down",
            "graceful_timeout_ms": u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
            "transferred_tasks": moved,
            "reason": s.reason,
        }))
    }

    /// The task `task_id` if it is assigned to `agent_id`.
    fn assigned_task(&self, task_id: &str, agent_id: &str) -> Result<(), Refuse> {
        match self.tasks.get(task_id).map(|t| &t.state) {
            Some(TaskState::Assigned(a)) if a == agent_id => Ok(()),
            Some(_) => Err(Refuse::new(
                codes::CONFLICT,
                format!("task {task_id:?} is not assigned to {agent_id:?}"),
            )),
            None => Err(Refuse::new(
                codes::CONFLICT,
                format!("unknown task {task_id:?}"),
            )),
        }
    }

    fn on_progress(&mut self, conn: ConnId, msg: &Inbound) -> Result<Value, Refuse> {
        let p = params::progress(&msg.body, self.config.limits.max_id_bytes)
            .map_err(|e| Refuse::param(&e))?;
        let agent_id = self.agent_of(conn, &p.agent_id)?;
        self.assigned_task(&p.task_id, &agent_id)?;
        if let Some(t) = self.tasks.get_mut(&p.task_id) {
            t.progress = p.progress;
        }
        self.out.event(OrchestratorEvent::TaskProgress {
            task_id: p.task_id.clone(),
            agent_id,
            progress: p.progress,
            status: p.status,
        });
        Ok(json!({"task_id": p.task_id, "status": "ok"}))
    }

    fn on_complete(&mut self, conn: ConnId, msg: &Inbound) -> Result<Value, Refuse> {
        let c = params::complete(&msg.body, self.config.limits.max_id_bytes)
            .map_err(|e| Refuse::param(&e))?;
        let agent_id = self.agent_of(conn, &c.agent_id)?;
        self.assigned_task(&c.task_id, &agent_id)?;
        self.tasks.remove(&c.task_id);
        self.timers.cancel(&Timer::Task(c.task_id.clone()));
        if let Some(a) = self.agents.get_mut(&agent_id) {
            a.tasks.remove(&c.task_id);
        }
        self.out.event(OrchestratorEvent::TaskCompleted {
            task_id: c.task_id.clone(),
            agent_id,
            status: c.status,
            result: c.result,
        });
        let body = json!({"task_id": c.task_id, "status": "accepted"});
        // A slot is free: queued work may go now (after the reply).
        self.queue_dirty = true;
        Ok(body)
    }

    fn on_collaboration(
        &mut self,
        conn: ConnId,
        msg: &Inbound,
        now: Instant,
    ) -> Result<Value, Refuse> {
        let l = &self.config.limits;
        let c = params::collaboration(&msg.body, l.max_id_bytes, l.max_collaborators)
            .map_err(|e| Refuse::param(&e))?;
        let requester = self.agent_of(conn, &c.requesting_agent).map_err(|r| {
            if r.code == codes::INVALID_PARAMS {
                Refuse::param(&ParamError {
                    field: "requesting_agent".into(),
                    reason: "Not this connection's agent",
                    expected: "the registered agent_id",
                    received: "string".into(),
                })
            } else {
                r
            }
        })?;
        if self.collabs.len() >= l.max_collaborations {
            return Err(Refuse::new(
                codes::SERVER_ERROR,
                "too many collaborations".into(),
            ));
        }
        let timeout = c
            .timeout_ms
            .map_or(
                self.config.default_collaboration_timeout,
                Duration::from_millis,
            )
            .min(self.config.max_collaboration_timeout);
        let id = self.next_seq;
        self.next_seq += 1;
        let mut asked = Vec::new();
        let mut waiting = BTreeSet::new();
        for agent in &c.required_agents {
            if asked.contains(agent) {
                continue;
            }
            asked.push(agent.clone());
            let Some(target) = self.agents.get(agent).map(|a| a.conn) else {
                continue; // not registered: reported as missing
            };
            if *agent == requester {
                continue;
            }
            let form = self.form_of(target);
            let key = self.new_key(form);
            self.send(
                target,
                form,
                types::REQUEST,
                Some("collaboration.request"),
                &key,
                &msg.body,
            );
            self.pending.insert((target, key), (id, agent.clone()));
            waiting.insert(agent.clone());
        }
        self.out.event(OrchestratorEvent::CollaborationStarted {
            task_id: c.task_id.clone(),
            requester,
            agents: waiting.iter().cloned().collect(),
        });
        self.collabs.insert(
            id,
            Collab {
                origin: conn,
                origin_reply: msg.reply.clone(),
                origin_form: msg.form,
                task_id: c.task_id,
                collaboration_type: c.collaboration_type,
                asked,
                waiting,
                responses: BTreeMap::new(),
            },
        );
        if self.collabs.get(&id).is_some_and(|c| c.waiting.is_empty()) {
            self.finish_collab(id);
        } else {
            self.timers.set(Timer::Collab(id), now + timeout);
        }
        Ok(Value::Null)
    }

    fn on_state_sync(&mut self, conn: ConnId, msg: &Inbound) -> Result<Value, Refuse> {
        let crdt = &self.config.crdt;
        let s = params::state_sync(
            &msg.body,
            self.config.limits.max_id_bytes,
            crdt.max_ops_per_sync,
            crdt.max_clock_actors,
        )
        .map_err(|e| Refuse::param(&e))?;
        let agent_id = self.agent_of(conn, &s.agent_id)?;
        let outcome = self
            .state
            .apply_sync(&agent_id, &s.clock, &s.ops)
            .map_err(|e| {
                let code = match e {
                    StoreError::KindConflict(_) => codes::CONFLICT,
                    StoreError::Limit(_) => codes::CONTEXT_TOO_LARGE,
                    _ => codes::INVALID_PARAMS,
                };
                Refuse {
                    code,
                    message: e.to_string(),
                    data: Some(json!({"field": e.field(), "reason": e.to_string()})),
                }
            })?;
        self.out.event(OrchestratorEvent::StateSynced {
            agent_id: agent_id.clone(),
            outcome,
        });
        Ok(json!({
            "agent_id": agent_id,
            "applied": matches!(outcome, SyncOutcome::Applied { .. }),
            "vector_clock": self.state.clock(),
        }))
    }

    fn on_timer(&mut self, key: Timer, now: Instant) {
        match key {
            Timer::Register(conn) => {
                if self.conns.get(&conn).is_some_and(|c| c.agent.is_none()) {
                    self.out.close(conn, CloseCode::POLICY, "register-required");
                }
            }
            Timer::Heartbeat(agent_id) => {
                let cfg = (
                    self.config.heartbeat_interval,
                    self.config.unhealthy_after,
                    self.config.remove_after,
                );
                let Some(a) = self.agents.get_mut(&agent_id) else {
                    return;
                };
                let remove_at = a.last_heartbeat + cfg.0.saturating_mul(cfg.2);
                if now >= remove_at {
                    let conn = a.conn;
                    self.remove_agent(&agent_id, RemovalReason::HeartbeatTimeout);
                    self.out.close(conn, CloseCode::POLICY, "heartbeat-timeout");
                } else {
                    let became = a.health == Health::Healthy;
                    a.health = Health::Unhealthy;
                    let last = a.last_heartbeat;
                    self.arm_heartbeat(&agent_id, last, cfg.2);
                    if became {
                        self.out.event(OrchestratorEvent::Unhealthy { agent_id });
                    }
                }
            }
            Timer::Task(task_id) => {
                if self.tasks.contains_key(&task_id) {
                    self.fail_task(&task_id, TaskFailure::DeadlineExceeded);
                }
            }
            Timer::Collab(id) => self.finish_collab(id),
            Timer::Shutdown(agent_id) => {
                if let Some(conn) = self.agents.get(&agent_id).map(|a| a.conn) {
                    self.remove_agent(&agent_id, RemovalReason::Shutdown);
                    self.out.close(conn, CloseCode::NORMAL, "shutdown");
                }
            }
        }
    }
}

// ---- batches, binary mode, undecodable frames ---------------------------------------------

impl Orchestrator {
    /// A frame (or batch entry) the codec refused: its error, with the id it carried.
    fn on_wire_error(&mut self, conn: ConnId, e: wire::WireError, registered: bool) {
        // Register first: an unregistered peer's bad params for any other method are
        // answered as its other messages are, with 4001.
        if !registered && e.method.is_some_and(|m| m != "agent.register") {
            self.send_error(
                conn,
                e.form,
                &e.reply,
                types::REQUEST,
                e.method,
                codes::AUTHENTICATION_FAILED,
                "agent.register required first",
                None,
            );
            return;
        }
        self.send_error(
            conn,
            e.form,
            &e.reply,
            types::REQUEST,
            None,
            e.code,
            &e.detail,
            e.data,
        );
    }

    /// A batch: each entry handled in order as if it came alone (each beyond the first
    /// takes its own token from the rate limit), and everything sent to this connection
    /// meanwhile goes back as one batch (several if more than the codec's `max_batch`),
    /// with the batch's id or sequence id, in the form and body the peer used.
    fn on_batch(&mut self, conn: ConnId, batch: InboundBatch, now: Instant) {
        self.batching = Some((conn, Vec::new()));
        let rate = self.config.rate;
        for (i, entry) in batch.entries.into_iter().enumerate() {
            let limited = match (rate, self.conns.get_mut(&conn)) {
                (Some(rate), Some(c)) if i > 0 => {
                    c.bucket.as_mut().is_some_and(|b| !b.take(&rate, now))
                }
                (_, None) => break,
                _ => false,
            };
            let registered = self.conns.get(&conn).is_some_and(|c| c.agent.is_some());
            match entry {
                Ok(msg) if limited => {
                    self.send_error(
                        conn,
                        msg.form,
                        &msg.reply,
                        msg.msg_type,
                        None,
                        codes::RATE_LIMITED,
                        "rate limit exceeded",
                        None,
                    );
                }
                Ok(msg) => self.on_message(conn, msg, now),
                Err(e) => self.on_wire_error(conn, e, registered),
            }
        }
        let Some((_, held)) = self.batching.take() else {
            return;
        };
        if !self.conns.contains_key(&conn) {
            return;
        }
        let max = self.codec.limits().max_batch.max(1);
        for chunk in held.chunks(max) {
            let mut reply = crate::Message::batch(chunk.to_vec());
            match &batch.reply {
                ReplyKey::Id(id) => reply.id = Some(id.clone()),
                ReplyKey::Seq(n) => reply.seq = *n,
                ReplyKey::None => {}
            }
            self.send_message(conn, batch.form, &reply, batch.body);
        }
    }

    /// `protocol.set_binary` (the real server's request): `{"enabled": bool, "compression":
    /// {"enabled": bool, "threshold": n}}`; empty, `null` or `{}` params switch binary mode
    /// off. Answered (to a request) in the current form, then the connection switches.
    fn on_set_binary(&mut self, conn: ConnId, msg: &Inbound) -> Result<Value, Refuse> {
        let (enabled, compression) =
            params::set_binary(&msg.body).map_err(|e| Refuse::param(&e))?;
        let body = json!({
            "binary_enabled": enabled,
            "compression_enabled": compression.is_some(),
            "status": "protocol_updated",
        });
        if msg.msg_type == types::REQUEST {
            self.send(conn, msg.form, types::RESPONSE, None, &msg.reply, &body);
        }
        self.mode_switch = Some((conn, enabled.then_some(compression)));
        Ok(Value::Null)
    }
}

/// An error reply about to be sent.
#[derive(Debug)]
struct Refuse {
    code: u16,
    message: String,
    data: Option<Value>,
}

impl Refuse {
    fn new(code: u16, message: String) -> Self {
        Self {
            code,
            message,
            data: None,
        }
    }

    fn param(e: &ParamError) -> Self {
        Self {
            code: codes::INVALID_PARAMS,
            message: format!("Invalid parameters: {} ({})", e.field, e.reason),
            data: Some(e.to_data()),
        }
    }
}

impl Machine for Orchestrator {
    type Event = OrchestratorEvent;

    fn handle_connect(&mut self, conn: ConnId, peer: &PeerInfo, now: Instant) {
        let now = self.clock.observe(now);
        if self.conns.contains_key(&conn) {
            return;
        }
        if self.conns.len() >= self.config.limits.max_connections {
            self.out
                .close(conn, CloseCode::TRY_AGAIN_LATER, "server-full");
            return;
        }
        let agent_type = peer.header("x-agent-type").map(str::to_owned);
        let agent_id = peer.header("x-agent-id").map(str::to_owned);
        // `X-Protocol: mcpw-binary-v1` announces the binary form before the first frame.
        let form = peer
            .header("x-protocol")
            .filter(|p| p.contains("binary"))
            .map(|_| Form::Binary);
        let label = agent_type.clone().unwrap_or_else(|| "unknown".to_owned());
        self.metrics.add_connection(&label, "none", 1);
        self.conns.insert(
            conn,
            Conn {
                form,
                compact: None,
                bucket: self.config.rate.map(|_| TokenBucket::new(now)),
                agent: None,
                agent_type_label: label,
                counted_as: None,
            },
        );
        if let Some(t) = self.config.register_timeout {
            self.timers.set(Timer::Register(conn), now + t);
        }
        self.out.event(OrchestratorEvent::Connected {
            conn,
            agent_id,
            agent_type,
        });
    }

    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        let now = self.clock.observe(now);
        let frame_form = match frame {
            Frame::Text(_) => Form::Json,
            Frame::Binary(b) if crate::compact::is_compact(b) => Form::Compact,
            Frame::Binary(_) => Form::Binary,
        };
        let rate = self.config.rate;
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        // Replies follow the form the peer uses.
        c.form = Some(frame_form);
        if c.counted_as != Some(frame_form) {
            let old = c.counted_as.map_or("none", form_label);
            let label = c.agent_type_label.clone();
            c.counted_as = Some(frame_form);
            self.metrics.add_connection(&label, old, -1);
            self.metrics
                .add_connection(&label, form_label(frame_form), 1);
        }
        self.last_method = None;
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if let (Some(bucket), Some(rate)) = (c.bucket.as_mut(), rate) {
            if !bucket.take(&rate, now) {
                let retry = bucket.retry_after(&rate, now);
                // The reply names the refused message: its id (JSON) or sequence id.
                let reply = wire::key_of_bad(frame);
                let data =
                    json!({"retry_after_ms": u64::try_from(retry.as_millis()).unwrap_or(u64::MAX)});
                self.send_error(
                    conn,
                    frame_form,
                    &reply,
                    types::REQUEST,
                    None,
                    codes::RATE_LIMITED,
                    "rate limit exceeded",
                    Some(data),
                );
                return;
            }
        }
        let max = self.config.limits.max_message_bytes;
        if frame.len() > max.saturating_add(24) || (frame.is_text() && frame.len() > max) {
            self.send_error(
                conn,
                frame_form,
                &wire::key_of_bad(frame),
                types::REQUEST,
                None,
                codes::CONTEXT_TOO_LARGE,
                "message too large",
                Some(json!({"limit": max})),
            );
            return;
        }
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let registered = c.agent.is_some();
        match wire::decode(&mut self.codec, frame) {
            Ok(Decoded::One(msg)) => self.on_message(conn, msg, now),
            Ok(Decoded::Batch(batch)) => self.on_batch(conn, batch, now),
            Err(e) => self.on_wire_error(conn, e, registered),
        }
        if let Some((c, mode)) = self.mode_switch.take() {
            if let Some(c) = self.conns.get_mut(&c) {
                c.compact = mode;
            }
        }
    }

    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        self.clock.observe(now);
        let Some(c) = self.conns.remove(&conn) else {
            return;
        };
        self.out.forget_conn(conn);
        self.timers.cancel(&Timer::Register(conn));
        self.metrics.add_connection(
            &c.agent_type_label,
            c.counted_as.map_or("none", form_label),
            -1,
        );
        if let Some(agent_id) = &c.agent {
            let reason = if self
                .agents
                .get(agent_id)
                .is_some_and(|a| a.health == Health::ShuttingDown)
            {
                RemovalReason::Shutdown
            } else {
                RemovalReason::Disconnected
            };
            self.remove_agent(agent_id, reason);
        }
        self.pending.retain(|(pc, _), _| *pc != conn);
        // Collaborations this connection asked for end without a reply.
        let mine: Vec<u64> = self
            .collabs
            .iter()
            .filter(|(_, col)| col.origin == conn)
            .map(|(id, _)| *id)
            .collect();
        for id in mine {
            self.finish_collab(id);
        }
        self.out.event(OrchestratorEvent::Disconnected {
            conn,
            agent_id: c.agent,
        });
    }

    fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        while let Some(key) = self.timers.pop_expired(now) {
            self.on_timer(key, now);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next_deadline()
    }

    fn poll_output(&mut self) -> Option<Output<OrchestratorEvent>> {
        self.out.pop()
    }
}

//! The orchestration server: the [`Orchestrator`] machine and what it is built from.
//!
//! - this module: the [`Orchestrator`] itself, its [`Machine`] impl and the routing of each
//!   message to its handler;
//! - sub-states that own their data and timers: connections, the agent registry (health,
//!   heartbeats), tasks (queue, deadlines), collaborations, and the [`CrdtStore`];
//! - [`routing`]: the capability score that picks an agent for a task;
//! - [`metrics`]: Prometheus text with the spec's metric names;
//! - [`upgrade`]: the pre-upgrade policy (426 / 401 / 503 / 429) for the transport's hook.
//!
//! This module is just over 700 lines because the routing of every message of the spec to
//! its handler reads best as one match.
//!
//! Its [`OrchestratorConfig`] and
//! [`OrchestratorLimits`] are in the crate's `config`, its errors
//! ([`CommandError`], [`ProtocolError`]) in the crate's `error`.

mod agents;
mod checks;
mod collabs;
mod conns;
mod event;
mod flows;
mod frames;
mod idempotency;
mod linger;
mod methods;
pub mod metrics;
pub mod routing;
mod tasks;
mod texts;
pub mod upgrade;
mod votes;
mod wire;

use std::time::Instant;

use agentwire_core::{
    CloseCode, ConnId, Frame, IdGen, Machine, Monotonic, Outbox, Output, PeerInfo, TokenBucket,
    WallClock,
};
use serde::Serialize;

pub use self::agents::{AgentInfo, Health};
pub use self::event::{OrchestratorEvent, RemovalReason, TaskFailure};
pub use self::metrics::Metrics;
pub use self::tasks::{TaskInfo, TaskSpec, TaskState};
pub use self::upgrade::{
    Admission, AuthFailure, Refusal, UpgradeConfig, UpgradePolicy, SUBPROTOCOL,
};
pub use crate::config::{OrchestratorConfig, OrchestratorLimits};
pub use crate::error::{CommandError, ParamError, ProtocolError};
pub use crate::params::CapabilityOperation;
pub use crate::Form;

use self::agents::{Agents, HeartbeatRule};
use self::collabs::Collabs;
use self::conns::{Conn, Conns};
use self::tasks::Tasks;
use self::wire::ReplyKey;
use crate::config::BatchForm;
use crate::crdt::CrdtStore;
use crate::error::ErrorBody;
use crate::{AgentId, Body, Codec, Message, MessageType, TaskId};

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
    "state.get",
    "ping",
];

/// The metrics label of a method: its name if the orchestrator handles it, else `unknown`.
fn method_label(m: Option<&str>) -> &'static str {
    m.and_then(|m| METHODS.iter().find(|k| **k == m).copied())
        .unwrap_or("unknown")
}

/// The orchestration server (spec: "the orchestration server"): agents register, heartbeat,
/// receive routed tasks and report progress and completion, ask each other for
/// collaboration, and sync replicated state.
///
/// # The four kinds of method
///
/// - `handle_*` ([`Machine`]): frames, connects, disconnects and time.
/// - `poll_*`: output (frames in the form each peer uses, closes, [`OrchestratorEvent`]s).
/// - commands: [`submit_task`](Self::submit_task), [`cancel_task`](Self::cancel_task).
/// - getters: [`agent`](Self::agent), [`agents`](Self::agents), [`task`](Self::task),
///   [`state`](Self::state), [`metrics`](Self::metrics) (and [`metrics_mut`](Self::metrics_mut)
///   for the driver's latency samples), [`last_method`](Self::last_method),
///   [`protocol_version`](Self::protocol_version).
pub struct Orchestrator {
    config: OrchestratorConfig,
    ids: Box<dyn IdGen>,
    out: Outbox<OrchestratorEvent>,
    clock: Monotonic,
    /// The wall clock (Unix ms) anchored at `new`'s `now`: deadlines, `server_time` and pong
    /// timestamps.
    wall: WallClock,
    conns: Conns,
    agents: Agents,
    tasks: Tasks,
    collabs: Collabs,
    /// Answers kept under idempotency keys.
    replays: idempotency::Replays,
    /// The next sequence id of a server-side message in the 24-byte form (and the next
    /// collaboration's id).
    next_seq: u64,
    store: CrdtStore,
    /// Connections sharing the state (they sent `state.sync` or `state.get`): each gets
    /// every other agent's merged syncs.
    state_subscribers: std::collections::BTreeSet<ConnId>,
    metrics: Metrics,
    last_method: Option<&'static str>,
    /// Queued tasks may be routable now (drained after the current reply is sent).
    queue_dirty: bool,
    /// One codec for every connection: it keeps nothing between frames, only its gzip
    /// state and buffers, which would cost hundreds of KiB per connection if each had one.
    codec: Codec,
    /// While a batch is handled: its connection and the messages for it, sent as one batch
    /// reply once every entry is handled.
    batching: Option<(ConnId, Vec<Message>)>,
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

/// Which sub-state's timer is due (in this order when several are due at one instant).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum TimerKind {
    Register,
    Heartbeat,
    Task,
    Collab,
    Shutdown,
    Linger,
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
        let store = CrdtStore::new(config.crdt.clone());
        let codec = wire::codec_for(
            config.limits.max_message_bytes,
            config.limits.max_json_depth,
            config.compression,
        );
        let mut clock = Monotonic::new();
        clock.observe(now);
        Self {
            config,
            ids: Box::new(ids),
            out: Outbox::new(),
            clock,
            wall: WallClock::new(now, unix_ms),
            conns: Conns::default(),
            agents: Agents::default(),
            tasks: Tasks::default(),
            collabs: Collabs::default(),
            replays: idempotency::Replays::default(),
            next_seq: 1,
            store,
            state_subscribers: Default::default(),
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
    pub fn agents(&self) -> impl Iterator<Item = (&AgentId, &AgentInfo)> {
        self.agents.iter()
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
        &self.store
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
    pub fn submit_task(&mut self, spec: TaskSpec, now: Instant) -> Result<TaskId, CommandError> {
        let now = self.clock.observe(now);
        if self.tasks.len() >= self.config.limits.max_tasks {
            return Err(CommandError::TooManyTasks);
        }
        let task_id = match &spec.task_id {
            Some(id) => TaskId::from(id.as_str()),
            None => TaskId::from(format!("task-{}", self.ids.next_id().hyphenated().as_str())),
        };
        if self.tasks.contains(&task_id) {
            return Err(CommandError::DuplicateTask(task_id.into_string()));
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
        self.tasks.insert(task_id.clone(), spec, deadline);
        if !self.try_assign(&task_id) {
            self.tasks.enqueue(task_id.clone());
            self.out.event(OrchestratorEvent::TaskQueued {
                task_id: task_id.clone(),
            });
        }
        Ok(task_id)
    }

    /// Cancels task `task_id`: its agent, if it holds it, is told with a 4006 naming it
    /// (and messages it had already sent about it are answered 4006 for
    /// [`cancel_grace`](OrchestratorConfig::cancel_grace), not 4008); a queued task leaves
    /// the queue. [`OrchestratorEvent::TaskFailed`] with [`TaskFailure::Cancelled`]
    /// follows.
    pub fn cancel_task(&mut self, task_id: &str, now: Instant) -> Result<(), CommandError> {
        self.clock.observe(now);
        if !self.tasks.contains(task_id) {
            return Err(CommandError::UnknownTask(task_id.to_owned()));
        }
        self.fail_task(task_id, TaskFailure::Cancelled);
        Ok(())
    }

    // ---- output -------------------------------------------------------------------------------

    /// The heartbeat rule of the configuration.
    fn heartbeat_rule(&self) -> HeartbeatRule {
        HeartbeatRule {
            interval: self.config.heartbeat_interval,
            unhealthy_after: self.config.unhealthy_after,
            remove_after: self.config.remove_after,
        }
    }

    /// The form messages to `conn` go in now.
    fn form_of(&self, conn: ConnId) -> Form {
        if self.batching.as_ref().is_some_and(|(c, _)| *c == conn) {
            // Messages inside a batch travel in their JSON form, matched by id.
            return Form::Json;
        }
        self.conns
            .get(conn)
            .and_then(|c| c.form)
            .unwrap_or(Form::Json)
    }

    /// Sends `body` as a message of type `kind` to `conn` in `form`, keyed `reply` (held
    /// for the batch reply while `conn`'s batch is handled).
    fn send(&mut self, conn: ConnId, form: Form, kind: MessageType, reply: &ReplyKey, body: Body) {
        let mut m = Message::new(kind, body);
        reply.stamp(&mut m);
        if kind == MessageType::ERROR {
            // Errors (4006 cancellations included) go first (decision 39).
            m.flags = m.flags.with(crate::Flags::PRIORITY);
        }
        if let Some((c, held)) = &mut self.batching {
            if *c == conn {
                held.push(m);
                return;
            }
        }
        // Small messages the server starts may wait for the next batch (decision 58).
        let Some(m) = self.hold(conn, form, m) else {
            return;
        };
        self.send_message(conn, form, &m, BatchForm::Json);
    }

    /// Sends the typed `result` of a request: a response that names no method.
    fn respond(&mut self, conn: ConnId, form: Form, reply: &ReplyKey, result: &impl Serialize) {
        let body = wire::result_body(None, result);
        self.send(conn, form, MessageType::RESPONSE, reply, body);
    }

    /// Encodes `m` for `conn` in `form` (a text-frame form turns into the 12-byte form on a
    /// connection in binary mode) and queues it.
    fn send_message(&mut self, conn: ConnId, form: Form, m: &Message, batch: BatchForm) {
        let compact = self.conns.get(conn).and_then(|c| c.compact);
        let (form, threshold) = match (form, compact) {
            (Form::Json, Some(t)) | (Form::Compact, Some(t)) => (Form::Compact, t),
            (f, _) => (f, Some(self.codec.config().compression.threshold)),
        };
        let mut frame = wire::encode_message(&mut self.codec, form, m, threshold, batch);
        if let Some(signer) = &self.config.hmac {
            frame = signer.seal(frame);
        }
        self.metrics.count_frame(false, frame.len());
        self.out.send(conn, frame);
    }

    /// Answers a message of type `kind` (naming `method`) with `error`, counts it and
    /// reports it.
    fn refuse(
        &mut self,
        conn: ConnId,
        (form, reply): (Form, &ReplyKey),
        (kind, method): (MessageType, Option<&str>),
        error: ProtocolError,
    ) {
        let body = Body::Error(error.to_error_body());
        self.send(conn, form, MessageType::ERROR, reply, body);
        self.metrics.count_error(error.code());
        self.metrics.count_message(
            metrics::type_label(kind),
            method_label(method),
            metrics::status_label(error.code()),
        );
        self.out
            .event(OrchestratorEvent::ProtocolViolation { conn, error });
    }

    /// A new server-side message key for a request or notification to `conn` in `form`: a
    /// JSON id, or the connection's next sequence id (decision 38).
    fn new_key(&mut self, conn: ConnId, form: Form) -> ReplyKey {
        match form {
            Form::Json | Form::Compact => {
                ReplyKey::Id(self.ids.next_id().hyphenated().as_str().to_owned())
            }
            Form::Binary => ReplyKey::Seq(self.conns.get_mut(conn).map_or(0, |c| c.seq.next())),
        }
    }

    /// The key of an error the server starts (not an answer): a JSON id, or sequence id 0
    /// (errors are not numbered, decision 38).
    fn unnumbered_key(&mut self, form: Form) -> ReplyKey {
        match form {
            Form::Json | Form::Compact => {
                ReplyKey::Id(self.ids.next_id().hyphenated().as_str().to_owned())
            }
            Form::Binary => ReplyKey::Seq(0),
        }
    }

    // ---- routing -------------------------------------------------------------------------------

    /// Routes one decoded message to its handler and answers it.
    fn on_message(&mut self, conn: ConnId, msg: wire::Inbound, now: Instant) {
        let label = method_label(msg.method());
        self.last_method = Some(label);
        let t = msg.kind;
        match t {
            MessageType::PING => {
                let pong = self.pong(now);
                let body = wire::result_body(msg.method(), &pong);
                self.send(conn, msg.form, MessageType::PONG, &msg.reply, body);
                self.metrics.count_message("ping", label, "ok");
                return;
            }
            MessageType::PONG => {
                self.metrics.count_message("pong", label, "ok");
                return;
            }
            MessageType::RESPONSE | MessageType::ERROR => {
                self.on_reply(conn, msg);
                return;
            }
            MessageType::REQUEST | MessageType::NOTIFICATION | MessageType::PROGRESS => {}
            _ => {
                let at = (msg.form, &msg.reply);
                self.refuse(conn, at, (t, None), ProtocolError::UnsupportedType);
                return;
            }
        }
        let at = (msg.form, &msg.reply);
        let Some(method) = msg.method().map(str::to_owned) else {
            // A method code this side has no name for is an unknown method, not a
            // malformed message.
            let error = match msg.body.code().0 {
                0 => ProtocolError::MethodRequired,
                code => ProtocolError::UnknownMethodCode(code),
            };
            self.refuse(conn, at, (t, None), error);
            return;
        };
        if method == "protocol.set_binary" {
            // Transport-level, like ping: allowed before agent.register.
            match self.on_set_binary(conn, &msg) {
                Ok(()) => self
                    .metrics
                    .count_message(metrics::type_label(t), label, "ok"),
                Err(e) => self.refuse(conn, at, (t, Some(&method)), e),
            }
            return;
        }
        let registered = self.conns.agent(conn).is_some();
        if method == crate::stream::STREAM_PART {
            // A part of a streamed message (decision 50): the whole is handled on its last.
            let result = if registered {
                self.on_stream_part(conn, &msg, now)
            } else {
                Err(ProtocolError::RegisterFirst)
            };
            match result {
                Ok(()) => self
                    .metrics
                    .count_message(metrics::type_label(t), label, "ok"),
                Err(e) => self.refuse(conn, at, (t, Some(&method)), e),
            }
            return;
        }
        if method != "agent.register" && method != "ping" && label != "unknown" && !registered {
            self.refuse(conn, at, (t, Some(&method)), ProtocolError::RegisterFirst);
            return;
        }
        let result = match &msg.body {
            Body::Other(_) if method == "ping" => {
                let pong = self.pong(now);
                Ok(Some(wire::result_body(None, &pong)))
            }
            Body::AgentRegister(p) => self.on_register(conn, p, at, now),
            Body::AgentHeartbeat(p) => self.on_heartbeat(conn, p, now),
            Body::CapabilityUpdate(p) => self.on_capability(conn, p, now),
            Body::AgentShutdown(p) => self.on_shutdown(conn, p, now),
            Body::TaskProgress(p) => self.on_progress(conn, p, now),
            Body::TaskComplete(p) => self.on_complete(conn, p, now),
            Body::CollaborationRequest(p) => self.on_collaboration(conn, p, at, now),
            Body::StateSync(p) => self.on_state_sync(conn, p),
            Body::Other(_) if method == "state.get" => self.on_state_get(conn),
            _ => Err(ProtocolError::MethodNotFound(method.clone())),
        };
        match result {
            Ok(None) => {
                // Answered already (registration.confirmed) or deferred (collaboration).
                self.metrics
                    .count_message(metrics::type_label(t), label, "ok");
            }
            Ok(Some(body)) => {
                if t == MessageType::REQUEST {
                    // A response names no method: its id / sequence id matches it.
                    self.send(conn, msg.form, MessageType::RESPONSE, &msg.reply, body);
                }
                self.metrics
                    .count_message(metrics::type_label(t), label, "ok");
            }
            Err(e) => self.refuse(conn, at, (t, Some(&method)), e),
        }
        if std::mem::take(&mut self.queue_dirty) {
            self.drain_queue();
        }
    }

    /// The body of a ping's reply, as the reference server writes it:
    /// `{"pong": true, "timestamp": <unix ms at now>}`.
    fn pong(&self, now: Instant) -> crate::params::Pong {
        crate::params::Pong {
            pong: true,
            timestamp: self.wall.unix_ms(now),
        }
    }

    // ---- timers --------------------------------------------------------------------------------

    /// The sub-state timer due first by `now`, if any (by deadline, then by kind).
    fn due(&self, now: Instant) -> Option<TimerKind> {
        [
            (self.conns.next_deadline(), TimerKind::Register),
            (self.agents.next_heartbeat(), TimerKind::Heartbeat),
            (self.tasks.next_deadline(), TimerKind::Task),
            (self.collabs.next_timeout(), TimerKind::Collab),
            (self.agents.next_shutdown(), TimerKind::Shutdown),
            (self.conns.next_linger(), TimerKind::Linger),
        ]
        .into_iter()
        .filter_map(|(at, kind)| at.filter(|at| *at <= now).map(|at| (at, kind)))
        .min()
        .map(|(_, kind)| kind)
    }

    /// Runs one due timer of `kind`.
    fn on_timer(&mut self, kind: TimerKind, now: Instant) {
        match kind {
            TimerKind::Register => {
                if let Some(conn) = self.conns.pop_expired(now) {
                    if self.conns.get(conn).is_some_and(|c| c.agent.is_none()) {
                        self.out
                            .close(conn, CloseCode::POLICY, texts::CLOSE_REGISTER_REQUIRED);
                    }
                }
            }
            TimerKind::Heartbeat => {
                if let Some(agent_id) = self.agents.pop_heartbeat(now) {
                    self.on_heartbeat_due(agent_id, now);
                }
            }
            TimerKind::Task => {
                if let Some(task_id) = self.tasks.pop_expired(now) {
                    if self.tasks.contains(&task_id) {
                        self.fail_task(&task_id, TaskFailure::DeadlineExceeded);
                    }
                }
            }
            TimerKind::Collab => {
                if let Some(id) = self.collabs.pop_expired(now) {
                    self.finish_collab(id);
                }
            }
            TimerKind::Shutdown => {
                if let Some(agent_id) = self.agents.pop_shutdown(now) {
                    if let Some(conn) = self.agents.conn_of(&agent_id) {
                        self.remove_agent(&agent_id, RemovalReason::Shutdown);
                        self.out
                            .close(conn, CloseCode::NORMAL, texts::CLOSE_SHUTDOWN);
                    }
                }
            }
            TimerKind::Linger => {
                if let Some(conn) = self.conns.pop_linger(now) {
                    self.flush_held(conn);
                }
            }
        }
    }
}

impl Machine for Orchestrator {
    type Event = OrchestratorEvent;

    fn handle_connect(&mut self, conn: ConnId, peer: &PeerInfo, now: Instant) {
        let now = self.clock.observe(now);
        if self.conns.contains(conn) {
            return;
        }
        if self.conns.len() >= self.config.limits.max_connections {
            self.out
                .close(conn, CloseCode::TRY_AGAIN_LATER, texts::CLOSE_SERVER_FULL);
            return;
        }
        let agent_type = peer.header("x-agent-type").map(str::to_owned);
        let agent_id = peer.header("x-agent-id").map(AgentId::from);
        if let Some(claimed) = &agent_id {
            // `agent.register` must name the same agent.
            self.agents.claim(conn, claimed.clone());
        }
        // `X-Protocol: mcpw-binary-v1` announces the binary form before the first frame.
        let form = peer
            .header("x-protocol")
            .filter(|p| p.contains("binary"))
            .map(|_| Form::Binary);
        let label = agent_type.clone().unwrap_or_else(|| "unknown".to_owned());
        self.metrics.add_connection(&label, "none", 1);
        let c = Conn {
            form,
            compact: None,
            bucket: self.config.rate.map(|_| TokenBucket::new(now)),
            agent: None,
            agent_type_label: label,
            counted_as: None,
            seq: Default::default(),
            version: peer
                .subprotocol
                .as_deref()
                .and_then(crate::header::version_of)
                .unwrap_or(crate::VERSION),
            streams: Default::default(),
            held: Vec::new(),
        };
        let register_by = self.config.register_timeout.map(|t| now + t);
        self.conns.open(conn, c, register_by);
        self.out.event(OrchestratorEvent::Connected {
            conn,
            agent_id,
            agent_type,
        });
    }

    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        let now = self.clock.observe(now);
        self.on_frame(conn, frame, now);
        if let Some((c, mode)) = self.mode_switch.take() {
            if let Some(c) = self.conns.get_mut(c) {
                c.compact = mode;
            }
        }
    }

    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        self.clock.observe(now);
        let Some(c) = self.conns.close(conn) else {
            return;
        };
        self.out.forget_conn(conn);
        self.agents.unclaim(conn);
        self.state_subscribers.remove(&conn);
        self.metrics.add_connection(
            &c.agent_type_label,
            c.counted_as.map_or("none", Form::label),
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
        // Collaborations this connection asked for end without a reply.
        for id in self.collabs.forget_conn(conn) {
            self.finish_collab(id);
        }
        self.out.event(OrchestratorEvent::Disconnected {
            conn,
            agent_id: c.agent,
        });
    }

    fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        while let Some(kind) = self.due(now) {
            self.on_timer(kind, now);
        }
    }

    /// Re-anchors the wall clock of `server_time`, wire deadlines and pong timestamps.
    fn handle_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        self.wall.set(self.clock.observe(now), unix_ms);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        [
            self.conns.next_deadline(),
            self.agents.next_heartbeat(),
            self.tasks.next_deadline(),
            self.collabs.next_timeout(),
            self.agents.next_shutdown(),
            self.conns.next_linger(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn poll_output(&mut self) -> Option<Output<OrchestratorEvent>> {
        self.metrics.set_compression(self.codec.compression_stats());
        self.out.pop()
    }
}

/// An error body for a deferred answer that could not be forwarded.
fn error_answer(error: &ProtocolError) -> serde_json::Value {
    #[derive(Serialize)]
    struct Answer {
        error: ErrorBody,
    }
    serde_json::to_value(Answer {
        error: error.to_error_body(),
    })
    .unwrap_or_default()
}

//! The [`Agent`]: MCPW's agent role, one connection at a time, surviving reconnects.
//!
//! Longer than the workspace's 700 lines because the routing of every message the server
//! sends stays in one place beside the `Machine` impl; what the agent keeps and does for
//! each concern is in its own module (tasks, retries and cancellation, shutdown, the
//! shared state, reconnect waits).

mod event;
mod linger;
mod link;
mod redial;
mod reliability;
mod replica;
mod reply;
mod retry;
mod shutdown;
mod state;
mod streaming;
mod tasks;

use std::time::{Duration, Instant};

use agentwire_core::{
    CloseCode, ConnId, Dial, Dialer, Frame, FrameBuf, IdGen, Machine, Monotonic, Outbox, Output,
    PeerInfo, SequentialIds, WallClock,
};
use serde::Serialize;

use crate::codec::{Codec, Form};
use crate::config::AgentConfig;
use crate::error::{AgentCommandError, ErrorBody, ErrorCode, ProtocolError};
use crate::header::MessageType;
use crate::message::{Body, Message, OtherCall, TaskId};
use crate::params::{
    AgentHeartbeat, CapabilitiesNow, HeartbeatMetrics, Pong, SetBinary, SetBinaryCompression,
    SetBinaryResult, TaskAck, TaskComplete, TaskProgress, Workload,
};

pub use event::{AgentEvent, CollaborationId, Request};
use link::{key_of, Link, ReplyKey};
use redial::Redial;
use replica::Replica;
use tasks::Tasks;

/// Close reason when [`Agent::shutdown`] ends the connection.
pub const CLOSE_SHUTDOWN: &str = "shutdown";
/// Close reason when [`Agent::close`] ends the connection.
pub const CLOSE_CLOSED: &str = "agent-closed";

/// The shortest heartbeat period a server's `heartbeat_interval_ms` can ask for (a hostile
/// or broken server asking for 0 cannot make the agent flood it).
const MIN_HEARTBEAT: Duration = Duration::from_millis(100);

/// A collaboration answer: `{"agent_id", "vote"}`.
#[derive(Serialize)]
struct Vote<'a> {
    agent_id: &'a str,
    vote: &'a str,
}

/// The MCPW agent role, sans IO: what a worker connected to an orchestration server does.
///
/// On every new connection it sends `agent.register` ([`AgentConfig::register`]); once the
/// server confirms, it sends `agent.heartbeat` every [`AgentConfig::heartbeat_interval`]
/// (with its held tasks as `active_tasks`/`queue_depth` and the load and status the
/// application set). Tasks arrive as [`AgentEvent::TaskAssigned`]; the application reports
/// on them ([`report_progress`](Self::report_progress), type 7) and finishes them
/// ([`complete_task`](Self::complete_task)), whose acceptance arrives as
/// [`AgentEvent::CompletionAccepted`]. Forwarded `collaboration.request`s arrive as
/// [`AgentEvent::CollaborationRequested`] and are answered with
/// [`answer_collaboration`](Self::answer_collaboration). [`set_binary`](Self::set_binary)
/// asks for the real server's 12-byte form, which both sides speak once the server
/// confirmed. Pings (type 4, or a `ping` request) are answered with a pong; any other
/// request the agent does not serve gets a 4004 error naming it.
/// [`shutdown`](Self::shutdown) announces `agent.shutdown` and stops after the answer.
///
/// It implements [`Dialer`]: run it with `agentwire_tokio::Client::connect_dialer`, which
/// dials only when the machine asks, so the reconnect waits are this machine's
/// ([`AgentConfig::reconnect`]: 500 ms doubling to 30 s, starting over only after a
/// connection that stayed up 30 s), tested in simulated time.
///
/// The four kinds of method, as in quinn:
/// - input: [`Machine::handle_connect`], [`Machine::handle_frame`],
///   [`Machine::handle_disconnect`], [`Machine::handle_timeout`],
///   [`Dialer::handle_dial_failed`];
/// - output: [`Machine::poll_output`], [`Machine::poll_timeout`], [`Dialer::poll_dial`];
/// - commands: [`Agent::report_progress`], [`Agent::complete_task`],
///   [`Agent::update_capability`], [`Agent::request_collaboration`],
///   [`Agent::answer_collaboration`], [`Agent::set_binary`], [`Agent::set_load`],
///   [`Agent::set_status`], [`Agent::set_wall_clock`], [`Agent::shutdown`],
///   [`Agent::close`]; the shared state's [`Agent::state_increment`],
///   [`Agent::state_add`], [`Agent::state_remove`], [`Agent::refresh_state`];
/// - getters: [`Agent::agent_id`], [`Agent::conn`], [`Agent::is_registered`],
///   [`Agent::is_compact`], [`Agent::tasks`], [`Agent::failures`], [`Agent::is_stopped`],
///   [`Agent::state`] (the replica of the shared state, decision 54),
///   [`Agent::is_state_ready`].
///
/// Requests refused with a retryable error are sent again ([`AgentConfig::retry`]); a
/// task the server cancels (4006) is let go of ([`AgentEvent::TaskCancelled`]).
///
/// Its spec decisions are 31-36 and 42-47 of the [crate docs](crate#spec-decisions).
///
/// # Limits
///
/// | limit | default | beyond it |
/// |---|---|---|
/// | [`AgentConfig::max_tasks`] | 64 | [`AgentEvent::TaskDropped`] |
/// | [`AgentConfig::max_collaborations`] | 64 | answered 4003 |
/// | [`AgentConfig::max_pending`] | 64 capability updates and collaboration requests awaiting an answer | [`AgentCommandError::TooManyPending`] |
/// | [`AgentConfig::retry`] | 4 sends, 500 ms doubling to 10 s | the error is reported |
/// | [`AgentConfig::max_pending_syncs`] | 64 | [`AgentCommandError::State`] |
/// | [`AgentConfig::crdt`] | [`CrdtLimits`](crate::crdt::CrdtLimits) defaults | a sync that would break one is refused; a full sync that does, reported |
/// | [`AgentConfig::codec`] | [`Limits`](crate::Limits) defaults | [`AgentEvent::ProtocolViolation`] |
pub struct Agent {
    config: AgentConfig,
    codec: Codec,
    clock: Monotonic,
    /// Pong timestamps: [`set_wall_clock`](Self::set_wall_clock)'s anchor, else 0 at the
    /// first connection.
    wall: Option<WallClock>,
    out: Outbox<AgentEvent>,
    link: Option<Link>,
    tasks: Tasks,
    /// The replica of the shared CRDT state.
    replica: Replica,
    redial: Redial,
    /// The message counter behind ids and sequence ids.
    seq: u64,
    /// The heartbeat's `workload.current_load`.
    load: Option<f64>,
    /// The heartbeat's `status`.
    status: String,
    /// A shutdown is under way: no reconnect; the connection closes by this deadline.
    stopping: Option<Instant>,
    /// The server answered the shutdown: the connection closes once no task is held.
    shutdown_answered: bool,
    /// Stopped for good.
    stopped: bool,
    /// Where idempotency keys come from.
    ids: Box<dyn IdGen>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("agent_id", &self.agent_id())
            .field("conn", &self.conn())
            .field("tasks", &self.tasks.len())
            .field("stopped", &self.stopped)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// An agent that dials at once ([`Dialer::poll_dial`] says [`Dial::Now`]).
    pub fn new(config: AgentConfig) -> Self {
        let crdt = config.crdt.clone();
        Self {
            codec: Codec::new(config.codec.clone()),
            config,
            clock: Monotonic::new(),
            wall: None,
            out: Outbox::new(),
            link: None,
            tasks: Tasks::default(),
            replica: Replica::new(crdt),
            redial: Redial::default(),
            seq: 0,
            load: None,
            status: "healthy".to_owned(),
            stopping: None,
            shutdown_answered: false,
            stopped: false,
            ids: Box::new(SequentialIds::new(0)),
        }
    }

    /// This agent with idempotency keys from `ids` (default: [`SequentialIds`] with seed 0,
    /// deterministic). A process that may restart within the server's idempotency TTL
    /// should give random ids (`agentwire_core::UuidV4Ids`), so that a new message never
    /// reuses a key of its previous life.
    #[must_use]
    pub fn with_ids(mut self, ids: impl IdGen + 'static) -> Self {
        self.ids = Box::new(ids);
        self
    }

    // ----- getters -----

    /// The agent's id (of [`AgentConfig::register`]).
    pub fn agent_id(&self) -> &str {
        &self.config.register.agent_id
    }

    /// The configuration it was made with (e.g. [`AgentConfig::subprotocols`], what the
    /// driver offers at the upgrade).
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// The open connection.
    pub fn conn(&self) -> Option<ConnId> {
        self.link.as_ref().map(|l| l.conn)
    }

    /// Whether the server confirmed `agent.register` on the open connection.
    pub fn is_registered(&self) -> bool {
        self.link.as_ref().is_some_and(Link::is_registered)
    }

    /// The protocol version of the open connection: the highest of
    /// [`AgentConfig::protocol_versions`] the server speaks too, as its upgrade answer
    /// named it (the subprotocol `mcp.v<n>`; decision 49). `None` without a connection or
    /// when the server named no version (then it is 1, the header's).
    pub fn protocol_version(&self) -> Option<u8> {
        self.link.as_ref().and_then(|l| l.version)
    }

    /// Whether the connection speaks the server's 12-byte form.
    pub fn is_compact(&self) -> bool {
        self.link.as_ref().is_some_and(|l| l.compact.is_some())
    }

    /// The held tasks' ids, in order.
    pub fn tasks(&self) -> impl Iterator<Item = &str> {
        self.tasks.held()
    }

    /// Connection attempts (or short-lived connections) that failed in a row.
    pub fn failures(&self) -> u32 {
        self.redial.failures()
    }

    /// Whether the agent stopped for good.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    // ----- commands -----

    /// Sends `task.progress` (type 7) for a held task. `agent_id` is set to this agent's,
    /// and an idempotency key unless one is given; a retryable refusal sends it again.
    pub fn report_progress(&mut self, mut report: TaskProgress) -> Result<(), AgentCommandError> {
        self.check_task(&report.task_id)?;
        report.agent_id.clone_from(&self.config.register.agent_id);
        if report.idempotency_key.is_none() {
            report.idempotency_key = Some(self.idempotency_key());
        }
        let about = Request::Progress {
            task_id: TaskId::from(report.task_id.as_str()),
        };
        let body = Body::TaskProgress(report);
        self.send_tracked(MessageType::PROGRESS, body, about, false)
    }

    /// Sends `task.complete` for a held task, which the agent then lets go of; the answer
    /// arrives as [`AgentEvent::CompletionAccepted`] or [`AgentEvent::ErrorReceived`].
    /// `agent_id` is set to this agent's, and an idempotency key unless one is given; a
    /// retryable refusal sends it again.
    pub fn complete_task(&mut self, mut done: TaskComplete) -> Result<(), AgentCommandError> {
        self.check_task(&done.task_id)?;
        done.agent_id.clone_from(&self.config.register.agent_id);
        if done.idempotency_key.is_none() {
            done.idempotency_key = Some(self.idempotency_key());
        }
        let task_id = TaskId::from(done.task_id.as_str());
        let about = Request::Complete {
            task_id: task_id.clone(),
        };
        self.send_tracked(MessageType::REQUEST, Body::TaskComplete(done), about, true)?;
        self.tasks.complete(&task_id);
        if let Some(link) = &mut self.link {
            // Earlier progress reports are settled by the completion.
            link.retries.forget_progress(&task_id);
        }
        Ok(())
    }

    /// Answers a forwarded collaboration request with `{"agent_id", "vote": vote}`
    /// (`approve`, `reject`, ...).
    pub fn answer_collaboration(
        &mut self,
        id: CollaborationId,
        vote: &str,
    ) -> Result<(), AgentCommandError> {
        self.check_open()?;
        let key = self
            .tasks
            .take_collaboration(id)
            .ok_or(AgentCommandError::UnknownCollaboration)?;
        let answer = Vote {
            agent_id: &self.config.register.agent_id,
            vote,
        };
        let answer =
            serde_json::to_value(&answer).map_err(|e| AgentCommandError::Encode(e.to_string()))?;
        self.reply(key, MessageType::RESPONSE, answer)
    }

    /// Asks the server (`protocol.set_binary`) to switch this connection to its 12-byte
    /// form (`enabled`; gzip above `compression` bytes when `Some`), or back. Once the
    /// server confirms, the agent speaks that form too ([`AgentEvent::BinaryMode`]).
    pub fn set_binary(
        &mut self,
        enabled: bool,
        compression: Option<usize>,
    ) -> Result<(), AgentCommandError> {
        let link = self.check_open()?;
        if link.set_binary.is_some() {
            return Err(AgentCommandError::SetBinaryPending);
        }
        let params = SetBinary {
            enabled: Some(enabled),
            compression: Some(SetBinaryCompression {
                enabled: Some(compression.is_some()),
                threshold: Some(compression.map_or(0, |t| u64::try_from(t).unwrap_or(u64::MAX))),
            }),
        };
        let params =
            serde_json::to_value(params).map_err(|e| AgentCommandError::Encode(e.to_string()))?;
        let msg = self.message(
            MessageType::REQUEST,
            Body::Other(OtherCall::new("protocol.set_binary", params)),
        );
        self.send(&msg)?;
        if let Some(link) = &mut self.link {
            link.set_binary = Some(enabled.then_some(compression));
            link.pending.insert(key_of(&msg), Request::SetBinary);
        }
        Ok(())
    }

    /// Sets the heartbeat's `workload.current_load` (0-1; `None` leaves it out), which the
    /// orchestrator's routing reads.
    pub fn set_load(&mut self, load: Option<f64>) {
        self.load = load;
    }

    /// Sets the heartbeat's `status` (default `healthy`).
    pub fn set_status(&mut self, status: impl Into<String>) {
        self.status = status.into();
    }

    /// Anchors pong timestamps: `unix_ms` is the wall-clock time at `now`. Without it they
    /// count milliseconds from the agent's first connection.
    pub fn set_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        let now = self.clock.observe(now);
        self.wall = Some(WallClock::new(now, unix_ms));
    }

    /// Stops at once: closes the connection (1000) without a word and stops dialing.
    pub fn close(&mut self, now: Instant) {
        self.clock.observe(now);
        if !self.stopped {
            self.close_link(CLOSE_CLOSED);
            self.stop();
        }
    }

    // ----- internals -----

    fn check_open(&self) -> Result<&Link, AgentCommandError> {
        if self.stopped {
            return Err(AgentCommandError::Stopped);
        }
        self.link.as_ref().ok_or(AgentCommandError::NotConnected)
    }

    fn check_task(&self, task_id: &str) -> Result<(), AgentCommandError> {
        self.check_open()?;
        if self.tasks.holds(task_id) {
            Ok(())
        } else if self.tasks.was_dropped(task_id) {
            Err(AgentCommandError::Cancelled(task_id.to_owned()))
        } else {
            Err(AgentCommandError::UnknownTask(task_id.to_owned()))
        }
    }

    /// Whether frames go in the 24-byte form (until the 12-byte form is switched on).
    fn binary(&self) -> bool {
        self.config.binary
    }

    /// A new message of type `kind` with `body` and this agent's next id (JSON and
    /// 12-byte forms) or sequence id (24-byte form).
    fn message(&mut self, kind: MessageType, body: Body) -> Message {
        self.seq += 1;
        let msg = Message::new(kind, body);
        if self.binary() && !self.is_compact() {
            msg.with_seq(self.seq)
        } else {
            msg.with_id(format!("{}-{}", self.config.register.agent_id, self.seq))
        }
    }

    /// Encodes `msg` in the connection's form and queues it.
    fn send(&mut self, msg: &Message) -> Result<(), AgentCommandError> {
        if self.hold(msg) {
            // Waits for the next batch (decision 58).
            return Ok(());
        }
        let Some(link) = &self.link else {
            return Err(AgentCommandError::NotConnected);
        };
        let conn = link.conn;
        let frame = match link.compact {
            Some(threshold) => {
                let mut out = Vec::new();
                self.codec
                    .encode_compact_with(msg, threshold, &mut out)
                    .map(|_| FrameBuf::binary(out))
            }
            None if self.config.binary => self.codec.encode_ws(msg, Form::Binary),
            None => self.codec.encode_ws(msg, Form::Json),
        };
        if self.too_large(&frame) {
            // Too large for one frame: streamed in parts (decision 50).
            return self.send_streamed(msg);
        }
        let frame = frame.map_err(|e| AgentCommandError::Encode(e.to_string()))?;
        let frame = match &self.config.hmac {
            Some(signer) => signer.seal(frame),
            None => frame,
        };
        self.out.send(conn, frame);
        Ok(())
    }

    /// Sends a message the agent starts itself; a failure to encode it is reported.
    fn send_own(&mut self, msg: &Message) {
        if let Err(AgentCommandError::Encode(e)) = self.send(msg) {
            self.out.event(AgentEvent::EncodeFailed(e));
        }
    }

    /// Answers the message `key` names with `kind` (a response or a pong) carrying `params`.
    fn reply(
        &mut self,
        key: ReplyKey,
        kind: MessageType,
        params: serde_json::Value,
    ) -> Result<(), AgentCommandError> {
        let mut msg = Message::new(kind, Body::Other(OtherCall::new("", params)));
        (msg.id, msg.seq) = key;
        self.send(&msg)
    }

    /// Answers the message `key` names with a type-3 error.
    fn reply_error(&mut self, key: ReplyKey, error: ErrorBody) {
        let mut msg = Message::error(error);
        (msg.id, msg.seq) = key;
        self.send_own(&msg);
    }

    fn heartbeat(&mut self) {
        let held = self.tasks.len() as u64;
        let beat = AgentHeartbeat {
            agent_id: self.config.register.agent_id.clone(),
            status: Some(self.status.clone()),
            metrics: Some(HeartbeatMetrics {
                active_tasks: Some(held),
                ..HeartbeatMetrics::default()
            }),
            workload: Some(Workload {
                current_load: self.load,
                queue_depth: Some(held),
                processing_rate: None,
            }),
        };
        let msg = self.message(MessageType::NOTIFICATION, Body::AgentHeartbeat(beat));
        self.send_own(&msg);
    }

    /// Closes the open connection (1000) and forgets it.
    fn close_link(&mut self, reason: &'static str) {
        if let Some(link) = self.link.take() {
            self.out.close(link.conn, CloseCode::NORMAL, reason);
        }
        self.tasks.forget();
        self.replica.disconnected();
    }

    /// Stops for good.
    fn stop(&mut self) {
        self.stopped = true;
        self.stopping = None;
        self.redial.clear();
        self.out.event(AgentEvent::Stopped);
    }

    fn on_message(&mut self, msg: Message, now: Instant) {
        let key = key_of(&msg);
        let kind = msg.kind;
        if kind == MessageType::PING {
            self.answer_ping(key, MessageType::PONG, now);
            return;
        }
        if kind == MessageType::PONG {
            return;
        }
        match msg.body {
            Body::Batch(entries) => {
                for entry in entries {
                    self.on_message(entry, now);
                }
            }
            Body::RegistrationConfirmed(c) => {
                let Some(link) = &mut self.link else { return };
                link.pending.remove(&key);
                link.retries.answered(&key);
                // The server's period wins, so that a mismatch never gets the agent dropped;
                // the agent's own setting is the fallback when the server names none.
                let period = c
                    .heartbeat_interval_ms
                    .map_or(self.config.heartbeat_interval, |ms| {
                        Duration::from_millis(ms).max(MIN_HEARTBEAT)
                    });
                link.start_heartbeats(now, period);
                self.out.event(AgentEvent::Registered(c));
                if self.config.shared_state {
                    self.fetch_state();
                }
            }
            Body::TaskAssigned(t) => {
                if self.tasks.assign(&t.task_id, self.config.max_tasks) {
                    self.out.event(AgentEvent::TaskAssigned(t));
                } else {
                    self.out.event(AgentEvent::TaskDropped {
                        task_id: t.task_id.into(),
                    });
                }
            }
            Body::CollaborationRequest(request) if kind == MessageType::REQUEST => {
                match self
                    .tasks
                    .add_collaboration(key.clone(), self.config.max_collaborations)
                {
                    Some(id) => self
                        .out
                        .event(AgentEvent::CollaborationRequested { id, request }),
                    None => self.reply_error(
                        key,
                        ErrorBody::new(
                            ErrorCode::SERVER_ERROR,
                            "too many collaboration requests awaiting an answer",
                        )
                        .with_data(serde_json::json!({
                            "reason": "Too many collaboration requests awaiting an answer",
                        })),
                    ),
                }
            }
            Body::StateSync(p) if kind == MessageType::NOTIFICATION => {
                self.on_state_notification(&p);
            }
            Body::Error(error) => {
                let Some(error) = self.intercept_error(&key, error, now) else {
                    return;
                };
                let about = self.take_pending(&key);
                match about {
                    Some(ref r @ (Request::StateGet | Request::StateSync { .. })) => {
                        self.on_state_refused(r);
                    }
                    Some(Request::SetBinary) => {
                        if let Some(link) = &mut self.link {
                            link.set_binary = None;
                        }
                    }
                    Some(Request::Shutdown) => self.finish_shutdown(),
                    _ => {}
                }
                self.out.event(AgentEvent::ErrorReceived { error, about });
            }
            Body::Other(call) if kind == MessageType::RESPONSE => {
                self.on_response(&key, call.params);
            }
            Body::Other(call) if kind == MessageType::REQUEST && call.method == "ping" => {
                self.answer_ping(key, MessageType::RESPONSE, now);
            }
            body if kind == MessageType::REQUEST => {
                let method = body.method().unwrap_or_default();
                let message = if method.is_empty() {
                    format!("method not found: code {}", body.code().0)
                } else {
                    format!("method not found: {method}")
                };
                let received = if method.is_empty() {
                    body.code().0.to_string()
                } else {
                    method.to_owned()
                };
                let data = serde_json::json!({
                    "field": "method", "reason": "Method not found",
                    "expected": "a method this agent serves", "received": received,
                });
                let error = ErrorBody::new(ErrorCode::METHOD_NOT_FOUND, message).with_data(data);
                self.reply_error(key, error);
            }
            // Notifications and responses the agent has no use for.
            _ => {}
        }
    }

    /// The pending request `key` answers, if any.
    fn take_pending(&mut self, key: &ReplyKey) -> Option<Request> {
        self.link.as_mut()?.pending.remove(key)
    }

    fn on_response(&mut self, key: &ReplyKey, params: serde_json::Value) {
        if let Some(link) = &mut self.link {
            link.retries.answered(key);
        }
        match self.take_pending(key) {
            Some(Request::SetBinary) => {
                let on = serde_json::from_value::<SetBinaryResult>(params)
                    .is_ok_and(|r| r.binary_enabled);
                let Some(link) = &mut self.link else { return };
                let asked = link.set_binary.take().flatten();
                // The server switched after this reply; so does the agent.
                link.compact = if on {
                    Some(asked.unwrap_or(None))
                } else {
                    None
                };
                self.out.event(AgentEvent::BinaryMode { enabled: on });
            }
            Some(Request::Complete { task_id }) => {
                let status = serde_json::from_value::<TaskAck>(params)
                    .ok()
                    .map(|r| r.status);
                self.out
                    .event(AgentEvent::CompletionAccepted { task_id, status });
                self.maybe_finish_shutdown();
            }
            Some(Request::CapabilityUpdate { .. }) => {
                match serde_json::from_value::<CapabilitiesNow>(params) {
                    Ok(now) => self.out.event(AgentEvent::CapabilitiesUpdated(now)),
                    Err(e) => self.out.event(AgentEvent::ProtocolViolation(ErrorBody::new(
                        ErrorCode::INVALID_PARAMS,
                        format!("agent.capability.update answer: {e}"),
                    ))),
                }
            }
            Some(Request::Collaboration { task_id }) => {
                self.out.event(AgentEvent::CollaborationAnswered {
                    task_id,
                    result: params,
                });
            }
            Some(Request::Shutdown) => {
                self.out.event(AgentEvent::ShutdownAccepted);
                self.finish_shutdown();
            }
            Some(r @ (Request::StateGet | Request::StateSync { .. })) => {
                self.on_state_answer(&r, params);
            }
            // `registration.confirmed` is read as such; anything else is not an answer
            // the agent waits for.
            Some(Request::Register | Request::Progress { .. }) | None => {}
        }
    }

    fn answer_ping(&mut self, key: ReplyKey, kind: MessageType, now: Instant) {
        let pong = Pong {
            pong: true,
            timestamp: self.wall.map_or(0, |w| w.unix_ms(now)),
        };
        if let Ok(pong) = serde_json::to_value(pong) {
            if let Err(AgentCommandError::Encode(e)) = self.reply(key, kind, pong) {
                self.out.event(AgentEvent::EncodeFailed(e));
            }
        }
    }
}

impl Machine for Agent {
    type Event = AgentEvent;

    /// A connection opened: the agent registers on it. Ignored once stopped.
    fn handle_connect(&mut self, conn: ConnId, peer: &PeerInfo, now: Instant) {
        let now = self.clock.observe(now);
        if self.stopped {
            self.out.close(conn, CloseCode::NORMAL, CLOSE_CLOSED);
            return;
        }
        self.redial.clear();
        self.wall.get_or_insert(WallClock::new(now, 0));
        let mut link = Link::new(conn, now);
        link.version = peer
            .subprotocol
            .as_deref()
            .and_then(crate::header::version_of);
        self.link = Some(link);
        let body = Body::AgentRegister(self.config.register.clone());
        if let Err(AgentCommandError::Encode(e)) =
            self.send_tracked(MessageType::REQUEST, body, Request::Register, true)
        {
            self.out.event(AgentEvent::EncodeFailed(e));
        }
    }

    /// A frame from the server; frames of any other connection are ignored.
    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        let now = self.clock.observe(now);
        if self.conn() != Some(conn) {
            return;
        }
        let frame = match self.config.hmac.as_ref().map(|s| s.open(frame)) {
            None => frame,
            Some(Ok(opened)) => opened,
            Some(Err(e)) => {
                let error = ProtocolError::BadSignature(e).to_error_body();
                self.out.event(AgentEvent::ProtocolViolation(error));
                return;
            }
        };
        match self.codec.decode_ws(frame) {
            Ok((msg, form)) => {
                if self
                    .link
                    .as_mut()
                    .is_some_and(|l| l.is_fresh(&msg, form, &mut self.out))
                {
                    self.on_message(msg, now);
                }
            }
            Err(e) => self
                .out
                .event(AgentEvent::ProtocolViolation(e.to_error_body())),
        }
    }

    /// The connection ended: held tasks are forgotten and the next attempt waits (or, during
    /// a shutdown, the agent stops).
    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        let now = self.clock.observe(now);
        if self.conn() != Some(conn) {
            return;
        }
        let Some(link) = self.link.take() else { return };
        self.tasks.forget();
        self.replica.disconnected();
        if self.stopping.is_some() {
            self.stop();
            return;
        }
        let retry_in = self.redial.ended(&self.config.reconnect, link.opened, now);
        self.out.event(AgentEvent::Disconnected { retry_in });
    }

    /// Heartbeats, retries, the end of a reconnect wait, the shutdown deadline. Idempotent.
    fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        self.redial.handle_timeout(now);
        if self.link.as_mut().is_some_and(|l| l.heartbeat_due(now)) {
            self.heartbeat();
        }
        self.resend_due(now);
        self.flush_due(now);
        if self.stopping.is_some_and(|at| at <= now) {
            self.close_link(CLOSE_SHUTDOWN);
            self.stop();
        }
    }

    /// Re-anchors the wall clock of pong timestamps ([`set_wall_clock`](Self::set_wall_clock)).
    fn handle_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        self.set_wall_clock(now, unix_ms);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        [
            self.redial.next_deadline(),
            self.link.as_ref().and_then(Link::next_deadline),
            self.stopping,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn poll_output(&mut self) -> Option<Output<AgentEvent>> {
        self.out.pop()
    }
}

impl Dialer for Agent {
    fn poll_dial(&self) -> Dial {
        if self.stopped {
            Dial::Stop
        } else if self.link.is_none() && !self.redial.is_waiting() {
            Dial::Now
        } else {
            Dial::Wait
        }
    }

    fn handle_dial_failed(&mut self, reason: &str, now: Instant) {
        let now = self.clock.observe(now);
        if self.stopped || self.link.is_some() {
            return;
        }
        if self.stopping.is_some() {
            self.stop();
            return;
        }
        let retry_in = self.redial.failed(&self.config.reconnect, now);
        self.out.event(AgentEvent::ConnectFailed {
            reason: reason.to_owned(),
            failures: self.redial.failures(),
            retry_in,
        });
    }
}

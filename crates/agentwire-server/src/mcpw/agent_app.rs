//! The reference agent: the crate's [`Agent`] machine plus a simulated worker. It registers
//! with its capabilities, heartbeats, works on each task it is assigned (progress reports,
//! then completion, one step apart), and approves collaboration requests.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use agentwire::core::{
    ConnId, Dial, Dialer, Disconnect, Frame, Machine, Output, PeerInfo, TimerSet, UuidV4Ids,
};
use agentwire::mcpw::{
    self, Agent, AgentConfig, AgentRegister, Capability, CollaborationRequest, CompressPolicy,
    ErrorBody, ModelInfo, Reconnect, RegistrationConfirmed, Resources, TaskAssigned, TaskComplete,
    TaskId, TaskProgress, TaskResult,
};
use agentwire::tokio::{Client, ClientConfig, Events, Handle};
use serde_json::json;

pub use super::agent_text::describe;
use super::agent_text::upgrade_required;

/// What the agent is.
#[derive(Debug, Clone)]
pub struct AgentSettings {
    /// `agent_id`.
    pub agent_id: String,
    /// `agent_type`.
    pub agent_type: String,
    /// `capabilities` of `agent.register`.
    pub capabilities: Vec<Capability>,
    /// Binary frames instead of JSON text.
    pub binary: bool,
    /// Heartbeat period, used only when `registration.confirmed` names none (the server's
    /// `heartbeat_interval_ms` wins).
    pub heartbeat: Duration,
    /// Progress reports per task before completion.
    pub steps: u32,
    /// Time per step.
    pub step: Duration,
    /// Shared secret for HMAC message authentication; `None`: the environment variable
    /// `MCPW_HMAC_SECRET` ([`HMAC_SECRET_ENV`](super::server_app::HMAC_SECRET_ENV)) if set,
    /// else unsigned frames.
    pub hmac_secret: Option<String>,
}

/// How the agent speaks on the wire, beyond its form: the protocol versions it offers, when
/// it gzips, and whether it batches what it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct WireSettings {
    /// The protocol versions offered at the upgrade, as the subprotocols `mcp.v<n>` (the
    /// server selects the highest it speaks too). Default: every version the crate speaks
    /// ([`mcpw::VERSIONS`]).
    pub protocol_versions: Vec<u8>,
    /// When outgoing payloads over 1 KiB are gzipped. Default
    /// [`CompressPolicy::IfSmaller`] (the reference server's rule);
    /// [`CompressPolicy::SPEC_ENTROPY`] is the spec's adaptive rule.
    pub compression: CompressPolicy,
    /// Sender-side batching: small messages the agent starts (heartbeats, progress reports,
    /// requests) wait up to this long and leave as one batch, in the JSON and 12-byte forms.
    /// Default `None`: every message leaves at once.
    pub batch_linger: Option<Duration>,
}

impl Default for WireSettings {
    fn default() -> Self {
        Self {
            protocol_versions: mcpw::VERSIONS.to_vec(),
            compression: CompressPolicy::IfSmaller,
            batch_linger: None,
        }
    }
}

/// A `task.complete` the server accepted.
#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    /// The task.
    pub task_id: TaskId,
    /// The answer's `status` (`accepted`).
    pub status: Option<String>,
}

/// What the agent reports.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AgentEvent {
    /// `registration.confirmed` arrived.
    Registered(RegistrationConfirmed),
    /// A task arrived.
    TaskAssigned(TaskAssigned),
    /// A progress report was sent.
    ProgressSent {
        /// The task reported on.
        task_id: String,
        /// The progress sent, 0.0 to 1.0.
        progress: f64,
    },
    /// `task.complete` was sent.
    Completed {
        /// The task completed.
        task_id: String,
    },
    /// The server accepted the completion.
    CompletionAccepted(Accepted),
    /// A collaboration request arrived and was answered with the agent's vote
    /// ([`AgentMachine::with_vote`], default `approve`).
    Collaborated(CollaborationRequest),
    /// The server's result of this agent's collaboration request (from this crate's
    /// orchestrator, a [`CollaborationResult`](agentwire::mcpw::CollaborationResult), whose
    /// `outcome` is the tally of a vote).
    CollaborationResult {
        /// The task it is about.
        task_id: TaskId,
        /// The result.
        result: serde_json::Value,
    },
    /// The agent's replica of the shared state changed: another agent's sync arrived
    /// (`from`), or the server's full sync replaced it (`from: None`). Only with
    /// [`AgentMachine::with_shared_state`].
    StateUpdated {
        /// The agent whose sync was applied.
        from: Option<String>,
        /// The shared `tasks_completed` counter now.
        tasks_completed: u64,
    },
    /// The server cancelled a task (4006): the worker stopped working on it.
    Cancelled {
        /// The task.
        task_id: TaskId,
        /// The server's message.
        reason: String,
    },
    /// The server refused a request with a retryable error: the agent's
    /// [`mcpw::AgentEvent::Retrying`], which carries the wait before it is sent again.
    Retrying(mcpw::AgentEvent),
    /// The server answered `agent.shutdown`; the agent closes once its tasks are done or
    /// handed over.
    ShutdownAccepted,
    /// An error message from the server.
    Error(ErrorBody),
    /// A frame from the server could not be read, or a message of the agent's could not be
    /// written; it was skipped.
    Failed(String),
    /// The server confirmed `protocol.set_binary`: the connection now speaks its 12-byte
    /// binary form (`enabled`) or JSON text again.
    BinaryMode {
        /// Whether the 12-byte form is on.
        enabled: bool,
    },
    /// The upgrade succeeded: the server selected protocol `version` of those `offered`
    /// (decision 49 of the MCPW crate: the highest both speak).
    ProtocolSelected {
        /// The version selected (`mcp.v<version>`).
        version: u8,
        /// The versions the agent offered, the highest first.
        offered: Vec<u8>,
    },
    /// A connection attempt was refused with HTTP 426: the server speaks none of the
    /// protocol versions `offered`. The agent tries again after the wait its
    /// [`mcpw::AgentEvent::ConnectFailed`] carries (the server may be upgraded meanwhile).
    NoCommonVersion {
        /// The versions the agent offered, the highest first.
        offered: Vec<u8>,
        /// The failed attempt, with the wait before the next one.
        failed: mcpw::AgentEvent,
    },
    /// A connection attempt failed or the connection ended: the agent's
    /// [`mcpw::AgentEvent::ConnectFailed`] or [`mcpw::AgentEvent::Disconnected`], which
    /// carry the wait before the next attempt.
    Reconnecting(mcpw::AgentEvent),
    /// The agent stopped for good.
    Stopped,
}

/// How long a connection must have stayed open for the next reconnect to start from the
/// shortest wait again; shorter connections (refused right after the upgrade) keep
/// doubling it.
pub const STABLE_AFTER: Duration = Duration::from_secs(30);

/// The reconnect waits: `initial`, doubled after each failure in a row, at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first wait. Default 500 ms.
    pub initial: Duration,
    /// The longest wait. Default 30 s.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        let r = Reconnect::default();
        Self {
            initial: r.initial,
            max: r.max,
        }
    }
}

impl From<Backoff> for Reconnect {
    fn from(b: Backoff) -> Self {
        let mut r = Self::new(b.initial, b.max);
        r.stable_after = STABLE_AFTER;
        r
    }
}

/// The [`Agent`] configured from `settings` and `wire`, keeping a replica of the shared
/// state when `shared_state`, signing its frames with [`AgentSettings::hmac_secret`] (or the
/// environment's) when there is one.
fn agent(
    settings: &AgentSettings,
    wire: &WireSettings,
    backoff: Backoff,
    shared_state: bool,
) -> Agent {
    let register = AgentRegister {
        agent_id: settings.agent_id.clone(),
        agent_type: Some(settings.agent_type.clone()),
        capabilities: settings.capabilities.clone(),
        model: Some(ModelInfo {
            provider: Some("none".into()),
            name: Some("reference-agent".into()),
            version: Some("1".into()),
        }),
        resources: Some(Resources {
            max_concurrent_tasks: Some(4),
            ..Resources::default()
        }),
        metadata: Some(json!({"version": env!("CARGO_PKG_VERSION")})),
    };
    let mut config = AgentConfig::new(register)
        .with_binary(settings.binary)
        .with_heartbeat_interval(settings.heartbeat)
        .with_reconnect(backoff.into())
        .with_shared_state(shared_state)
        .with_protocol_versions(wire.protocol_versions.iter().copied())
        .with_compression(wire.compression)
        .with_batch_linger(wire.batch_linger);
    // HMAC message authentication when the settings or the environment give the shared
    // secret, as the reference server reads it.
    let secret = settings
        .hmac_secret
        .clone()
        .or_else(|| std::env::var(super::server_app::HMAC_SECRET_ENV).ok())
        .unwrap_or_default();
    if !secret.is_empty() {
        config = config.with_hmac_secret(secret.as_bytes());
    }
    // Random idempotency keys: a restarted agent never reuses one of its previous life.
    let mut agent = Agent::new(config).with_ids(UuidV4Ids);
    agent.set_load(Some(0.1));
    agent
}

/// The shared G-Counter the reference agent adds each accepted completion to (the key of
/// the spec's `state.sync` example).
pub const TASKS_COMPLETED: &str = "tasks_completed";

/// The reference agent's machine: the [`Agent`] role, with a worker that takes every task
/// through `steps` progress reports to its completion, one `step` apart, and answers every
/// collaboration request with its vote. With [`with_shared_state`](Self::with_shared_state)
/// it keeps a replica of the shared state and counts its accepted completions in the
/// shared [`TASKS_COMPLETED`] counter.
pub struct AgentMachine {
    agent: Agent,
    settings: AgentSettings,
    wire: WireSettings,
    backoff: Backoff,
    shared_state: bool,
    /// The vote every collaboration request is answered with.
    vote: String,
    /// What the agent said, turned into this machine's outputs.
    out: VecDeque<Output<AgentEvent>>,
    /// The next step of each task in work.
    work: TimerSet<String>,
    /// Steps done per task in work.
    done: BTreeMap<String, u32>,
    /// The latest time seen (the start of a task's first step).
    now: Option<Instant>,
}

impl AgentMachine {
    /// A machine for `settings`.
    pub fn new(settings: AgentSettings) -> Self {
        Self {
            agent: agent(
                &settings,
                &WireSettings::default(),
                Backoff::default(),
                false,
            ),
            settings,
            wire: WireSettings::default(),
            backoff: Backoff::default(),
            shared_state: false,
            vote: "approve".to_owned(),
            out: VecDeque::new(),
            work: TimerSet::new(),
            done: BTreeMap::new(),
            now: None,
        }
    }

    /// This machine with reconnect waits `backoff`.
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self.agent = agent(&self.settings, &self.wire, backoff, self.shared_state);
        self
    }

    /// This machine speaking on the wire as `wire` says (protocol versions offered,
    /// compression, batching linger).
    pub fn with_wire(mut self, wire: WireSettings) -> Self {
        self.agent = agent(&self.settings, &wire, self.backoff, self.shared_state);
        self.wire = wire;
        self
    }

    /// This machine keeping a replica of the shared CRDT state (fetched after each
    /// registration, kept in step by every agent's `state.sync`).
    pub fn with_shared_state(mut self, shared: bool) -> Self {
        self.shared_state = shared;
        self.agent = agent(&self.settings, &self.wire, self.backoff, shared);
        self
    }

    /// This machine answering collaboration requests with `vote` (`approve`, `reject`,
    /// `abstain`) instead of `approve`.
    pub fn with_vote(mut self, vote: &str) -> Self {
        vote.clone_into(&mut self.vote);
        self
    }

    /// The agent role inside (its replica: [`Agent::state`]).
    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// Sends `request` (`requesting_agent` set to this agent); the server's result arrives
    /// as [`AgentEvent::CollaborationResult`]. `false` if not connected or too many
    /// requests are pending.
    pub fn request_collaboration(&mut self, request: CollaborationRequest) -> bool {
        self.agent.request_collaboration(request).is_ok()
    }

    /// Announces `agent.shutdown` (`reason`; `transfer`: the server hands the held tasks to
    /// other agents, and the worker stops working on them at once) and stops once the
    /// server answered and no task is left, or after the agent's `graceful_timeout_ms`
    /// (5 s): [`AgentEvent::Stopped`]. `false` if it is stopping or stopped already.
    pub fn shutdown(&mut self, reason: &str, transfer: bool, now: Instant) -> bool {
        let now = self.observe(now);
        let started = self.agent.shutdown(reason, transfer, now).is_ok();
        let held: BTreeSet<String> = self.agent.tasks().map(str::to_owned).collect();
        let gone: Vec<String> = self
            .done
            .keys()
            .filter(|t| !held.contains(*t))
            .cloned()
            .collect();
        for task_id in gone {
            self.work.cancel(&task_id);
            self.done.remove(&task_id);
        }
        self.pump(now);
        started
    }

    /// Anchors the pong timestamps: `unix_ms` is the wall-clock time at `now`.
    pub fn set_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        self.agent.set_wall_clock(now, unix_ms);
    }

    /// Asks the server (`protocol.set_binary`) to switch this connection to its 12-byte
    /// binary form (`enabled`; gzip above `compression` bytes when `Some`), or back. Once the
    /// server confirms, the agent sends in that form too. `false` if not connected or a
    /// switch is pending.
    pub fn set_binary(&mut self, enabled: bool, compression: Option<usize>) -> bool {
        self.agent.set_binary(enabled, compression).is_ok()
    }

    /// Whether the connection is in the server's 12-byte binary form.
    pub fn is_compact(&self) -> bool {
        self.agent.is_compact()
    }

    /// The next step of a task in work: a progress report, or after `steps` of them the
    /// completion.
    fn step(&mut self, task_id: String, now: Instant) {
        let Some(done) = self.done.get_mut(&task_id) else {
            return;
        };
        *done += 1;
        let done = *done;
        let steps = self.settings.steps;
        if done <= steps {
            let progress = f64::from(done) / f64::from(steps + 1);
            let report = TaskProgress {
                task_id: task_id.clone(),
                agent_id: self.settings.agent_id.clone(),
                progress: Some(progress),
                status: Some("analyzing".into()),
                current_step: Some(format!("step-{done}")),
                steps_completed: None,
                estimated_completion: None,
                intermediate_results: None,
                idempotency_key: None,
            };
            if self.agent.report_progress(report).is_ok() {
                self.pump(now);
                self.event(AgentEvent::ProgressSent {
                    task_id: task_id.clone(),
                    progress,
                });
                self.work.set(task_id, now + self.settings.step);
            }
        } else {
            self.done.remove(&task_id);
            let step_ms = u64::try_from(self.settings.step.as_millis()).unwrap_or(0);
            let completion = TaskComplete {
                task_id: task_id.clone(),
                agent_id: self.settings.agent_id.clone(),
                status: Some("completed".into()),
                duration_ms: Some(u64::from(done) * step_ms),
                result: Some(TaskResult {
                    summary: Some(format!("{} reviewed it", self.settings.agent_id)),
                    findings: Some(Vec::new()),
                    metrics: None,
                }),
                resource_usage: None,
                idempotency_key: None,
            };
            if self.agent.complete_task(completion).is_ok() {
                self.pump(now);
                self.event(AgentEvent::Completed { task_id });
            }
        }
    }

    fn event(&mut self, event: AgentEvent) {
        self.out.push_back(Output::Event(event));
    }

    /// Moves the agent's outputs into this machine's, acting on its events.
    fn pump(&mut self, now: Instant) {
        while let Some(out) = self.agent.poll_output() {
            let ev = match out {
                Output::Event(ev) => ev,
                Output::Send { conn, frame } => {
                    self.out.push_back(Output::Send { conn, frame });
                    continue;
                }
                Output::Close { conn, code, reason } => {
                    self.out.push_back(Output::Close { conn, code, reason });
                    continue;
                }
            };
            let mapped = match ev {
                mcpw::AgentEvent::Registered(c) => AgentEvent::Registered(c),
                mcpw::AgentEvent::TaskAssigned(t) => {
                    self.done.insert(t.task_id.clone(), 0);
                    self.work.set(t.task_id.clone(), now + self.settings.step);
                    AgentEvent::TaskAssigned(t)
                }
                mcpw::AgentEvent::CompletionAccepted { task_id, status } => {
                    if self.agent.is_state_ready() {
                        // Counted once the server accepted it; the sync joins the outputs.
                        let _ = self.agent.state_increment(TASKS_COMPLETED, 1);
                    }
                    AgentEvent::CompletionAccepted(Accepted { task_id, status })
                }
                mcpw::AgentEvent::StateUpdated { from } => AgentEvent::StateUpdated {
                    from,
                    tasks_completed: self
                        .agent
                        .state()
                        .counter(TASKS_COMPLETED)
                        .map_or(0, |c| c.value()),
                },
                mcpw::AgentEvent::CollaborationAnswered { task_id, result } => {
                    AgentEvent::CollaborationResult { task_id, result }
                }
                mcpw::AgentEvent::CollaborationRequested { id, request } => {
                    // The answer joins the agent's outputs, drained by this loop.
                    if self.agent.answer_collaboration(id, &self.vote).is_err() {
                        continue;
                    }
                    AgentEvent::Collaborated(request)
                }
                mcpw::AgentEvent::TaskCancelled { task_id, error } => {
                    self.work.cancel(&task_id.as_str().to_owned());
                    self.done.remove(task_id.as_str());
                    AgentEvent::Cancelled {
                        task_id,
                        reason: error.message,
                    }
                }
                e @ mcpw::AgentEvent::Retrying { .. } => AgentEvent::Retrying(e),
                mcpw::AgentEvent::ShutdownAccepted => AgentEvent::ShutdownAccepted,
                mcpw::AgentEvent::ErrorReceived { error, .. } => AgentEvent::Error(error),
                mcpw::AgentEvent::BinaryMode { enabled } => AgentEvent::BinaryMode { enabled },
                mcpw::AgentEvent::ProtocolViolation(e) => AgentEvent::Failed(e.message),
                mcpw::AgentEvent::EncodeFailed(e) => AgentEvent::Failed(e),
                e @ mcpw::AgentEvent::ConnectFailed { .. } if upgrade_required(&e) => {
                    AgentEvent::NoCommonVersion {
                        offered: self.offered(),
                        failed: e,
                    }
                }
                e @ mcpw::AgentEvent::ConnectFailed { .. } => AgentEvent::Reconnecting(e),
                e @ mcpw::AgentEvent::Disconnected { .. } => {
                    // The agent forgot its tasks (the server reassigns them): so does the worker.
                    self.work.clear();
                    self.done.clear();
                    AgentEvent::Reconnecting(e)
                }
                mcpw::AgentEvent::Stopped => AgentEvent::Stopped,
                _ => continue,
            };
            self.event(mapped);
        }
    }

    /// The protocol versions offered at the upgrade, the highest first.
    fn offered(&self) -> Vec<u8> {
        let mut v = self.wire.protocol_versions.clone();
        v.sort_unstable_by(|a, b| b.cmp(a));
        v.dedup();
        v
    }

    /// Records `now` and returns the latest time seen.
    fn observe(&mut self, now: Instant) -> Instant {
        let now = self.now.map_or(now, |seen| seen.max(now));
        self.now = Some(now);
        now
    }
}

impl Machine for AgentMachine {
    type Event = AgentEvent;

    fn handle_connect(&mut self, conn: ConnId, peer: &PeerInfo, now: Instant) {
        let now = self.observe(now);
        self.agent.handle_connect(conn, peer, now);
        if let Some(version) = self.agent.protocol_version() {
            let offered = self.offered();
            self.event(AgentEvent::ProtocolSelected { version, offered });
        }
        self.pump(now);
    }

    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        let now = self.observe(now);
        self.agent.handle_frame(conn, frame, now);
        self.pump(now);
    }

    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        self.handle_disconnect_with(conn, &Disconnect::Ended, now);
    }

    fn handle_disconnect_with(&mut self, conn: ConnId, how: &Disconnect, now: Instant) {
        let now = self.observe(now);
        self.agent.handle_disconnect_with(conn, how, now);
        self.pump(now);
    }

    fn handle_pong(&mut self, conn: ConnId, now: Instant) {
        let now = self.observe(now);
        self.agent.handle_pong(conn, now);
        self.pump(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        let now = self.observe(now);
        self.agent.handle_timeout(now);
        self.pump(now);
        while let Some(task_id) = self.work.pop_expired(now) {
            self.step(task_id, now);
        }
    }

    /// Re-anchors the agent's pong timestamps ([`set_wall_clock`](Self::set_wall_clock)).
    fn handle_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        self.set_wall_clock(now, unix_ms);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        [self.agent.poll_timeout(), self.work.next_deadline()]
            .into_iter()
            .flatten()
            .min()
    }

    fn poll_output(&mut self) -> Option<Output<AgentEvent>> {
        if self.out.is_empty() {
            // A command (set_binary) queued something on the agent.
            let now = self.now?;
            self.pump(now);
        }
        self.out.pop_front()
    }
}

impl Dialer for AgentMachine {
    fn poll_dial(&self) -> Dial {
        self.agent.poll_dial()
    }

    fn handle_dial_failed(&mut self, reason: &str, now: Instant) {
        let now = self.observe(now);
        self.agent.handle_dial_failed(reason, now);
        self.pump(now);
    }
}

/// Connects an agent to `url` with `api_key` (if any); returns its handle and events. A
/// failed attempt or an ended connection is reported as an event and retried after the
/// default [`Backoff`].
pub fn connect(
    url: &str,
    settings: AgentSettings,
    api_key: Option<&str>,
) -> Result<(Handle<AgentMachine>, Events<AgentEvent>), agentwire::tokio::ConfigError> {
    connect_with_backoff(url, settings, api_key, Backoff::default())
}

/// [`connect`] with reconnect waits `backoff`.
pub fn connect_with_backoff(
    url: &str,
    settings: AgentSettings,
    api_key: Option<&str>,
    backoff: Backoff,
) -> Result<(Handle<AgentMachine>, Events<AgentEvent>), agentwire::tokio::ConfigError> {
    connect_machine(
        url,
        AgentMachine::new(settings).with_backoff(backoff),
        api_key,
    )
}

/// Connects `machine` to `url` with `api_key` (if any), announcing its id and type (and
/// binary form) in the upgrade's headers; returns its handle and events.
pub fn connect_machine(
    url: &str,
    mut machine: AgentMachine,
    api_key: Option<&str>,
) -> Result<(Handle<AgentMachine>, Events<AgentEvent>), agentwire::tokio::ConfigError> {
    let settings = &machine.settings;
    // Every protocol version the agent speaks, as `mcp.v<n>`, the highest first.
    let mut cfg = machine
        .agent
        .config()
        .subprotocols()
        .into_iter()
        .fold(
            crate::common::client_transport(ClientConfig::default()),
            ClientConfig::with_subprotocol,
        )
        .with_header("X-Agent-ID", settings.agent_id.clone())
        .with_header("X-Agent-Type", settings.agent_type.clone());
    if settings.binary {
        cfg = cfg.with_header("X-Protocol", "mcpw-binary-v1");
    }
    if let Some(k) = api_key {
        cfg = cfg.with_header("Authorization", format!("Bearer {k}"));
    }
    let (now, unix_ms) = crate::common::clocks();
    machine.set_wall_clock(now, unix_ms);
    Client::connect_dialer(url, machine, cfg)
}

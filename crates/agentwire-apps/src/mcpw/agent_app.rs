//! The reference agent: registers with its capabilities, heartbeats, works on each task it is
//! assigned (progress, then completion), and approves collaboration requests.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use agentwire::core::{ConnId, Dial, Dialer, Frame, Machine, Outbox, Output, PeerInfo, TimerSet};
use agentwire::mcpw::{
    AgentHeartbeat, AgentRegister, Body, Codec, Form, Message, MessageType, OtherCall,
    TaskComplete, TaskProgress,
};
use agentwire::tokio::{Client, ClientConfig, Events, Handle};
use serde_json::{json, Value};

/// What the agent is.
#[derive(Debug, Clone)]
pub struct AgentSettings {
    /// `agent_id`.
    pub agent_id: String,
    /// `agent_type`.
    pub agent_type: String,
    /// `capabilities` of `agent.register`.
    pub capabilities: Value,
    /// Binary frames instead of JSON text.
    pub binary: bool,
    /// Heartbeat period.
    pub heartbeat: Duration,
    /// Progress reports per task before completion.
    pub steps: u32,
    /// Time per step.
    pub step: Duration,
}

/// What the agent reports.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// `registration.confirmed` arrived.
    Registered(Value),
    /// A task arrived (`task.assigned` params).
    TaskAssigned(Value),
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
    CompletionAccepted(Value),
    /// A collaboration request arrived and was approved.
    Collaborated(Value),
    /// An error message from the server.
    Error(Value),
    /// The server confirmed `protocol.set_binary`: the connection now speaks its 12-byte
    /// binary form (`enabled`) or JSON text again.
    BinaryMode {
        /// Whether the 12-byte form is on.
        enabled: bool,
    },
    /// A connection attempt failed before the WebSocket opened (refused, HTTP 401, ...);
    /// the next one starts after `retry_in`.
    ConnectFailed {
        /// What went wrong, as the transport reports it (`HTTP error: 401 Unauthorized`).
        reason: String,
        /// Attempts that failed in a row, this one included.
        failures: u32,
        /// The wait before the next attempt.
        retry_in: Duration,
    },
    /// The connection ended; the next attempt starts after `retry_in`.
    Disconnected {
        /// The wait before the next attempt.
        retry_in: Duration,
    },
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
        Self {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(30),
        }
    }
}

impl Backoff {
    /// The wait after `failures` failures in a row (1: `initial`).
    pub fn delay(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(20);
        self.initial.saturating_mul(1 << doublings).min(self.max)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    Heartbeat,
    Step(String),
    Redial,
}

/// A `protocol.set_binary` request awaiting its response.
#[derive(Debug, Clone, PartialEq)]
struct SetBinary {
    /// Its id (JSON forms) and sequence id (24-byte form).
    key: (Option<String>, u64),
    /// What it asked for: `Some(threshold)` to switch on, `None` to switch off.
    asked: Option<Option<usize>>,
}

/// The agent's client machine.
pub struct AgentMachine {
    s: AgentSettings,
    conn: Option<ConnId>,
    out: Outbox<AgentEvent>,
    timers: TimerSet<Timer>,
    /// Task id -> steps done.
    tasks: BTreeMap<String, u32>,
    seq: u64,
    started: Option<Instant>,
    /// Frames in both forms: gzip above 1 KiB, the codec's method codes.
    codec: Codec,
    /// Ids (JSON) or sequence ids (binary) of `task.complete` requests awaiting their response.
    completing: BTreeSet<(Option<String>, u64)>,
    /// The server's binary mode (`protocol.set_binary`): `Some` once it confirmed it, with
    /// the gzip threshold asked for; every frame then goes in the real server's 12-byte form.
    compact: Option<Option<usize>>,
    /// The pending `protocol.set_binary` request: its key and what it asked for.
    set_binary: Option<SetBinary>,
    /// Reconnect waits.
    backoff: Backoff,
    /// Attempts or short-lived connections in a row.
    failures: u32,
    /// When the open connection opened.
    connected_at: Option<Instant>,
    /// A reconnect is waiting for its timer.
    waiting_to_dial: bool,
}

impl AgentMachine {
    /// A machine for `settings`.
    pub fn new(settings: AgentSettings) -> Self {
        Self {
            s: settings,
            conn: None,
            out: Outbox::new(),
            timers: TimerSet::new(),
            tasks: BTreeMap::new(),
            seq: 0,
            started: None,
            codec: Codec::default(),
            completing: BTreeSet::new(),
            compact: None,
            set_binary: None,
            backoff: Backoff::default(),
            failures: 0,
            connected_at: None,
            waiting_to_dial: false,
        }
    }

    /// This machine with reconnect waits `backoff`.
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Counts a failure and arms the reconnect timer; returns the wait.
    fn schedule_redial(&mut self, now: Instant) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let wait = self.backoff.delay(self.failures);
        self.waiting_to_dial = true;
        self.timers.set(Timer::Redial, now + wait);
        wait
    }

    /// Asks the server (`protocol.set_binary`) to switch this connection to its 12-byte
    /// binary form (`enabled`; gzip above `compression` bytes when `Some`), or back. Once the
    /// server confirms, the agent sends in that form too. `false` if not connected.
    pub fn set_binary(&mut self, enabled: bool, compression: Option<usize>) -> bool {
        if self.conn.is_none() {
            return false;
        }
        let params = json!({"enabled": enabled, "compression": {
            "enabled": compression.is_some(), "threshold": compression.unwrap_or(0)}});
        let msg = self.message(
            MessageType::REQUEST,
            Body::Other(OtherCall::new("protocol.set_binary", params)),
        );
        self.set_binary = Some(SetBinary {
            key: (msg.id.clone(), msg.seq),
            asked: enabled.then_some(compression),
        });
        self.send(&msg);
        true
    }

    /// Whether the connection is in the server's 12-byte binary form.
    pub fn is_compact(&self) -> bool {
        self.compact.is_some()
    }

    fn form(&self) -> Form {
        if self.compact.is_some() {
            return Form::Compact;
        }
        if self.s.binary {
            Form::Binary
        } else {
            Form::Json
        }
    }

    /// A new message of type `kind` with `body`, with this agent's next id or sequence id.
    fn message(&mut self, kind: MessageType, body: Body) -> Message {
        self.seq += 1;
        let msg = Message::new(kind, body);
        match self.form() {
            Form::Json | Form::Compact => msg.with_id(format!("{}-{}", self.s.agent_id, self.seq)),
            Form::Binary => msg.with_seq(self.seq),
        }
    }

    fn send(&mut self, msg: &Message) {
        let Some(conn) = self.conn else { return };
        let form = self.form();
        let encoded = match self.compact {
            // The 12-byte form, gzipped above the threshold this agent asked for.
            Some(threshold) => {
                let mut out = Vec::new();
                self.codec
                    .encode_compact_with(msg, threshold, &mut out)
                    .map(|_| agentwire::core::FrameBuf::binary(out))
            }
            None => self.codec.encode_ws(msg, form),
        };
        match encoded {
            Ok(frame) => self.out.send(conn, frame),
            Err(e) => self
                .out
                .event(AgentEvent::Error(json!({"encode": e.to_string()}))),
        }
    }

    fn request(&mut self, kind: MessageType, body: Body) {
        let msg = self.message(kind, body);
        self.send(&msg);
    }

    fn step(&mut self, task_id: String, now: Instant) {
        let Some(done) = self.tasks.get_mut(&task_id) else {
            return;
        };
        *done += 1;
        let done = *done;
        if done <= self.s.steps {
            let progress = f64::from(done) / f64::from(self.s.steps + 1);
            let body = json!({"task_id": task_id, "agent_id": self.s.agent_id, "progress": progress,
                "status": "analyzing", "current_step": format!("step-{done}")});
            self.request(
                MessageType::PROGRESS,
                typed::<TaskProgress>("task.progress", body, Body::TaskProgress),
            );
            self.out.event(AgentEvent::ProgressSent {
                task_id: task_id.clone(),
                progress,
            });
            self.timers.set(Timer::Step(task_id), now + self.s.step);
        } else {
            self.tasks.remove(&task_id);
            let body = json!({"task_id": task_id, "agent_id": self.s.agent_id, "status": "completed",
                "duration_ms": u64::from(done) * u64::try_from(self.s.step.as_millis()).unwrap_or(0),
                "result": {"summary": format!("{} reviewed it", self.s.agent_id), "findings": []}});
            let msg = self.message(
                MessageType::REQUEST,
                typed::<TaskComplete>("task.complete", body, Body::TaskComplete),
            );
            self.completing.insert((msg.id.clone(), msg.seq));
            self.send(&msg);
            self.out.event(AgentEvent::Completed { task_id });
        }
    }
}

impl Machine for AgentMachine {
    type Event = AgentEvent;

    fn handle_connect(&mut self, conn: ConnId, _: &PeerInfo, now: Instant) {
        self.conn = Some(conn);
        self.connected_at = Some(now);
        self.waiting_to_dial = false;
        self.started.get_or_insert(now);
        let body = json!({"agent_id": self.s.agent_id, "agent_type": self.s.agent_type,
            "capabilities": self.s.capabilities,
            "model": {"provider": "none", "name": "reference-agent", "version": "1"},
            "resources": {"max_concurrent_tasks": 4}, "metadata": {"version": env!("CARGO_PKG_VERSION")}});
        self.request(
            MessageType::REQUEST,
            typed::<AgentRegister>("agent.register", body, Body::AgentRegister),
        );
    }

    fn handle_frame(&mut self, _: ConnId, frame: Frame<'_>, now: Instant) {
        let Ok((msg, _)) = self.codec.decode_ws(frame) else {
            return;
        };
        match msg.body {
            Body::RegistrationConfirmed(c) => {
                self.timers.set(Timer::Heartbeat, now + self.s.heartbeat);
                self.out.event(AgentEvent::Registered(to_value(&c)));
            }
            Body::TaskAssigned(t) => {
                self.tasks.insert(t.task_id.clone(), 0);
                self.timers
                    .set(Timer::Step(t.task_id.clone()), now + self.s.step);
                self.out.event(AgentEvent::TaskAssigned(to_value(&t)));
            }
            Body::CollaborationRequest(c) if msg.kind == MessageType::REQUEST => {
                let answer = json!({"agent_id": self.s.agent_id, "vote": "approve"});
                let mut reply = Message::new(
                    MessageType::RESPONSE,
                    Body::Other(OtherCall::new("", answer)),
                );
                reply.id = msg.id;
                reply.seq = msg.seq;
                self.send(&reply);
                self.out.event(AgentEvent::Collaborated(to_value(&c)));
            }
            Body::Error(e) => self.out.event(AgentEvent::Error(to_value(&e))),
            Body::Other(r)
                if msg.kind == MessageType::RESPONSE
                    && self
                        .set_binary
                        .as_ref()
                        .is_some_and(|p| p.key == (msg.id.clone(), msg.seq)) =>
            {
                // The server switched after this reply; so do we.
                if let Some(SetBinary { asked, .. }) = self.set_binary.take() {
                    let on = r.params.get("binary_enabled").and_then(Value::as_bool);
                    self.compact = if on == Some(true) {
                        asked.or(Some(None))
                    } else {
                        None
                    };
                    self.out.event(AgentEvent::BinaryMode {
                        enabled: self.compact.is_some(),
                    });
                }
            }
            Body::Other(r)
                if msg.kind == MessageType::RESPONSE
                    && self.completing.remove(&(msg.id.clone(), msg.seq)) =>
            {
                self.out.event(AgentEvent::CompletionAccepted(r.params));
            }
            _ => {}
        }
    }

    fn handle_disconnect(&mut self, _: ConnId, now: Instant) {
        self.conn = None;
        // A new connection starts in the JSON form again.
        self.compact = None;
        self.set_binary = None;
        self.timers.clear();
        self.tasks.clear();
        // Only a connection that stayed up a while starts the waits over.
        if self
            .connected_at
            .take()
            .is_some_and(|at| now.saturating_duration_since(at) >= STABLE_AFTER)
        {
            self.failures = 0;
        }
        let retry_in = self.schedule_redial(now);
        self.out.event(AgentEvent::Disconnected { retry_in });
    }

    fn handle_timeout(&mut self, now: Instant) {
        while let Some(t) = self.timers.pop_expired(now) {
            match t {
                Timer::Heartbeat => {
                    let body = json!({"agent_id": self.s.agent_id, "status": "healthy",
                        "metrics": {"active_tasks": self.tasks.len()},
                        "workload": {"current_load": 0.1, "queue_depth": self.tasks.len()}});
                    self.request(
                        MessageType::NOTIFICATION,
                        typed::<AgentHeartbeat>("agent.heartbeat", body, Body::AgentHeartbeat),
                    );
                    self.timers.set(Timer::Heartbeat, now + self.s.heartbeat);
                }
                Timer::Step(id) => self.step(id, now),
                Timer::Redial => self.waiting_to_dial = false,
            }
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next_deadline()
    }

    fn poll_output(&mut self) -> Option<Output<AgentEvent>> {
        self.out.pop()
    }
}

impl Dialer for AgentMachine {
    fn poll_dial(&self) -> Dial {
        if self.conn.is_none() && !self.waiting_to_dial {
            Dial::Now
        } else {
            Dial::Wait
        }
    }

    fn handle_dial_failed(&mut self, reason: &str, now: Instant) {
        let retry_in = self.schedule_redial(now);
        self.out.event(AgentEvent::ConnectFailed {
            reason: reason.to_owned(),
            failures: self.failures,
            retry_in,
        });
    }
}

/// `params` as the typed body `wrap` takes, or as raw params of `method` if they do
/// not fit (never the case for the JSON this agent builds).
fn typed<T: serde::de::DeserializeOwned>(method: &str, params: Value, wrap: fn(T) -> Body) -> Body {
    match serde_json::from_value::<T>(params.clone()) {
        Ok(p) => wrap(p),
        Err(_) => Body::Other(OtherCall::new(method, params)),
    }
}

/// A typed value as JSON, for the agent's events.
fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
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
    let mut cfg = ClientConfig::default()
        .with_subprotocol("mcp.v1")
        .with_header("X-Agent-ID", settings.agent_id.clone())
        .with_header("X-Agent-Type", settings.agent_type.clone());
    if settings.binary {
        cfg = cfg.with_header("X-Protocol", "mcpw-binary-v1");
    }
    if let Some(k) = api_key {
        cfg = cfg.with_header("Authorization", format!("Bearer {k}"));
    }
    Client::connect_dialer(url, AgentMachine::new(settings).with_backoff(backoff), cfg)
}

/// A string field of `v` for a sentence (`?` if absent).
fn field<'a>(v: &'a Value, name: &str) -> &'a str {
    v.get(name).and_then(Value::as_str).unwrap_or("?")
}

/// `1.5 s`, `500 ms`.
fn wait(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{:.1} s", d.as_secs_f64())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// One line (a sentence, no Rust `Debug` dump) for an agent event.
pub fn describe(ev: &AgentEvent) -> String {
    match ev {
        AgentEvent::Registered(c) => {
            let beat = c
                .get("heartbeat_interval_ms")
                .and_then(Value::as_u64)
                .map(|ms| format!(", heartbeat every {}", wait(Duration::from_millis(ms))))
                .unwrap_or_default();
            format!(
                "registered as {} (session {}{beat})",
                field(c, "agent_id"),
                field(c, "session_id")
            )
        }
        AgentEvent::TaskAssigned(t) => format!(
            "task {} ({}) assigned to me",
            field(t, "task_id"),
            field(t, "type")
        ),
        AgentEvent::ProgressSent { task_id, progress } => {
            format!("task {task_id}: reported {:.0}% done", progress * 100.0)
        }
        AgentEvent::Completed { task_id } => format!("task {task_id}: sent task.complete"),
        AgentEvent::CompletionAccepted(r) => format!(
            "task {}: the server accepted the completion ({})",
            field(r, "task_id"),
            field(r, "status")
        ),
        AgentEvent::Collaborated(c) => format!(
            "approved {}'s {} request on task {}",
            field(c, "requesting_agent"),
            field(c, "collaboration_type"),
            field(c, "task_id")
        ),
        AgentEvent::Error(e) => match (e.get("code"), e.get("message")) {
            (Some(code), Some(Value::String(m))) => {
                format!("the server answered with error {code}: {m}")
            }
            _ => format!("error: {e}"),
        },
        AgentEvent::ConnectFailed {
            reason,
            failures,
            retry_in,
        } => format!(
            "could not connect ({reason}); attempt {failures} failed, retrying in {}",
            wait(*retry_in)
        ),
        AgentEvent::BinaryMode { enabled: true } => {
            "the server switched this connection to its 12-byte binary form".to_owned()
        }
        AgentEvent::BinaryMode { enabled: false } => {
            "the server switched this connection back to JSON text".to_owned()
        }
        AgentEvent::Disconnected { retry_in } => {
            format!("disconnected; reconnecting in {}", wait(*retry_in))
        }
    }
}

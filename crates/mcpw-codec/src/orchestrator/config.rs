//! Configuration and limits of the [`Orchestrator`](super::Orchestrator), with documented
//! defaults.

use std::time::Duration;

use agentwire_core::Rate;

use super::routing::RoutingWeights;
use crate::crdt::CrdtLimits;

/// Bounds on what peers (and commands) can make the orchestrator hold.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Connections at once; one more is closed 1013 `server-full` at once. Default 10,000
    /// (the upgrade policy should refuse it earlier with 503).
    pub max_connections: usize,
    /// Registered agents at once; one more registration gets 4003. Default 1,024.
    pub max_agents: usize,
    /// Largest message (a frame, and a binary payload after decompression), in bytes.
    /// Default 1 MiB, exactly the limit allowed; larger gets 4007.
    pub max_message_bytes: usize,
    /// Capabilities one agent may declare. Default 64; more gets 4005 on `capabilities`.
    pub max_capabilities: usize,
    /// Tasks held (queued, assigned or running). Default 10,000; `submit_task` beyond it
    /// fails with [`CommandError::TooManyTasks`](super::CommandError::TooManyTasks).
    pub max_tasks: usize,
    /// Collaborations in flight. Default 1,024; one more gets 4003.
    pub max_collaborations: usize,
    /// Agents one collaboration may require. Default 32; more gets 4005 on `required_agents`.
    pub max_collaborators: usize,
    /// Longest id (agent, task, message) in bytes. Default 256; longer gets 4005.
    pub max_id_bytes: usize,
    /// Label sets per metric family. Default 256.
    pub max_metric_series: usize,
    /// Deepest nesting of a message in its JSON form (the codec's
    /// [`Limits::max_json_depth`](crate::Limits::max_json_depth)): deeper gets 4007 and is
    /// never forwarded or stored. A task's `context` and `requirements` travel two levels
    /// down in `task.assigned`, so [`submit_task`](super::Orchestrator::submit_task)
    /// refuses them deeper than this minus 2 ([`CommandError::TooDeep`](super::CommandError::TooDeep)).
    /// Default 128 ([`agentwire_core::DEFAULT_MAX_JSON_DEPTH`]).
    pub max_json_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 10_000,
            max_agents: 1024,
            max_message_bytes: 1 << 20,
            max_capabilities: 64,
            max_tasks: 10_000,
            max_collaborations: 1024,
            max_collaborators: 32,
            max_id_bytes: 256,
            max_metric_series: 256,
            max_json_depth: agentwire_core::DEFAULT_MAX_JSON_DEPTH,
        }
    }
}

/// Configuration of the [`Orchestrator`](super::Orchestrator).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct OrchestratorConfig {
    /// Messages per connection over time, counted before anything else is done with a
    /// message; beyond it the message gets error 4002. Default `Some(1000/min, burst 100)`
    /// (the reference server's); `None` turns it off.
    pub rate: Option<Rate>,
    /// The heartbeat period agents are expected to keep. Default 30 s.
    pub heartbeat_interval: Duration,
    /// Heartbeat periods without one after which an agent is unhealthy (no new tasks).
    /// Default 2.
    pub unhealthy_after: u32,
    /// Heartbeat periods without one after which an agent is removed (its tasks are
    /// reassigned, its connection closed 1008 `heartbeat-timeout`). Default 3.
    pub remove_after: u32,
    /// Time a connection has to send `agent.register`. Default `Some(30 s)`; then close 1008
    /// `register-required`. `None` waits forever.
    pub register_timeout: Option<Duration>,
    /// Deadline of a task submitted without one. Default 5 min.
    pub default_task_deadline: Duration,
    /// Agents a task is tried on before it fails (first assignment included). Default 3.
    pub max_task_attempts: u32,
    /// Longest `graceful_timeout_ms` honoured in `agent.shutdown`. Default 5 min.
    pub max_shutdown_grace: Duration,
    /// Timeout of a collaboration whose request gives none, and the longest honoured.
    /// Default 30 s and 5 min.
    pub default_collaboration_timeout: Duration,
    /// See [`default_collaboration_timeout`](Self::default_collaboration_timeout).
    pub max_collaboration_timeout: Duration,
    /// How the routing score is weighed.
    pub routing: RoutingWeights,
    /// Bounds of the replicated state `state.sync` merges into.
    pub crdt: CrdtLimits,
    /// What peers can make the orchestrator hold.
    pub limits: Limits,
}

impl Default for OrchestratorConfig {
    fn default() -> Self {
        Self {
            rate: Some(Rate::per_minute(1000, 100)),
            heartbeat_interval: Duration::from_secs(30),
            unhealthy_after: 2,
            remove_after: 3,
            register_timeout: Some(Duration::from_secs(30)),
            default_task_deadline: Duration::from_secs(300),
            max_task_attempts: 3,
            max_shutdown_grace: Duration::from_secs(300),
            default_collaboration_timeout: Duration::from_secs(30),
            max_collaboration_timeout: Duration::from_secs(300),
            routing: RoutingWeights::default(),
            crdt: CrdtLimits::default(),
            limits: Limits::default(),
        }
    }
}

impl OrchestratorConfig {
    /// Sets [`rate`](Self::rate).
    pub fn with_rate(mut self, rate: Option<Rate>) -> Self {
        self.rate = rate;
        self
    }

    /// Sets [`heartbeat_interval`](Self::heartbeat_interval).
    pub fn with_heartbeat_interval(mut self, d: Duration) -> Self {
        self.heartbeat_interval = d;
        self
    }

    /// Sets [`unhealthy_after`](Self::unhealthy_after) and
    /// [`remove_after`](Self::remove_after) (kept at least `unhealthy_after`).
    pub fn with_missed_heartbeats(mut self, unhealthy_after: u32, remove_after: u32) -> Self {
        self.unhealthy_after = unhealthy_after.max(1);
        self.remove_after = remove_after.max(self.unhealthy_after);
        self
    }

    /// Sets [`register_timeout`](Self::register_timeout).
    pub fn with_register_timeout(mut self, d: Option<Duration>) -> Self {
        self.register_timeout = d;
        self
    }

    /// Sets [`default_task_deadline`](Self::default_task_deadline).
    pub fn with_default_task_deadline(mut self, d: Duration) -> Self {
        self.default_task_deadline = d;
        self
    }

    /// Sets [`max_task_attempts`](Self::max_task_attempts) (at least 1).
    pub fn with_max_task_attempts(mut self, n: u32) -> Self {
        self.max_task_attempts = n.max(1);
        self
    }

    /// Sets [`limits`](Self::limits).
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets [`crdt`](Self::crdt).
    pub fn with_crdt_limits(mut self, crdt: CrdtLimits) -> Self {
        self.crdt = crdt;
        self
    }
}

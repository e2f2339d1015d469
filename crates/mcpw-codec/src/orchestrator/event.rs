//! What the [`Orchestrator`](super::Orchestrator) tells its application.

use agentwire_core::ConnId;
use serde_json::Value;

use crate::crdt::SyncOutcome;
use crate::error::ProtocolError;
use crate::params::CapabilityOperation;
use crate::{AgentId, Form, TaskId};

/// Why an agent was removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RemovalReason {
    /// Its connection ended.
    Disconnected,
    /// It missed [`remove_after`](super::OrchestratorConfig::remove_after) heartbeats.
    HeartbeatTimeout,
    /// It announced `agent.shutdown` and its grace period ended (or it left).
    Shutdown,
    /// The same agent id registered on another connection.
    Replaced,
}

/// Why a task failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskFailure {
    /// Its deadline passed before `task.complete`.
    DeadlineExceeded,
    /// It was tried on [`max_task_attempts`](super::OrchestratorConfig::max_task_attempts)
    /// agents, each of which disappeared.
    AttemptsExhausted,
    /// The application cancelled it
    /// ([`cancel_task`](super::Orchestrator::cancel_task)).
    Cancelled,
}

/// An event of the [`Orchestrator`](super::Orchestrator).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum OrchestratorEvent {
    /// A peer skipped sequence ids (messages lost on its side; the crate's spec decision
    /// 38). The message is handled; `mcpw_sequence_gaps_total` counts the missing ids.
    SequenceGap {
        /// The connection.
        conn: ConnId,
        /// The id that was due.
        expected: u64,
        /// The id that came.
        received: u64,
    },
    /// A numbered message whose sequence id was seen already on its connection: dropped,
    /// not handled twice (decision 38), counted in `mcpw_sequence_duplicates_total`.
    SequenceDuplicate {
        /// The connection.
        conn: ConnId,
        /// The id that came again.
        seq: u64,
    },
    /// A connection opened; the upgrade's `X-Agent-ID`/`X-Agent-Type` headers, if any.
    Connected {
        /// The connection.
        conn: ConnId,
        /// `X-Agent-ID`.
        agent_id: Option<AgentId>,
        /// `X-Agent-Type`.
        agent_type: Option<String>,
    },
    /// `agent.register` was accepted and confirmed.
    Registered {
        /// The connection.
        conn: ConnId,
        /// The agent.
        agent_id: AgentId,
        /// Its capability names.
        capabilities: Vec<String>,
        /// The form it speaks.
        form: Form,
    },
    /// An agent missed heartbeats and gets no new tasks until its next heartbeat.
    Unhealthy {
        /// The agent.
        agent_id: AgentId,
    },
    /// An unhealthy agent sent a heartbeat again.
    Recovered {
        /// The agent.
        agent_id: AgentId,
    },
    /// An agent is gone; its tasks were reassigned (or failed).
    AgentRemoved {
        /// The agent.
        agent_id: AgentId,
        /// Why.
        reason: RemovalReason,
    },
    /// `agent.capability.update` was applied.
    CapabilityChanged {
        /// The agent.
        agent_id: AgentId,
        /// add, update or remove.
        operation: CapabilityOperation,
        /// The capability's name.
        capability: String,
    },
    /// A task was sent to an agent with `task.assigned`.
    TaskAssigned {
        /// The task.
        task_id: TaskId,
        /// The agent.
        agent_id: AgentId,
        /// The routing score.
        score: f64,
        /// The runners-up (`routing_metadata.alternative_agents`).
        alternatives: Vec<AgentId>,
        /// 1 for the first assignment, more after reassignments.
        attempt: u32,
    },
    /// No agent can take the task now; it waits for one.
    TaskQueued {
        /// The task.
        task_id: TaskId,
    },
    /// `task.progress` from the assigned agent.
    TaskProgress {
        /// The task.
        task_id: TaskId,
        /// The agent.
        agent_id: AgentId,
        /// 0..=1.
        progress: f64,
        /// The agent's `status`.
        status: Option<String>,
    },
    /// `task.complete` from the assigned agent.
    TaskCompleted {
        /// The task.
        task_id: TaskId,
        /// The agent.
        agent_id: AgentId,
        /// The agent's `status` (`completed`, `failed`, ...).
        status: String,
        /// The agent's `result`.
        result: Value,
    },
    /// A task failed for good.
    TaskFailed {
        /// The task.
        task_id: TaskId,
        /// Why.
        reason: TaskFailure,
    },
    /// A collaboration request was forwarded to the required agents.
    CollaborationStarted {
        /// The task it is about.
        task_id: TaskId,
        /// Who asked.
        requester: AgentId,
        /// Who was asked.
        agents: Vec<AgentId>,
    },
    /// A collaboration ended: everyone answered, or the timeout passed.
    CollaborationFinished {
        /// The task it is about.
        task_id: TaskId,
        /// Who answered.
        responded: Vec<AgentId>,
        /// Who did not (absent, gone, or too slow).
        missing: Vec<AgentId>,
    },
    /// A `state.sync` was merged (or recognised as a repeat).
    StateSynced {
        /// The sender.
        agent_id: AgentId,
        /// What happened.
        outcome: SyncOutcome,
    },
    /// `agent.shutdown` was received.
    ShutdownRequested {
        /// The agent.
        agent_id: AgentId,
        /// Tasks moved to other agents (or queued) at once.
        transferred: usize,
    },
    /// A message was refused with an error reply (for logs and metrics).
    ProtocolViolation {
        /// The connection.
        conn: ConnId,
        /// What was wrong; [`ProtocolError::code`] is the code sent (4000-4008).
        error: ProtocolError,
    },
    /// A connection ended.
    Disconnected {
        /// The connection.
        conn: ConnId,
        /// The agent registered on it, if any.
        agent_id: Option<AgentId>,
    },
}

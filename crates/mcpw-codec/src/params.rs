//! Typed `params` of every message in the spec, with its exact field names.
//!
//! The spec gives one example per message and no optionality notation. Our reading: the ids
//! a message is about (`agent_id`, `task_id`, ...) and the lists that are its point
//! (`capabilities`, `required_agents`, `vector_clock`, `operations`) are required; every other
//! field is optional and omitted when `None`. Free-form objects (`metadata`, `context`,
//! `requirements`, `intermediate_results`, `metrics` of a result) are kept as JSON values.
//! Unknown fields are ignored (STYLE.md 3.5). Integers in the examples are integers here
//! (`u64`), so the examples re-encode to the same JSON.
//!
//! Longer than the workspace's 700 lines because it holds one documented struct per message
//! of the spec, which is what makes it the one place to look a field up.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::crdt::VectorClock;

/// One capability an agent offers (in `agent.register` and `agent.capability.update`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Capability {
    /// Capability name, e.g. `code_review`; tasks are routed by it.
    pub name: String,
    /// Self-reported confidence, 0-1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// Languages covered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub languages: Option<Vec<String>>,
    /// Specialties, e.g. `security`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub specialties: Option<Vec<String>>,
    /// Patterns detected, e.g. `race-condition`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patterns: Option<Vec<String>>,
    /// Learning status, e.g. `training`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learning_status: Option<String>,
    /// Training progress, 0-1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub training_progress: Option<f64>,
}

impl Capability {
    /// A capability with only a name and a confidence.
    pub fn new(name: impl Into<String>, confidence: f64) -> Self {
        Self {
            name: name.into(),
            confidence: Some(confidence),
            languages: None,
            specialties: None,
            patterns: None,
            learning_status: None,
            training_progress: None,
        }
    }
}

/// The model behind an agent.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct ModelInfo {
    /// Provider, e.g. `openai`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Model version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// An agent's resources.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct Resources {
    /// Tasks the agent runs at once; the router's load denominator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_tasks: Option<u64>,
    /// Memory, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_memory_mb: Option<u64>,
    /// Whether the agent needs a GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_required: Option<bool>,
}

/// `agent.register` params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentRegister {
    /// The agent's id.
    pub agent_id: String,
    /// The agent's type, e.g. `code-analyzer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_type: Option<String>,
    /// What it can do; absent is none (an agent may register before it has any).
    #[serde(default)]
    pub capabilities: Vec<Capability>,
    /// Its model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelInfo>,
    /// Its resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// Free-form metadata (version, deployment, region, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// `registration.confirmed` params: the server's answer to `agent.register`.
///
/// The spec names this message but shows no example; the fields are ours.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RegistrationConfirmed {
    /// The registered agent's id.
    pub agent_id: String,
    /// A session id the server assigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// How often the server expects `agent.heartbeat`, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_interval_ms: Option<u64>,
    /// Capability names the server accepted for routing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_capabilities: Option<Vec<String>>,
    /// `registered`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// The server's time at registration, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_time: Option<String>,
}

/// Heartbeat metrics.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct HeartbeatMetrics {
    /// Tasks running now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_tasks: Option<u64>,
    /// Tasks completed so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_tasks: Option<u64>,
    /// Tasks failed so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_tasks: Option<u64>,
    /// Mean task duration, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_task_duration_ms: Option<u64>,
    /// CPU use, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_usage_percent: Option<f64>,
    /// Memory use, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_usage_mb: Option<u64>,
    /// Uptime, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uptime_seconds: Option<u64>,
}

/// Heartbeat workload.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct Workload {
    /// Current load, 0-1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_load: Option<f64>,
    /// Tasks queued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_depth: Option<u64>,
    /// Tasks per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processing_rate: Option<f64>,
}

/// `agent.heartbeat` params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentHeartbeat {
    /// The agent's id.
    pub agent_id: String,
    /// Status, e.g. `healthy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<HeartbeatMetrics>,
    /// Load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<Workload>,
}

/// How a task was routed (in `task.assigned`).
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct RoutingMetadata {
    /// Who routed it, e.g. `capability-router`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assigned_by: Option<String>,
    /// The chosen agent's score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// The runners-up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alternative_agents: Option<Vec<String>>,
}

/// `task.assigned` params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskAssigned {
    /// The task's id.
    pub task_id: String,
    /// The task's type (wire name `type`), e.g. `code_review`: the capability it needs.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub task_type: Option<String>,
    /// Priority (the example uses 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    /// Deadline, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    /// Free-form task context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// Free-form requirements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirements: Option<Value>,
    /// How it was routed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing_metadata: Option<RoutingMetadata>,
}

/// `task.progress` params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskProgress {
    /// The task's id.
    pub task_id: String,
    /// The reporting agent.
    pub agent_id: String,
    /// Progress, 0-1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<f64>,
    /// Status, e.g. `analyzing`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// The step running now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_step: Option<String>,
    /// Steps done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps_completed: Option<Vec<String>>,
    /// Expected completion, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_completion: Option<String>,
    /// Free-form partial results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intermediate_results: Option<Value>,
    /// The sender's idempotency key (ours: the spec asks for "idempotency keys for critical
    /// operations" without naming a field): a message retried with the same key gets the
    /// first one's answer and is applied once. See the crate's spec decisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

/// One finding in a task result.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct Finding {
    /// Kind (wire name `type`), e.g. `security`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Severity, e.g. `high`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
    /// File.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// What was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// What to do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggestion: Option<String>,
}

/// The `result` of `task.complete`.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct TaskResult {
    /// Summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Findings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub findings: Option<Vec<Finding>>,
    /// Free-form metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Value>,
}

/// Resources a task used.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct ResourceUsage {
    /// CPU time, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<f64>,
    /// Peak memory, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_peak_mb: Option<u64>,
    /// LLM tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_used: Option<u64>,
}

/// `task.complete` params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskComplete {
    /// The task's id.
    pub task_id: String,
    /// The agent that ran it.
    pub agent_id: String,
    /// Outcome, e.g. `completed` or `failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Duration, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// The result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<TaskResult>,
    /// Resources used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_usage: Option<ResourceUsage>,
    /// The sender's idempotency key (ours: the spec asks for "idempotency keys for critical
    /// operations" without naming a field): a message retried with the same key gets the
    /// first one's answer and is applied once. See the crate's spec decisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

/// What `agent.capability.update` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CapabilityOperation {
    /// Add the capability.
    Add,
    /// Replace the capability of the same name.
    Update,
    /// Remove the capability of that name.
    Remove,
}

impl CapabilityOperation {
    /// The wire name (`add`, `update`, `remove`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Add => "add",
            Self::Update => "update",
            Self::Remove => "remove",
        }
    }
}

/// `agent.capability.update` params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapabilityUpdate {
    /// The agent's id.
    pub agent_id: String,
    /// Add, update or remove.
    pub operation: CapabilityOperation,
    /// The capability (for `remove`, its name is what counts).
    pub capability: Capability,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The sender's idempotency key (ours: the spec asks for "idempotency keys for critical
    /// operations" without naming a field): a message retried with the same key gets the
    /// first one's answer and is applied once. See the crate's spec decisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

/// `collaboration.request` params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CollaborationRequest {
    /// The task collaborated on.
    pub task_id: String,
    /// Who asks.
    pub requesting_agent: String,
    /// Kind, e.g. `consensus`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collaboration_type: Option<String>,
    /// Agents that must take part.
    pub required_agents: Vec<String>,
    /// Pattern, e.g. `voting`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coordination_pattern: Option<String>,
    /// How long the collaboration may take, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Free-form context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// The sender's idempotency key (ours: the spec asks for "idempotency keys for critical
    /// operations" without naming a field): a message retried with the same key gets the
    /// first one's answer and is applied once. See the crate's spec decisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

/// A G-Counter increment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GCounterOp {
    /// The counter's key.
    pub key: String,
    /// Amount added to `actor`'s slot.
    pub increment: u64,
    /// Whose slot.
    pub actor: String,
}

/// Add or remove, for an OR-Set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SetOperation {
    /// Add `element` tagged `unique_id`.
    Add,
    /// Remove the observed tags of `element`.
    Remove,
}

/// An OR-Set operation.
///
/// An `add` carries the new tag in `unique_id` (as in the spec's example). A `remove` carries
/// the tags it observed in `removed_ids` (ours: the spec shows only `add`); a remove without
/// them removes the tags the receiver has seen.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OrSetOp {
    /// The set's key.
    pub key: String,
    /// Add or remove.
    pub operation: SetOperation,
    /// The element.
    pub element: String,
    /// The add's unique tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unique_id: Option<String>,
    /// The tags a remove observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed_ids: Option<Vec<String>>,
}

/// One CRDT operation of `state.sync`, tagged by `type`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum CrdtOperation {
    /// `"type": "g-counter"`.
    #[serde(rename = "g-counter")]
    GCounter(GCounterOp),
    /// `"type": "or-set"`.
    #[serde(rename = "or-set")]
    OrSet(OrSetOp),
}

/// `state.sync` params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StateSync {
    /// The sender.
    pub agent_id: String,
    /// The sender's vector clock: actor -> counter.
    pub vector_clock: BTreeMap<String, u64>,
    /// Operations since the last sync.
    pub operations: Vec<CrdtOperation>,
    /// Merkle root of the sender's state (hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merkle_root: Option<String>,
}

/// What an agent reports when it shuts down.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct FinalState {
    /// Tasks completed over its life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_tasks: Option<u64>,
    /// Tasks still running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_tasks: Option<Vec<String>>,
    /// Tasks it asks to hand over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_transfers: Option<Vec<String>>,
}

/// `agent.shutdown` params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentShutdown {
    /// The agent's id.
    pub agent_id: String,
    /// Why, e.g. `scheduled_maintenance`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// How long it waits for in-flight work, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graceful_timeout_ms: Option<u64>,
    /// Whether its tasks should go to other agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer_tasks: Option<bool>,
    /// Final counters and pending tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_state: Option<FinalState>,
}

/// `protocol.set_binary` params (the real server's request, no spec example): switch the
/// connection's binary messages to the 12-byte form. Empty, `null` or `{}` params switch it
/// off.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct SetBinary {
    /// Binary mode on or off; absent is off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Whether and above what size 12-byte payloads are gzipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<SetBinaryCompression>,
}

/// The `compression` of [`SetBinary`].
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct SetBinaryCompression {
    /// Gzip on or off; absent is off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Payloads longer than this are gzipped; absent is 1024.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<u64>,
}

// ---- results: what the orchestrator answers with (a response names no method, so these
// travel as the raw params of their response) -------------------------------------------------

/// The result of `ping` (a type-1 response) and the body of a type-5 pong, as the reference
/// server writes them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pong {
    /// Always `true`.
    pub pong: bool,
    /// The server's wall-clock time, Unix milliseconds.
    pub timestamp: u64,
}

/// The result of `agent.heartbeat`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeartbeatAck {
    /// The agent.
    pub agent_id: String,
    /// `ok`.
    pub status: String,
}

/// The result of `agent.capability.update`: the agent's capabilities now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapabilitiesNow {
    /// The agent.
    pub agent_id: String,
    /// Its capability names, in the order they were declared.
    pub capabilities: Vec<String>,
}

/// A task moved off a shutting-down agent (in [`ShutdownAck`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TransferredTask {
    /// The task.
    pub task_id: String,
    /// The agent that took it; `null` when it was queued.
    pub agent_id: Option<String>,
}

/// The result of `agent.shutdown`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShutdownAck {
    /// The agent.
    pub agent_id: String,
    /// `shutting_down`.
    pub status: String,
    /// The grace period granted, ms.
    pub graceful_timeout_ms: u64,
    /// Tasks moved on at once (when `transfer_tasks` was asked).
    pub transferred_tasks: Vec<TransferredTask>,
    /// The request's `reason`, `null` when it gave none.
    pub reason: Option<String>,
}

/// The result of `task.progress` (`status: ok`) and `task.complete` (`status: accepted`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskAck {
    /// The task.
    pub task_id: String,
    /// `ok` or `accepted`.
    pub status: String,
}

/// The result of `collaboration.request`, sent when every asked agent answered or the
/// timeout passed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CollaborationResult {
    /// The task collaborated on.
    pub task_id: String,
    /// The request's `collaboration_type`.
    pub collaboration_type: String,
    /// Each answering agent's result (or `{"error": ...}`), by agent id.
    pub responses: BTreeMap<String, Value>,
    /// Asked agents that did not answer (absent, gone or too slow).
    pub missing: Vec<String>,
    /// Whether every asked agent answered.
    pub complete: bool,
    /// The request's `coordination_pattern`, when it named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coordination_pattern: Option<String>,
    /// The tally of a `voting` or `consensus` collaboration (whose `responses` are then
    /// left empty: the requester gets the outcome, not the raw replies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<VoteOutcome>,
}

/// How a collaboration is coordinated (`coordination_pattern` of
/// [`CollaborationRequest`]); on the wire, its lowercase name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CoordinationPattern {
    /// Each asked agent votes; the orchestrator tallies the votes against the request's
    /// `context.criteria` (`quorum`, `threshold`).
    Voting,
    /// Each asked agent votes; approved only when every asked agent approves.
    Consensus,
    /// Every asked agent answers at once; the requester gets every answer.
    Parallel,
    /// As `parallel` (the default when no pattern is named).
    Broadcast,
}

impl CoordinationPattern {
    /// Every pattern, as named on the wire.
    pub const NAMES: &'static str = "voting, consensus, parallel or broadcast";

    /// The pattern `name` names (`voting`, `consensus`, `parallel`, `broadcast`).
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "voting" => Self::Voting,
            "consensus" => Self::Consensus,
            "parallel" => Self::Parallel,
            "broadcast" => Self::Broadcast,
            _ => return None,
        })
    }

    /// Its wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Voting => "voting",
            Self::Consensus => "consensus",
            Self::Parallel => "parallel",
            Self::Broadcast => "broadcast",
        }
    }

    /// Whether the asked agents vote and the requester gets a tally.
    pub fn is_vote(self) -> bool {
        matches!(self, Self::Voting | Self::Consensus)
    }
}

/// The tally of a `voting` or `consensus` collaboration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VoteOutcome {
    /// `approved`, `rejected` or `no_quorum`.
    pub decision: String,
    /// Approving votes.
    pub approve: u64,
    /// Rejecting votes.
    pub reject: u64,
    /// Abstentions.
    pub abstain: u64,
    /// Votes (of any kind) needed for a decision.
    pub quorum: u64,
    /// Share of approvals among approve and reject votes needed (`voting`); 1 for
    /// `consensus`.
    pub threshold: f64,
    /// Each voter's vote (`approve`, `reject`, `abstain`), by agent id.
    pub votes: BTreeMap<String, String>,
}

/// The result of `state.sync`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StateSyncResult {
    /// The sender.
    pub agent_id: String,
    /// Whether the sync changed the store (`false`: seen before).
    pub applied: bool,
    /// The store's vector clock after the sync.
    pub vector_clock: VectorClock,
    /// The store's `merkle_root` after the sync.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merkle_root: Option<String>,
    /// A full sync: the whole store, sent when the sender's `merkle_root` shows its replica
    /// diverged (its clock equals the store's, its root does not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<crate::crdt::StateSnapshot>,
}

/// The result of `protocol.set_binary`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SetBinaryResult {
    /// Binary mode is on.
    pub binary_enabled: bool,
    /// 12-byte payloads are gzipped above the threshold.
    pub compression_enabled: bool,
    /// `protocol_updated`.
    pub status: String,
}

//! What the [`Agent`](super::Agent) reports: [`AgentEvent`], and the requests an answer or
//! an error can be about.

use std::time::Duration;

use crate::error::ErrorBody;
use crate::message::TaskId;
use crate::params::{CapabilitiesNow, CollaborationRequest, RegistrationConfirmed, TaskAssigned};

/// A `collaboration.request` the server forwarded and the agent has not answered yet; pass
/// it to [`Agent::answer_collaboration`](super::Agent::answer_collaboration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CollaborationId(pub(crate) u64);

/// One of this agent's requests that the server answers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Request {
    /// `agent.register`, sent on every new connection.
    Register,
    /// `protocol.set_binary`.
    SetBinary,
    /// `task.complete` of this task.
    Complete {
        /// The task's id.
        task_id: TaskId,
    },
    /// `agent.shutdown`.
    Shutdown,
    /// `task.progress` of this task (answered only when refused).
    Progress {
        /// The task's id.
        task_id: TaskId,
    },
    /// `agent.capability.update` of this capability.
    CapabilityUpdate {
        /// The capability's name.
        capability: String,
    },
    /// `collaboration.request` about this task.
    Collaboration {
        /// The task's id.
        task_id: TaskId,
    },
    /// `state.get`: the whole shared state.
    StateGet,
    /// This agent's `state.sync` with its own vector-clock entry `seq`.
    StateSync {
        /// The sync's sequence number.
        seq: u64,
    },
}

impl Request {
    /// The task the request is about, if any.
    pub fn task_id(&self) -> Option<&str> {
        match self {
            Self::Complete { task_id }
            | Self::Progress { task_id }
            | Self::Collaboration { task_id } => Some(task_id.as_str()),
            _ => None,
        }
    }
}

/// What happened, for the application.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AgentEvent {
    /// The server confirmed `agent.register` (on every new connection); heartbeats run from
    /// now on.
    Registered(RegistrationConfirmed),
    /// A task was assigned; report on it with
    /// [`report_progress`](super::Agent::report_progress) and finish it with
    /// [`complete_task`](super::Agent::complete_task).
    TaskAssigned(TaskAssigned),
    /// A task was assigned while [`max_tasks`](crate::AgentConfig::max_tasks) tasks are
    /// held already: the agent does not hold it (the server's task deadline decides its
    /// fate).
    TaskDropped {
        /// The task's id.
        task_id: TaskId,
    },
    /// The server cancelled a held task (a 4006 error naming it in `data.task_id`): the
    /// agent let go of it and sends nothing more about it (reports on it are refused with
    /// [`AgentCommandError::Cancelled`](crate::AgentCommandError::Cancelled)).
    TaskCancelled {
        /// The task's id.
        task_id: TaskId,
        /// The server's error.
        error: ErrorBody,
    },
    /// The server refused a request with a retryable error (4002, 4003); it is sent again
    /// (a new message, the same params and idempotency key) after `retry_in`.
    Retrying {
        /// The request.
        about: Request,
        /// The server's error.
        error: ErrorBody,
        /// Sends so far.
        attempts: u32,
        /// The wait before the next send: the backoff, or the error's
        /// `data.retry_after_ms` when that is longer.
        retry_in: Duration,
    },
    /// The server applied an `agent.capability.update`
    /// ([`update_capability`](super::Agent::update_capability)): the capabilities now.
    CapabilitiesUpdated(CapabilitiesNow),
    /// The server answered a `collaboration.request`
    /// ([`request_collaboration`](super::Agent::request_collaboration)) once every asked
    /// agent answered or its timeout passed.
    CollaborationAnswered {
        /// The task it is about.
        task_id: TaskId,
        /// The server's result (this crate's orchestrator: `CollaborationResult`).
        result: serde_json::Value,
    },
    /// The server accepted a `task.complete`.
    CompletionAccepted {
        /// The task's id.
        task_id: TaskId,
        /// The reply's `status` (`accepted` from this crate's orchestrator).
        status: Option<String>,
    },
    /// Another agent asks for a collaboration (forwarded by the server as a request);
    /// answer with [`answer_collaboration`](super::Agent::answer_collaboration).
    CollaborationRequested {
        /// What to answer.
        id: CollaborationId,
        /// The request's params.
        request: CollaborationRequest,
    },
    /// The server answered with a type-3 error (after the retries a retryable one gets).
    ErrorReceived {
        /// The error.
        error: ErrorBody,
        /// Which of this agent's requests it answers, when its id names one.
        about: Option<Request>,
    },
    /// The server confirmed `protocol.set_binary`: the connection now speaks the 12-byte
    /// form (`enabled`) or the form it started with again.
    BinaryMode {
        /// Whether the 12-byte form is on.
        enabled: bool,
    },
    /// The server answered `agent.shutdown`; the agent closes the connection and stops.
    ShutdownAccepted,
    /// A frame from the server could not be decoded (or, with
    /// [`AgentConfig::hmac`](crate::AgentConfig::hmac), carried no good tag: code 4001); it
    /// is skipped, the connection stays.
    ProtocolViolation(ErrorBody),
    /// The server skipped sequence ids on this connection (messages lost; the crate's spec
    /// decision 38). The message is handled.
    SequenceGap {
        /// The id that was due.
        expected: u64,
        /// The id that came.
        received: u64,
    },
    /// A numbered message whose sequence id was seen already on this connection: dropped,
    /// not handled twice (decision 38).
    SequenceDuplicate {
        /// The id that came again.
        seq: u64,
    },
    /// A message the agent starts itself (register, heartbeat, an answer) could not be
    /// encoded, e.g. registration params over the codec's payload limit; it was not sent.
    EncodeFailed(String),
    /// A connection attempt failed before the WebSocket opened (refused, HTTP 401, ...);
    /// the next one starts after `retry_in`.
    ConnectFailed {
        /// What went wrong, as the driver reports it (`HTTP error: 401 Unauthorized`).
        reason: String,
        /// Attempts that failed in a row, this one included.
        failures: u32,
        /// The wait before the next attempt.
        retry_in: Duration,
    },
    /// The connection ended; the next attempt starts after `retry_in`. Held tasks are
    /// forgotten (the server reassigns them).
    Disconnected {
        /// The wait before the next attempt.
        retry_in: Duration,
    },
    /// The replica of the shared state changed: another agent's sync was applied
    /// (`from`), or a full sync from the server replaced it (`from: None`).
    StateUpdated {
        /// The agent whose sync was applied.
        from: Option<String>,
    },
    /// The agent stopped for good ([`shutdown`](super::Agent::shutdown) or
    /// [`close`](super::Agent::close)); the driver stops dialing.
    Stopped,
}

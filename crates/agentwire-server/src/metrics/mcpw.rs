//! MCPW orchestrator events: agents, tasks in flight and their duration, errors, drops.

use std::collections::BTreeMap;
use std::time::Instant;

use agentwire::mcpw::orchestrator::{OrchestratorEvent, TaskFailure};
use agentwire::mcpw::TaskId;

use super::families::{set, Families};
use super::transport::TransportCollector;
use super::MAX_TRACKED;
use crate::config::Protocol;

const P: Protocol = Protocol::Mcpw;

/// What the MCPW observer remembers between events.
#[derive(Debug, Default)]
pub(super) struct State {
    agents: usize,
    /// Tasks queued or assigned and not finished, with when they were first seen, in the
    /// order they were first seen (the oldest is forgotten first past the bound).
    tasks: BTreeMap<TaskId, (u64, Instant)>,
    order: BTreeMap<u64, TaskId>,
    next: u64,
}

impl State {
    fn start(&mut self, task: &TaskId, now: Instant) {
        if self.tasks.contains_key(task) {
            return;
        }
        if self.tasks.len() >= MAX_TRACKED {
            if let Some((_, oldest)) = self.order.pop_first() {
                self.tasks.remove(&oldest);
            }
        }
        self.next += 1;
        self.tasks.insert(task.clone(), (self.next, now));
        self.order.insert(self.next, task.clone());
    }

    fn finish(&mut self, task: &TaskId) -> Option<Instant> {
        let (n, start) = self.tasks.remove(task)?;
        self.order.remove(&n);
        Some(start)
    }
}

fn failure(reason: TaskFailure) -> &'static str {
    match reason {
        TaskFailure::DeadlineExceeded => "deadline-exceeded",
        TaskFailure::AttemptsExhausted => "attempts-exhausted",
        TaskFailure::Cancelled => "cancelled",
        _ => "failed",
    }
}

pub(super) fn observe(
    f: &Families,
    t: &TransportCollector,
    s: &mut State,
    event: &OrchestratorEvent,
    now: Instant,
) {
    match event {
        OrchestratorEvent::Registered { .. } => s.agents += 1,
        OrchestratorEvent::AgentRemoved { .. } => s.agents = s.agents.saturating_sub(1),
        OrchestratorEvent::TaskQueued { task_id }
        | OrchestratorEvent::TaskAssigned { task_id, .. } => {
            s.start(task_id, now);
        }
        OrchestratorEvent::TaskCompleted { task_id, .. } => {
            if let Some(start) = s.finish(task_id) {
                f.duration(P, "task", now.saturating_duration_since(start));
            }
            f.request(P, "task", "completed");
        }
        OrchestratorEvent::TaskFailed { task_id, reason } => {
            if let Some(start) = s.finish(task_id) {
                f.duration(P, "task", now.saturating_duration_since(start));
            }
            f.request(P, "task", failure(*reason));
        }
        OrchestratorEvent::ProtocolViolation { error, .. } => f.error(P, error.code().0),
        OrchestratorEvent::SequenceGap {
            expected, received, ..
        } => t.dropped(P, "sequence-gap", received.saturating_sub(*expected)),
        OrchestratorEvent::SequenceDuplicate { .. } => t.dropped(P, "sequence-duplicate", 1),
        _ => {}
    }
    set(&f.mcpw_agents, s.agents);
    set(&f.mcpw_tasks, s.tasks.len());
}

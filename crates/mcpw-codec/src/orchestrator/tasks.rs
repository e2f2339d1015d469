//! Tasks: what was submitted, where each task is (queued or assigned), the queue in
//! submission order, and the deadline timers this table owns.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use agentwire_core::TimerSet;
use serde_json::{json, Value};

use crate::error::ProtocolError;
use crate::{AgentId, TaskId};

/// A task to route, given to [`Orchestrator::submit_task`](super::Orchestrator::submit_task).
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

    /// The `requirements.focus_areas` strings, which weigh in routing.
    pub(crate) fn focus(&self) -> Vec<String> {
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

/// Where a task is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskState {
    /// Waiting for an agent that can take it.
    Queued,
    /// Sent to this agent.
    Assigned(AgentId),
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
    pub(crate) tried: BTreeSet<AgentId>,
    /// When it fails if not completed.
    pub(crate) deadline: Instant,
}

/// Tasks held, by id, with the queue of those waiting for an agent and their deadlines, and
/// the tasks recently taken from an agent (cancelled or handed over) with when their grace
/// ends.
#[derive(Debug, Default)]
pub(crate) struct Tasks {
    map: BTreeMap<TaskId, TaskInfo>,
    /// Queued task ids, the most urgent first: by `priority` (larger first), then in
    /// submission order.
    queue: Vec<TaskId>,
    deadlines: TimerSet<TaskId>,
    /// (task, the agent it was taken from, end of the grace), oldest first: the grace is
    /// one constant, so this is also the order in which they end.
    cancelled: VecDeque<(TaskId, AgentId, Instant)>,
}

impl Tasks {
    pub(crate) fn get(&self, task_id: &str) -> Option<&TaskInfo> {
        self.map.get(task_id)
    }

    pub(crate) fn get_mut(&mut self, task_id: &str) -> Option<&mut TaskInfo> {
        self.map.get_mut(task_id)
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn contains(&self, task_id: &str) -> bool {
        self.map.contains_key(task_id)
    }

    /// Holds a new task, due at `deadline`.
    pub(crate) fn insert(&mut self, task_id: TaskId, spec: TaskSpec, deadline: Instant) {
        self.deadlines.set(task_id.clone(), deadline);
        self.map.insert(
            task_id,
            TaskInfo {
                spec,
                state: TaskState::Queued,
                attempts: 0,
                progress: 0.0,
                tried: BTreeSet::new(),
                deadline,
            },
        );
    }

    /// Forgets `task_id` (completed or failed): its deadline and queue place go too.
    pub(crate) fn remove(&mut self, task_id: &str) -> Option<TaskInfo> {
        let task = self.map.remove(task_id)?;
        self.deadlines.cancel(&TaskId::from(task_id));
        self.queue.retain(|t| t.as_str() != task_id);
        Some(task)
    }

    /// Records that `task_id` went to `agent_id`: its attempt count.
    pub(crate) fn assigned(&mut self, task_id: &str, agent_id: &str) -> Option<u32> {
        let task = self.map.get_mut(task_id)?;
        task.state = TaskState::Assigned(agent_id.into());
        task.attempts += 1;
        task.progress = 0.0;
        Some(task.attempts)
    }

    /// Puts `task_id` in the queue behind every task of its priority or a larger one (the
    /// crate's spec decision 39).
    pub(crate) fn enqueue(&mut self, task_id: TaskId) {
        let priority = |t: &TaskId| self.map.get(t).map_or(0, |t| t.spec.priority);
        let p = priority(&task_id);
        let at = self
            .queue
            .iter()
            .position(|t| priority(t) < p)
            .unwrap_or(self.queue.len());
        self.queue.insert(at, task_id);
    }

    /// Empties the queue, returning it most urgent first (what stays queued is put back
    /// with [`enqueue`](Self::enqueue), which keeps that order).
    pub(crate) fn take_queue(&mut self) -> Vec<TaskId> {
        std::mem::take(&mut self.queue)
    }

    /// `Ok` if `task_id` is assigned to `agent_id`.
    pub(crate) fn check_assigned(
        &self,
        task_id: &str,
        agent_id: &str,
    ) -> Result<(), ProtocolError> {
        match self.map.get(task_id).map(|t| &t.state) {
            Some(TaskState::Assigned(a)) if a == agent_id => Ok(()),
            Some(_) => Err(ProtocolError::NotAssigned {
                task_id: task_id.to_owned(),
                agent_id: agent_id.to_owned(),
            }),
            None => Err(ProtocolError::UnknownTask(task_id.to_owned())),
        }
    }

    /// Remembers that `task_id` was taken from `agent_id` until `until` (at most `max`
    /// such tasks, the oldest forgotten first).
    pub(crate) fn cancelled(&mut self, task_id: &str, agent_id: &str, until: Instant, max: usize) {
        if max == 0 {
            return;
        }
        while self.cancelled.len() >= max {
            self.cancelled.pop_front();
        }
        self.cancelled
            .push_back((task_id.into(), agent_id.into(), until));
    }

    /// Whether `task_id` was taken from `agent_id` less than its grace ago at `now` (ended
    /// graces are forgotten).
    pub(crate) fn was_cancelled(&mut self, task_id: &str, agent_id: &str, now: Instant) -> bool {
        while self
            .cancelled
            .front()
            .is_some_and(|(_, _, until)| *until <= now)
        {
            self.cancelled.pop_front();
        }
        self.cancelled
            .iter()
            .any(|(t, a, _)| t.as_str() == task_id && a.as_str() == agent_id)
    }

    /// The next task deadline.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.next_deadline()
    }

    /// The task whose deadline passed by `now`, if any.
    pub(crate) fn pop_expired(&mut self, now: Instant) -> Option<TaskId> {
        self.deadlines.pop_expired(now)
    }
}

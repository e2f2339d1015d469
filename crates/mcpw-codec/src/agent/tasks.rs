//! [`Tasks`]: the tasks the agent holds, those it let go of without finishing them, and the
//! collaboration requests awaiting its answer.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::event::CollaborationId;
use super::link::ReplyKey;

/// Held tasks and unanswered collaboration requests; both bounded, both forgotten when the
/// connection ends (the server reassigns the tasks and gives up on the answers). Tasks
/// cancelled or handed over are remembered (at most `max` of them, the oldest forgotten
/// first) so that a late report on one is refused as such.
#[derive(Debug, Default)]
pub(super) struct Tasks {
    /// Assigned and not completed.
    held: BTreeSet<String>,
    /// Cancelled by the server or handed over, newest last.
    dropped: VecDeque<String>,
    /// Completed over the agent's life (for `agent.shutdown`'s `final_state`).
    completed: u64,
    /// Forwarded collaboration requests: how to answer each.
    collaborations: BTreeMap<CollaborationId, ReplyKey>,
    /// The next collaboration id.
    next_collaboration: u64,
}

impl Tasks {
    /// Holds `task_id` unless `max` tasks are held already (a task held already stays
    /// held). Returns whether it is held.
    pub(super) fn assign(&mut self, task_id: &str, max: usize) -> bool {
        if self.held.contains(task_id) {
            return true;
        }
        if self.held.len() >= max {
            return false;
        }
        self.dropped.retain(|t| t != task_id);
        self.held.insert(task_id.to_owned());
        true
    }

    /// Whether `task_id` is held.
    pub(super) fn holds(&self, task_id: &str) -> bool {
        self.held.contains(task_id)
    }

    /// Whether `task_id` was cancelled or handed over (and not assigned again since).
    pub(super) fn was_dropped(&self, task_id: &str) -> bool {
        self.dropped.iter().any(|t| t == task_id)
    }

    /// Lets go of `task_id` as completed; `false` if it was not held.
    pub(super) fn complete(&mut self, task_id: &str) -> bool {
        let held = self.held.remove(task_id);
        if held {
            self.completed += 1;
        }
        held
    }

    /// Lets go of `task_id` unfinished (cancelled, or handed over), remembering it among at
    /// most `max` such tasks; `false` if it was not held.
    pub(super) fn drop_task(&mut self, task_id: &str, max: usize) -> bool {
        if !self.held.remove(task_id) {
            return false;
        }
        if self.dropped.len() >= max.max(1) {
            self.dropped.pop_front();
        }
        self.dropped.push_back(task_id.to_owned());
        true
    }

    /// Held task ids, in order.
    pub(super) fn held(&self) -> impl Iterator<Item = &str> {
        self.held.iter().map(String::as_str)
    }

    /// Number of held tasks.
    pub(super) fn len(&self) -> usize {
        self.held.len()
    }

    /// Tasks completed so far.
    pub(super) fn completed(&self) -> u64 {
        self.completed
    }

    /// Keeps a collaboration request to answer under a new id, unless `max` await already.
    pub(super) fn add_collaboration(
        &mut self,
        key: ReplyKey,
        max: usize,
    ) -> Option<CollaborationId> {
        if self.collaborations.len() >= max {
            return None;
        }
        self.next_collaboration += 1;
        let id = CollaborationId(self.next_collaboration);
        self.collaborations.insert(id, key);
        Some(id)
    }

    /// Takes the reply key of collaboration request `id`.
    pub(super) fn take_collaboration(&mut self, id: CollaborationId) -> Option<ReplyKey> {
        self.collaborations.remove(&id)
    }

    /// Forgets held tasks and unanswered requests (the connection ended).
    pub(super) fn forget(&mut self) {
        self.held.clear();
        self.collaborations.clear();
    }
}

//! [`Retries`]: what the agent sent that it may send again after a retryable error, and when.

use std::collections::BTreeMap;
use std::time::Instant;

use super::event::Request;
use super::reply::ReplyKey;
use crate::header::MessageType;
use crate::message::Body;

/// A message the agent may send again: a retry is a new message (new id or sequence id) of
/// the same type with the same body, idempotency key included.
#[derive(Debug, Clone)]
pub(super) struct Resend {
    /// The message's type.
    pub(super) kind: MessageType,
    /// The message's body.
    pub(super) body: Body,
    /// What it asks for.
    pub(super) about: Request,
    /// Sends so far.
    pub(super) attempts: u32,
}

/// Sent messages that may be sent again, by reply key, and refused ones waiting for their
/// next send. Bounded: one per held task for progress reports (a newer report replaces the
/// older), one per completion, the register, and at most
/// [`AgentConfig::max_pending`](crate::AgentConfig::max_pending) other requests.
#[derive(Debug, Default)]
pub(super) struct Retries {
    /// Sent, not answered yet.
    sent: BTreeMap<ReplyKey, Resend>,
    /// Refused with a retryable error: sent again at the instant (ties in refusal order).
    due: BTreeMap<(Instant, u64), Resend>,
    /// The tie-breaker of the next refusal.
    next: u64,
}

impl Retries {
    /// Keeps `resend`, just sent as `key`; a progress report replaces its task's earlier one.
    pub(super) fn sent(&mut self, key: ReplyKey, resend: Resend) {
        if let Request::Progress { task_id } = &resend.about {
            let task_id = task_id.clone();
            self.forget_progress(task_id.as_str());
        }
        self.sent.insert(key, resend);
    }

    /// The message `key` answers, which will not be sent again from here.
    pub(super) fn answered(&mut self, key: &ReplyKey) -> Option<Resend> {
        self.sent.remove(key)
    }

    /// Sends `resend` again at `at`.
    pub(super) fn schedule(&mut self, at: Instant, resend: Resend) {
        self.next += 1;
        self.due.insert((at, self.next), resend);
    }

    /// A message due to be sent again by `now`, if any.
    pub(super) fn pop_due(&mut self, now: Instant) -> Option<Resend> {
        let key = *self.due.keys().next().filter(|(at, _)| *at <= now)?;
        self.due.remove(&key)
    }

    /// When the next message is due.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.due.keys().next().map(|(at, _)| *at)
    }

    /// Forgets every message about `task_id` (completed, cancelled or handed over).
    pub(super) fn forget_task(&mut self, task_id: &str) {
        self.forget_where(|r| r.about.task_id() == Some(task_id));
    }

    /// Forgets the progress reports about `task_id` (its completion settles them).
    pub(super) fn forget_progress(&mut self, task_id: &str) {
        self.forget_where(
            |r| matches!(&r.about, Request::Progress { task_id: t } if t.as_str() == task_id),
        );
    }

    /// Whether a `task.complete` awaits its answer or a retry.
    pub(super) fn has_completion(&self) -> bool {
        self.sent
            .values()
            .chain(self.due.values())
            .any(|r| matches!(r.about, Request::Complete { .. }))
    }

    /// Capability updates and collaboration requests awaiting an answer or a retry.
    pub(super) fn requests(&self) -> usize {
        self.sent
            .values()
            .chain(self.due.values())
            .filter(|r| {
                matches!(
                    r.about,
                    Request::CapabilityUpdate { .. } | Request::Collaboration { .. }
                )
            })
            .count()
    }

    fn forget_where(&mut self, gone: impl Fn(&Resend) -> bool) {
        self.sent.retain(|_, r| !gone(r));
        self.due.retain(|_, r| !gone(r));
    }
}

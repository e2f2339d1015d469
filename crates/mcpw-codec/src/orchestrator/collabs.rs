//! Collaborations in flight: who asked, who was asked, the answers so far, the forwarded
//! requests awaiting an answer, and the timeout timers this table owns.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use agentwire_core::{ConnId, TimerSet};
use serde_json::Value;

use super::votes::{Vote, VoteRule};
use super::wire::ReplyKey;
use crate::params::{CollaborationResult, CoordinationPattern};
use crate::Form;

/// One collaboration: a `collaboration.request` forwarded to the agents it requires.
#[derive(Debug)]
pub(crate) struct Collab {
    /// The requester's connection, and how to answer it.
    pub(crate) origin: ConnId,
    pub(crate) origin_reply: ReplyKey,
    pub(crate) origin_form: Form,
    pub(crate) task_id: String,
    pub(crate) collaboration_type: String,
    /// Every agent required, once each, in request order.
    pub(crate) asked: Vec<String>,
    /// Agents whose answer is awaited.
    pub(crate) waiting: BTreeSet<String>,
    pub(crate) responses: BTreeMap<String, Value>,
    /// The request's pattern, as it named it (`None`: it named none).
    pub(crate) pattern: Option<CoordinationPattern>,
    /// How the votes decide (`voting`, `consensus`).
    pub(crate) rule: Option<VoteRule>,
    /// The votes so far (`voting`, `consensus`).
    pub(crate) votes: BTreeMap<String, Vote>,
}

impl Collab {
    /// Whether the collaboration can end: no answer is awaited, or the votes decide
    /// whatever the rest vote.
    fn is_done(&self) -> bool {
        self.waiting.is_empty()
            || self.rule.is_some_and(|r| {
                r.is_decided(
                    &self.votes,
                    self.waiting.len() as u64,
                    self.asked.len() as u64,
                )
            })
    }

    /// The requester's result (with a vote's tally instead of the raw answers), and who
    /// answered and who did not.
    pub(crate) fn finish(mut self) -> (CollaborationResult, Vec<String>, Vec<String>) {
        let responded: Vec<String> = self.responses.keys().cloned().collect();
        let missing: Vec<String> = self
            .asked
            .iter()
            .filter(|a| !self.responses.contains_key(*a))
            .cloned()
            .collect();
        let outcome = self
            .rule
            .map(|r| r.outcome(&self.votes, self.asked.len() as u64));
        if outcome.is_some() {
            self.responses.clear();
        }
        let result = CollaborationResult {
            task_id: self.task_id,
            collaboration_type: self.collaboration_type,
            responses: self.responses,
            complete: missing.is_empty(),
            missing: missing.clone(),
            coordination_pattern: self.pattern.map(|p| p.as_str().to_owned()),
            outcome,
        };
        (result, responded, missing)
    }
}

/// Collaborations by id, and the forwarded requests awaiting an answer.
#[derive(Debug, Default)]
pub(crate) struct Collabs {
    map: BTreeMap<u64, Collab>,
    /// Forwarded requests: (agent conn, key) -> (collaboration, agent).
    pending: BTreeMap<(ConnId, ReplyKey), (u64, String)>,
    timeouts: TimerSet<u64>,
}

impl Collabs {
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn contains(&self, id: u64) -> bool {
        self.map.contains_key(&id)
    }

    /// Records that the request to `agent` went to `conn` under `key`.
    pub(crate) fn forwarded(&mut self, conn: ConnId, key: ReplyKey, id: u64, agent: String) {
        self.pending.insert((conn, key), (id, agent));
    }

    /// Starts collaboration `id`; it ends at `deadline` at the latest.
    pub(crate) fn start(&mut self, id: u64, collab: Collab, deadline: Instant) {
        self.map.insert(id, collab);
        self.timeouts.set(id, deadline);
    }

    /// Ends collaboration `id`: no more answers are taken for it.
    pub(crate) fn take(&mut self, id: u64) -> Option<Collab> {
        let c = self.map.remove(&id)?;
        self.timeouts.cancel(&id);
        self.pending.retain(|_, (cid, _)| *cid != id);
        Some(c)
    }

    /// The forwarded request `key` on `conn` answers, if any: (collaboration, agent).
    pub(crate) fn answered(&mut self, conn: ConnId, key: ReplyKey) -> Option<(u64, String)> {
        self.pending.remove(&(conn, key))
    }

    /// Records `agent`'s answer to `id` (and its vote, in a vote); `true` when the
    /// collaboration can end: no answer is awaited any more, or the votes decide already.
    pub(crate) fn record(&mut self, id: u64, agent: String, answer: Value) -> bool {
        let Some(c) = self.map.get_mut(&id) else {
            return false;
        };
        c.waiting.remove(&agent);
        if c.rule.is_some() {
            if let Some(v) = Vote::of(&answer) {
                c.votes.insert(agent.clone(), v);
            }
        }
        c.responses.insert(agent, answer);
        c.is_done()
    }

    /// `agent` is gone: no collaboration waits for it. Returns those that wait for no one
    /// now.
    pub(crate) fn forget_agent(&mut self, agent: &str, conn: ConnId) -> Vec<u64> {
        let mut done = Vec::new();
        for (id, c) in &mut self.map {
            if c.waiting.remove(agent) && c.is_done() {
                done.push(*id);
            }
        }
        self.pending.retain(|(c, _), _| *c != conn);
        done
    }

    /// `conn` closed: its forwarded requests are not answered any more. Returns the
    /// collaborations it asked for.
    pub(crate) fn forget_conn(&mut self, conn: ConnId) -> Vec<u64> {
        self.pending.retain(|(c, _), _| *c != conn);
        self.map
            .iter()
            .filter(|(_, c)| c.origin == conn)
            .map(|(id, _)| *id)
            .collect()
    }

    /// The next collaboration timeout.
    pub(crate) fn next_timeout(&self) -> Option<Instant> {
        self.timeouts.next_deadline()
    }

    /// The collaboration whose timeout passed by `now`, if any.
    pub(crate) fn pop_expired(&mut self, now: Instant) -> Option<u64> {
        self.timeouts.pop_expired(now)
    }
}

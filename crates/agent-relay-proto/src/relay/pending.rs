//! Agent requests the relay forwarded to a host and still routes the reply of, with their
//! expiry timer.

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use agentwire_core::ConnId;

use crate::id::SessionId;

/// One agent request forwarded to the host and not yet answered.
#[derive(Debug)]
pub(super) struct Pending {
    /// The session it was forwarded in.
    pub(super) session: SessionId,
    /// The agent that asked.
    pub(super) agent: ConnId,
    /// Its `id`, the `replyTo` of the answer.
    pub(super) id: Box<str>,
    /// When the relay forgets it ([`RelayConfig::pending_timeout`](crate::RelayConfig)).
    pub(super) expires: Option<Instant>,
    /// The agent sent no `id`: `id` is the relay's, and the answer reaches the agent
    /// without `replyTo`.
    pub(super) minted: bool,
}

impl Pending {
    /// The `replyTo` an answer to the agent carries: its own `id`, none for a minted one.
    pub(super) fn reply_to(&self) -> Option<&str> {
        (!self.minted).then_some(&*self.id)
    }
}

/// The prefix of the ids the relay gives agent requests sent without one.
pub(super) const MINTED_PREFIX: &str = "relay-";

/// Every outstanding request, indexed three ways: by sequence number (creation order, which
/// is also expiry order), by session and `id` (ids may repeat across agents: oldest first),
/// and by agent.
#[derive(Debug, Default)]
pub(super) struct PendingRequests {
    by_seq: BTreeMap<u64, Pending>,
    by_id: BTreeMap<SessionId, BTreeMap<Box<str>, VecDeque<u64>>>,
    by_agent: BTreeMap<ConnId, Vec<u64>>,
    next_seq: u64,
}

impl PendingRequests {
    /// Requests of all agents.
    pub(super) fn total(&self) -> usize {
        self.by_seq.len()
    }

    /// Requests of `agent`.
    pub(super) fn of_agent(&self, agent: ConnId) -> usize {
        self.by_agent.get(&agent).map_or(0, Vec::len)
    }

    /// An id for a request sent without one, unused by any outstanding request of
    /// `session`: [`MINTED_PREFIX`] and a number.
    pub(super) fn mint(&self, session: &SessionId) -> String {
        let ids = self.by_id.get(session);
        let mut n = self.next_seq;
        loop {
            let id = format!("{MINTED_PREFIX}{n}");
            if !ids.is_some_and(|m| m.contains_key(id.as_str())) {
                return id;
            }
            n += 1;
        }
    }

    /// Remembers a request of `agent` in `session`; `minted` when `id` is the relay's.
    pub(super) fn insert(
        &mut self,
        session: &SessionId,
        agent: ConnId,
        id: &str,
        minted: bool,
        expires: Option<Instant>,
    ) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let id: Box<str> = id.into();
        self.by_id
            .entry(session.clone())
            .or_default()
            .entry(id.clone())
            .or_default()
            .push_back(seq);
        self.by_agent.entry(agent).or_default().push(seq);
        self.by_seq.insert(
            seq,
            Pending {
                session: session.clone(),
                agent,
                id,
                expires,
                minted,
            },
        );
    }

    /// Takes the oldest request of `session` with id `reply_to`: the one a reply answers.
    pub(super) fn take_answered(&mut self, session: &SessionId, reply_to: &str) -> Option<Pending> {
        let seq = *self.by_id.get(session)?.get(reply_to)?.front()?;
        self.remove(seq)
    }

    /// Forgets every request of `agent`; returns how many there were.
    pub(super) fn forget_agent(&mut self, agent: ConnId) -> usize {
        let seqs = self.by_agent.remove(&agent).unwrap_or_default();
        for seq in &seqs {
            self.remove(*seq);
        }
        seqs.len()
    }

    /// Takes every request of `session`, oldest first.
    pub(super) fn take_session(&mut self, session: &SessionId) -> Vec<Pending> {
        let Some(ids) = self.by_id.get(session) else {
            return Vec::new();
        };
        let mut seqs: Vec<u64> = ids.values().flatten().copied().collect();
        seqs.sort_unstable();
        seqs.into_iter()
            .filter_map(|seq| self.remove(seq))
            .collect()
    }

    /// The oldest request's expiry and its agent (requests expire in creation order).
    pub(super) fn next_expiry(&self) -> Option<(Instant, ConnId)> {
        let (_, p) = self.by_seq.first_key_value()?;
        p.expires.map(|t| (t, p.agent))
    }

    /// Takes the oldest request if it has expired at `now`.
    pub(super) fn pop_expired(&mut self, now: Instant) -> Option<Pending> {
        let (&seq, p) = self.by_seq.first_key_value()?;
        if p.expires.is_none_or(|t| t > now) {
            return None;
        }
        self.remove(seq)
    }

    fn remove(&mut self, seq: u64) -> Option<Pending> {
        let p = self.by_seq.remove(&seq)?;
        if let Some(ids) = self.by_id.get_mut(&p.session) {
            if let Some(q) = ids.get_mut(&*p.id) {
                q.retain(|x| *x != seq);
                if q.is_empty() {
                    ids.remove(&*p.id);
                }
            }
            if ids.is_empty() {
                self.by_id.remove(&p.session);
            }
        }
        if let Some(seqs) = self.by_agent.get_mut(&p.agent) {
            seqs.retain(|x| *x != seq);
            if seqs.is_empty() {
                self.by_agent.remove(&p.agent);
            }
        }
        Some(p)
    }
}

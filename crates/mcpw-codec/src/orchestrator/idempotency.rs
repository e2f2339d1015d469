//! Idempotency keys: the answers to messages that carried an `idempotency_key`, kept for
//! [`idempotency_ttl`](crate::OrchestratorConfig::idempotency_ttl) so that a retry of one
//! gets the same answer and is not applied twice.
//!
//! A key is scoped by the agent that sent it and the method, and tied to a fingerprint of
//! the params: the same key with other params is a conflict (4008). Only answers that
//! applied something are kept (a refused message changed nothing, so its retry is simply
//! handled again). A `collaboration.request` is kept while it runs: a retry then is
//! absorbed, and the answer goes out once, to the first message, when the collaboration
//! ends (this crate's agent retries with the same key only after a refusal, so it never
//! has two in flight).

use std::collections::{BTreeMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

use super::{wire, Orchestrator};
use crate::error::ProtocolError;
use crate::{AgentId, Body};

/// What a key names: the sending agent, the method, the key.
type Scope = (AgentId, &'static str, String);

/// One remembered key.
#[derive(Debug)]
struct Entry {
    /// Hash of the params it came with.
    fingerprint: u64,
    /// The answer's result; `None` while a collaboration runs.
    answer: Option<Value>,
    /// Bytes counted for it.
    bytes: usize,
}

/// What to do with a message that carries a key.
#[derive(Debug)]
pub(crate) enum Seen {
    /// A new key: handle the message (and [`remember`](Orchestrator::remember) its answer).
    New,
    /// Seen, answered: answer with this result again.
    Answered(Value),
    /// Seen, still running (a collaboration): nothing to do now.
    Running,
}

/// The remembered keys, oldest first, bounded by count and bytes.
#[derive(Debug, Default)]
pub(crate) struct Replays {
    entries: BTreeMap<Scope, Entry>,
    /// Keys by when they expire (one TTL for all, so also by when they were stored).
    order: VecDeque<(Instant, Scope)>,
    /// Running collaborations by id, with their key.
    running: BTreeMap<u64, Scope>,
    bytes: usize,
}

impl Replays {
    fn expire(&mut self, now: Instant) {
        while self.order.front().is_some_and(|(at, _)| *at <= now) {
            if let Some((_, scope)) = self.order.pop_front() {
                self.drop_entry(&scope);
            }
        }
    }

    fn drop_entry(&mut self, scope: &Scope) {
        if let Some(e) = self.entries.remove(scope) {
            self.bytes = self.bytes.saturating_sub(e.bytes);
        }
    }

    fn insert(&mut self, scope: Scope, entry: Entry, until: Instant, max: (usize, usize)) {
        let (max_keys, max_bytes) = max;
        if max_keys == 0 || entry.bytes > max_bytes {
            return;
        }
        self.drop_entry(&scope);
        self.order.retain(|(_, s)| *s != scope);
        while self.entries.len() >= max_keys || self.bytes + entry.bytes > max_bytes {
            let Some((_, old)) = self.order.pop_front() else {
                break;
            };
            self.drop_entry(&old);
        }
        self.bytes += entry.bytes;
        self.entries.insert(scope.clone(), entry);
        self.order.push_back((until, scope));
    }
}

/// A stable hash of `params` (their JSON).
fn fingerprint(params: &impl Serialize) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_vec(params).unwrap_or_default().hash(&mut h);
    h.finish()
}

impl Orchestrator {
    fn limits_of_replays(&self) -> (usize, usize) {
        let l = &self.config.limits;
        (l.max_idempotency_keys, l.max_idempotency_bytes)
    }

    /// Looks `key` (of `agent`, for `method`, with `params`) up at `now`.
    pub(super) fn seen(
        &mut self,
        (agent, method, key): (&AgentId, &'static str, Option<&str>),
        params: &impl Serialize,
        now: Instant,
    ) -> Result<Seen, ProtocolError> {
        let Some(key) = key else {
            return Ok(Seen::New);
        };
        self.replays.expire(now);
        let scope = (agent.clone(), method, key.to_owned());
        let Some(e) = self.replays.entries.get(&scope) else {
            return Ok(Seen::New);
        };
        if e.fingerprint != fingerprint(params) {
            return Err(ProtocolError::IdempotencyConflict(key.to_owned()));
        }
        Ok(e.answer.clone().map_or(Seen::Running, Seen::Answered))
    }

    /// Remembers `answer` as the answer to `key` (of `agent`, for `method`, with `params`)
    /// until the TTL ends; returns the answer's body.
    pub(super) fn remember(
        &mut self,
        (agent, method, key): (&AgentId, &'static str, Option<&str>),
        params: &impl Serialize,
        answer: &impl Serialize,
        now: Instant,
    ) -> Body {
        let value = serde_json::to_value(answer).unwrap_or(Value::Null);
        let body = wire::result_body(None, &value);
        if let Some(key) = key {
            let bytes = key.len() + agent.as_str().len() + value.to_string().len() + 64;
            let entry = Entry {
                fingerprint: fingerprint(params),
                answer: Some(value),
                bytes,
            };
            let until = now + self.config.idempotency_ttl;
            let max = self.limits_of_replays();
            let scope = (agent.clone(), method, key.to_owned());
            self.replays.insert(scope, entry, until, max);
        }
        body
    }

    /// Remembers `key` as the running collaboration `id`.
    pub(super) fn remember_running(
        &mut self,
        (agent, key): (&AgentId, Option<&str>),
        params: &impl Serialize,
        id: u64,
        now: Instant,
    ) {
        let Some(key) = key else { return };
        let scope = (agent.clone(), "collaboration.request", key.to_owned());
        let entry = Entry {
            fingerprint: fingerprint(params),
            answer: None,
            bytes: key.len() + agent.as_str().len() + 64,
        };
        let until = now + self.config.idempotency_ttl;
        let max = self.limits_of_replays();
        self.replays.insert(scope.clone(), entry, until, max);
        self.replays.running.insert(id, scope);
    }

    /// Collaboration `id` ended with `result`: a retry of its key gets that from now on.
    pub(super) fn collaboration_answered(&mut self, id: u64, result: &impl Serialize) {
        let Some(scope) = self.replays.running.remove(&id) else {
            return;
        };
        let value = serde_json::to_value(result).unwrap_or(Value::Null);
        let (_, max_bytes) = self.limits_of_replays();
        let Some(e) = self.replays.entries.get_mut(&scope) else {
            return;
        };
        let extra = value.to_string().len();
        if self.replays.bytes + extra > max_bytes {
            // Too large to keep: the key is forgotten, a retry is handled again.
            let e_bytes = e.bytes;
            self.replays.entries.remove(&scope);
            self.replays.bytes = self.replays.bytes.saturating_sub(e_bytes);
            return;
        }
        e.answer = Some(value);
        e.bytes += extra;
        self.replays.bytes += extra;
    }
}

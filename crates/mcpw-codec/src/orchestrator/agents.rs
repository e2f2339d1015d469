//! The agent registry: who is registered on which connection, what it can do, and its
//! health, kept by the heartbeat and shutdown timers this registry owns.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use agentwire_core::{ConnId, TimerSet};

use super::routing::{Candidate, CapabilityProfile};
use crate::{AgentId, TaskId};

/// Health of a registered agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// Heartbeats arrive in time.
    Healthy,
    /// It missed heartbeats; it gets no new tasks.
    Unhealthy,
    /// It announced `agent.shutdown`; it gets no new tasks.
    ShuttingDown,
}

/// What the orchestrator knows about one registered agent.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentInfo {
    /// Its connection.
    pub conn: ConnId,
    /// `agent_type` from `agent.register` (or `X-Agent-Type`).
    pub agent_type: Option<String>,
    /// Its capabilities.
    pub capabilities: Vec<CapabilityProfile>,
    /// `resources.max_concurrent_tasks` (0: not given).
    pub max_concurrent: usize,
    /// Its last `workload.current_load`.
    pub load: f64,
    /// Its last heartbeat `status`.
    pub status: Option<String>,
    /// Its health.
    pub health: Health,
    /// Tasks assigned to it.
    pub tasks: BTreeSet<TaskId>,
    last_heartbeat: Instant,
}

impl AgentInfo {
    /// A healthy agent on `conn` that registered (and so last beat) at `now`.
    pub(crate) fn new(
        conn: ConnId,
        agent_type: Option<String>,
        capabilities: Vec<CapabilityProfile>,
        max_concurrent: usize,
        tasks: BTreeSet<TaskId>,
        now: Instant,
    ) -> Self {
        Self {
            conn,
            agent_type,
            capabilities,
            max_concurrent,
            load: 0.0,
            status: None,
            health: Health::Healthy,
            tasks,
            last_heartbeat: now,
        }
    }
}

/// The heartbeat rule: an agent is unhealthy after `unhealthy_after` periods without a
/// heartbeat, removed after `remove_after`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeartbeatRule {
    /// The period.
    pub(crate) interval: Duration,
    /// Periods until unhealthy.
    pub(crate) unhealthy_after: u32,
    /// Periods until removed.
    pub(crate) remove_after: u32,
}

/// What a heartbeat timer found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Overdue {
    /// Nothing to do (the agent is gone, or beat in time).
    No,
    /// The agent just became unhealthy.
    Unhealthy,
    /// The agent is overdue for removal; it was on this connection.
    Remove(ConnId),
}

/// Registered agents by id, with their heartbeat and shutdown timers.
#[derive(Debug, Default)]
pub(crate) struct Agents {
    map: BTreeMap<AgentId, AgentInfo>,
    /// When each agent's next heartbeat check is due.
    heartbeats: TimerSet<AgentId>,
    /// When each shutting-down agent's grace period ends.
    shutdowns: TimerSet<AgentId>,
    /// The `X-Agent-ID` upgrade header of each open connection that sent one.
    claims: BTreeMap<ConnId, AgentId>,
}

impl Agents {
    pub(crate) fn get(&self, agent_id: &str) -> Option<&AgentInfo> {
        self.map.get(agent_id)
    }

    pub(crate) fn get_mut(&mut self, agent_id: &str) -> Option<&mut AgentInfo> {
        self.map.get_mut(agent_id)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&AgentId, &AgentInfo)> {
        self.map.iter()
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn contains(&self, agent_id: &str) -> bool {
        self.map.contains_key(agent_id)
    }

    /// The connection of `agent_id`.
    pub(crate) fn conn_of(&self, agent_id: &str) -> Option<ConnId> {
        self.map.get(agent_id).map(|a| a.conn)
    }

    /// Registers (or re-registers) `agent_id` and arms its heartbeat check.
    pub(crate) fn insert(&mut self, agent_id: AgentId, info: AgentInfo, rule: HeartbeatRule) {
        let now = info.last_heartbeat;
        self.map.insert(agent_id.clone(), info);
        self.arm(agent_id, now, rule.interval, rule.unhealthy_after);
    }

    /// Removes `agent_id` and its timers.
    pub(crate) fn remove(&mut self, agent_id: &str) -> Option<AgentInfo> {
        let agent = self.map.remove(agent_id)?;
        let agent_id = AgentId::from(agent_id);
        self.heartbeats.cancel(&agent_id);
        self.shutdowns.cancel(&agent_id);
        Some(agent)
    }

    fn arm(&mut self, agent_id: AgentId, from: Instant, interval: Duration, missed: u32) {
        self.heartbeats
            .set(agent_id, from + interval.saturating_mul(missed));
    }

    /// A heartbeat of `agent_id` at `now` with its `status` and reported load. Returns
    /// `true` when it brought an unhealthy agent back (it may take tasks again).
    pub(crate) fn beat(
        &mut self,
        agent_id: &str,
        now: Instant,
        status: Option<String>,
        load: Option<f64>,
        rule: HeartbeatRule,
    ) -> Option<bool> {
        let a = self.map.get_mut(agent_id)?;
        a.last_heartbeat = now;
        a.status = status;
        if let Some(load) = load {
            a.load = load;
        }
        let recovered = a.health == Health::Unhealthy;
        if recovered {
            a.health = Health::Healthy;
        }
        if a.health != Health::ShuttingDown {
            self.arm(agent_id.into(), now, rule.interval, rule.unhealthy_after);
        }
        Some(recovered)
    }

    /// Records the `X-Agent-ID` header `conn` was opened with.
    pub(crate) fn claim(&mut self, conn: ConnId, agent_id: AgentId) {
        self.claims.insert(conn, agent_id);
    }

    /// Forgets `conn`'s `X-Agent-ID` header (it closed).
    pub(crate) fn unclaim(&mut self, conn: ConnId) {
        self.claims.remove(&conn);
    }

    /// The `X-Agent-ID` header `conn` was opened with, if any.
    pub(crate) fn claim_of(&self, conn: ConnId) -> Option<&AgentId> {
        self.claims.get(&conn)
    }

    /// `agent_id` announced its shutdown: no heartbeat checks any more, removal at `until`.
    /// Returns the tasks that leave it: with `transfer`, those of `only` it holds (all of
    /// them when `only` is `None`); without, none.
    pub(crate) fn shut_down(
        &mut self,
        agent_id: &str,
        until: Instant,
        transfer: bool,
        only: Option<&[String]>,
    ) -> Option<Vec<TaskId>> {
        let a = self.map.get_mut(agent_id)?;
        a.health = Health::ShuttingDown;
        let tasks: Vec<TaskId> = match (transfer, only) {
            (false, _) => Vec::new(),
            (true, None) => std::mem::take(&mut a.tasks).into_iter().collect(),
            (true, Some(only)) => {
                let picked: Vec<TaskId> = a
                    .tasks
                    .iter()
                    .filter(|t| only.iter().any(|o| o == t.as_str()))
                    .cloned()
                    .collect();
                for t in &picked {
                    a.tasks.remove(t);
                }
                picked
            }
        };
        let agent_id = AgentId::from(agent_id);
        self.heartbeats.cancel(&agent_id);
        self.shutdowns.set(agent_id, until);
        Some(tasks)
    }

    /// The heartbeat check of `agent_id` is due at `now`.
    pub(crate) fn check(&mut self, agent_id: &str, now: Instant, rule: HeartbeatRule) -> Overdue {
        let Some(a) = self.map.get_mut(agent_id) else {
            return Overdue::No;
        };
        if now >= a.last_heartbeat + rule.interval.saturating_mul(rule.remove_after) {
            return Overdue::Remove(a.conn);
        }
        let became = a.health == Health::Healthy;
        a.health = Health::Unhealthy;
        let last = a.last_heartbeat;
        self.arm(agent_id.into(), last, rule.interval, rule.remove_after);
        if became {
            Overdue::Unhealthy
        } else {
            Overdue::No
        }
    }

    /// Agents that may take a task: healthy, and not in `tried`.
    pub(crate) fn candidates(&self, tried: &BTreeSet<AgentId>) -> Vec<Candidate<'_>> {
        self.map
            .iter()
            .filter(|(id, a)| a.health == Health::Healthy && !tried.contains(*id))
            .map(|(id, a)| Candidate {
                agent_id: id,
                capabilities: &a.capabilities,
                active_tasks: a.tasks.len(),
                max_concurrent: a.max_concurrent,
                reported_load: a.load,
            })
            .collect()
    }

    /// The next heartbeat check.
    pub(crate) fn next_heartbeat(&self) -> Option<Instant> {
        self.heartbeats.next_deadline()
    }

    /// The next end of a shutdown grace period.
    pub(crate) fn next_shutdown(&self) -> Option<Instant> {
        self.shutdowns.next_deadline()
    }

    /// The agent whose heartbeat check is due by `now`, if any.
    pub(crate) fn pop_heartbeat(&mut self, now: Instant) -> Option<AgentId> {
        self.heartbeats.pop_expired(now)
    }

    /// The agent whose shutdown grace ended by `now`, if any.
    pub(crate) fn pop_shutdown(&mut self, now: Instant) -> Option<AgentId> {
        self.shutdowns.pop_expired(now)
    }
}

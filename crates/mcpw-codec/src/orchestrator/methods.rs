//! One handler per agent method: each checks its typed params, updates the sub-states and
//! returns the typed result to answer with (`None`: answered already, or later).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use agentwire_core::{CloseCode, ConnId};

use super::agents::AgentInfo;
use super::checks;
use super::collabs::Collab;
use super::event::{OrchestratorEvent, RemovalReason};
use super::idempotency::Seen;
use super::tasks::TaskState;
use super::texts;
use super::votes;
use super::wire::{self, ReplyKey};
use super::Orchestrator;
use crate::crdt::SyncOutcome;
use crate::crdt_wire;
use crate::error::{ParamError, ProtocolError};
use crate::params::{
    AgentHeartbeat, AgentRegister, AgentShutdown, CapabilitiesNow, CapabilityOperation,
    CapabilityUpdate, CollaborationRequest, HeartbeatAck, RegistrationConfirmed, ShutdownAck,
    StateSync, StateSyncResult, TaskAck, TaskComplete, TaskProgress, TransferredTask,
};
use crate::{AgentId, Body, Form, MessageType};

/// What a handler answers with: the result's body, `None` when answered already (or
/// later), or the error.
type Handled = Result<Option<Body>, ProtocolError>;

impl Orchestrator {
    /// The agent registered on `conn`, if it is the one the params name in `field`.
    fn agent_of(&self, conn: ConnId, claimed: &str, field: &str) -> Result<AgentId, ProtocolError> {
        match self.conns.agent(conn) {
            Some(a) if a == claimed => Ok(a.clone()),
            Some(_) => Err(ProtocolError::InvalidParams(ParamError::new(
                field,
                "Not this connection's agent",
                "the registered agent_id",
                "string",
            ))),
            None => Err(ProtocolError::RegisterFirst),
        }
    }

    pub(super) fn on_register(
        &mut self,
        conn: ConnId,
        p: &AgentRegister,
        (form, reply): (Form, &ReplyKey),
        now: Instant,
    ) -> Handled {
        let l = &self.config.limits;
        checks::register(p, l).map_err(ProtocolError::InvalidParams)?;
        if let Some(header) = self.agents.claim_of(conn).filter(|h| **h != p.agent_id) {
            return Err(ProtocolError::AgentIdMismatch {
                header: header.to_string(),
                agent_id: p.agent_id.clone(),
            });
        }
        let current = self.conns.agent(conn).cloned();
        if let Some(cur) = current.as_ref().filter(|cur| **cur != p.agent_id) {
            return Err(ProtocolError::RegisteredAs(cur.to_string()));
        }
        if current.is_none()
            && !self.agents.contains(&p.agent_id)
            && self.agents.len() >= l.max_agents
        {
            return Err(ProtocolError::TooManyAgents);
        }
        // The same agent id on another connection: the newer registration wins.
        if let Some(old) = self.agents.conn_of(&p.agent_id).filter(|old| *old != conn) {
            self.remove_agent(&p.agent_id, RemovalReason::Replaced);
            self.out
                .close(old, CloseCode::POLICY, texts::CLOSE_REPLACED);
        }
        let agent_type = p.agent_type.clone().or_else(|| {
            self.conns
                .get(conn)
                .map(|c| c.agent_type_label.clone())
                .filter(|t| t != "unknown")
        });
        let tasks = self
            .agents
            .get(&p.agent_id)
            .map(|a| a.tasks.clone())
            .unwrap_or_default();
        let capabilities: Vec<_> = p.capabilities.iter().map(checks::profile).collect();
        let max_concurrent = p
            .resources
            .as_ref()
            .and_then(|r| r.max_concurrent_tasks)
            .map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX));
        let names: Vec<String> = capabilities.iter().map(|c| c.name.clone()).collect();
        let info = AgentInfo::new(conn, agent_type, capabilities, max_concurrent, tasks, now);
        let agent_id = AgentId::from(p.agent_id.as_str());
        self.conns.registered(conn, &agent_id);
        let rule = self.heartbeat_rule();
        self.agents.insert(agent_id.clone(), info, rule);
        let confirmed = RegistrationConfirmed {
            agent_id: p.agent_id.clone(),
            session_id: Some(format!("session-{}", conn.get())),
            heartbeat_interval_ms: Some(
                u64::try_from(self.config.heartbeat_interval.as_millis()).unwrap_or(u64::MAX),
            ),
            accepted_capabilities: Some(names.clone()),
            status: Some(texts::STATUS_REGISTERED.to_owned()),
            server_time: Some(self.wall.rfc3339(now)),
        };
        // Replied as `registration.confirmed` whatever the request's type.
        let body = Body::RegistrationConfirmed(confirmed);
        self.send(conn, form, MessageType::RESPONSE, reply, body);
        self.out.event(OrchestratorEvent::Registered {
            conn,
            agent_id,
            capabilities: names,
            form,
        });
        self.drain_queue();
        Ok(None)
    }

    pub(super) fn on_heartbeat(
        &mut self,
        conn: ConnId,
        p: &AgentHeartbeat,
        now: Instant,
    ) -> Handled {
        checks::heartbeat(p, &self.config.limits).map_err(ProtocolError::InvalidParams)?;
        let agent_id = self.agent_of(conn, &p.agent_id, "agent_id")?;
        let load = p.workload.as_ref().and_then(|w| w.current_load);
        let rule = self.heartbeat_rule();
        let recovered = self
            .agents
            .beat(&agent_id, now, p.status.clone(), load, rule)
            .ok_or(ProtocolError::AgentVanished)?;
        if recovered {
            self.out.event(OrchestratorEvent::Recovered {
                agent_id: agent_id.clone(),
            });
            self.queue_dirty = true;
        }
        let ack = HeartbeatAck {
            agent_id: agent_id.into_string(),
            status: texts::STATUS_OK.to_owned(),
        };
        Ok(Some(wire::result_body(None, &ack)))
    }

    pub(super) fn on_capability(
        &mut self,
        conn: ConnId,
        p: &CapabilityUpdate,
        now: Instant,
    ) -> Handled {
        checks::capability_update(p, &self.config.limits).map_err(ProtocolError::InvalidParams)?;
        let agent_id = self.agent_of(conn, &p.agent_id, "agent_id")?;
        let key = p.idempotency_key.as_deref();
        if let Some(answer) = self.replay((&agent_id, "agent.capability.update", key), p, now)? {
            return Ok(answer);
        }
        let max = self.config.limits.max_capabilities;
        let a = self
            .agents
            .get_mut(&agent_id)
            .ok_or(ProtocolError::AgentVanished)?;
        let name = p.capability.name.clone();
        let pos = a.capabilities.iter().position(|c| c.name == name);
        match (p.operation, pos) {
            (CapabilityOperation::Remove, Some(i)) => {
                a.capabilities.remove(i);
            }
            (CapabilityOperation::Remove, None) => {
                return Err(ProtocolError::NoSuchCapability(name));
            }
            (_, Some(i)) => a.capabilities[i] = checks::profile(&p.capability),
            (_, None) if a.capabilities.len() >= max => {
                return Err(ProtocolError::InvalidParams(ParamError::new(
                    "capability",
                    "Too many",
                    "fewer capabilities",
                    "object",
                )));
            }
            (_, None) => a.capabilities.push(checks::profile(&p.capability)),
        }
        let caps = CapabilitiesNow {
            agent_id: agent_id.to_string(),
            capabilities: a.capabilities.iter().map(|c| c.name.clone()).collect(),
        };
        self.out.event(OrchestratorEvent::CapabilityChanged {
            agent_id: agent_id.clone(),
            operation: p.operation,
            capability: name,
        });
        self.queue_dirty = true;
        let scope = (&agent_id, "agent.capability.update", key);
        Ok(Some(self.remember(scope, p, &caps, now)))
    }

    pub(super) fn on_shutdown(&mut self, conn: ConnId, p: &AgentShutdown, now: Instant) -> Handled {
        checks::shutdown(p, &self.config.limits).map_err(ProtocolError::InvalidParams)?;
        let agent_id = self.agent_of(conn, &p.agent_id, "agent_id")?;
        let grace = Duration::from_millis(p.graceful_timeout_ms.unwrap_or(0))
            .min(self.config.max_shutdown_grace);
        let transfer = p.transfer_tasks.unwrap_or(false);
        // The tasks it asks to hand over, when it names them; else all it holds.
        let only = p
            .final_state
            .as_ref()
            .and_then(|f| f.pending_transfers.as_deref());
        let tasks = self
            .agents
            .shut_down(&agent_id, now + grace, transfer, only)
            .ok_or(ProtocolError::AgentVanished)?;
        let mut moved = Vec::new();
        let until = now + self.config.cancel_grace;
        for task_id in &tasks {
            // What it had already sent about the task is not a conflict.
            let max = self.config.limits.max_cancelled_tasks;
            self.tasks.cancelled(task_id, &agent_id, until, max);
            // A transfer is not a failure of the task: the attempt is given back.
            if let Some(t) = self.tasks.get_mut(task_id) {
                t.attempts = t.attempts.saturating_sub(1);
            }
            self.reassign(task_id, &agent_id);
            let to = match self.tasks.get(task_id).map(|t| &t.state) {
                Some(TaskState::Assigned(to)) => Some(to.clone()),
                _ => None,
            };
            moved.push(TransferredTask {
                task_id: task_id.to_string(),
                agent_id: to.map(AgentId::into_string),
            });
        }
        self.out.event(OrchestratorEvent::ShutdownRequested {
            agent_id: agent_id.clone(),
            transferred: tasks.len(),
        });
        let ack = ShutdownAck {
            agent_id: agent_id.into_string(),
            status: texts::STATUS_SHUTTING_DOWN.to_owned(),
            graceful_timeout_ms: u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
            transferred_tasks: moved,
            reason: p.reason.clone(),
        };
        Ok(Some(wire::result_body(None, &ack)))
    }

    pub(super) fn on_progress(&mut self, conn: ConnId, p: &TaskProgress, now: Instant) -> Handled {
        let progress =
            checks::progress(p, &self.config.limits).map_err(ProtocolError::InvalidParams)?;
        let agent_id = self.agent_of(conn, &p.agent_id, "agent_id")?;
        let key = p.idempotency_key.as_deref();
        if let Some(answer) = self.replay((&agent_id, "task.progress", key), p, now)? {
            return Ok(answer);
        }
        self.check_current(&p.task_id, &agent_id, now)?;
        if let Some(t) = self.tasks.get_mut(&p.task_id) {
            t.progress = progress;
        }
        self.out.event(OrchestratorEvent::TaskProgress {
            task_id: p.task_id.as_str().into(),
            agent_id: agent_id.clone(),
            progress,
            status: p.status.clone(),
        });
        let ack = TaskAck {
            task_id: p.task_id.clone(),
            status: texts::STATUS_OK.to_owned(),
        };
        Ok(Some(self.remember(
            (&agent_id, "task.progress", key),
            p,
            &ack,
            now,
        )))
    }

    pub(super) fn on_complete(&mut self, conn: ConnId, p: &TaskComplete, now: Instant) -> Handled {
        let status =
            checks::complete(p, &self.config.limits).map_err(ProtocolError::InvalidParams)?;
        let agent_id = self.agent_of(conn, &p.agent_id, "agent_id")?;
        let key = p.idempotency_key.as_deref();
        if let Some(answer) = self.replay((&agent_id, "task.complete", key), p, now)? {
            return Ok(answer);
        }
        self.check_current(&p.task_id, &agent_id, now)?;
        self.tasks.remove(&p.task_id);
        if let Some(a) = self.agents.get_mut(&agent_id) {
            a.tasks.remove(p.task_id.as_str());
        }
        self.out.event(OrchestratorEvent::TaskCompleted {
            task_id: p.task_id.as_str().into(),
            agent_id: agent_id.clone(),
            status: status.to_owned(),
            result: checks::result_value(p),
        });
        // A slot is free: queued work may go now (after the reply).
        self.queue_dirty = true;
        let ack = TaskAck {
            task_id: p.task_id.clone(),
            status: texts::STATUS_ACCEPTED.to_owned(),
        };
        Ok(Some(self.remember(
            (&agent_id, "task.complete", key),
            p,
            &ack,
            now,
        )))
    }

    /// `Ok` if `task_id` is assigned to `agent_id`; a task taken from it less than the
    /// cancel grace ago is [`ProtocolError::Cancelled`] (4006: the message was on its way
    /// when the task went), else the assignment's error (4008).
    fn check_current(
        &mut self,
        task_id: &str,
        agent_id: &str,
        now: Instant,
    ) -> Result<(), ProtocolError> {
        match self.tasks.check_assigned(task_id, agent_id) {
            Err(_) if self.tasks.was_cancelled(task_id, agent_id, now) => {
                Err(ProtocolError::Cancelled {
                    task_id: task_id.to_owned(),
                })
            }
            checked => checked,
        }
    }

    /// The answer to a message whose idempotency key was seen: its first answer again, or
    /// `None` inside while it still runs; `Ok(None)`: a new key (or none), handle it.
    fn replay(
        &mut self,
        scope: (&AgentId, &'static str, Option<&str>),
        params: &impl serde::Serialize,
        now: Instant,
    ) -> Result<Option<Option<Body>>, ProtocolError> {
        Ok(match self.seen(scope, params, now)? {
            Seen::New => None,
            Seen::Answered(v) => Some(Some(wire::result_body(None, &v))),
            Seen::Running => Some(None),
        })
    }

    pub(super) fn on_collaboration(
        &mut self,
        conn: ConnId,
        p: &CollaborationRequest,
        (form, reply): (Form, &ReplyKey),
        now: Instant,
    ) -> Handled {
        let l = &self.config.limits;
        let collaboration_type =
            checks::collaboration(p, l).map_err(ProtocolError::InvalidParams)?;
        let (pattern, rule) = votes::rule_of(p)?;
        let requester = self.agent_of(conn, &p.requesting_agent, "requesting_agent")?;
        let key = p.idempotency_key.as_deref();
        if let Some(answer) = self.replay((&requester, "collaboration.request", key), p, now)? {
            return Ok(answer);
        }
        if self.collabs.len() >= self.config.limits.max_collaborations {
            return Err(ProtocolError::TooManyCollaborations);
        }
        let timeout = p
            .timeout_ms
            .map_or(
                self.config.default_collaboration_timeout,
                Duration::from_millis,
            )
            .min(self.config.max_collaboration_timeout);
        let id = self.next_seq;
        self.next_seq += 1;
        self.remember_running((&requester, key), p, id, now);
        let mut asked = Vec::new();
        let mut waiting = BTreeSet::new();
        for agent in &p.required_agents {
            if asked.contains(agent) {
                continue;
            }
            asked.push(agent.clone());
            let Some(target) = self.agents.conn_of(agent) else {
                continue; // not registered: reported as missing
            };
            if *agent == requester.as_str() {
                continue;
            }
            let target_form = self.form_of(target);
            let key = self.new_key(target, target_form);
            let body = Body::CollaborationRequest(p.clone());
            self.send(target, target_form, MessageType::REQUEST, &key, body);
            self.collabs.forwarded(target, key, id, agent.clone());
            waiting.insert(agent.clone());
        }
        self.out.event(OrchestratorEvent::CollaborationStarted {
            task_id: p.task_id.as_str().into(),
            requester,
            agents: waiting.iter().map(|a| AgentId::from(a.as_str())).collect(),
        });
        let none_asked = waiting.is_empty();
        let collab = Collab {
            origin: conn,
            origin_reply: reply.clone(),
            origin_form: form,
            task_id: p.task_id.clone(),
            collaboration_type: collaboration_type.to_owned(),
            asked,
            waiting,
            responses: Default::default(),
            pattern: p.coordination_pattern.as_ref().map(|_| pattern),
            rule,
            votes: Default::default(),
        };
        self.collabs.start(id, collab, now + timeout);
        if none_asked {
            self.finish_collab(id);
        }
        Ok(None)
    }

    /// `state.sync`: the operations merge into the store once (removes that name no tag are
    /// resolved to the tags observed here first); a new sync goes on as a `state.sync`
    /// notification to every other agent sharing the state; the sender is answered with
    /// the store's clock and root, and the whole store when its root shows it diverged.
    pub(super) fn on_state_sync(&mut self, conn: ConnId, p: &StateSync) -> Handled {
        let (clock, ops) = checks::state_sync(p, &self.config.limits, &self.config.crdt)
            .map_err(ProtocolError::InvalidParams)?;
        let agent_id = self.agent_of(conn, &p.agent_id, "agent_id")?;
        let ops = self.store.resolve(&ops);
        let outcome = self
            .store
            .apply_sync(&agent_id, &clock, &ops)
            .map_err(ProtocolError::Store)?;
        self.state_subscribers.insert(conn);
        let root = self.store.merkle_root();
        if matches!(outcome, SyncOutcome::Applied { .. }) {
            let params = crdt_wire::sync_params(&agent_id, &clock, &ops, Some(root.clone()));
            let to: Vec<ConnId> = self
                .state_subscribers
                .iter()
                .copied()
                .filter(|c| *c != conn && self.conns.agent(*c).is_some())
                .collect();
            for target in to {
                let form = self.form_of(target);
                let key = self.new_key(target, form);
                let body = Body::StateSync(params.clone());
                self.send(target, form, MessageType::NOTIFICATION, &key, body);
            }
        }
        self.out.event(OrchestratorEvent::StateSynced {
            agent_id: agent_id.clone(),
            outcome,
        });
        // The sender has seen what the store has (same clock) yet holds other content: it
        // diverged, and gets a full sync.
        let diverged = p
            .merkle_root
            .as_ref()
            .is_some_and(|r| *r != root && crdt_wire::clock_of(p) == *self.store.clock());
        let state = diverged
            .then(|| self.store.snapshot())
            .filter(|s| self.fits(s));
        let result = StateSyncResult {
            agent_id: agent_id.into_string(),
            applied: matches!(outcome, SyncOutcome::Applied { .. }),
            vector_clock: self.store.clock().clone(),
            merkle_root: Some(root),
            state,
        };
        Ok(Some(wire::result_body(None, &result)))
    }

    /// `state.get`: the whole store ([`StateSnapshot`](crate::crdt::StateSnapshot)), and
    /// the sender shares the state from now on (it gets every other agent's syncs).
    pub(super) fn on_state_get(&mut self, conn: ConnId) -> Handled {
        if self.conns.agent(conn).is_none() {
            return Err(ProtocolError::RegisterFirst);
        }
        let snapshot = self.store.snapshot();
        if !self.fits(&snapshot) {
            return Err(ProtocolError::TooLarge {
                limit: self.config.limits.max_message_bytes,
            });
        }
        self.state_subscribers.insert(conn);
        Ok(Some(wire::result_body(None, &snapshot)))
    }

    /// Whether `snapshot` fits in one message (with room for its envelope).
    fn fits(&self, snapshot: &crate::crdt::StateSnapshot) -> bool {
        let len = serde_json::to_vec(snapshot).map_or(usize::MAX, |v| v.len());
        len.saturating_add(256) <= self.config.limits.max_message_bytes
    }
}

//! What crosses sub-states: routing a task to an agent (and on when it leaves), failing a
//! task, removing an agent, an overdue heartbeat, and a collaboration's answers and end.

use std::time::Instant;

use agentwire_core::{CloseCode, ConnId};
use serde_json::{json, Value};

use super::agents::Overdue;
use super::event::{OrchestratorEvent, RemovalReason, TaskFailure};
use super::routing;
use super::tasks::TaskState;
use super::texts;
use super::wire::Inbound;
use super::{error_answer, method_label, metrics, Orchestrator};
use crate::error::{ErrorBody, ErrorCode, ProtocolError};
use crate::message::ParamsRef;
use crate::params::{RoutingMetadata, TaskAssigned};
use crate::{AgentId, Body, MessageType};

impl Orchestrator {
    /// Routes task `task_id` (queued) to the best agent; `false` if none can take it.
    pub(super) fn try_assign(&mut self, task_id: &str) -> bool {
        let Some(task) = self.tasks.get(task_id) else {
            return false;
        };
        let focus = task.spec.focus();
        let candidates = self.agents.candidates(&task.tried);
        let Some(route) = routing::route(
            &candidates,
            &task.spec.task_type,
            &focus,
            &self.config.routing,
        ) else {
            return false;
        };
        let assigned = TaskAssigned {
            task_id: task_id.into(),
            task_type: Some(task.spec.task_type.clone()),
            priority: Some(task.spec.priority),
            deadline: Some(self.wall.rfc3339(task.deadline)),
            context: Some(task.spec.context.clone()),
            requirements: Some(task.spec.requirements.clone()),
            routing_metadata: Some(RoutingMetadata {
                assigned_by: Some(texts::ASSIGNED_BY.to_owned()),
                score: Some(route.score),
                alternative_agents: Some(route.alternatives.clone()),
            }),
        };
        let Some(agent) = self.agents.get_mut(&route.agent_id) else {
            return false;
        };
        agent.tasks.insert(task_id.into());
        let conn = agent.conn;
        let form = self.form_of(conn);
        let key = self.new_key(conn, form);
        let body = Body::TaskAssigned(assigned);
        self.send(conn, form, MessageType::NOTIFICATION, &key, body);
        self.metrics
            .count_message("notification", "task.assigned", "sent");
        let Some(attempt) = self.tasks.assigned(task_id, &route.agent_id) else {
            return false;
        };
        self.out.event(OrchestratorEvent::TaskAssigned {
            task_id: task_id.into(),
            agent_id: route.agent_id.into(),
            score: route.score,
            alternatives: route.alternatives.into_iter().map(AgentId::from).collect(),
            attempt,
        });
        true
    }

    /// Tries every queued task, most urgent first (decision 39).
    pub(super) fn drain_queue(&mut self) {
        for task_id in self.tasks.take_queue() {
            if self.tasks.contains(&task_id) && !self.try_assign(&task_id) {
                self.tasks.enqueue(task_id);
            }
        }
    }

    /// Moves `task_id` off `agent_id`: to another agent, to the queue, or (attempts
    /// exhausted) to failure.
    pub(super) fn reassign(&mut self, task_id: &str, agent_id: &str) {
        let Some(task) = self.tasks.get_mut(task_id) else {
            return;
        };
        task.tried.insert(agent_id.into());
        task.state = TaskState::Queued;
        if task.attempts >= self.config.max_task_attempts {
            self.fail_task(task_id, TaskFailure::AttemptsExhausted);
            return;
        }
        if !self.try_assign(task_id) {
            self.tasks.enqueue(task_id.into());
            self.out.event(OrchestratorEvent::TaskQueued {
                task_id: task_id.into(),
            });
        }
    }

    /// Fails `task_id` for good; the agent holding it is told with a 4006 naming it.
    pub(super) fn fail_task(&mut self, task_id: &str, reason: TaskFailure) {
        let Some(task) = self.tasks.remove(task_id) else {
            return;
        };
        if let TaskState::Assigned(agent_id) = &task.state {
            // What its agent had already sent about it is not a conflict (cancel grace).
            if let Some(now) = self.clock.latest() {
                let until = now + self.config.cancel_grace;
                let max = self.config.limits.max_cancelled_tasks;
                self.tasks.cancelled(task_id, agent_id, until, max);
            }
            if let Some(agent) = self.agents.get_mut(agent_id) {
                agent.tasks.remove(task_id);
                let conn = agent.conn;
                let form = self.form_of(conn);
                let key = self.unnumbered_key(form);
                let text = if reason == TaskFailure::Cancelled {
                    texts::TASK_CANCELLED_BY_SERVER
                } else {
                    texts::TASK_CANCELLED
                };
                let cancelled = ProtocolError::Cancelled {
                    task_id: task_id.to_owned(),
                };
                let error = ErrorBody::new(ErrorCode::OPERATION_CANCELLED, text)
                    .with_data(cancelled.data().unwrap_or_default());
                self.send(conn, form, MessageType::ERROR, &key, Body::Error(error));
            }
        }
        self.out.event(OrchestratorEvent::TaskFailed {
            task_id: task_id.into(),
            reason,
        });
    }

    /// Removes agent `agent_id`: its tasks move on, collaborations stop waiting for it.
    pub(super) fn remove_agent(&mut self, agent_id: &str, reason: RemovalReason) {
        let Some(agent) = self.agents.remove(agent_id) else {
            return;
        };
        if let Some(c) = self.conns.get_mut(agent.conn) {
            c.agent = None;
        }
        self.out.event(OrchestratorEvent::AgentRemoved {
            agent_id: agent_id.into(),
            reason,
        });
        for task_id in &agent.tasks {
            self.reassign(task_id, agent_id);
        }
        for id in self.collabs.forget_agent(agent_id, agent.conn) {
            self.finish_collab(id);
        }
    }

    /// The heartbeat check of `agent_id` is due: unhealthy, or removed (closed 1008).
    pub(super) fn on_heartbeat_due(&mut self, agent_id: AgentId, now: Instant) {
        let rule = self.heartbeat_rule();
        match self.agents.check(&agent_id, now, rule) {
            Overdue::Remove(conn) => {
                self.remove_agent(&agent_id, RemovalReason::HeartbeatTimeout);
                self.out
                    .close(conn, CloseCode::POLICY, texts::CLOSE_HEARTBEAT_TIMEOUT);
            }
            Overdue::Unhealthy => self.out.event(OrchestratorEvent::Unhealthy { agent_id }),
            Overdue::No => {}
        }
    }

    /// Ends collaboration `id`: the requester gets the answers so far.
    pub(super) fn finish_collab(&mut self, id: u64) {
        let Some(c) = self.collabs.take(id) else {
            return;
        };
        let (origin, origin_form, origin_reply) = (c.origin, c.origin_form, c.origin_reply.clone());
        let (result, responded, missing) = c.finish();
        self.collaboration_answered(id, &result);
        if self.conns.contains(origin) {
            self.respond(origin, origin_form, &origin_reply, &result);
        }
        self.out.event(OrchestratorEvent::CollaborationFinished {
            task_id: result.task_id.into(),
            responded: responded.into_iter().map(AgentId::from).collect(),
            missing: missing.into_iter().map(AgentId::from).collect(),
        });
    }

    /// A response or error from an agent: the answer to a forwarded collaboration request.
    pub(super) fn on_reply(&mut self, conn: ConnId, msg: Inbound) {
        let status = if msg.kind == MessageType::ERROR {
            "error"
        } else {
            "ok"
        };
        self.metrics.count_message(
            metrics::type_label(msg.kind),
            method_label(msg.method()),
            status,
        );
        let Some((id, agent)) = self.collabs.answered(conn, msg.reply.clone()) else {
            return; // unsolicited or late: dropped
        };
        if !self.collabs.contains(id) {
            return;
        }
        let mut answer = match &msg.body {
            Body::Error(e) => json!({ "error": e }),
            Body::Batch(_) => Value::Null,
            body => serde_json::to_value(ParamsRef(body)).unwrap_or_default(),
        };
        // The answer goes on in the requester's result under `params.responses.<agent>`,
        // three levels down: deeper than the bound allows there, it is not forwarded.
        let limit = self.config.limits.max_json_depth.saturating_sub(3);
        let text = serde_json::to_vec(&answer).unwrap_or_default();
        if agentwire_core::check_json_depth(&text, limit).is_err() {
            let error = ProtocolError::AnswerTooDeep { limit };
            answer = error_answer(&error);
            let form = self.form_of(conn);
            self.refuse(conn, (form, &msg.reply), (msg.kind, None), error);
        }
        if self.collabs.record(id, agent, answer) {
            self.finish_collab(id);
        }
    }
}

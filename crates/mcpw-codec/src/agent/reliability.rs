//! The [`Agent`]'s reliability: idempotency keys on the critical operations, retries of
//! requests refused with a retryable error, cancelled tasks, and the requests it makes of
//! the server beside its tasks (capability updates, collaboration requests).

use std::time::{Duration, Instant};

use super::reply::key_of;
use super::retry::Resend;
use super::{Agent, AgentEvent, Request};
use crate::error::{AgentCommandError, ErrorBody, ErrorCode};
use crate::header::MessageType;
use crate::message::{Body, TaskId};
use crate::params::{Capability, CapabilityOperation, CapabilityUpdate, CollaborationRequest};

/// Whether an error says "try again later": 4002 Rate Limited and 4003 Server Error. Every
/// other code says something about the request itself, which a resend would not change.
pub(crate) fn is_retryable(code: ErrorCode) -> bool {
    code == ErrorCode::RATE_LIMITED || code == ErrorCode::SERVER_ERROR
}

/// The `data.retry_after_ms` of an error, if it has one.
fn retry_after(error: &ErrorBody) -> Option<Duration> {
    let ms = error.data.as_ref()?.get("retry_after_ms")?.as_u64()?;
    Some(Duration::from_millis(ms))
}

/// The `data.task_id` of an error, if it names one.
fn task_named(error: &ErrorBody) -> Option<&str> {
    error.data.as_ref()?.get("task_id")?.as_str()
}

impl Agent {
    /// Sends `agent.capability.update` (`operation` on `capability`, with `reason`); the
    /// server's answer (the capabilities now) arrives as
    /// [`AgentEvent::CapabilitiesUpdated`]. It carries an idempotency key, kept on retries.
    pub fn update_capability(
        &mut self,
        operation: CapabilityOperation,
        capability: Capability,
        reason: Option<String>,
    ) -> Result<(), AgentCommandError> {
        self.check_request_room()?;
        let about = Request::CapabilityUpdate {
            capability: capability.name.clone(),
        };
        let update = CapabilityUpdate {
            agent_id: self.agent_id().to_owned(),
            operation,
            capability,
            reason,
            idempotency_key: Some(self.idempotency_key()),
        };
        let body = Body::CapabilityUpdate(update);
        self.send_tracked(MessageType::REQUEST, body, about, true)
    }

    /// Sends `collaboration.request` (`requesting_agent` is set to this agent's id, and an
    /// idempotency key unless one is given); the server's result arrives as
    /// [`AgentEvent::CollaborationAnswered`] once every asked agent answered or its timeout
    /// passed.
    pub fn request_collaboration(
        &mut self,
        mut request: CollaborationRequest,
    ) -> Result<(), AgentCommandError> {
        self.check_request_room()?;
        request.requesting_agent = self.agent_id().to_owned();
        if request.idempotency_key.is_none() {
            request.idempotency_key = Some(self.idempotency_key());
        }
        let about = Request::Collaboration {
            task_id: TaskId::from(request.task_id.as_str()),
        };
        let body = Body::CollaborationRequest(request);
        self.send_tracked(MessageType::REQUEST, body, about, true)
    }

    /// A fresh idempotency key from the agent's id source.
    pub(super) fn idempotency_key(&mut self) -> String {
        self.ids.next_id().hyphenated().as_str().to_owned()
    }

    /// Room for one more capability update or collaboration request.
    fn check_request_room(&self) -> Result<(), AgentCommandError> {
        let link = self.check_open()?;
        if self.stopping.is_some() {
            return Err(AgentCommandError::Stopped);
        }
        if link.retries.requests() >= self.config.max_pending {
            return Err(AgentCommandError::TooManyPending);
        }
        Ok(())
    }

    /// Sends a new message of type `kind` with `body`, kept to be sent again after a
    /// retryable error; `answered` when the server answers it whatever happens (a request),
    /// not only on a refusal (a progress report).
    pub(super) fn send_tracked(
        &mut self,
        kind: MessageType,
        body: Body,
        about: Request,
        answered: bool,
    ) -> Result<(), AgentCommandError> {
        let resend = Resend {
            kind,
            body,
            about,
            attempts: 0,
        };
        self.send_resend(resend, answered)
    }

    /// Sends `resend` (again) as a new message.
    fn send_resend(&mut self, mut resend: Resend, answered: bool) -> Result<(), AgentCommandError> {
        let msg = self.message(resend.kind, resend.body.clone());
        self.send(&msg)?;
        resend.attempts += 1;
        let key = key_of(&msg);
        if let Some(link) = &mut self.link {
            if answered {
                link.pending.insert(key.clone(), resend.about.clone());
            }
            link.retries.sent(key, resend);
        }
        Ok(())
    }

    /// Sends the refused requests whose wait is over by `now`.
    pub(super) fn resend_due(&mut self, now: Instant) {
        while let Some(resend) = self.link.as_mut().and_then(|l| l.retries.pop_due(now)) {
            let answered = !matches!(resend.about, Request::Progress { .. });
            if let Err(AgentCommandError::Encode(e)) = self.send_resend(resend, answered) {
                self.out.event(AgentEvent::EncodeFailed(e));
            }
        }
    }

    /// An error answering `key`, before the agent reports it: a retryable refusal of a
    /// request it may send again is scheduled ([`AgentEvent::Retrying`]); a 4006 naming a
    /// held task lets go of the task ([`AgentEvent::TaskCancelled`]). Returns the error when
    /// it is still to be reported as an answer.
    pub(super) fn intercept_error(
        &mut self,
        key: &super::reply::ReplyKey,
        error: ErrorBody,
        now: Instant,
    ) -> Option<ErrorBody> {
        let policy = self.config.retry;
        let resend = self.link.as_mut().and_then(|l| l.retries.answered(key));
        if let Some(resend) = resend {
            if is_retryable(error.code) && resend.attempts < policy.max_attempts {
                let retry_in = policy.delay(resend.attempts, retry_after(&error));
                if let Some(link) = &mut self.link {
                    link.pending.remove(key);
                    self.out.event(AgentEvent::Retrying {
                        about: resend.about.clone(),
                        error,
                        attempts: resend.attempts,
                        retry_in,
                    });
                    link.retries.schedule(now + retry_in, resend);
                }
                return None;
            }
            // Reported as an answer to what it refused, a progress report included.
            if let Some(link) = &mut self.link {
                link.pending.entry(key.clone()).or_insert(resend.about);
            }
        }
        if error.code == ErrorCode::OPERATION_CANCELLED {
            if let Some(task_id) = task_named(&error).map(str::to_owned) {
                if self.cancel_task(&task_id) {
                    if let Some(link) = &mut self.link {
                        link.pending.remove(key);
                    }
                    self.out.event(AgentEvent::TaskCancelled {
                        task_id: TaskId::from(task_id),
                        error,
                    });
                    self.maybe_finish_shutdown();
                    return None;
                }
            }
        }
        Some(error)
    }

    /// Lets go of held task `task_id` unfinished (cancelled or handed over): nothing more
    /// is sent about it. `false` if it was not held.
    pub(super) fn cancel_task(&mut self, task_id: &str) -> bool {
        if !self.tasks.drop_task(task_id, self.config.max_tasks) {
            return false;
        }
        if let Some(link) = &mut self.link {
            link.retries.forget_task(task_id);
        }
        true
    }
}

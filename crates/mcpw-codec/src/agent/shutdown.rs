//! The [`Agent`]'s graceful shutdown: `agent.shutdown`, then closing once the server
//! answered and no task is left (or when its graceful timeout ends).

use std::time::Instant;

use super::reply::key_of;
use super::{Agent, Request, CLOSE_SHUTDOWN};
use crate::error::AgentCommandError;
use crate::header::MessageType;
use crate::message::Body;
use crate::params::{AgentShutdown, FinalState};

impl Agent {
    /// Announces `agent.shutdown` (with `reason`, `graceful_timeout_ms` =
    /// [`AgentConfig::shutdown_timeout`](crate::AgentConfig::shutdown_timeout), and
    /// `transfer_tasks` to have the server hand the held tasks to other agents at once,
    /// listed in `final_state.pending_transfers`) and stops once the server answered and no
    /// task is held any more, or when that timeout ends. Transferred tasks are let go of at
    /// once (reports on them are refused with [`AgentCommandError::Cancelled`]); without a
    /// transfer the held tasks may still be completed meanwhile. Without a connection the
    /// agent stops at once.
    pub fn shutdown(
        &mut self,
        reason: &str,
        transfer_tasks: bool,
        now: Instant,
    ) -> Result<(), AgentCommandError> {
        let now = self.clock.observe(now);
        if self.stopped || self.stopping.is_some() {
            return Err(AgentCommandError::Stopped);
        }
        if self.link.is_none() {
            self.stop();
            return Ok(());
        }
        let active: Vec<String> = self.tasks.held().map(str::to_owned).collect();
        let grace = u64::try_from(self.config.shutdown_timeout.as_millis()).unwrap_or(u64::MAX);
        let params = AgentShutdown {
            agent_id: self.config.register.agent_id.clone(),
            reason: Some(reason.to_owned()),
            graceful_timeout_ms: Some(grace),
            transfer_tasks: Some(transfer_tasks),
            final_state: Some(FinalState {
                completed_tasks: Some(self.tasks.completed()),
                pending_transfers: transfer_tasks.then(|| active.clone()),
                active_tasks: Some(active.clone()),
            }),
        };
        let msg = self.message(MessageType::REQUEST, Body::AgentShutdown(params));
        self.send(&msg)?;
        if let Some(link) = &mut self.link {
            link.pending.insert(key_of(&msg), Request::Shutdown);
        }
        if transfer_tasks {
            for task_id in &active {
                self.cancel_task(task_id);
            }
        }
        self.stopping = Some(now + self.config.shutdown_timeout);
        self.shutdown_answered = false;
        Ok(())
    }

    /// The shutdown was answered: close and stop once no task is held.
    pub(super) fn finish_shutdown(&mut self) {
        self.shutdown_answered = true;
        self.maybe_finish_shutdown();
    }

    /// Closes and stops if a shutdown was answered and no held task or completion is left.
    pub(super) fn maybe_finish_shutdown(&mut self) {
        let done = self.tasks.len() == 0
            && !self
                .link
                .as_ref()
                .is_some_and(|l| l.retries.has_completion());
        if self.stopping.is_some() && self.shutdown_answered && done {
            self.close_link(CLOSE_SHUTDOWN);
            self.stop();
        }
    }
}

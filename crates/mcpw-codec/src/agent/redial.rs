//! [`Redial`]: when the agent's driver may open the next connection.

use std::time::{Duration, Instant};

use crate::config::Reconnect;

/// Failures in a row and the wait before the next attempt.
#[derive(Debug, Default)]
pub(super) struct Redial {
    /// Attempts, or connections shorter than `stable_after`, that failed in a row.
    failures: u32,
    /// The next attempt may start then.
    retry_at: Option<Instant>,
}

impl Redial {
    /// Counts a failure and sets the wait; returns it.
    pub(super) fn failed(&mut self, policy: &Reconnect, now: Instant) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let wait = policy.delay(self.failures);
        self.retry_at = Some(now + wait);
        wait
    }

    /// A connection opened at `opened` ended at `now`: counts it as a failure unless it
    /// stayed up for `stable_after`, which starts the waits over. Returns the wait.
    pub(super) fn ended(&mut self, policy: &Reconnect, opened: Instant, now: Instant) -> Duration {
        if now.saturating_duration_since(opened) >= policy.stable_after {
            self.failures = 0;
        }
        self.failed(policy, now)
    }

    /// Attempts that failed in a row.
    pub(super) fn failures(&self) -> u32 {
        self.failures
    }

    /// Whether a wait is running.
    pub(super) fn is_waiting(&self) -> bool {
        self.retry_at.is_some()
    }

    /// Ends the wait if it is over at `now`.
    pub(super) fn handle_timeout(&mut self, now: Instant) {
        if self.retry_at.is_some_and(|at| at <= now) {
            self.retry_at = None;
        }
    }

    /// Ends the wait (a connection opened, or the agent stopped).
    pub(super) fn clear(&mut self) {
        self.retry_at = None;
    }

    /// When the wait ends.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.retry_at
    }
}

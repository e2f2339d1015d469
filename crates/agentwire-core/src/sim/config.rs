//! The knobs of a simulation and how a run fails.

use std::fmt;
use std::time::Duration;

/// Knobs of a simulation.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SimConfig {
    /// One-way delay of every frame and close. Default: zero.
    pub latency: Duration,
    /// Probability, per thousand, that a frame is lost (closes are never lost). Default: 0.
    pub loss_per_mille: u16,
    /// Seed of the loss generator. Default: 1.
    pub seed: u64,
    /// Steps one `run_*` call may take before it reports livelock. Default: 1,000,000.
    pub max_steps: usize,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            latency: Duration::ZERO,
            loss_per_mille: 0,
            seed: 1,
            max_steps: 1_000_000,
        }
    }
}

impl SimConfig {
    /// Sets the one-way latency.
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// Sets the frame loss probability in per mille (clamped to 1000).
    pub fn with_loss_per_mille(mut self, loss: u16) -> Self {
        self.loss_per_mille = loss.min(1000);
        self
    }

    /// Sets the random seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Sets the step bound.
    pub fn with_max_steps(mut self, max_steps: usize) -> Self {
        self.max_steps = max_steps;
        self
    }
}

/// Why a simulation run stopped early.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SimError {
    /// More than `max_steps` steps without reaching the target time: a livelock.
    Livelock {
        /// Steps taken.
        steps: usize,
    },
    /// A machine's `poll_timeout` did not move past `now` after `handle_timeout(now)`.
    TimerStuck {
        /// Which machine: `"server"` or `"client N"`.
        machine: String,
    },
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Livelock { steps } => write!(f, "livelock: {steps} steps without settling"),
            Self::TimerStuck { machine } => write!(
                f,
                "{machine}: poll_timeout did not move past now after handle_timeout"
            ),
        }
    }
}

impl std::error::Error for SimError {}

//! The orchestration server: the [`Orchestrator`] machine and what it is built from.
//!
//! - [`upgrade`]: the pre-upgrade policy (426 / 401 / 503 / 429) for the transport's hook;
//! - [`routing`]: the capability score that picks an agent for a task;
//! - [`metrics`]: Prometheus text with the spec's metric names;
//! - the [`Orchestrator`] itself, its [`OrchestratorConfig`] and [`OrchestratorEvent`]s.

mod config;
mod event;
mod machine;
pub mod metrics;
mod params;
pub mod routing;
pub mod upgrade;
mod wallclock;
pub mod wire;

pub use config::{Limits, OrchestratorConfig};
pub use event::{OrchestratorEvent, RemovalReason, TaskFailure};
pub use machine::{
    AgentInfo, CommandError, Health, Orchestrator, TaskInfo, TaskSpec, TaskState, METHODS,
};
pub use metrics::Metrics;
pub use params::{CapabilityOp, ParamError};
pub use upgrade::{Admission, AuthFailure, Refusal, UpgradeConfig, UpgradePolicy, SUBPROTOCOL};
pub use wire::Form;

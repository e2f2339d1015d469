//! The orchestration server: the [`Orchestrator`] machine and what it is built from.

pub mod metrics;
pub mod routing;
pub mod upgrade;

pub use metrics::Metrics;
pub use upgrade::{Admission, Refusal, UpgradeConfig, UpgradePolicy, SUBPROTOCOL};

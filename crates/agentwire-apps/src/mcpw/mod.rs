//! Library code of the MCPW reference programs, shared by the examples (`mcpw_server`,
//! `mcpw_agent`, `mcpw_demo`) and the end-to-end tests (`tests/mcpw_e2e.rs`).
//!
//! - [`server_app`]: the [`Orchestrator`](agentwire::mcpw::orchestrator::Orchestrator) served
//!   by agentwire-tokio behind the pre-upgrade policy, with a Prometheus `/metrics` endpoint.
//! - [`agent_app`]: a reference agent (a client machine) that registers, heartbeats, works on
//!   the tasks it is given and answers collaboration requests, in JSON or binary form.

pub mod agent_app;
pub mod server_app;

//! Library code of the MCPW reference programs, shared by the examples (`mcpw_server`,
//! `mcpw_agent`, `mcpw_demo`) and the end-to-end tests (`tests/mcpw_e2e.rs`).
//!
//! - [`server_app`]: the [`Orchestrator`](agentwire::mcpw::orchestrator::Orchestrator) served
//!   by agentwire-tokio behind the pre-upgrade policy, with a Prometheus `/metrics` endpoint.
//! - [`agent_app`]: a reference agent (a client machine) that registers, heartbeats, works on
//!   the tasks it is given and answers collaboration requests, in JSON or binary form.
//!   Its events in words (`agent_app::describe`) live in `agent_text`.
//! - [`console`]: the reference server's stdin commands (a task to submit, with its
//!   priority; a task to cancel).
//! - [`pool`]: N reference agents from one process (`mcpw_agent --count N`), one connection
//!   each, one settings template and backoff, one merged event stream.

pub mod agent_app;
mod agent_text;
pub mod console;
pub mod pool;
pub mod server_app;

//! The reference servers and clients of the five agentwire protocols as library code: what
//! the example commands (`cargo run --example bus_server`, `relay_demo`, ...) run, and what the
//! workspace's end-to-end tests and benches start over loopback.
//!
//! One module per protocol, each with its server program and its client or agent:
//!
//! - [`bus`]: the JSON-RPC bus server and a bus client.
//! - [`chopsticks`]: the Chopsticks controller and a music agent with a mock player.
//! - [`llmrtc`]: the llmrtc signalling server with scripted providers, and a client.
//! - [`mcpw`]: the MCPW orchestrator and a reference agent.
//! - [`relay`]: the agent relay with its study log, the movie host, an external agent and
//!   the log checker.
//!
//! [`cli`] holds the commands themselves, one module per command (flags, `main` and `run`):
//! each `examples/NAME.rs` binary only calls its `main`, and the `agentwire` binary
//! ([`cli::agentwire`]: `serve`, `config`, `demo` and a client subcommand per protocol) calls
//! the same modules' `run`. [`common`] holds what all of them share: tracing to stderr, the
//! clocks a machine is anchored to, the per-address connection limits every server takes as
//! flags, and the clients' `wss://` settings.
//!
//! For operators: [`admin`] serves `/healthz`, `/readyz` and `/metrics` beside the protocol
//! listeners, [`metrics`] counts every protocol the same way (from the machines' events and
//! the transport's counters), and [`logging`] writes text or JSON lines with each
//! connection's span.

pub mod admin;
pub mod bus;
pub mod chopsticks;
pub mod cli;
pub mod common;
pub mod config;
pub mod endpoint;
pub mod gateway;
pub mod llmrtc;
pub mod logging;
pub mod mcpw;
pub mod metrics;
pub mod relay;
pub mod security;

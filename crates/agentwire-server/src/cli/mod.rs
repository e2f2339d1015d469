//! The commands, one module per command: its flags, its `main` and its `run`. The example
//! binaries (`cargo run --example NAME`) call a module's `main`; [`agentwire`] is the
//! `agentwire` binary, whose subcommands call the same modules' `run` with the same flags.

pub mod agentwire;
pub mod bus_client;
pub mod bus_demo;
pub mod bus_server;
pub mod chopsticks_agent;
pub mod chopsticks_controller;
pub mod chopsticks_demo;
pub mod client_tls;
pub mod demo;
pub mod llmrtc_client;
pub mod llmrtc_demo;
pub mod llmrtc_server;
pub mod mcpw_agent;
pub mod mcpw_demo;
pub mod mcpw_server;
pub mod movie_host;
pub mod relay_agent;
pub mod relay_demo;
pub mod relay_log;
pub mod relay_server;
pub mod script;
pub mod serve;

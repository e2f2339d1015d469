//! The example commands (`cargo run --example NAME`), one module per command: its flags
//! and its `main`, which the example binary calls.

pub mod bus_client;
pub mod bus_demo;
pub mod bus_server;
pub mod chopsticks_agent;
pub mod chopsticks_controller;
pub mod chopsticks_demo;
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

//! Library code of the llmrtc reference programs, shared by the examples (`llmrtc_server`,
//! `llmrtc_client`, `llmrtc_demo`) and the end-to-end tests (`tests/llmrtc_e2e.rs`).
#![allow(dead_code, unreachable_pub)]

pub mod audio;
pub mod client_app;
pub mod providers;
pub mod server_app;
pub mod server_cli;
pub mod server_log;

#[path = "../common/mod.rs"]
mod common;
#[allow(unused_imports)] // not every program of the family uses both
pub use common::{clocks, init_tracing, AddressLimits};

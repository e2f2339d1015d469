//! Library code of the JSON-RPC bus reference programs, shared by the examples
//! (`bus_server`, `bus_client`, `bus_demo`) and the end-to-end tests (`tests/bus_e2e.rs`).
#![allow(dead_code, unreachable_pub)]

pub mod client_app;
pub mod server_app;

#[path = "../common/mod.rs"]
mod common;
#[allow(unused_imports)] // not every program of the family uses both
pub use common::{clocks, init_tracing, AddressLimits};

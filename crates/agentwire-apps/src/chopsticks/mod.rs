//! Library code of the Chopsticks reference programs, shared by the examples
//! (`chopsticks_controller`, `chopsticks_agent`, `chopsticks_demo`) and the end-to-end tests.
#![allow(dead_code, unreachable_pub)]

pub mod agent_app;
pub mod controller_app;
pub mod player;

#[path = "../common/mod.rs"]
mod common;
#[allow(unused_imports)] // not every program of the family uses both
pub use common::{init_tracing, AddressLimits};

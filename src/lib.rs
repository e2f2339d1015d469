//! agentwire: WebSocket agent protocols as sans-IO Rust crates, plus a tokio transport.
//!
//! This facade re-exports each crate behind a feature (all on by default):
//!
//! | module | crate | feature |
//! |---|---|---|
//! | [`core`] | `agentwire-core` | always |
//! | `chopsticks` | `chopsticks-proto` | `chopsticks` |
//! | `jsonrpc_bus` | `jsonrpc-bus-proto` | `jsonrpc-bus` |
//! | `agent_relay` | `agent-relay-proto` | `agent-relay` |
//! | `mcpw` | `mcpw-codec` | `mcpw` |
//! | `llmrtc` | `llmrtc-proto` | `llmrtc` |
//! | `tokio` | `agentwire-tokio` | `tokio` |
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub use agentwire_core as core;

#[cfg(feature = "chopsticks")]
pub use chopsticks_proto as chopsticks;

#[cfg(feature = "jsonrpc-bus")]
pub use jsonrpc_bus_proto as jsonrpc_bus;

#[cfg(feature = "agent-relay")]
pub use agent_relay_proto as agent_relay;

#[cfg(feature = "mcpw")]
pub use mcpw_codec as mcpw;

#[cfg(feature = "llmrtc")]
pub use llmrtc_proto as llmrtc;

#[cfg(feature = "tokio")]
pub use agentwire_tokio as tokio;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

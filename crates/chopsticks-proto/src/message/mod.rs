//! Wire types: one enum per sender, exact field names of the spec.
//!
//! - [`AgentMessage`]: agent → controller (`hello`, `guilds`, `event`, `resp`).
//! - [`ControllerMessage`]: controller → agent (`req`, `error`).
//!
//! Optionality follows the spec's notation: `field?` is an `Option` omitted when `None`;
//! `T | null` is an `Option` written as `null`. Unknown fields are ignored on decode
//! (the real agent adds `agentId` and `runnerId` to every message).

mod agent;
mod controller;

pub(crate) use agent::HelloWire;
pub use agent::{Add, AgentMessage, Event, Guilds, Hello, Released, Resp, SessionKind};
pub use agentwire_core::json::RawJson;
pub(crate) use controller::ReqRef;
pub use controller::{ControllerMessage, ErrorMessage, Req};

/// The protocol version this crate speaks and writes in `hello`.
pub const PROTOCOL_VERSION: &str = "1.0.0";

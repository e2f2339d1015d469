//! Chopsticks controller ↔ agent protocol (placeholder docs; see README).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod agent;
mod codec;
mod config;
mod controller;
mod error;
mod event;
pub mod message;

#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;

pub use agent::Agent;
pub use config::{AgentConfig, ControllerConfig, Limits};
pub use controller::{
    Controller, LiveAgent, Session, SessionKey, TimerKind, AGENT_OFFLINE, AGENT_TIMEOUT,
    ERR_UNAUTHORIZED, ERR_VERSION_REQUIRED,
};
pub use error::{CommandError, DecodeError, ProtocolError};
pub use event::{AgentEvent, ControllerEvent, DropReason};
pub use message::{
    Add, AgentMessage, ControllerMessage, ErrorMessage, Event, Guilds, Hello, RawJson, Released,
    Req, Resp, SessionKind, PROTOCOL_VERSION,
};

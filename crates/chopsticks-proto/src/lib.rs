//! Chopsticks controller ↔ agent protocol (placeholder docs; see README).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod codec;
mod config;
mod error;
pub mod message;

pub use config::{AgentConfig, ControllerConfig, Limits};
pub use error::{CommandError, DecodeError, ProtocolError};
pub use message::{
    Add, AgentMessage, ControllerMessage, ErrorMessage, Event, Guilds, Hello, RawJson, Released,
    Req, Resp, SessionKind, PROTOCOL_VERSION,
};

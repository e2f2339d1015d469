//! Sans-IO JSON-RPC 2.0 pub/sub agent bus (work in progress).

mod bus;
mod client;
mod config;
mod error;
mod event;
pub mod jsonrpc;
pub mod message;
pub mod topic;

#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;

pub use bus::{Bus, BusStats};
pub use client::BusClient;
pub use config::{BusConfig, ClientConfig, Limits};
pub use error::{CommandError, DecodeError, ErrorCode, ErrorObject, ProtocolError};
pub use event::{
    BusEvent, ClientEvent, DeliveryId, HopOutcome, IncomingId, RequestError, RequestId, RequestKind,
};
pub use jsonrpc::{Id, JsonRpc2};
pub use topic::MatchMode;

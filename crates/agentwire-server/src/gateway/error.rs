//! [`StartError`]: why a gateway did not start.

use std::path::PathBuf;

use crate::config::{ConfigError, Protocol};
use crate::security::SecurityError;

/// Why [`Gateway::start`](super::Gateway::start) failed. Nothing keeps serving after an
/// error: whatever was already bound is shut down first.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The configuration contradicts itself (see [`Config::validate`](crate::config::Config::validate)).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A listener's TLS certificate or allowlist could not be set up.
    #[error("listener {listener:?}: {source}")]
    Security {
        /// The listener's name.
        listener: String,
        /// Why.
        source: SecurityError,
    },
    /// A key file (`[mcpw] api_keys_file`, `[chopsticks] runner_secrets_file`) could not
    /// be read.
    #[error("{protocol} keys: {source}")]
    Keys {
        /// The protocol whose keys they are.
        protocol: Protocol,
        /// Why.
        source: SecurityError,
    },
    /// A protocol could not be served on its route (its settings are refused, its UDP
    /// socket or study-log folder could not be opened).
    #[error("{protocol} on listener {listener:?} at {path}: {source}")]
    Mount {
        /// The protocol.
        protocol: Protocol,
        /// The listener's name.
        listener: String,
        /// The route's path.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The relay's study-log folder could not be created.
    #[error("relay study-log folder {}: {source}", path.display())]
    LogDir {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A listener could not bind its address (in use, not local, no permission).
    #[error("listener {listener:?} cannot listen on {addr}: {source}")]
    Bind {
        /// The listener's name.
        listener: String,
        /// Its configured address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The admin listener could not bind its address.
    #[error("admin listener cannot listen on {addr}: {source}")]
    Admin {
        /// Its configured address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The SIGINT/SIGTERM handlers could not be installed.
    #[error("cannot install the signal handlers: {0}")]
    Signals(std::io::Error),
}

//! The load generator's one error type.

use std::io;

/// Why a run could not be made or finished.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// A baseline's server program is not installed.
    #[error(
        "`{program}` was not found on PATH (nor in /usr/sbin, /usr/local/sbin, /sbin): \
         install the Debian package `{package}` (apt-get install {package})"
    )]
    MissingProgram {
        /// The program looked for (`nats-server`, `redis-server`).
        program: &'static str,
        /// The Debian package that installs it.
        package: &'static str,
    },
    /// A server process could not be started.
    #[error("starting {what}: {source}")]
    Spawn {
        /// What was started.
        what: String,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// A started server did not answer in time (or exited first).
    #[error("{what} did not become ready within {secs} s")]
    NotReady {
        /// The server.
        what: String,
        /// The bound waited.
        secs: u64,
    },
    /// A socket error while connecting or under load.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// A WebSocket error while connecting or under load.
    #[error("{what}: {source}")]
    WebSocket {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: Box<tokio_tungstenite::tungstenite::Error>,
    },
    /// A server answered something the scenario did not expect.
    #[error("unexpected answer: {0}")]
    Protocol(String),
    /// A scenario name no scenario has.
    #[error("unknown scenario `{0}` (`agentwire-load --list` names them)")]
    UnknownScenario(String),
    /// The run asked for something the scenario cannot do.
    #[error("{0}")]
    Usage(String),
}

impl LoadError {
    /// An [`Io`](Self::Io) error saying what was being done.
    pub fn io(what: impl Into<String>, source: io::Error) -> Self {
        Self::Io {
            what: what.into(),
            source,
        }
    }

    /// A [`WebSocket`](Self::WebSocket) error saying what was being done.
    pub fn ws(what: impl Into<String>, source: tokio_tungstenite::tungstenite::Error) -> Self {
        Self::WebSocket {
            what: what.into(),
            source: Box::new(source),
        }
    }
}

//! Serving until a signal: the first SIGINT or SIGTERM starts the graceful stop, a second
//! one exits at once.

use std::io;

use super::Gateway;

/// The signal that stopped the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Signal {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM (`kill`, service managers, container runtimes).
    Terminate,
}

impl Signal {
    /// The exit code of a process killed by this signal (128 + its number): 130 for
    /// SIGINT, 143 for SIGTERM. [`run_until_signal`] exits with it on a second signal.
    pub fn exit_code(self) -> i32 {
        match self {
            Self::Interrupt => 130,
            Self::Terminate => 143,
        }
    }

    /// `SIGINT` or `SIGTERM`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Interrupt => "SIGINT",
            Self::Terminate => "SIGTERM",
        }
    }
}

/// Serves until SIGINT or SIGTERM, then stops `gateway` gracefully
/// ([`Gateway::shutdown`], within [`Gateway::shutdown_bound`]) and returns the signal. A
/// second SIGINT or SIGTERM during the stop exits the process at once
/// (`std::process::exit`) with that signal's [`exit_code`](Signal::exit_code), 130 or 143.
/// After a graceful stop the caller decides the exit code (the `agentwire` binary exits
/// with 0). Errors only if the signal handlers cannot be installed.
pub async fn run_until_signal(gateway: Gateway) -> io::Result<Signal> {
    let signals = Signals::install()?;
    Ok(stop_on_signal(gateway, signals).await)
}

/// [`run_until_signal`] with handlers installed earlier: `agentwire serve` installs them
/// before it binds and prints where it serves, so a signal sent as soon as the `serving`
/// lines appear is never met by the default action (which would kill the process without
/// the graceful stop).
pub(super) async fn stop_on_signal(gateway: Gateway, mut signals: Signals) -> Signal {
    let first = signals.next().await;
    tracing::info!(
        "{}: stopping gracefully (at most {}s; peers get close 1001, study logs are synced); \
         a second signal exits at once",
        first.name(),
        gateway.shutdown_bound().as_secs()
    );
    tokio::select! {
        () = gateway.shutdown() => {
            tracing::info!("stopped");
            first
        }
        second = signals.next() => {
            tracing::warn!("{} during the graceful stop: exiting at once", second.name());
            std::process::exit(second.exit_code());
        }
    }
}

/// The installed SIGINT and SIGTERM handlers.
#[cfg(unix)]
pub(super) struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    pub(super) fn install() -> io::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// The next signal (a handler whose stream ended never fires again).
    async fn next(&mut self) -> Signal {
        tokio::select! {
            Some(()) = self.interrupt.recv() => Signal::Interrupt,
            Some(()) = self.terminate.recv() => Signal::Terminate,
            else => std::future::pending().await,
        }
    }
}

/// Ctrl-C only, where there is no SIGTERM.
#[cfg(not(unix))]
pub(super) struct Signals;

#[cfg(not(unix))]
impl Signals {
    pub(super) fn install() -> io::Result<Self> {
        Ok(Self)
    }

    async fn next(&mut self) -> Signal {
        match tokio::signal::ctrl_c().await {
            Ok(()) => Signal::Interrupt,
            Err(_) => std::future::pending().await,
        }
    }
}

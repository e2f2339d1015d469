//! Library code of the JSON-RPC bus reference programs, shared by the examples
//! (`bus_server`, `bus_client`, `bus_demo`) and the end-to-end tests (`tests/bus_e2e.rs`).
#![allow(dead_code, unreachable_pub)]

pub mod client_app;
pub mod server_app;

use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Logs to stderr, filtered by `RUST_LOG` (default `default`), so stdout stays JSON lines.
pub fn init_tracing(default: &str) {
    let default = default.to_owned();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| default.into()),
        )
        .init();
}

/// The two clocks a [`Bus`](agentwire::jsonrpc_bus::Bus) is anchored to: the transport's
/// monotonic clock (tokio's, so paused-time tests agree with the driver) and the wall clock
/// in Unix milliseconds, for `ping` timestamps.
pub fn clocks() -> (Instant, u64) {
    let now = tokio::time::Instant::now().into_std();
    // The machine reads no clock; the program hands it the wall-clock time once, here.
    #[allow(clippy::disallowed_methods)]
    let wall = SystemTime::now();
    let unix_ms = wall
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    (now, unix_ms)
}

//! Library code of the agent-relay reference programs, shared by the examples (`relay_server`,
//! `relay_log`) and the tests (`tests/relay_e2e.rs`, `tests/relay_log.rs`).
//!
//! - [`log_writer`]: the study-log writer, one JSONL file per relay session, with the
//!   guarantees the study needs (indexes never repeat or skip within a file, every line on
//!   disk before the message it records is forwarded, `fsync` before `session.ended`).
//! - [`logging_relay`]: a [`Machine`](agentwire::core::Machine) wrapping the
//!   [`Relay`](agentwire::agent_relay::Relay) that writes each study-log record in the task
//!   that owns the machine, while the driver drains outputs, so the write happens before the
//!   send that follows it.
//! - [`server_app`]: the relay served by agentwire-tokio at `/agent/ws`, with its event log.
//! - [`log_check`]: the validator behind `relay_log`.
#![allow(dead_code, unreachable_pub)]

pub mod log_check;
pub mod log_writer;
pub mod logging_relay;
pub mod server_app;

use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Logs to stderr, filtered by `RUST_LOG` (default `default`), so stdout stays free.
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

/// The two clocks a [`Relay`](agentwire::agent_relay::Relay) is anchored to: the transport's
/// monotonic clock (tokio's, so paused-time tests agree with the driver) and the wall clock
/// in Unix milliseconds, for the study log's timestamps.
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

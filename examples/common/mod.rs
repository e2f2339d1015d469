//! What every reference program needs the same way: tracing to stderr and the two clocks a
//! machine is anchored to. Included by each example family's `mod.rs`.
#![allow(dead_code, unreachable_pub)]

use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Logs to stderr, filtered by `RUST_LOG` (else `default`), so stdout stays free for output.
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

/// The transport's monotonic clock (tokio's, so paused-time tests agree with the driver) and
/// the wall clock in Unix milliseconds, read together once: machines read no clock, so the
/// program hands them the wall-clock time at `now` (bus `ping`, relay study log).
pub fn clocks() -> (Instant, u64) {
    let now = tokio::time::Instant::now().into_std();
    #[allow(clippy::disallowed_methods)]
    let wall = SystemTime::now();
    let unix_ms = wall
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    (now, unix_ms)
}

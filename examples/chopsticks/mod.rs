//! Library code of the Chopsticks reference programs, shared by the examples
//! (`chopsticks_controller`, `chopsticks_agent`, `chopsticks_demo`) and the end-to-end tests.
#![allow(dead_code, unreachable_pub)]

pub mod agent_app;
pub mod controller_app;
pub mod player;

/// Logs to stderr, filtered by `RUST_LOG` (default `warn`), so stdout stays JSON lines.
pub fn init_tracing() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
}

//! A mock Chopsticks music agent with an in-memory player per guild.
//!
//! Answers `play`, `pause`, `resume`, `skip`, `stop`, `queue`, `search`, `status`, `volume`,
//! `remove`, `move`, `swap`, `shuffle`, `clear` (anything else: `unknown-op`), emits `add`
//! when it first joins a voice channel and `released` on `stop`, and reconnects with
//! backoff (1 s doubling to 30 s) when the controller goes away. On Ctrl-C or SIGTERM it
//! sends `released` for every channel it is in, then closes (the spec's graceful disconnect).
//!
//! ```text
//! cargo run --release --example chopsticks_agent -- --url ws://127.0.0.1:8787 --agent-id agent-1 --guild g1
//! ```

#[tokio::main]
async fn main() -> std::process::ExitCode {
    agentwire_server::cli::chopsticks_agent::main().await
}

//! The interceptor chain in one process, no arguments: a bus and five clients on loopback,
//! four scripted publishes, a readable transcript. Exits 0 when every outcome is the
//! expected one, 1 otherwise.
//!
//! - `auth` subscribes to `inbound:*` first and stops every message without
//!   `"token":"secret"`; `logger` observes; `handler` handles what gets through.
//! - `slowpoke` never answers (the bus's 300 ms delivery timeout skips it).
//! - `flaky` disconnects while a delivery waits for its answer (the bus skips it at once).
//!
//! ```text
//! cargo run --release --example bus_demo
//! ```

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    agentwire_server::cli::bus_demo::main().await
}

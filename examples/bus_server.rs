//! Reference JSON-RPC bus server.
//!
//! Serves the bus on `--listen` (default 127.0.0.1:7892, the reference's port) and logs
//! connections, subscriptions and deliveries to stderr with `tracing` (`RUST_LOG`, default
//! `info`; `debug` adds every subscriber's turn). Every limit is a flag.
//!
//! ```text
//! cargo run --example bus_server -- --listen 127.0.0.1:7892 --match-mode prefix
//! ```

#[tokio::main]
async fn main() -> std::process::ExitCode {
    agentwire_server::cli::bus_server::main().await
}

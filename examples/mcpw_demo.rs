//! The MCPW orchestration server, two agents (one JSON, one binary) and a routed task in one
//! process, with a readable transcript. Exits 0 by itself within a few seconds.
//!
//! ```text
//! cargo run --release --example mcpw_demo
//! ```

#[tokio::main]
async fn main() -> std::process::ExitCode {
    agentwire_server::cli::mcpw_demo::main().await
}

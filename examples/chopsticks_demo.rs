//! A whole Chopsticks session in one process, no arguments: a controller and two mock
//! agents on loopback, a scripted session, a readable transcript, exit code 0.
//!
//! ```text
//! cargo run --release --example chopsticks_demo
//! ```

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    agentwire_server::cli::chopsticks_demo::main().await
}

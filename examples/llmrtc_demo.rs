//! llmrtc in one process: the reference server (offline stand-in providers, playbook mode)
//! and the reference client over a real loopback WebSocket and real WebRTC (the data
//! channel opens first; each turn's transcript, streamed reply and speech then travel on
//! it), through a full turn, a barge-in, a playbook tool call and a reconnect that recovers
//! the session's history with a new peer connection; then a second client speaks one turn
//! on a WebRTC microphone track (Opus) and hears the reply on the server's audio track.
//! Prints a readable transcript and exits 0 on success (non-zero with the reason on any
//! failure), within seconds.
//!
//! ```text
//! cargo run --release --example llmrtc_demo
//! ```

#[tokio::main]
async fn main() -> std::process::ExitCode {
    agentwire_server::cli::llmrtc_demo::main().await
}

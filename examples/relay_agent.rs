//! An external agent for the External Agent Protocol (mvp-0.2): joins the relay, starts a
//! study session, reads the snapshot, books movie tickets end to end with tool calls (each
//! with its `reason`), tells the participant, and ends the session. Prints the conversation.
//!
//! Needs a relay and a host (`relay_server` and `movie_host`, or `relay_demo` for all three
//! in one process). Exits 0 once `session.ended` arrives, 1 on any failure.
//!
//! ```text
//! cargo run --example relay_agent -- --url ws://127.0.0.1:3000/agent/ws --tickets 2
//! ```

#[tokio::main]
async fn main() -> std::process::ExitCode {
    agentwire_server::cli::relay_agent::main().await
}

//! Reference Chopsticks controller.
//!
//! Serves agents on `--listen` (default 127.0.0.1:8787), prints one JSON line per event on
//! stdout, and reads commands on stdin, one per line:
//!
//! - `agents`: the live agents as JSON
//! - `req AGENT_ID OP [JSON_DATA]`: sends a request to one agent, prints the outcome as JSON
//! - `play GUILD VOICE_CHANNEL QUERY`: `play` for that voice channel: the agent already
//!   bound to it, else one picked by the selection rules (and bound from then on)
//! - `op GUILD VOICE_CHANNEL OP [JSON_DATA]`: any op for that voice channel's session (`pause`,
//!   `skip`, `stop`, `status`, `volume {"volume":50}`, `assistantJoin`, ...)
//!
//! Every op carries an acting user (`actorUserId`, from `--actor-user-id`, unless the data
//! names one), and `adminToken` with `--admin-token`: the real agent refuses ops without an
//! acting user (`missing-actor`) and checks that the user is in the voice channel unless the
//! admin token matches. Ctrl-C stops it at once.
//!
//! ```text
//! cargo run --release --example chopsticks_controller -- --listen 127.0.0.1:8787
//! ```

#[tokio::main]
async fn main() -> std::process::ExitCode {
    agentwire_server::cli::chopsticks_controller::main().await
}

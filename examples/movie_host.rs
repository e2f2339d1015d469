//! A Rust UI host for the External Agent Protocol (mvp-0.2): the movie-booking flow of the
//! spec era over in-memory data, joining the relay as `host`.
//!
//! Stages movie → theater → date → time → seat → ticket → confirm; tools `filter`, `sort`,
//! `highlight`, `augment`, `clearModification`, `select`, `setQuantity`, `next`, `prev`,
//! `postMessage`, each offered on the stages of the table in `relay/movie/schema.rs` (e.g.
//! `setQuantity` only on the ticket stage, no `prev` on the first; `next` on the confirm stage
//! places the booking). The `Host` machine of agent-relay-proto checks every call (`reason`
//! required, UNKNOWN_TOOL, INVALID_PARAMS naming the parameter) before the movie UI runs it.
//!
//! Each line typed on stdin is sent to the agents as the participant's `user.message`. The
//! host keeps no log of its own: `session.ended` reports the relay's file for the relay
//! session, `<--log-dir>/<session>.jsonl` (the relay syncs it before forwarding
//! `session.ended`), so give it the relay's `--log-dir`.
//!
//! ```text
//! cargo run --example relay_server                      # terminal 1
//! cargo run --example movie_host -- --url ws://127.0.0.1:3000/agent/ws   # terminal 2
//! cargo run --example relay_agent                       # terminal 3
//! ```

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    agentwire_apps::cli::movie_host::main().await
}

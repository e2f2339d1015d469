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
//! The participant types on stdin: `help` lists the commands; a line starting with `/` is a
//! UI action (`/select ITEM_ID`, `/next`, `/prev`, `/filter FIELD OP VALUE`,
//! `/sort FIELD [asc|desc]`, `/quantity TYPE_ID N`, `/clear [filter|sort|highlight|augment|all]`),
//! run as the current stage's tool with the same checks as an agent's `tool.call` (a refusal
//! is printed with the error code and text an agent would get) and pushed to every agent as
//! `state.updated` with `source: "user"`; `/show` prints the stage and the items on screen;
//! `/say TEXT` and any other line are the participant's chat message, `user.message`.
//!
//! Agents may read the UI (`snapshot.get`) before a study session starts; the other requests
//! wait for `session.start`. The host keeps no log of its own: the relay writes each study
//! session's records to `<--log-dir>/<sessionId>.jsonl` (`s-YYYYMMDD-NNN.jsonl`) and syncs it
//! before forwarding `session.ended`, whose `logFile` names that file, so give the host the
//! relay's `--log-dir`; the host also numbers study sessions after the newest such file in it,
//! so a restart never reuses an id.
//!
//! ```text
//! cargo run --example relay_server                      # terminal 1
//! cargo run --example movie_host -- --url ws://127.0.0.1:3000/agent/ws   # terminal 2
//! cargo run --example relay_agent                       # terminal 3
//! ```

#[tokio::main]
async fn main() -> std::process::ExitCode {
    agentwire_server::cli::movie_host::main().await
}

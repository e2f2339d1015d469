//! Reference MCPW agent: registers with its capabilities, heartbeats, accepts tasks, reports
//! progress and completion, answers collaboration requests with its vote (`--vote`, default
//! approve). Prints one sentence per event;
//! a refused connection (e.g. `HTTP error: 401 Unauthorized` for a wrong `--api-key`) is
//! printed with the wait before the next attempt, which doubles up to 30 s. Ctrl-C or
//! SIGTERM shuts it down gracefully: `agent.shutdown` hands its tasks over to other agents,
//! and it exits once the server answered (at most 5 s later).
//!
//! ```text
//! cargo run --example mcpw_agent -- --url ws://127.0.0.1:8080/ --agent-id agent-1 --capability code_review:0.9 --binary
//! ```
//!
//! `--count N` runs N agents from this one process (an agent pool: `agent-1-1` ...
//! `agent-1-N`, one connection each, the same settings and reconnect waits; each line is
//! prefixed with the agent's id, and Ctrl-C shuts every one down gracefully).
//! `--shared-state` keeps a replica of the shared CRDT state and counts accepted completions
//! in the shared `tasks_completed` counter. `--hmac-secret SECRET` (or `MCPW_HMAC_SECRET`)
//! signs every frame for a server that authenticates messages and refuses its unsigned ones.
//! `--protocol-version N` (repeatable; default every version it speaks) sets the versions it
//! offers: it prints the one the server selected, or that the server speaks none of them
//! (HTTP 426). `--compression if-smaller|entropy|never` and `--batch-linger-ms N` are the
//! server's settings of the same names, for what the agent sends.
//!
//! ```text
//! cargo run --example mcpw_agent -- --url ws://127.0.0.1:8080/ --agent-id agent --count 3 --shared-state
//! ```

#[tokio::main]
async fn main() -> std::process::ExitCode {
    agentwire_server::cli::mcpw_agent::main().await
}

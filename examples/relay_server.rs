//! Reference agent-relay server (External Agent Protocol, mvp-0.2).
//!
//! Serves the relay on `--listen` (default 127.0.0.1:3000) at `/agent/ws`: any other path
//! gets HTTP 404 before the upgrade. Writes the study log, one JSONL file per relay session,
//! into `--log-dir` (default `./relay-logs`); every line is written before the message it
//! records is forwarded, and synced (on a worker, off the relay's task) before
//! `session.ended` is; a `session.ended` whose log was not saved reaches the agent as
//! `LOG_FLUSH_FAILED`. Logs connections, joins, repaired log files and study-log failures to
//! stderr with `tracing` (`RUST_LOG`, default `info`; `debug` adds every forward and log
//! line). Every limit is a flag.
//!
//! ```text
//! cargo run --example relay_server -- --listen 127.0.0.1:3000 --log-dir ./relay-logs
//! ```

#[tokio::main]
async fn main() -> std::io::Result<()> {
    agentwire_apps::cli::relay_server::main().await
}

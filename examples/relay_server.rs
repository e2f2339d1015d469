//! Reference agent-relay server (External Agent Protocol, mvp-0.2).
//!
//! Serves the relay on `--listen` (default 127.0.0.1:3000) at `/agent/ws`: any other path
//! gets HTTP 404 before the upgrade. A request an agent sends without `id` is forwarded with
//! an id of the relay's own (`relay-N`) and its answer goes back to that agent only, without
//! the `replyTo`; a host answer that names no request is dropped, never sent to every agent.
//!
//! Writes the study log into `--log-dir` (default `./relay-logs`), one JSONL file per
//! session id: a study session's records, from the host's `session.started` through
//! `session.ended`, carry its id and go to `<log dir>/s-YYYYMMDD-NNN.jsonl` (the file
//! `session.ended`'s `logFile` names); the records outside a study session (joins, polls
//! before `session.start`, ...) go to the relay session's file, e.g. `default.jsonl`. Every
//! line is written before the message it records is forwarded, and synced (on a worker, off
//! the relay's task) before `session.ended` is; a `session.ended` whose log was not saved
//! reaches the agent as `LOG_FLUSH_FAILED`. Logs connections, joins, undelivered messages,
//! repaired log files and study-log failures to stderr with `tracing` (`RUST_LOG`, default
//! `info`; `debug` adds every forward and log line). Every limit is a flag.
//!
//! ```text
//! cargo run --example relay_server -- --listen 127.0.0.1:3000 --log-dir ./relay-logs
//! ```

#[tokio::main]
async fn main() -> std::process::ExitCode {
    agentwire_server::cli::relay_server::main().await
}

//! Validates and summarises agent-relay study logs (JSONL, one file per session id: a study
//! session's `s-YYYYMMDD-NNN.jsonl`, and a relay session's, e.g. `default.jsonl`, for the
//! records outside a study session).
//!
//! For each file (or each `*.jsonl` in a directory): counts by type and by direction, the
//! first and last timestamp, and the checks of `relay/log_check.rs` (every line a record of
//! the spec's shape, one `sessionId`, `eventIndex` contiguous from 0). Warnings, not
//! failures: a torn last line (a crash while writing), a timestamp earlier than the one
//! before it, a file name that is not the relay's name for its session, and a study
//! session's log (first record `session.started`) whose last record is not `session.ended`
//! (the session is still running, or the relay stopped). Exits 0 when every file is
//! consistent, 1 when one is not, 2 when a file cannot be read.
//!
//! ```text
//! cargo run --example relay_log -- ./relay-logs
//! cargo run --example relay_log -- ./relay-logs/s-20260213-001.jsonl
//! ```

fn main() -> std::process::ExitCode {
    agentwire_server::cli::relay_log::main()
}

//! Validates and summarises agent-relay study logs (JSONL, one file per session).
//!
//! For each file (or each `*.jsonl` in a directory): counts by type and by direction, the
//! first and last timestamp, and the checks of `relay/log_check.rs` (every line a record of
//! the spec's shape, one `sessionId`, `eventIndex` contiguous from 0). A torn last line (a
//! crash while writing) is a warning. Exits 0 when every file is consistent, 1 when one is
//! not, 2 when a file cannot be read.
//!
//! ```text
//! cargo run --example relay_log -- ./relay-logs
//! cargo run --example relay_log -- ./relay-logs/default.jsonl
//! ```

fn main() -> std::process::ExitCode {
    agentwire_apps::cli::relay_log::main()
}

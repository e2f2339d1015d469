//! Reference MCPW orchestration server.
//!
//! Agents connect over WebSocket with subprotocol `mcp.v1` (426 without it), an
//! API key when `--api-key` is given (in `Authorization: Bearer <key>`, `Authorization: <key>` or
//! `X-API-Key: <key>`, as the real server reads them; 401 otherwise), and speak JSON
//! (text frames) or binary MCPW frames; replies follow the form of each peer. Serves
//! Prometheus metrics over plain HTTP on `--metrics ADDR` (the spec's three families and its
//! protocol analytics). With `--hmac-secret SECRET` (or `MCPW_HMAC_SECRET`) every frame must
//! carry its HMAC tag (error 4001 otherwise) and every frame sent carries one; the reference
//! agent signs with the same `--hmac-secret` (or `MCPW_HMAC_SECRET`). `--compression
//! entropy` uses the spec's adaptive rule; `--protocol-version N` (repeatable) sets the versions offered agents may
//! select (`mcp.v<N>`). Logs registrations, tasks,
//! protocol violations and refused upgrades (with the reason) to stderr, one sentence each
//! (`RUST_LOG`, default `info`). `--batch-linger-ms N` sends the small messages it starts to
//! an agent together, after at most N ms. Reads one task per line on stdin
//! (`TYPE [priority=N] [JSON_CONTEXT]`, e.g. `code_review priority=5 {"pull_request": 7}`:
//! the larger priority is assigned first among tasks waiting for an agent, default 1) and
//! routes it; `cancel TASK_ID` cancels one (its agent gets error 4006). Ctrl-C stops it at
//! once.
//!
//! ```text
//! cargo run --example mcpw_server -- --listen 127.0.0.1:8080 --metrics 127.0.0.1:9090 --api-key secret
//! ```

#[tokio::main]
async fn main() -> std::process::ExitCode {
    agentwire_server::cli::mcpw_server::main().await
}

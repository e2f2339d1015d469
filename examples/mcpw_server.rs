//! Reference MCPW orchestration server.
//!
//! Agents connect over WebSocket with subprotocol `mcp.v1` (426 without it), an
//! `Authorization: Bearer <key>` when `--api-key` is given (401 otherwise), and speak JSON
//! (text frames) or binary MCPW frames; replies follow the form of each peer. Serves
//! Prometheus metrics over plain HTTP on `--metrics ADDR`. Logs registrations, tasks and
//! protocol violations to stderr (`RUST_LOG`, default `info`). Reads one task per line on
//! stdin (`TYPE [JSON_CONTEXT]`) and routes it.
//!
//! ```text
//! cargo run --example mcpw_server -- --listen 127.0.0.1:8080 --metrics 127.0.0.1:9090 --api-key secret
//! ```

#[path = "mcpw/mod.rs"]
mod mcpw;

use std::time::Duration;

use agentwire::mcpw::orchestrator::{OrchestratorConfig, TaskSpec, UpgradeConfig};
use clap::Parser;
use tokio::io::AsyncBufReadExt;

/// Reference MCPW orchestration server.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Address of the WebSocket endpoint.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: String,
    /// Address of the Prometheus endpoint (plain HTTP, any path); none if unset.
    #[arg(long)]
    metrics: Option<String>,
    /// Accepted API key (repeatable); unset: no authentication.
    #[arg(long = "api-key")]
    api_keys: Vec<String>,
    /// Accept upgrades that do not offer `mcp.v1`.
    #[arg(long)]
    allow_no_subprotocol: bool,
    /// Connections at once (503 beyond).
    #[arg(long, default_value_t = 10_000)]
    max_connections: usize,
    /// Expected heartbeat period, seconds.
    #[arg(long, default_value_t = 30)]
    heartbeat_secs: u64,
    /// Messages per minute per connection (0: no limit); burst 100.
    #[arg(long, default_value_t = 1000)]
    rate_per_minute: u32,
    /// Per-address connection limits (the same flags in every reference server).
    #[command(flatten)]
    address: mcpw::AddressLimits,
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    mcpw::init_tracing("info");
    let args = Args::parse();
    args.address.install();
    let rate = (args.rate_per_minute > 0)
        .then(|| agentwire::core::Rate::per_minute(args.rate_per_minute, 100));
    let config = OrchestratorConfig::default()
        .with_heartbeat_interval(Duration::from_secs(args.heartbeat_secs.max(1)))
        .with_rate(rate);
    let upgrade = UpgradeConfig::default()
        .with_api_keys(args.api_keys.clone())
        .with_required_subprotocol(!args.allow_no_subprotocol)
        .with_max_connections(args.max_connections);
    let app = mcpw::server_app::start(
        &args.listen,
        args.metrics.as_deref(),
        config,
        upgrade,
        |ev| {
            tracing::info!("{ev:?}");
        },
    )
    .await?;
    tracing::info!("listening on {} (subprotocol mcp.v1)", app.url());
    if let Some(m) = app.metrics_addr {
        tracing::info!("metrics on http://{m}/metrics");
    }
    let handle = app.handle.clone();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let (kind, ctx) = line.trim().split_once(' ').unwrap_or((line.trim(), "{}"));
            if kind.is_empty() {
                continue;
            }
            let context = serde_json::from_str(ctx).unwrap_or_else(|_| serde_json::json!({}));
            let spec = TaskSpec::new(kind).with_context(context);
            match handle
                .call(move |m, now| m.inner.submit_task(spec, now))
                .await
            {
                Ok(Ok(id)) => println!("submitted {id}"),
                Ok(Err(e)) => println!("refused: {e}"),
                Err(_) => break,
            }
        }
    });
    let _ = tokio::signal::ctrl_c().await;
    app.shutdown().await;
    Ok(())
}

//! The `mcpw_server` command: its flags and its `main`. `examples/mcpw_server.rs` is the binary,
//! and its documentation says what the command does and how to run it.

use std::process::ExitCode;
use std::time::Duration;

use crate::mcpw;
use agentwire::mcpw::orchestrator::{OrchestratorConfig, OrchestratorEvent, UpgradeConfig};
use clap::Parser;
use mcpw::console::Command;

/// Reference MCPW orchestration server. Reads tasks to route, and cancellations, on stdin
/// (below).
#[derive(Parser, Debug)]
#[command(name = "agentwire", version, after_help = mcpw::console::HELP)]
pub struct Args {
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
    /// Shared secret for HMAC-SHA256 message authentication: every frame must carry its
    /// tag (else error 4001) and every frame sent carries one. Also read from the
    /// `MCPW_HMAC_SECRET` environment variable; unset: off.
    #[arg(long)]
    hmac_secret: Option<String>,
    /// When outgoing payloads over 1 KiB are gzipped: `if-smaller` (the reference server's
    /// rule), `entropy` (the spec's adaptive rule: skip payloads that look incompressible)
    /// or `never`.
    #[arg(long, default_value = "if-smaller")]
    compression: String,
    /// A protocol version the server speaks (repeatable): of those an agent offers as
    /// subprotocols `mcp.v<n>`, the highest is selected (none in common: HTTP 426). Only
    /// version 1 exists.
    #[arg(long = "protocol-version", value_name = "N",
          default_values_t = agentwire::mcpw::VERSIONS.to_vec())]
    protocol_versions: Vec<u8>,
    /// Sender-side batching: small messages the server starts (`task.assigned`, forwarded
    /// collaboration requests, `state.sync` notifications) to a JSON or 12-byte-form agent
    /// wait up to this many milliseconds and leave as one batch (errors and answers never
    /// wait). 0: every message leaves at once.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    batch_linger_ms: u64,
    /// Per-address connection limits (the same flags in every reference server).
    #[command(flatten)]
    address: crate::common::AddressLimits,
}

/// Runs the `mcpw_server` command, as `cargo run --example mcpw_server` does.
pub async fn main() -> ExitCode {
    crate::common::init_tracing("info");
    run(Args::parse()).await
}

/// Runs the command with `args`, as `main` does after parsing them (the `agentwire`
/// binary's subcommand calls it with the same flags); installs no tracing subscriber.
pub async fn run(args: Args) -> ExitCode {
    crate::common::exit_code("mcpw_server", body(args).await.map_err(Into::into))
}

async fn body(args: Args) -> std::io::Result<()> {
    args.address.install();
    // Ctrl-C is caught from here on (before "listening" is logged), so it always stops the
    // server cleanly.
    #[cfg(unix)]
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let rate = (args.rate_per_minute > 0)
        .then(|| agentwire::core::Rate::per_minute(args.rate_per_minute, 100));
    let Some(compression) = mcpw::server_app::compress_policy(&args.compression) else {
        eprintln!("--compression must be if-smaller, entropy or never");
        std::process::exit(2);
    };
    let mut config = OrchestratorConfig::default()
        .with_heartbeat_interval(Duration::from_secs(args.heartbeat_secs.max(1)))
        .with_rate(rate)
        .with_compression(compression)
        .with_batch_linger(
            (args.batch_linger_ms > 0).then(|| Duration::from_millis(args.batch_linger_ms)),
        );
    let secret = args
        .hmac_secret
        .clone()
        .or_else(|| std::env::var(mcpw::server_app::HMAC_SECRET_ENV).ok())
        .filter(|s| !s.is_empty());
    if let Some(secret) = secret {
        config = config.with_hmac_secret(secret.as_bytes());
        tracing::info!("HMAC message authentication on");
    }
    let upgrade = UpgradeConfig::default()
        .with_api_keys(args.api_keys.clone())
        .with_required_subprotocol(!args.allow_no_subprotocol)
        .with_max_connections(args.max_connections)
        .with_protocol_versions(args.protocol_versions.clone());
    let app = mcpw::server_app::start(
        &args.listen,
        args.metrics.as_deref(),
        config,
        upgrade,
        |ev| match ev {
            OrchestratorEvent::ProtocolViolation { .. } => {
                tracing::warn!("{}", mcpw::server_app::describe(ev));
            }
            _ => tracing::info!("{}", mcpw::server_app::describe(ev)),
        },
    )
    .await?;
    tracing::info!("listening on {} (subprotocol mcp.v1)", app.url());
    if let Some(m) = app.metrics_addr {
        tracing::info!("metrics on http://{m}/metrics");
    }
    let handle = app.handle.clone();
    // stdin is read on a plain thread, not tokio's: the process ends when `main` returns.
    let mut lines = crate::common::spawn_line_reader(std::io::BufReader::new(std::io::stdin()));
    tokio::spawn(async move {
        while let Some(line) = lines.recv().await {
            // `TYPE [priority=N] [JSON_CONTEXT]` or `cancel TASK_ID` (`mcpw::console`).
            let command = match mcpw::console::parse(&line) {
                Ok(Some(c)) => c,
                Ok(None) => continue,
                Err(e) => {
                    println!("not understood: {e}");
                    continue;
                }
            };
            match command {
                Command::Cancel(task_id) => {
                    // Its agent gets 4006 and stops working on it.
                    let id = task_id.clone();
                    match handle
                        .call(move |m, now| m.inner.cancel_task(&id, now))
                        .await
                    {
                        Ok(Ok(())) => println!("cancelled {task_id}"),
                        Ok(Err(e)) => println!("not cancelled: {e}"),
                        Err(_) => break,
                    }
                }
                Command::Submit(spec) => match handle
                    .call(move |m, now| m.inner.submit_task(spec, now))
                    .await
                {
                    Ok(Ok(id)) => println!("submitted {id}"),
                    Ok(Err(e)) => println!("refused: {e}"),
                    Err(_) => break,
                },
            }
        }
    });
    #[cfg(unix)]
    interrupt.recv().await;
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
    tracing::info!("Ctrl-C: closing every connection and stopping");
    app.shutdown().await;
    Ok(())
}

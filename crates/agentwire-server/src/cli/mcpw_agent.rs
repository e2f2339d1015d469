//! The `mcpw_agent` command: its flags and its `main`. `examples/mcpw_agent.rs` is the binary, and
//! its documentation says what the command does and how to run it.

use std::process::ExitCode;
use std::time::Duration;

use crate::mcpw;
use agentwire::mcpw::Capability;
use clap::Parser;
use mcpw::agent_app::{connect_machine, AgentEvent, AgentSettings, WireSettings};

/// Reference MCPW agent.
#[derive(Parser, Debug)]
#[command(name = "agentwire", version)]
pub struct Args {
    /// Server URL.
    #[arg(long, default_value = "ws://127.0.0.1:8080/")]
    url: String,
    /// `agent_id`.
    #[arg(long, default_value = "agent-1")]
    agent_id: String,
    /// `agent_type`.
    #[arg(long, default_value = "code-analyzer")]
    agent_type: String,
    /// A capability `NAME:CONFIDENCE` (repeatable).
    #[arg(long = "capability", default_value = "code_review:0.9")]
    capabilities: Vec<String>,
    /// API key for `Authorization: Bearer`.
    #[arg(long)]
    api_key: Option<String>,
    /// Speak binary MCPW frames.
    #[arg(long, conflicts_with = "json")]
    binary: bool,
    /// Speak JSON text frames (the default).
    #[arg(long)]
    json: bool,
    /// Once registered, ask the server for its 12-byte binary form (`protocol.set_binary`,
    /// gzip above 1 KiB): the binary mode of the real developer-mesh server.
    #[arg(long)]
    set_binary: bool,
    /// Heartbeat period, seconds.
    #[arg(long, default_value_t = 10)]
    heartbeat_secs: u64,
    /// Progress reports per task.
    #[arg(long, default_value_t = 2)]
    steps: u32,
    /// Milliseconds per step.
    #[arg(long, default_value_t = 500)]
    step_ms: u64,
    /// Run this many agents from this process, one connection each, named
    /// `<agent-id>-1` ... `<agent-id>-N` (an agent pool sharing these settings).
    #[arg(long, default_value_t = 1)]
    count: usize,
    /// Keep a replica of the shared CRDT state (`state.get` after registering, every
    /// agent's `state.sync` applied) and count accepted completions in `tasks_completed`.
    #[arg(long)]
    shared_state: bool,
    /// Shared secret for HMAC-SHA256 message authentication (the server's `--hmac-secret`):
    /// every frame is signed and the server's frames must be. Default: the
    /// `MCPW_HMAC_SECRET` environment variable; unset: off.
    #[arg(long)]
    hmac_secret: Option<String>,
    /// A protocol version the agent offers (repeatable), as the subprotocol `mcp.v<N>`: the
    /// server selects the highest it speaks too, and refuses with HTTP 426 when it speaks
    /// none. Default: every version the agent speaks (only version 1 exists).
    #[arg(long = "protocol-version", value_name = "N",
          default_values_t = agentwire::mcpw::VERSIONS.to_vec(),
          value_parser = clap::value_parser!(u8).range(1..))]
    protocol_versions: Vec<u8>,
    /// When outgoing payloads over 1 KiB are gzipped: `if-smaller` (the reference server's
    /// rule), `entropy` (the spec's adaptive rule: skip payloads that look incompressible)
    /// or `never` (the server's `--compression` values).
    #[arg(long, default_value = "if-smaller", value_parser = ["if-smaller", "entropy", "never"])]
    compression: String,
    /// Sender-side batching: small messages the agent starts (heartbeats, progress
    /// reports, requests) wait up to this many milliseconds and leave as one batch (JSON
    /// and 12-byte forms; answers never wait). 0: every message leaves at once.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    batch_linger_ms: u64,
    /// The vote collaboration requests are answered with: approve, reject or abstain.
    #[arg(long, default_value = "approve")]
    vote: String,
    /// `wss://` settings.
    #[command(flatten)]
    tls: super::client_tls::TlsFlags,
    /// Certificate pinning (the MCPW spec's): the SHA-256 of the server's leaf certificate,
    /// 64 hex digits (colons allowed, as `openssl x509 -noout -fingerprint -sha256` prints
    /// it); a server whose certificate does not match is refused, on top of the normal
    /// verification (add `--ca` for a self-signed certificate).
    #[arg(long, value_name = "HEX")]
    pin_sha256: Option<String>,
}

/// Runs the `mcpw_agent` command, as `cargo run --example mcpw_agent` does.
pub async fn main() -> ExitCode {
    crate::common::init_tracing("warn");
    run(Args::parse()).await
}

/// Runs the command with `args`, as `main` does after parsing them (the `agentwire`
/// binary's subcommand calls it with the same flags); installs no tracing subscriber.
pub async fn run(args: Args) -> ExitCode {
    crate::common::exit_code("mcpw_agent", body(args).await)
}

async fn body(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    args.tls.install(args.pin_sha256.as_deref())?;
    let Some(compression) = mcpw::server_app::compress_policy(&args.compression) else {
        return Err(format!(
            "--compression must be if-smaller, entropy or never, not {:?}",
            args.compression
        )
        .into());
    };
    let wire = WireSettings {
        protocol_versions: args.protocol_versions.clone(),
        compression,
        batch_linger: (args.batch_linger_ms > 0)
            .then(|| Duration::from_millis(args.batch_linger_ms)),
    };
    let capabilities: Vec<_> = args
        .capabilities
        .iter()
        .map(|c| {
            let (name, conf) = c.split_once(':').unwrap_or((c, "0.8"));
            Capability::new(name, conf.parse::<f64>().unwrap_or(0.8))
        })
        .collect();
    let settings = AgentSettings {
        agent_id: args.agent_id,
        agent_type: args.agent_type,
        capabilities,
        binary: args.binary,
        heartbeat: Duration::from_secs(args.heartbeat_secs.max(1)),
        steps: args.steps,
        step: Duration::from_millis(args.step_ms),
        hmac_secret: args.hmac_secret,
    };
    if args.count > 1 {
        let mut config = mcpw::pool::PoolConfig::new(settings, args.count);
        config.api_key = args.api_key.clone();
        config.shared_state = args.shared_state;
        config.vote = args.vote.clone();
        config.wire = wire;
        let (pool, mut events) = mcpw::pool::AgentPool::connect(&args.url, &config)?;
        let mut stop = std::pin::pin!(stop_signal());
        let signal = loop {
            tokio::select! {
                ev = events.recv() => match ev {
                    Some((i, ev)) => {
                        let id = &pool.agent_ids()[i];
                        println!("{id}: {}", mcpw::agent_app::describe(&ev));
                    }
                    None => break None,
                },
                name = &mut stop => break Some(name),
            }
        };
        if let Some(name) = signal {
            // Every agent shuts down gracefully, as a single one does.
            println!("{name}: shutting down {} agents", pool.agent_ids().len());
            let mut running = pool.begin_shutdown(name).await;
            let stopped = async {
                while running > 0 {
                    let Some((i, ev)) = events.recv().await else {
                        break;
                    };
                    let id = &pool.agent_ids()[i];
                    println!("{id}: {}", mcpw::agent_app::describe(&ev));
                    if matches!(ev, AgentEvent::Stopped) {
                        running -= 1;
                    }
                }
            };
            let _ = tokio::time::timeout(Duration::from_secs(10), stopped).await;
        }
        pool.shutdown().await;
        return Ok(());
    }
    let machine = mcpw::agent_app::AgentMachine::new(settings)
        .with_shared_state(args.shared_state)
        .with_vote(&args.vote)
        .with_wire(wire);
    let (handle, mut events) = connect_machine(&args.url, machine, args.api_key.as_deref())?;
    // Listening for Ctrl-C and SIGTERM from the start: a signal is never missed.
    let mut stop = std::pin::pin!(stop_signal());
    let signal = loop {
        tokio::select! {
            ev = events.recv() => match ev {
                Some(ev) => {
                    println!("{}", mcpw::agent_app::describe(&ev));
                    if args.set_binary && matches!(ev, AgentEvent::Registered(_)) {
                        let _ = handle.call(|m, _| m.set_binary(true, Some(1024))).await;
                    }
                }
                None => break None,
            },
            name = &mut stop => break Some(name),
        }
    };
    if let Some(name) = signal {
        // A graceful shutdown: `agent.shutdown`, the held tasks handed over to other
        // agents, and the connection closed once the server answered (at most the
        // agent's graceful timeout, 5 s).
        println!("{name}: shutting down");
        let started = handle
            .call(move |m, now| m.shutdown(name, true, now))
            .await
            .unwrap_or(false);
        if started {
            let stopped = async {
                while let Some(ev) = events.recv().await {
                    println!("{}", mcpw::agent_app::describe(&ev));
                    if matches!(ev, AgentEvent::Stopped) {
                        break;
                    }
                }
            };
            let _ = tokio::time::timeout(Duration::from_secs(10), stopped).await;
        }
    }
    handle.shutdown().await;
    Ok(())
}

/// Waits for Ctrl-C or (on Unix) SIGTERM; returns which.
async fn stop_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            return tokio::select! {
                _ = tokio::signal::ctrl_c() => "ctrl-c",
                _ = term.recv() => "sigterm",
            };
        }
    }
    let _ = tokio::signal::ctrl_c().await;
    "ctrl-c"
}

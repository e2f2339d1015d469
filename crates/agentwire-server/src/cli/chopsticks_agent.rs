//! The `chopsticks_agent` command: its flags and its `main`. `examples/chopsticks_agent.rs` is the
//! binary, and its documentation says what the command does and how to run it.

use crate::chopsticks;
use agentwire::chopsticks::AgentConfig;
use chopsticks::agent_app::AgentLog;
use clap::Parser;
use std::process::ExitCode;

/// A mock Chopsticks music agent.
#[derive(Parser, Debug)]
#[command(name = "agentwire")]
pub struct Args {
    /// Controller URL (`ws://` or `wss://`).
    #[arg(long, default_value = "ws://127.0.0.1:8787")]
    url: String,
    /// This agent's id.
    #[arg(long, default_value = "agent-1")]
    agent_id: String,
    /// A guild the agent is in (repeatable).
    #[arg(long = "guild")]
    guilds: Vec<String>,
    /// Pool id.
    #[arg(long, default_value = "default")]
    pool: String,
    /// Runner secret sent in hello.
    #[arg(long)]
    secret: Option<String>,
    /// Protocol version sent in hello.
    #[arg(long, default_value = "1.0.0")]
    protocol_version: String,
    /// `wss://` settings.
    #[command(flatten)]
    tls: super::client_tls::TlsFlags,
}

/// Runs the `chopsticks_agent` command, as `cargo run --example chopsticks_agent` does.
pub async fn main() -> ExitCode {
    crate::common::init_tracing("warn");
    run(Args::parse()).await
}

/// Runs the command with `args`, as `main` does after parsing them (the `agentwire`
/// binary's subcommand calls it with the same flags); installs no tracing subscriber.
pub async fn run(args: Args) -> ExitCode {
    crate::common::exit_code("chopsticks_agent", body(args).await)
}

async fn body(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    args.tls.install(None)?;
    let mut cfg = AgentConfig::new(&args.agent_id)
        .with_guilds(args.guilds)
        .with_pool(args.pool)
        .with_protocol_version(args.protocol_version)
        .with_bot(
            format!("bot-{}", args.agent_id),
            format!("{}#0001", args.agent_id),
        );
    if let Some(s) = args.secret {
        cfg = cfg.with_runner_secret(s);
    }
    let mut agent = chopsticks::agent_app::start(&args.url, cfg, true, |id, log| match log {
        AgentLog::Connected => eprintln!("[{id}] connected, hello sent"),
        AgentLog::Disconnected => eprintln!("[{id}] disconnected; reconnecting with backoff"),
        AgentLog::ControllerError(e) => eprintln!("[{id}] controller error: {e}"),
        AgentLog::Answered { op, result } => match result {
            Ok(data) => println!(
                "{}",
                serde_json::json!({"agentId": id, "op": op, "ok": true, "data": data})
            ),
            Err(e) => println!(
                "{}",
                serde_json::json!({"agentId": id, "op": op, "ok": false, "error": e})
            ),
        },
    })?;
    let signal = tokio::select! {
        _ = &mut agent.task => None,
        name = stop_signal() => Some(name?),
    };
    if let Some(name) = signal {
        // The spec's graceful disconnect: release every session, then close.
        let released = agent.stop("shutdown").await;
        eprintln!(
            "[{}] {name}: released {released} session(s) and closed",
            args.agent_id
        );
    }
    Ok(())
}

/// Resolves on Ctrl-C (SIGINT) or, on Unix, SIGTERM, with the signal's name.
async fn stop_signal() -> std::io::Result<&'static str> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r.map(|()| "SIGINT"),
            _ = term.recv() => Ok("SIGTERM"),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await.map(|()| "Ctrl-C")
    }
}

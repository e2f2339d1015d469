//! A mock Chopsticks music agent with an in-memory player per guild.
//!
//! Answers `play`, `pause`, `resume`, `skip`, `stop`, `queue`, `search`, `status`, `volume`,
//! `remove`, `move`, `swap`, `shuffle`, `clear` (anything else: `unknown-op`), emits `add`
//! when it first joins a voice channel and `released` on `stop`, and reconnects with
//! backoff (1 s doubling to 30 s) when the controller goes away.
//!
//! ```text
//! cargo run --release --example chopsticks_agent -- --url ws://127.0.0.1:8787 --agent-id agent-1 --guild g1
//! ```

use agentwire::chopsticks::AgentConfig;
use agentwire_apps::chopsticks;
use chopsticks::agent_app::AgentLog;
use clap::Parser;

/// A mock Chopsticks music agent.
#[derive(Parser, Debug)]
struct Args {
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
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    agentwire_apps::common::init_tracing("warn");
    let args = Args::parse();
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
    let agent = chopsticks::agent_app::start(&args.url, cfg, true, |id, log| match log {
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
    tokio::select! {
        _ = agent.task => {}
        _ = tokio::signal::ctrl_c() => agent.handle.shutdown().await,
    }
    Ok(())
}

//! Reference Chopsticks controller.
//!
//! Serves agents on `--listen` (default 127.0.0.1:8787), prints one JSON line per event on
//! stdout, and reads commands on stdin, one per line:
//!
//! - `agents`: the live agents as JSON
//! - `req AGENT_ID OP JSON_DATA`: sends a request, prints the outcome as JSON
//! - `play GUILD VOICE_CHANNEL QUERY`: selects an agent by the selection rules, sends `play`
//!
//! ```text
//! cargo run --example chopsticks_controller -- --listen 127.0.0.1:8787
//! ```

#[path = "chopsticks/mod.rs"]
mod chopsticks;

use std::time::Duration;

use agentwire::chopsticks::ControllerConfig;
use clap::Parser;
use tokio::io::{AsyncBufReadExt, BufReader};

/// Reference Chopsticks controller.
#[derive(Parser, Debug)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8787")]
    listen: String,
    /// Runner secret every agent's hello must carry (unset: not checked).
    #[arg(long)]
    secret: Option<String>,
    /// Supported protocol versions (repeatable).
    #[arg(long = "supported-version", default_values_t = vec!["1.0.0".to_string()])]
    supported_versions: Vec<String>,
    /// Seconds a connection has to send its hello.
    #[arg(long, default_value_t = 8)]
    hello_timeout: u64,
    /// Seconds an agent has to answer a request.
    #[arg(long, default_value_t = 30)]
    request_timeout: u64,
    /// Seconds without a message after which an agent is dropped.
    #[arg(long, default_value_t = 45)]
    stale_after: u64,
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    chopsticks::init_tracing("warn");
    let args = Args::parse();
    let mut cfg = ControllerConfig::default()
        .with_supported_versions(args.supported_versions)
        .with_hello_timeout(Duration::from_secs(args.hello_timeout))
        .with_request_timeout(Duration::from_secs(args.request_timeout))
        .with_stale_after(Duration::from_secs(args.stale_after));
    if let Some(s) = args.secret {
        cfg = cfg.with_runner_secret(s);
    }
    let app = chopsticks::controller_app::start(&args.listen, cfg, |ev| {
        if let Some(line) = chopsticks::controller_app::event_json(ev) {
            println!("{line}");
        }
    })
    .await?;
    eprintln!(
        "chopsticks controller listening on ws://{}",
        app.local_addr()
    );
    eprintln!("commands: agents | req AGENT_ID OP JSON_DATA | play GUILD VOICE_CHANNEL QUERY");

    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    loop {
        tokio::select! {
            line = lines.next_line() => match line? {
                Some(line) => {
                    let out = app.execute(&line).await;
                    if !out.is_null() {
                        println!("{out}");
                    }
                }
                None => break, // stdin closed: keep serving until Ctrl-C
            },
            _ = tokio::signal::ctrl_c() => {
                app.server.shutdown().await;
                return Ok(());
            }
        }
    }
    let _ = tokio::signal::ctrl_c().await;
    app.server.shutdown().await;
    Ok(())
}

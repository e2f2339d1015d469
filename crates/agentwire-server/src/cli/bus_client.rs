//! The `bus_client` command: its flags and its `main`. `examples/bus_client.rs` is the binary, and
//! its documentation says what the command does and how to run it.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::bus;
use agentwire::jsonrpc_bus::{ClientConfig, ClientEvent};
use clap::{Parser, Subcommand};
use serde_json::Value;

/// A command-line JSON-RPC bus client.
#[derive(Parser, Debug)]
#[command(name = "agentwire", version)]
struct Args {
    /// Bus URL (`ws://` or `wss://`).
    #[arg(long, default_value = "ws://127.0.0.1:7892")]
    url: String,
    /// `clientId` sent in `initialize`.
    #[arg(long, default_value = "bus-client")]
    client_id: String,
    /// Seconds to wait for an answer (a publish waits for the whole chain).
    #[arg(long, default_value_t = 30)]
    timeout: u64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Prints every delivery on PATTERN as a JSON line and answers it.
    Subscribe {
        /// Topic pattern (`inbound:*`, `agent:spawn`, ...).
        pattern: String,
        /// Answer `stopPropagation: true`: later subscribers never see the message.
        #[arg(long)]
        stop: bool,
    },
    /// Publishes JSON on TOPIC and prints the result.
    Publish {
        /// Topic (not a pattern).
        topic: String,
        /// The payload: a JSON object (a bus refuses anything else unless it accepts any
        /// value, e.g. `bus_server --any-payload`).
        json: String,
    },
    /// Sends `ping` and prints the timestamp.
    Ping,
}

/// Runs the `bus_client` command, as `cargo run --example bus_client` does.
pub async fn main() -> ExitCode {
    crate::common::init_tracing("warn");
    let args = Args::parse();
    let timeout = Duration::from_secs(args.timeout);
    let mut cfg = ClientConfig::new(&args.client_id).with_request_timeout(timeout);
    if matches!(args.command, Command::Subscribe { .. }) {
        cfg = cfg.intercepting();
    }
    // One-shot commands stay quiet about the connection; `stopping` silences the last
    // "disconnected" of a Ctrl-C.
    let one_shot = !matches!(args.command, Command::Subscribe { .. });
    let stopping = Arc::new(AtomicBool::new(false));
    let quiet = stopping.clone();
    let connect = bus::client_app::connect(
        &args.url,
        cfg,
        bus::client_app::transport_config(),
        move |ev| match ev {
            ClientEvent::Initialized(init) if !one_shot => eprintln!(
                "connected to {} ({} {})",
                init.server_id, init.server_info.name, init.server_info.version
            ),
            ClientEvent::Disconnected if !one_shot && !quiet.load(Ordering::Relaxed) => {
                eprintln!("disconnected; reconnecting with backoff")
            }
            ClientEvent::ProtocolViolation(e) => eprintln!("the bus broke the protocol: {e}"),
            _ => {}
        },
    );
    let (client, mut deliveries) = match connect {
        Ok(c) => c,
        Err(e) => {
            eprintln!("bus_client: {e}");
            return ExitCode::FAILURE;
        }
    };

    let code = match args.command {
        Command::Subscribe { pattern, stop } => {
            match client.subscribe(&pattern).await {
                Ok(id) => eprintln!(
                    "subscribed to {pattern:?} ({}); answering stopPropagation:{stop}",
                    id.as_deref().unwrap_or("no subscriptionId")
                ),
                Err(e) => {
                    eprintln!("bus_client: subscribe failed: {e}");
                    client.shutdown().await;
                    return ExitCode::FAILURE;
                }
            }
            loop {
                tokio::select! {
                    d = deliveries.recv() => {
                        let Some(d) = d else { break ExitCode::FAILURE };
                        println!("{}", d.to_json_line());
                        d.answer(stop).await;
                    }
                    _ = tokio::signal::ctrl_c() => {
                        stopping.store(true, Ordering::Relaxed);
                        break ExitCode::SUCCESS;
                    }
                }
            }
        }
        Command::Publish { topic, json } => match serde_json::from_str::<Value>(&json) {
            Err(e) => {
                eprintln!("bus_client: JSON is not valid JSON: {e}");
                ExitCode::FAILURE
            }
            Ok(payload) => match client.publish(&topic, &payload).await {
                Ok(result) => {
                    println!("{}", serde_json::to_string(&result).unwrap_or_default());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("bus_client: publish failed: {e}");
                    ExitCode::FAILURE
                }
            },
        },
        Command::Ping => match client.ping().await {
            Ok(timestamp) => {
                println!("{timestamp}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("bus_client: ping failed: {e}");
                ExitCode::FAILURE
            }
        },
    };
    client.shutdown().await;
    code
}

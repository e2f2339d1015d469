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
pub struct Args {
    /// Where and as whom to connect (before or after the subcommand).
    #[command(flatten)]
    pub connection: Connection,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The flags every bus client subcommand takes: where and as whom it connects.
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    /// Bus URL (`ws://` or `wss://`).
    #[arg(long, global = true, default_value = "ws://127.0.0.1:7892")]
    url: String,
    /// `clientId` sent in `initialize`.
    #[arg(long, global = true, default_value = "bus-client")]
    client_id: String,
    /// Seconds to wait for an answer (a publish waits for the whole chain).
    #[arg(long, global = true, default_value_t = 30)]
    timeout: u64,
    /// A PEM file of certificates to trust for `wss://` besides the Mozilla roots (a private
    /// CA, or a self-signed server certificate).
    #[arg(long, global = true, value_name = "FILE")]
    ca: Option<std::path::PathBuf>,
}

impl Connection {
    /// Whether every flag has its default value (as when none was given).
    pub fn is_default(&self) -> bool {
        use clap::{Args as _, FromArgMatches as _};
        let command = Self::augment_args(clap::Command::new("bus"));
        command
            .try_get_matches_from(["bus"])
            .ok()
            .and_then(|m| Self::from_arg_matches(&m).ok())
            .is_some_and(|defaults| defaults == *self)
    }
}

/// A bus client subcommand.
#[derive(Subcommand, Debug)]
pub enum Command {
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
    run(args.connection, args.command).await
}

/// Runs `command` over `connection`, as `main` does after parsing them (the `agentwire bus`
/// subcommands call it with the same flags); installs no tracing subscriber.
pub async fn run(connection: Connection, command: Command) -> ExitCode {
    let args = Args {
        connection,
        command,
    };
    let tls = super::client_tls::TlsFlags {
        ca: args.connection.ca.clone(),
    };
    if let Err(e) = tls.install(None) {
        eprintln!("bus_client: {e}");
        return ExitCode::FAILURE;
    }
    let url = args.connection.url.clone();
    let timeout = Duration::from_secs(args.connection.timeout);
    let mut cfg = ClientConfig::new(&args.connection.client_id).with_request_timeout(timeout);
    if matches!(args.command, Command::Subscribe { .. }) {
        cfg = cfg.intercepting();
    }
    // One-shot commands stay quiet about the connection; `stopping` silences the last
    // "disconnected" of a Ctrl-C.
    let one_shot = !matches!(args.command, Command::Subscribe { .. });
    let stopping = Arc::new(AtomicBool::new(false));
    let quiet = stopping.clone();
    // A one-shot command tries once: an unreachable bus is an error at once, not a retry.
    let transport = bus::client_app::transport_config().with_reconnect(!one_shot);
    let connect =
        bus::client_app::connect(&args.connection.url, cfg, transport, move |ev| match ev {
            ClientEvent::Initialized(init) if !one_shot => eprintln!(
                "connected to {} ({} {})",
                init.server_id, init.server_info.name, init.server_info.version
            ),
            ClientEvent::Disconnected if !one_shot && !quiet.load(Ordering::Relaxed) => {
                eprintln!("disconnected; reconnecting with backoff")
            }
            ClientEvent::ProtocolViolation(e) => eprintln!("the bus broke the protocol: {e}"),
            _ => {}
        });
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
                    eprintln!("bus_client: subscribe failed: {}", reason(&e, &url));
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
                    eprintln!("bus_client: publish failed: {}", reason(&e, &url));
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
                eprintln!("bus_client: ping failed: {}", reason(&e, &url));
                ExitCode::FAILURE
            }
        },
    };
    client.shutdown().await;
    code
}

/// Why a command failed, in words: a stopped client means the bus could not be reached (or
/// the connection ended and is not retried).
fn reason(failure: &bus::client_app::Failure, url: &str) -> String {
    match failure {
        bus::client_app::Failure::Stopped => format!("no connection to {url}"),
        other => other.to_string(),
    }
}

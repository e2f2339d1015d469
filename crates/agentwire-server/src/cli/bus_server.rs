//! The `bus_server` command: its flags and its `main`. `examples/bus_server.rs` is the binary, and
//! its documentation says what the command does and how to run it.

use std::process::ExitCode;
use std::time::Duration;

use crate::bus;
use crate::config::{BusMatchMode, BusPayload, BusSection};
use agentwire::jsonrpc_bus::{BusConfig, Limits};
use bus::server_app::EventLog;
use clap::{Parser, ValueEnum};

/// How subscription patterns match topics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Anchored glob (`*`, `?`, `[seq]`, `[!seq]`), as the reference bus.
    Glob,
    /// Glob, and a pattern also matches the topics it is a prefix of (the spec's rule:
    /// `inbound:chat-` matches `inbound:chat-1`).
    Prefix,
}

/// Reference JSON-RPC bus server.
#[derive(Parser, Debug)]
#[command(name = "agentwire", version)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7892")]
    listen: String,
    /// `serverId` in the initialize result (default: `bus-<12 hex>`, random).
    #[arg(long)]
    server_id: Option<String>,
    /// How subscription patterns match topics.
    #[arg(long, value_enum, default_value_t = Mode::Glob)]
    match_mode: Mode,
    /// Milliseconds one subscriber has to answer a delivery before the chain skips it.
    #[arg(long, default_value_t = duration_ms(BusConfig::default().delivery_timeout))]
    delivery_timeout_ms: u64,
    /// Seconds a connection has to send `initialize` (0: wait forever, as the reference).
    #[arg(long, default_value_t = BusConfig::default().initialize_timeout.map_or(0, |d| d.as_secs()))]
    initialize_timeout: u64,
    /// Deliveries sent to one subscriber before it answers the first (1: strictly one at a time).
    #[arg(long, default_value_t = BusConfig::default().max_in_flight_per_subscriber)]
    max_in_flight_per_subscriber: usize,
    /// Whether a publisher subscribed to its own topic receives its own messages.
    #[arg(long, action = clap::ArgAction::Set, default_value_t = BusConfig::default().deliver_to_publisher)]
    deliver_to_publisher: bool,
    /// Connections served at once; one more gets -32005 and close 1013.
    #[arg(long, default_value_t = Limits::default().max_connections)]
    max_connections: usize,
    /// Largest message body in bytes; larger gets -32005.
    #[arg(long, default_value_t = Limits::default().max_message_bytes)]
    max_message_bytes: usize,
    /// Entries in one JSON-RPC batch.
    #[arg(long, default_value_t = Limits::default().max_batch_len)]
    max_batch_len: usize,
    /// Subscriptions one connection may hold.
    #[arg(long, default_value_t = Limits::default().max_subscriptions_per_conn)]
    max_subscriptions_per_conn: usize,
    /// Longest topic or pattern, in bytes.
    #[arg(long, default_value_t = Limits::default().max_topic_bytes)]
    max_topic_bytes: usize,
    /// Deliveries queued for one subscriber; beyond it the subscriber is skipped (overloaded).
    #[arg(long, default_value_t = Limits::default().max_pending_per_subscriber)]
    max_pending_per_subscriber: usize,
    /// `sendMessage` requests one connection may have awaiting their result.
    #[arg(long, default_value_t = Limits::default().max_pending_per_publisher)]
    max_pending_per_publisher: usize,
    /// Publishes of one connection still in their chains before the bus stops reading it
    /// (backpressure; reading resumes at half).
    #[arg(long, default_value_t = Limits::default().max_backlog_per_publisher)]
    max_backlog_per_publisher: usize,
    /// Deepest nesting a payload may have; deeper is refused (-32005), never forwarded.
    #[arg(long, default_value_t = Limits::default().max_payload_depth)]
    max_payload_depth: usize,
    /// Accept any JSON value as a payload, not only objects (reference subscribers require
    /// objects: use only if every subscriber accepts anything).
    #[arg(long)]
    any_payload: bool,
    /// Per-address connection limits (the same flags in every reference server).
    #[command(flatten)]
    address: crate::common::AddressLimits,
}

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Args {
    /// The bus configuration these flags describe: the flags fill a `[bus]` section of the
    /// configuration file (the rest at its defaults), which makes the `BusConfig` exactly as
    /// `agentwire serve` does.
    fn bus_config(&self) -> BusConfig {
        BusSection {
            server_id: self.server_id.clone(),
            match_mode: match self.match_mode {
                Mode::Glob => BusMatchMode::Glob,
                Mode::Prefix => BusMatchMode::Prefix,
            },
            payload: if self.any_payload {
                BusPayload::Any
            } else {
                BusPayload::Object
            },
            delivery_timeout_ms: self.delivery_timeout_ms,
            initialize_timeout_secs: self.initialize_timeout,
            max_in_flight_per_subscriber: self.max_in_flight_per_subscriber,
            deliver_to_publisher: self.deliver_to_publisher,
            max_connections: self.max_connections,
            max_message_bytes: self.max_message_bytes,
            max_batch_len: self.max_batch_len,
            max_subscriptions_per_conn: self.max_subscriptions_per_conn,
            max_topic_bytes: self.max_topic_bytes,
            max_pending_per_subscriber: self.max_pending_per_subscriber,
            max_pending_per_publisher: self.max_pending_per_publisher,
            max_backlog_per_publisher: self.max_backlog_per_publisher,
            max_payload_depth: self.max_payload_depth,
            ..BusSection::default()
        }
        .bus_config()
    }
}

/// Runs the `bus_server` command, as `cargo run --example bus_server` does.
pub async fn main() -> ExitCode {
    crate::common::init_tracing("info");
    run(Args::parse()).await
}

/// Runs the command with `args`, as `main` does after parsing them (the `agentwire`
/// binary's subcommand calls it with the same flags); installs no tracing subscriber.
pub async fn run(args: Args) -> ExitCode {
    crate::common::exit_code("bus_server", body(args).await.map_err(Into::into))
}

async fn body(args: Args) -> std::io::Result<()> {
    args.address.install();
    let cfg = args.bus_config();
    tracing::info!(
        match_mode = ?cfg.match_mode,
        delivery_timeout = ?cfg.delivery_timeout,
        limits = ?cfg.limits,
        "starting bus"
    );
    let mut log = EventLog::new();
    let app = bus::server_app::start(&args.listen, cfg, move |ev| log.log(ev)).await?;
    let server_id = app
        .handle
        .call(|b, _| b.server_id().to_owned())
        .await
        .unwrap_or_default();
    tracing::info!("bus {server_id} listening on {}", app.url());
    let _ = tokio::signal::ctrl_c().await;
    tracing::info!("shutting down (clients get close 1001)");
    app.server.shutdown().await;
    Ok(())
}

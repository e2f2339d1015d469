//! The `relay_server` command: its flags and its `main`. `examples/relay_server.rs` is the binary,
//! and its documentation says what the command does and how to run it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::config::{RelaySection, RelaySync};
use crate::relay;
use agentwire::agent_relay::{Limits, RateLimit, RelayConfig, ENDPOINT_PATH};
use clap::{Parser, ValueEnum};
use relay::log_writer::{SyncPolicy, DEFAULT_LOG_DIR};
use relay::server_app::EventLog;

/// When the study log is `fsync`ed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum SyncArg {
    /// Before each `session.ended` is forwarded, and when a session's file is closed.
    SessionEnd,
    /// After every record as well.
    EveryRecord,
}

/// Reference agent-relay server.
#[derive(Parser, Debug)]
#[command(name = "agentwire", version)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:3000")]
    listen: String,
    /// Directory of the study log (one `<sessionId>.jsonl` per study session, `s-….jsonl`, and
    /// one per relay session for the records outside a study session); created if missing.
    #[arg(long, default_value = DEFAULT_LOG_DIR)]
    log_dir: PathBuf,
    /// When the study log is synced to disk.
    #[arg(long, value_enum, default_value_t = SyncArg::SessionEnd)]
    sync: SyncArg,
    /// Greet every connection with `relay.hello`, as the reference relay.
    #[arg(long, action = clap::ArgAction::Set, default_value_t = RelayConfig::default().hello)]
    hello: bool,
    /// Send hosts `relay.presence` when their agents change, as the reference relay.
    #[arg(long, action = clap::ArgAction::Set, default_value_t = RelayConfig::default().presence)]
    presence: bool,
    /// Accept messages without `v` (a wrong `v` is refused either way).
    #[arg(long)]
    allow_missing_version: bool,
    /// Seconds a connection has to send `relay.join` (0: wait forever, as the reference).
    #[arg(long, default_value_t = secs(RelayConfig::default().join_timeout))]
    join_timeout: u64,
    /// Seconds an agent request is remembered awaiting the host's reply (0: until answered).
    #[arg(long, default_value_t = secs(RelayConfig::default().pending_timeout))]
    pending_timeout: u64,
    /// Connections served at once; one more gets LIMIT_EXCEEDED and close 1013.
    #[arg(long, default_value_t = Limits::default().max_connections)]
    max_connections: usize,
    /// Sessions at once.
    #[arg(long, default_value_t = Limits::default().max_sessions)]
    max_sessions: usize,
    /// Agents in one session.
    #[arg(long, default_value_t = Limits::default().max_agents_per_session)]
    max_agents_per_session: usize,
    /// Largest message body in bytes.
    #[arg(long, default_value_t = Limits::default().max_message_bytes)]
    max_message_bytes: usize,
    /// Requests one agent may have awaiting the host's reply.
    #[arg(long, default_value_t = Limits::default().max_pending_per_agent)]
    max_pending_per_agent: usize,
    /// Longest `id`, in bytes.
    #[arg(long, default_value_t = Limits::default().max_id_bytes)]
    max_id_bytes: usize,
    /// Longest `sessionId`, in bytes.
    #[arg(long, default_value_t = Limits::default().max_session_id_bytes)]
    max_session_id_bytes: usize,
    /// Longest agent name, in bytes (longer names are cut).
    #[arg(long, default_value_t = Limits::default().max_name_bytes)]
    max_name_bytes: usize,
    /// Messages per second per connection (0: no rate limit).
    #[arg(long, default_value_t = RateLimit::default().per_second)]
    rate_per_second: u32,
    /// Messages a connection may send at once after a quiet period.
    #[arg(long, default_value_t = RateLimit::default().burst)]
    rate_burst: u32,
    /// Deepest JSON nesting of a message (the envelope counts as one level); deeper ones are
    /// refused, neither forwarded nor logged.
    #[arg(long, default_value_t = Limits::default().max_json_depth)]
    max_json_depth: usize,
    /// Study-log bytes per relay session until its next `session.ended` (0: no cap).
    #[arg(long, default_value_t = Limits::default().max_log_bytes_per_session.unwrap_or(0))]
    max_log_bytes_per_session: u64,
    /// Per-address connection limits (the same flags in every reference server).
    #[command(flatten)]
    address: crate::common::AddressLimits,
}

fn secs(d: Option<Duration>) -> u64 {
    d.map_or(0, |d| d.as_secs())
}

impl Args {
    /// The `[relay]` section these flags describe (the rest at its defaults): the relay and
    /// its study log are configured exactly as `agentwire serve` configures them.
    fn section(&self) -> RelaySection {
        RelaySection {
            log_dir: self.log_dir.clone(),
            sync: match self.sync {
                SyncArg::SessionEnd => RelaySync::SessionEnd,
                SyncArg::EveryRecord => RelaySync::EveryRecord,
            },
            hello: self.hello,
            presence: self.presence,
            allow_missing_version: self.allow_missing_version,
            join_timeout_secs: self.join_timeout,
            pending_timeout_secs: self.pending_timeout,
            max_connections: self.max_connections,
            max_sessions: self.max_sessions,
            max_agents_per_session: self.max_agents_per_session,
            max_message_bytes: self.max_message_bytes,
            max_pending_per_agent: self.max_pending_per_agent,
            max_id_bytes: self.max_id_bytes,
            max_session_id_bytes: self.max_session_id_bytes,
            max_name_bytes: self.max_name_bytes,
            rate_per_second: self.rate_per_second,
            rate_burst: self.rate_burst,
            max_json_depth: self.max_json_depth,
            max_log_bytes_per_session: self.max_log_bytes_per_session,
            ..RelaySection::default()
        }
    }

    fn relay_config(&self) -> RelayConfig {
        self.section().relay_config()
    }

    fn sync(&self) -> SyncPolicy {
        self.section().sync_policy()
    }
}

/// Runs the `relay_server` command, as `cargo run --example relay_server` does.
pub async fn main() -> ExitCode {
    crate::common::init_tracing("info");
    run(Args::parse()).await
}

/// Runs the command with `args`, as `main` does after parsing them (the `agentwire`
/// binary's subcommand calls it with the same flags); installs no tracing subscriber.
pub async fn run(args: Args) -> ExitCode {
    crate::common::exit_code("relay_server", body(args).await.map_err(Into::into))
}

async fn body(args: Args) -> std::io::Result<()> {
    args.address.install();
    let cfg = args.relay_config();
    tracing::info!(
        log_dir = %args.log_dir.display(),
        sync = ?args.sync,
        limits = ?cfg.limits,
        "starting relay"
    );
    let mut log = EventLog::new();
    let app = relay::server_app::start(&args.listen, cfg, &args.log_dir, args.sync(), move |ev| {
        log.log(ev)
    })
    .await?;
    tracing::info!(
        "relay listening on {} (other paths than {ENDPOINT_PATH} get 404); study log in {}",
        app.url(),
        app.log_dir.display()
    );
    let _ = tokio::signal::ctrl_c().await;
    tracing::info!("shutting down (peers get close 1001; session logs are synced)");
    app.shutdown().await;
    Ok(())
}

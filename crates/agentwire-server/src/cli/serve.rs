//! `agentwire serve` and `agentwire config`: the server from a configuration file, and the
//! complete commented default file.
//!
//! The configuration is resolved in this order, later winning: the file given with
//! `--config` (else the built-in defaults), the `AGENTWIRE__SECTION__KEY` environment
//! variables, the `--set KEY=VALUE` flags, then `--log-format`. A bad configuration is
//! reported (naming the key, and the line when it came from the file) before anything binds,
//! with exit code 2. Its `[runtime]` section picks the tokio runtime the server runs on, so
//! the binary resolves it first before any runtime exists, builds that runtime
//! ([`runtime_for`](super::agentwire::runtime_for)) and runs [`serve`] in it, which resolves
//! it again. Once every listener is bound, one line per listener, protocol and the
//! admin listener goes to stdout (`listening name=main addr=127.0.0.1:8080 tls=false`,
//! `serving protocol=bus url=ws://127.0.0.1:8080/bus`, `admin addr=127.0.0.1:9090`); the
//! server then runs until SIGINT or SIGTERM, stops gracefully and exits 0 (a second signal
//! exits at once with 130 or 143; see [`crate::gateway`]).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};

use crate::config::{self, Config};

/// The exit code of a configuration that cannot be used (as clap's for a bad command line).
const BAD_CONFIG: u8 = 2;

/// `agentwire serve`.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// The configuration file (TOML; `agentwire config defaults` prints every key with its
    /// default). Without it, the built-in defaults: every protocol on 127.0.0.1:8080.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Resolve and validate the configuration (file, environment, --set), print `config
    /// ok` and exit 0; a bad one prints its error and exits 2. Nothing binds.
    #[arg(long)]
    check: bool,
    /// Override one setting: `KEY=VALUE`, the key a dotted path (`bus.max_message_bytes=
    /// 65536`, `listener.0.listen="0.0.0.0:8080"`), the value TOML (a bare word is a
    /// string). Repeatable; wins over the file and the environment.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// How logs are written to stderr (wins over `[log] format`).
    #[arg(long, value_enum, value_name = "FORMAT")]
    log_format: Option<LogFormatArg>,
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormatArg {
    /// Human-readable text, one event per line (colours only on a terminal).
    Text,
    /// One JSON object per line.
    Json,
}

/// `agentwire config`.
#[derive(clap::Args, Debug)]
pub struct ConfigArgs {
    /// What to do.
    #[command(subcommand)]
    command: ConfigCommand,
}

/// `agentwire config ...`.
#[derive(Subcommand, Debug)]
enum ConfigCommand {
    /// Prints the complete default configuration file, every key commented (`agentwire
    /// config defaults > agentwire.toml`).
    Defaults,
}

impl ServeArgs {
    /// The configuration these flags describe, with the process's environment.
    fn resolve(&self) -> Result<Config, config::ConfigError> {
        let mut sets = self.sets.clone();
        if let Some(format) = self.log_format {
            let name = match format {
                LogFormatArg::Text => "text",
                LogFormatArg::Json => "json",
            };
            sets.push(format!("log.format=\"{name}\""));
        }
        Config::resolve(self.config.as_deref(), config::environment(), &sets)
    }
}

/// The `[runtime]` section `args` resolve to, read before any runtime exists; the default
/// section when the configuration cannot be resolved ([`serve`] then reports why).
pub(crate) fn runtime(args: &ServeArgs) -> config::Runtime {
    args.resolve().map(|c| c.runtime).unwrap_or_default()
}

/// Runs `agentwire serve`: installs the configured logging itself, and logs the runtime it
/// runs on (the binary builds it from `[runtime]`).
pub async fn serve(args: ServeArgs) -> ExitCode {
    let config = match args.resolve() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("agentwire serve: {e}");
            return ExitCode::from(BAD_CONFIG);
        }
    };
    if args.check {
        println!("config ok");
        return ExitCode::SUCCESS;
    }
    if let Err(e) = crate::logging::init(config.log.format, &config.log.level) {
        eprintln!("agentwire serve: {e}");
        return ExitCode::from(BAD_CONFIG);
    }
    let handle = tokio::runtime::Handle::current();
    let flavor = match handle.runtime_flavor() {
        tokio::runtime::RuntimeFlavor::CurrentThread => config::RuntimeFlavor::CurrentThread,
        _ => config::RuntimeFlavor::MultiThread,
    };
    tracing::info!(%flavor, workers = handle.metrics().num_workers(), "runtime");
    match crate::gateway::serve(&config).await {
        Ok(signal) => {
            tracing::info!("stopped after {}", signal.name());
            ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("agentwire serve: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `agentwire config`.
pub fn config(args: ConfigArgs) -> ExitCode {
    match args.command {
        ConfigCommand::Defaults => {
            print!("{}", config::defaults_toml());
            ExitCode::SUCCESS
        }
    }
}

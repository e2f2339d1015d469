//! The `agentwire` command: its subcommands and its `main`. `src/main.rs` is the binary.
//!
//! The client subcommands are the example commands with the same flags (one implementation:
//! `agentwire bus publish` runs [`bus_client`], `agentwire relay agent`
//! runs [`relay_agent`], ...), and `agentwire PROTOCOL server` runs that
//! protocol's single reference server with its example's flags.
//!
//! Every subcommand runs on a multi-thread tokio runtime except `serve`, which runs on the
//! runtime its configuration's `[runtime]` section asks for ([`runtime_for`]).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use super::{
    bus_client, bus_server, chopsticks_agent, chopsticks_controller, llmrtc_client, llmrtc_server,
    mcpw_agent, mcpw_server, movie_host, relay_agent, relay_log, relay_server,
};

/// Where `agentwire bus ...` connects by default: `agentwire serve`'s bus with no
/// configuration file (the example commands keep their own servers' defaults).
pub const BUS_URL: &str = "ws://127.0.0.1:8080/bus";
/// Where `agentwire chopsticks agent` connects by default (`agentwire serve`'s defaults).
pub const CHOPSTICKS_URL: &str = "ws://127.0.0.1:8080/chopsticks";
/// Where `agentwire mcpw agent` connects by default (`agentwire serve`'s defaults).
pub const MCPW_URL: &str = "ws://127.0.0.1:8080/ws";
/// Where `agentwire llmrtc client` connects by default (`agentwire serve`'s defaults).
pub const LLMRTC_URL: &str = "ws://127.0.0.1:8080/llmrtc";
/// Where `agentwire relay agent|host` connect by default (`agentwire serve`'s defaults).
pub const RELAY_URL: &str = "ws://127.0.0.1:8080/agent/ws";

/// The agentwire server: the reference servers of the five agentwire protocols (JSON-RPC
/// bus, Chopsticks, MCPW, llmrtc, agent relay) in one process, their clients, and a demo of
/// all five.
#[derive(Parser, Debug)]
#[command(name = "agentwire", version, propagate_version = true)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// An `agentwire` subcommand.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Runs the servers a configuration file describes (by default all five on
    /// 127.0.0.1:8080, the admin listener on 127.0.0.1:9090) until SIGINT or SIGTERM.
    Serve(super::serve::ServeArgs),
    /// The configuration file: `agentwire config defaults` prints every key, commented.
    Config(super::serve::ConfigArgs),
    /// The five servers on one port in one process, and a scripted client of each against
    /// them: a readable transcript of each protocol's story.
    Demo(super::demo::Args),
    /// JSON-RPC bus clients (publish, subscribe, ping) and the bus server alone.
    #[command(mut_arg("url", |a| a.default_value(BUS_URL)))]
    Bus(BusArgs),
    /// The Chopsticks mock music agent and the controller alone.
    Chopsticks(ChopsticksArgs),
    /// The MCPW reference agent and the orchestrator alone.
    Mcpw(McpwArgs),
    /// The llmrtc reference client and the llmrtc server alone.
    Llmrtc(LlmrtcArgs),
    /// The agent relay's booking agent, movie host, study-log checker and the relay alone.
    Relay(RelayArgs),
}

/// `agentwire bus`.
#[derive(clap::Args, Debug)]
pub struct BusArgs {
    /// Where and as whom a client connects (client subcommands only).
    #[command(flatten)]
    pub connection: bus_client::Connection,
    /// What to run.
    #[command(subcommand)]
    pub command: BusCommand,
}

/// `agentwire bus ...`.
#[derive(Subcommand, Debug)]
pub enum BusCommand {
    /// A client command (`subscribe`, `publish`, `ping`).
    #[command(flatten)]
    Client(bus_client::Command),
    /// Runs the JSON-RPC bus server alone (the `bus_server` example's flags).
    Server(bus_server::Args),
}

/// `agentwire chopsticks`.
#[derive(clap::Args, Debug)]
pub struct ChopsticksArgs {
    /// What to run.
    #[command(subcommand)]
    pub command: ChopsticksCommand,
}

/// `agentwire chopsticks ...`.
#[derive(Subcommand, Debug)]
pub enum ChopsticksCommand {
    /// A mock Chopsticks music agent (the `chopsticks_agent` example's flags).
    #[command(mut_arg("url", |a| a.default_value(CHOPSTICKS_URL)))]
    Agent(chopsticks_agent::Args),
    /// Runs the Chopsticks controller alone (the `chopsticks_controller` example's flags).
    Server(chopsticks_controller::Args),
}

/// `agentwire mcpw`.
#[derive(clap::Args, Debug)]
pub struct McpwArgs {
    /// What to run.
    #[command(subcommand)]
    pub command: McpwCommand,
}

/// `agentwire mcpw ...`.
#[derive(Subcommand, Debug)]
pub enum McpwCommand {
    /// The reference MCPW agent (the `mcpw_agent` example's flags).
    #[command(mut_arg("url", |a| a.default_value(MCPW_URL)))]
    Agent(mcpw_agent::Args),
    /// Runs the MCPW orchestrator alone (the `mcpw_server` example's flags).
    Server(mcpw_server::Args),
}

/// `agentwire llmrtc`.
#[derive(clap::Args, Debug)]
pub struct LlmrtcArgs {
    /// What to run.
    #[command(subcommand)]
    pub command: LlmrtcCommand,
}

/// `agentwire llmrtc ...`.
#[derive(Subcommand, Debug)]
pub enum LlmrtcCommand {
    /// The reference llmrtc client (the `llmrtc_client` example's flags).
    #[command(mut_arg("url", |a| a.default_value(LLMRTC_URL)))]
    Client(llmrtc_client::Args),
    /// Runs the llmrtc server alone (the `llmrtc_server` example's flags).
    Server(crate::llmrtc::server_cli::ServerArgs),
}

/// `agentwire relay`.
#[derive(clap::Args, Debug)]
pub struct RelayArgs {
    /// What to run.
    #[command(subcommand)]
    pub command: RelayCommand,
}

/// `agentwire relay ...`.
#[derive(Subcommand, Debug)]
pub enum RelayCommand {
    /// An agent that books movie tickets through the relay (the `relay_agent` example's
    /// flags).
    #[command(mut_arg("url", |a| a.default_value(RELAY_URL)))]
    Agent(relay_agent::Args),
    /// The movie-booking UI host (the `movie_host` example's flags).
    #[command(mut_arg("url", |a| a.default_value(RELAY_URL)))]
    Host(movie_host::Args),
    /// Validates and summarises study logs (the `relay_log` example's flags).
    Log(relay_log::Args),
    /// Runs the agent relay alone (the `relay_server` example's flags).
    Server(relay_server::Args),
}

impl Command {
    /// The log filter when `RUST_LOG` is unset: servers log what they do, clients only
    /// warnings (their output is on stdout).
    fn default_log_level(&self) -> &'static str {
        match self {
            Self::Bus(BusArgs {
                command: BusCommand::Server(_),
                ..
            })
            | Self::Mcpw(McpwArgs {
                command: McpwCommand::Server(_),
            })
            | Self::Llmrtc(LlmrtcArgs {
                command: LlmrtcCommand::Server(_),
            })
            | Self::Relay(RelayArgs {
                command: RelayCommand::Server(_) | RelayCommand::Host(_),
            }) => "info",
            _ => "warn",
        }
    }
}

/// Runs the `agentwire` command: parses the command line (a bad one prints clap's error and
/// exits 2), installs logging (`serve` installs the configured one itself), builds the
/// subcommand's runtime ([`runtime_for`]) and runs the subcommand in it.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve(_)) {
        crate::common::init_tracing(cli.command.default_log_level());
    }
    match runtime_for(&cli.command) {
        Ok(rt) => rt.block_on(run(cli.command)),
        Err(e) => {
            eprintln!("agentwire: starting the runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The tokio runtime `command` runs on: for `serve`, the one its configuration's `[runtime]`
/// section asks for (resolved from the same file, environment and flags `serve` reads;
/// a configuration that cannot be resolved gets the default runtime, and `serve` then
/// reports its error with exit code 2); for every other subcommand the default
/// multi-thread runtime. What the `agentwire` binary and the load generator both run
/// [`run`] on. Fails only when the operating system refuses the runtime's threads or its
/// epoll instance.
pub fn runtime_for(command: &Command) -> std::io::Result<tokio::runtime::Runtime> {
    let section = match command {
        Command::Serve(args) => super::serve::runtime(args),
        _ => crate::config::Runtime::default(),
    };
    section.build()
}

/// Runs one subcommand (logging is the caller's).
pub async fn run(command: Command) -> ExitCode {
    match command {
        Command::Serve(args) => super::serve::serve(args).await,
        Command::Config(args) => super::serve::config(args),
        Command::Demo(args) => super::demo::run(args).await,
        Command::Bus(BusArgs {
            connection,
            command,
        }) => match command {
            BusCommand::Client(c) => bus_client::run(connection, c).await,
            BusCommand::Server(_) if !connection.is_default() => {
                eprintln!(
                    "agentwire bus server: --url, --client-id, --timeout and --ca are client \
                     flags; the server takes --listen and its own (see --help)"
                );
                ExitCode::from(2)
            }
            BusCommand::Server(args) => bus_server::run(args).await,
        },
        Command::Chopsticks(ChopsticksArgs { command }) => match command {
            ChopsticksCommand::Agent(args) => chopsticks_agent::run(args).await,
            ChopsticksCommand::Server(args) => chopsticks_controller::run(args).await,
        },
        Command::Mcpw(McpwArgs { command }) => match command {
            McpwCommand::Agent(args) => mcpw_agent::run(args).await,
            McpwCommand::Server(args) => mcpw_server::run(args).await,
        },
        Command::Llmrtc(LlmrtcArgs { command }) => match command {
            LlmrtcCommand::Client(args) => llmrtc_client::run(args).await,
            LlmrtcCommand::Server(args) => llmrtc_server::run(args).await,
        },
        Command::Relay(RelayArgs { command }) => match command {
            RelayCommand::Agent(args) => relay_agent::run(args).await,
            RelayCommand::Host(args) => movie_host::run(args).await,
            RelayCommand::Log(args) => relay_log::run(args),
            RelayCommand::Server(args) => relay_server::run(args).await,
        },
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::{runtime_for, Cli};

    #[test]
    fn the_command_tree_is_consistent() {
        Cli::command().debug_assert();
    }

    /// The default `--url` of the client subcommand at `path`.
    fn default_url(path: &[&str]) -> String {
        let mut cmd = Cli::command();
        cmd.build();
        let mut sub = &cmd;
        for name in path {
            sub = sub.find_subcommand(name).expect("subcommand");
        }
        let url = sub
            .get_arguments()
            .find(|a| a.get_id() == "url")
            .expect("--url");
        url.get_default_values()[0].to_string_lossy().into_owned()
    }

    /// The runtime `agentwire ARGS...` runs on.
    fn flavor_of(args: &[&str]) -> tokio::runtime::RuntimeFlavor {
        let cli = Cli::try_parse_from(std::iter::once("agentwire").chain(args.iter().copied()))
            .expect("a valid command line");
        runtime_for(&cli.command)
            .expect("runtime")
            .handle()
            .runtime_flavor()
    }

    #[test]
    fn serve_runs_on_the_runtime_its_configuration_asks_for() {
        use tokio::runtime::RuntimeFlavor::{CurrentThread, MultiThread};
        assert_eq!(flavor_of(&["serve"]), MultiThread);
        let current = ["serve", "--set", "runtime.flavor=current-thread"];
        assert_eq!(flavor_of(&current), CurrentThread);
        // A bad configuration gets the default runtime; `serve` reports it there.
        let bad = ["serve", "--set", "runtime.flavor=fast"];
        assert_eq!(flavor_of(&bad), MultiThread);
        // The other subcommands always run on the multi-thread runtime.
        assert_eq!(flavor_of(&["config", "defaults"]), MultiThread);
    }

    #[test]
    fn clients_connect_to_agentwire_serve_with_no_configuration_by_default() {
        let config = crate::config::Config::default();
        let base = format!("ws://{}", config.listener[0].listen);
        for (path, want) in [
            (&["bus", "ping"][..], config.bus.path.as_str()),
            (
                &["chopsticks", "agent"][..],
                config.chopsticks.path.as_str(),
            ),
            (&["mcpw", "agent"][..], config.mcpw.path.as_str()),
            (&["llmrtc", "client"][..], config.llmrtc.path.as_str()),
            (&["relay", "agent"][..], config.relay.path.as_str()),
            (&["relay", "host"][..], config.relay.path.as_str()),
        ] {
            assert_eq!(default_url(path), format!("{base}{want}"), "{path:?}");
        }
    }
}

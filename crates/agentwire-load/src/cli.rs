//! The command line: `agentwire-load [SCENARIO|all]... [--smoke] [options] [--json]`.
//!
//! `agentwire-load agentwire ARGS...` (not listed in `--help`) is the `agentwire` command
//! itself, on the runtime the `agentwire` binary would build for it
//! ([`runtime_for`](agentwire_server::cli::agentwire::runtime_for): `serve`'s from its
//! `[runtime]` section): the load generator starts the server it measures that way, and
//! `--server-set runtime.flavor=current-thread` measures the current-thread runtime.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use crate::options::Options;
use crate::registry::{all, find};
use crate::report::{table, Report};
use crate::runner::{run, Target};
use crate::scenario::Scenario;
use crate::server::AgentwireProgram;

/// Load generator for the agentwire server, with NATS and Redis baselines in the same run.
#[derive(Parser, Debug)]
#[command(name = "agentwire-load", version)]
pub struct Args {
    /// Scenarios to run in order (`all`: every one; `--list` names them).
    pub scenarios: Vec<String>,
    /// Lists the scenarios and exits.
    #[arg(long)]
    pub list: bool,
    /// A short bounded run of every scenario named (of all with none named): 300 ms, at most
    /// 2,000 messages, small counts; the other options are ignored.
    #[arg(long)]
    pub smoke: bool,
    /// Prints one JSON object per scenario instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Drive a server already running at this address (a `ws://` URL, or HOST:PORT for the
    /// NATS and Redis scenarios) instead of starting one.
    #[arg(long, value_name = "ADDRESS")]
    pub server: Option<String>,
    /// With --server: the server's process id, read in /proc for the CPU figures.
    #[arg(long, value_name = "PID", requires = "server")]
    pub server_pid: Option<u32>,
    /// Start the agentwire server from this `agentwire` binary (default: this executable
    /// runs the same `agentwire serve` code).
    #[arg(long, value_name = "PATH", conflicts_with = "server")]
    pub agentwire_bin: Option<PathBuf>,
    /// A setting of the agentwire server it starts, passed to `agentwire serve` as `--set
    /// KEY=VALUE` after the load generator's own (so it wins): `--server-set
    /// runtime.flavor=current-thread`. Repeatable; checked before any run. The NATS, Redis
    /// and in-process scenarios ignore it.
    #[arg(
        long = "server-set",
        value_name = "KEY=VALUE",
        conflicts_with = "server"
    )]
    pub server_settings: Vec<String>,
    /// The run's shape and bounds.
    #[command(flatten)]
    pub options: Options,
}

/// Parses the command line and runs it.
pub fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv.get(1).is_some_and(|a| a == "agentwire") {
        return agentwire(argv[1..].to_vec());
    }
    let args = Args::parse();
    if args.list {
        for s in all() {
            println!("{:<20} {:<13} {}", s.name, s.server.name(), s.about);
        }
        return ExitCode::SUCCESS;
    }
    let scenarios: Vec<Scenario> = match selected(&args.scenarios, args.smoke) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("agentwire-load: {e}");
            return ExitCode::from(2);
        }
    };
    let options = if args.smoke {
        Options::smoke()
    } else {
        args.options.clone()
    };
    if let Err(e) = check_server_settings(&args.server_settings) {
        eprintln!("agentwire-load: --server-set: {e}");
        return ExitCode::from(2);
    }
    let target = match (&args.server, &args.agentwire_bin) {
        (Some(address), _) => Target::Given {
            address: address.clone(),
            pid: args.server_pid,
        },
        (None, Some(bin)) => Target::Spawn(
            AgentwireProgram::Binary(bin.clone()).with_settings(args.server_settings.clone()),
        ),
        (None, None) => Target::Spawn(
            AgentwireProgram::ThisExecutable.with_settings(args.server_settings.clone()),
        ),
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("agentwire-load: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut reports: Vec<Report> = Vec::new();
    let mut failed = false;
    for s in &scenarios {
        match rt.block_on(run(s, &options, &target)) {
            Ok(r) => {
                if args.json {
                    println!("{}", r.to_json());
                }
                reports.push(r);
            }
            Err(e) => {
                eprintln!("agentwire-load: {}: {e}", s.name);
                failed = true;
            }
        }
    }
    if !args.json {
        print!("{}", table(&reports));
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn selected(names: &[String], smoke: bool) -> Result<Vec<Scenario>, crate::LoadError> {
    if names.is_empty() {
        return if smoke {
            Ok(all())
        } else {
            Err(crate::LoadError::Usage(
                "name a scenario, or `all` (`--list` names them)".into(),
            ))
        };
    }
    let mut v = Vec::new();
    for n in names {
        if n == "all" {
            v.extend(all());
        } else {
            v.push(find(n)?);
        }
    }
    Ok(v)
}

/// `settings` (`--server-set` entries) applied to `agentwire serve`'s defaults: an error
/// names the setting and what is wrong with it, before a server is started.
fn check_server_settings(settings: &[String]) -> Result<(), agentwire_server::config::ConfigError> {
    agentwire_server::config::Config::resolve(None, Vec::new(), settings).map(drop)
}

/// `agentwire-load agentwire ARGS...`: the `agentwire` command (what the server under load
/// runs), on the runtime the `agentwire` binary builds for it.
fn agentwire(argv: Vec<std::ffi::OsString>) -> ExitCode {
    use agentwire_server::cli::agentwire::{run, runtime_for, Cli};
    // `serve` installs its configured logging itself; the other subcommands run unlogged.
    let cli = Cli::parse_from(argv);
    match runtime_for(&cli.command) {
        Ok(rt) => rt.block_on(run(cli.command)),
        Err(e) => {
            eprintln!("agentwire: starting the runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::check_server_settings;

    #[test]
    fn server_settings_are_checked_against_the_server_configuration() {
        check_server_settings(&["runtime.flavor=current-thread".into()]).expect("a valid setting");
        check_server_settings(&[]).expect("none");
        let e = check_server_settings(&["runtime.flavor=fast".into()]).expect_err("no such flavor");
        assert_eq!(e.key(), Some("runtime.flavor"), "{e}");
        let e = check_server_settings(&["runtime.flavour=current-thread".into()])
            .expect_err("no such key");
        assert!(e.to_string().contains("runtime.flavour"), "{e}");
        let e = check_server_settings(&["runtime".into()]).expect_err("no value");
        assert!(e.to_string().contains("--set runtime"), "{e}");
    }
}

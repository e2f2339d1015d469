//! The `relay_demo` command: its flags and its `main`. `examples/relay_demo.rs` is the binary, and
//! its documentation says what the command does and how to run it. `agentwire demo` runs the
//! same story against the relay on its shared listener: [`relay::demo::server`], then
//! [`relay::demo::book`], then [`relay::demo::check`] and [`summary`].

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::relay;
use clap::Parser;
use relay::agent_app::Plan;
use relay::demo::Outcome;

use super::script::DemoError;

/// Relay + movie host + booking agent in one process.
#[derive(Parser, Debug)]
#[command(name = "agentwire", version)]
struct Args {
    /// Study-log directory, kept (default: a new directory under the system temp dir,
    /// removed when the demo exits).
    #[arg(long)]
    log_dir: Option<PathBuf>,
    /// Tickets to book, 1 to 10.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=10))]
    tickets: u64,
}

/// Runs the `relay_demo` command, as `cargo run --example relay_demo` does.
pub async fn main() -> ExitCode {
    crate::common::init_tracing("warn");
    let args = Args::parse();
    let (log_dir, temp) = match args.log_dir {
        Some(dir) => (dir, None),
        None => {
            let temp = TempLogDir::new("agentwire-relay-demo");
            (temp.path().to_owned(), Some(temp))
        }
    };
    let plan = Plan {
        tickets: args.tickets,
        ..Plan::default()
    };
    let print = printer();
    // Bounded: the demo runs in CI.
    let run = relay::demo::run(&log_dir, &plan, print);
    let outcome = match tokio::time::timeout(Duration::from_secs(60), run).await {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => {
            eprintln!("relay_demo failed: {e}");
            return ExitCode::FAILURE;
        }
        Err(_) => {
            eprintln!("relay_demo did not finish within 60 s");
            return ExitCode::FAILURE;
        }
    };
    match summary(&outcome, temp.is_some()) {
        Ok(()) => {
            println!("demo finished");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("relay_demo: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Prints each line of the story on stdout.
pub fn printer() -> relay::demo::Printer {
    Arc::new(|line| println!("{line}"))
}

/// Prints the booking, where its study log is (`temporary`: removed at exit) and the log's
/// check; an error if the check found the log inconsistent.
pub fn summary(outcome: &Outcome, temporary: bool) -> Result<(), DemoError> {
    let b = &outcome.booked;
    println!(
        "\nbooked {} ({}) in study session {} with {} tool calls",
        b.reference,
        b.booking["totalCents"]
            .as_u64()
            .map_or_else(String::new, |c| format!("{}.{:02} EUR", c / 100, c % 100)),
        b.session_id,
        b.tool_calls
    );
    if temporary {
        println!(
            "study log: {} (temporary, removed at exit; pass --log-dir to keep it)",
            outcome.log_path.display()
        );
    } else {
        println!("study log: {}", outcome.log_path.display());
    }
    println!("{}", outcome.report.render());
    if outcome.report.is_consistent() {
        Ok(())
    } else {
        Err("the study log is not consistent".into())
    }
}

/// A demo's own temp log directory, removed when the demo exits (whatever the outcome).
pub struct TempLogDir(PathBuf);

impl TempLogDir {
    /// `<system temp dir>/<prefix>-<process id>`.
    pub fn new(prefix: &str) -> Self {
        Self(std::env::temp_dir().join(format!("{prefix}-{}", std::process::id())))
    }

    /// The directory (created by whoever writes into it).
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempLogDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

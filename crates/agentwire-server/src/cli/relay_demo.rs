//! The `relay_demo` command: its flags and its `main`. `examples/relay_demo.rs` is the binary, and
//! its documentation says what the command does and how to run it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::relay;
use clap::Parser;
use relay::agent_app::Plan;

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
            let dir =
                std::env::temp_dir().join(format!("agentwire-relay-demo-{}", std::process::id()));
            (dir.clone(), Some(TempLogDir(dir)))
        }
    };
    let plan = Plan {
        tickets: args.tickets,
        ..Plan::default()
    };
    let print: relay::demo::Printer = Arc::new(|line| println!("{line}"));
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
    match &temp {
        Some(_) => println!(
            "study log: {} (temporary, removed at exit; pass --log-dir to keep it)",
            outcome.log_path.display()
        ),
        None => println!("study log: {}", outcome.log_path.display()),
    }
    println!("{}", outcome.report.render());
    if outcome.report.is_consistent() {
        println!("demo finished");
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The demo's own temp log directory, removed when the demo exits (whatever the outcome).
struct TempLogDir(PathBuf);

impl Drop for TempLogDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

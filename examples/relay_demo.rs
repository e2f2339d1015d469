//! The External Agent Protocol end to end in one process: the relay on 127.0.0.1 (a free
//! port), the movie host and an agent that books two tickets, over real sockets. Prints the
//! conversation as the agent sees it, what the host does, and the path and summary of the
//! study log the relay wrote. Exits 0 when the booking was made and the log checks out.
//!
//! ```text
//! cargo run --release --example relay_demo      # log in a temp directory, removed at exit
//! cargo run --release --example relay_demo -- --log-dir ./relay-logs   # kept
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use agentwire_apps::relay;
use clap::Parser;
use relay::agent_app::Plan;

/// Relay + movie host + booking agent in one process.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Study-log directory, kept (default: a new directory under the system temp dir,
    /// removed when the demo exits).
    #[arg(long)]
    log_dir: Option<PathBuf>,
    /// Tickets to book, 1 to 10.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=10))]
    tickets: u64,
}

#[tokio::main]
async fn main() -> ExitCode {
    agentwire_apps::common::init_tracing("warn");
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

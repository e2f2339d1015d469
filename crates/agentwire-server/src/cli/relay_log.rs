//! The `relay_log` command: its flags and its `main`. `examples/relay_log.rs` is the binary, and
//! its documentation says what the command does and how to run it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::relay;
use clap::Parser;

/// Validates and summarises agent-relay study logs.
#[derive(Parser, Debug)]
#[command(name = "agentwire", version)]
pub struct Args {
    /// Log files, or directories whose `*.jsonl` files are checked.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

/// The files to check: `path` itself, or the `*.jsonl` files in it, sorted.
fn files(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(path)? {
        let p = entry?.path();
        if p.is_file() && p.extension().is_some_and(|e| e == "jsonl") {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

/// Runs the `relay_log` command, as `cargo run --example relay_log` does.
pub fn main() -> ExitCode {
    run(Args::parse())
}

/// Runs the command with `args`, as `main` does after parsing them (the `agentwire`
/// binary's subcommand calls it with the same flags).
pub fn run(args: Args) -> ExitCode {
    let (mut inconsistent, mut unreadable) = (0, 0);
    for path in &args.paths {
        let list = match files(path) {
            Ok(list) => list,
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                unreadable += 1;
                continue;
            }
        };
        for file in list {
            match relay::log_check::check_file(&file) {
                Ok(report) => {
                    println!("== {}\n{}\n", file.display(), report.render());
                    if !report.is_consistent() {
                        inconsistent += 1;
                    }
                }
                Err(e) => {
                    eprintln!("{}: {e}", file.display());
                    unreadable += 1;
                }
            }
        }
    }
    if unreadable > 0 {
        ExitCode::from(2)
    } else if inconsistent > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

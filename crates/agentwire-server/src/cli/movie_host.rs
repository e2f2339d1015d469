//! The `movie_host` command: its flags and its `main`. `examples/movie_host.rs` is the binary, and
//! its documentation says what the command does and how to run it.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::relay;
use agentwire::agent_relay::{HostConfig, DEFAULT_SESSION};
use clap::Parser;
use relay::host_app::{describe, newest_study_session, MovieHost};
use relay::log_name::file_name;
use relay::log_writer::DEFAULT_LOG_DIR;
use relay::participant;

/// A movie-booking UI host joining an agent relay.
#[derive(Parser, Debug)]
#[command(name = "agentwire", version)]
pub struct Args {
    /// The relay's endpoint.
    #[arg(long, default_value = "ws://127.0.0.1:3000/agent/ws")]
    url: String,
    /// The relay session to serve.
    #[arg(long, default_value = DEFAULT_SESSION)]
    relay_session: String,
    /// The relay's study-log directory (for the `logFile` of `session.ended`, and to number
    /// study sessions after the newest log file in it).
    #[arg(long, default_value = DEFAULT_LOG_DIR)]
    log_dir: PathBuf,
    /// `wss://` settings.
    #[command(flatten)]
    tls: super::client_tls::TlsFlags,
}

/// Runs the `movie_host` command, as `cargo run --example movie_host` does.
pub async fn main() -> ExitCode {
    crate::common::init_tracing("info");
    run(Args::parse()).await
}

/// Runs the command with `args`, as `main` does after parsing them (the `agentwire`
/// binary's subcommand calls it with the same flags); installs no tracing subscriber.
pub async fn run(args: Args) -> ExitCode {
    crate::common::exit_code("movie_host", body(args).await)
}

async fn body(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    args.tls.install(None)?;
    // The relay writes a study session's records to `<log dir>/<sessionId>.jsonl`; number
    // after the newest such file, so a restart never reuses an id (and its file).
    let last = newest_study_session(&args.log_dir);
    let log_dir = args.log_dir.clone();
    let config = HostConfig::default().with_relay_session(args.relay_session.clone());
    let host = MovieHost::start_resuming(
        &args.url,
        config,
        last.as_deref(),
        move |study_session| log_dir.join(file_name(study_session)).display().to_string(),
        |ev| match describe(ev) {
            Some(line) => tracing::info!("{line}"),
            None => tracing::debug!("{ev:?}"),
        },
    )?;
    tracing::info!(
        "movie host connecting to {} (relay session {:?}); type help for the participant's \
         commands (UI actions such as /select, /filter, /next reach the agents as \
         state.updated from the user), any other line is a chat message; Ctrl-C to stop",
        args.url,
        args.relay_session
    );
    // Ctrl-C is watched from the start, so it is never missed between two lines.
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut stdin = crate::common::spawn_line_reader(std::io::BufReader::new(std::io::stdin()));
    loop {
        tokio::select! {
            line = stdin.recv() => match line {
                Some(line) => match participant::parse(&line) {
                    Ok(Some(command)) => {
                        let shown = host.run(command).await;
                        println!("{shown}");
                    }
                    Ok(None) => {}
                    Err(hint) => println!("{hint}"),
                },
                // stdin closed (e.g. run in the background): keep serving until Ctrl-C.
                None => {
                    let _ = (&mut ctrl_c).await;
                    break;
                }
            },
            _ = &mut ctrl_c => break,
        }
    }
    tracing::info!("Ctrl-C: shutting down");
    host.shutdown().await;
    Ok(())
}

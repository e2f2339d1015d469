//! A Rust UI host for the External Agent Protocol (mvp-0.2): the movie-booking flow of the
//! spec era over in-memory data, joining the relay as `host`.
//!
//! Stages movie → theater → date → time → seat → ticket → confirm; tools `filter`, `sort`,
//! `highlight`, `augment`, `clearModification`, `select`, `setQuantity`, `next`, `prev`,
//! `postMessage`, each offered on the stages of the table in `relay/movie/schema.rs` (e.g.
//! `setQuantity` only on the ticket stage, no `prev` on the first; `next` on the confirm stage
//! places the booking). The `Host` machine of agent-relay-proto checks every call (`reason`
//! required, UNKNOWN_TOOL, INVALID_PARAMS naming the parameter) before the movie UI runs it.
//!
//! Each line typed on stdin is sent to the agents as the participant's `user.message`. The
//! host keeps no log of its own: `session.ended` reports the relay's file for the relay
//! session, `<--log-dir>/<session>.jsonl` (the relay syncs it before forwarding
//! `session.ended`), so give it the relay's `--log-dir`.
//!
//! ```text
//! cargo run --example relay_server                      # terminal 1
//! cargo run --example movie_host -- --url ws://127.0.0.1:3000/agent/ws   # terminal 2
//! cargo run --example relay_agent                       # terminal 3
//! ```

use std::path::PathBuf;

use agentwire::agent_relay::{HostConfig, DEFAULT_SESSION};
use agentwire_apps::relay;
use clap::Parser;
use relay::host_app::{describe, MovieHost};
use relay::log_writer::{file_name, DEFAULT_LOG_DIR};
use tokio::sync::mpsc;

/// A movie-booking UI host joining an agent relay.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// The relay's endpoint.
    #[arg(long, default_value = "ws://127.0.0.1:3000/agent/ws")]
    url: String,
    /// The relay session to serve.
    #[arg(long, default_value = DEFAULT_SESSION)]
    relay_session: String,
    /// The relay's study-log directory (for the `logFile` of `session.ended`).
    #[arg(long, default_value = DEFAULT_LOG_DIR)]
    log_dir: PathBuf,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    agentwire_apps::common::init_tracing("info");
    let args = Args::parse();
    let log_file = args
        .log_dir
        .join(file_name(&args.relay_session))
        .display()
        .to_string();
    let config = HostConfig::default().with_relay_session(args.relay_session.clone());
    let host = MovieHost::start(
        &args.url,
        config,
        move |_| log_file.clone(),
        |ev| match describe(ev) {
            Some(line) => tracing::info!("{line}"),
            None => tracing::debug!("{ev:?}"),
        },
    )?;
    tracing::info!(
        "movie host connecting to {} (relay session {:?}); type a line to send it as the \
         participant's user.message, Ctrl-C to stop",
        args.url,
        args.relay_session
    );
    // Ctrl-C is watched from the start, so it is never missed between two lines.
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut stdin = stdin_lines();
    loop {
        tokio::select! {
            line = stdin.recv() => match line {
                Some(text) if !text.trim().is_empty() => {
                    let sent = host.handle.call(move |h, now| h.user_message(&text, now)).await;
                    match sent {
                        Ok(Ok(())) => tracing::info!("user.message sent"),
                        Ok(Err(e)) => tracing::warn!("user.message refused: {e}"),
                        Err(_) => break,
                    }
                }
                Some(_) => {}
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

/// Lines typed on stdin, read on a plain thread. tokio's own stdin reads on the runtime's
/// blocking pool, and the runtime waits for that read when `main` returns, so the program
/// would only stop after the next Enter; a plain thread does not hold the process.
fn stdin_lines() -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel(16);
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.blocking_send(line).is_err() {
                break;
            }
        }
    });
    rx
}

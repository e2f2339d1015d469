//! The `chopsticks_controller` command: its flags and its `main`.
//! `examples/chopsticks_controller.rs` is the binary, and its documentation says what the command
//! does and how to run it.

use std::process::ExitCode;
use std::time::Duration;

use crate::chopsticks;
use agentwire::chopsticks::ControllerConfig;
use chopsticks::controller_app::{Actor, COMMANDS, DEFAULT_ACTOR_USER_ID};
use clap::Parser;

/// Reference Chopsticks controller.
#[derive(Parser, Debug)]
#[command(name = "agentwire")]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8787")]
    listen: String,
    /// Runner secret every agent's hello must carry (unset: not checked).
    #[arg(long)]
    secret: Option<String>,
    /// Supported protocol versions (repeatable).
    #[arg(long = "supported-version", default_values_t = vec!["1.0.0".to_string()])]
    supported_versions: Vec<String>,
    /// Seconds a connection has to send its hello.
    #[arg(long, default_value_t = 8)]
    hello_timeout: u64,
    /// Seconds an agent has to answer a request.
    #[arg(long, default_value_t = 30)]
    request_timeout: u64,
    /// Seconds without a message after which an agent is dropped.
    #[arg(long, default_value_t = 45)]
    stale_after: u64,
    /// Acting user sent with every op as `actorUserId` (real agents refuse ops without one;
    /// give a Discord user who is in the voice channel).
    #[arg(long, default_value = DEFAULT_ACTOR_USER_ID)]
    actor_user_id: String,
    /// Admin token sent with every op as `adminToken` (the real agent's
    /// `DASHBOARD_ADMIN_TOKEN`, which skips its membership checks).
    #[arg(long)]
    admin_token: Option<String>,
    /// Per-address connection limits (the same flags in every reference server).
    #[command(flatten)]
    address: crate::common::AddressLimits,
}

/// Runs the `chopsticks_controller` command, as `cargo run --example chopsticks_controller` does.
pub async fn main() -> ExitCode {
    crate::common::init_tracing("warn");
    run(Args::parse()).await
}

/// Runs the command with `args`, as `main` does after parsing them (the `agentwire`
/// binary's subcommand calls it with the same flags); installs no tracing subscriber.
pub async fn run(args: Args) -> ExitCode {
    crate::common::exit_code(
        "chopsticks_controller",
        body(args).await.map_err(Into::into),
    )
}

async fn body(args: Args) -> std::io::Result<()> {
    args.address.install();
    let mut cfg = ControllerConfig::default()
        .with_supported_versions(args.supported_versions)
        .with_hello_timeout(Duration::from_secs(args.hello_timeout))
        .with_request_timeout(Duration::from_secs(args.request_timeout))
        .with_stale_after(Duration::from_secs(args.stale_after));
    if let Some(s) = args.secret {
        cfg = cfg.with_runner_secret(s);
    }
    let actor = Actor {
        user_id: args.actor_user_id,
        admin_token: args.admin_token,
    };
    let app = chopsticks::controller_app::start(&args.listen, cfg, |ev| {
        if let Some(line) = chopsticks::controller_app::event_json(ev) {
            println!("{line}");
        }
    })
    .await?
    .with_actor(actor);
    eprintln!(
        "chopsticks controller listening on ws://{}",
        app.local_addr()
    );
    eprintln!("commands: {COMMANDS}");

    // Stdin is read on a plain thread, so Ctrl-C ends the program at once even while a read
    // is blocked (tokio's stdin would keep the runtime alive until Enter).
    let mut lines = crate::common::spawn_line_reader(std::io::BufReader::new(std::io::stdin()));
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        let line = tokio::select! {
            line = lines.recv() => line,
            _ = &mut ctrl_c => break,
        };
        let Some(line) = line else {
            // Stdin closed: keep serving until Ctrl-C.
            let _ = (&mut ctrl_c).await;
            break;
        };
        tokio::select! {
            out = app.execute(&line) => {
                if !out.is_null() {
                    println!("{out}");
                }
            }
            _ = &mut ctrl_c => break,
        }
    }
    app.server.shutdown().await;
    Ok(())
}

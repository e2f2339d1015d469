//! The `llmrtc_server` command: its flags and its `main`. `examples/llmrtc_server.rs` is the
//! binary, and its documentation says what the command does and how to run it.

use crate::llmrtc;
use agentwire::llmrtc::ServerEvent;
use clap::Parser;
use llmrtc::providers::Providers;
use llmrtc::server_app;
use llmrtc::server_cli::ServerArgs;
use llmrtc::server_log;

/// Runs the `llmrtc_server` command, as `cargo run --example llmrtc_server` does.
pub async fn main() -> std::process::ExitCode {
    crate::common::init_tracing("info");
    crate::common::exit_code("llmrtc_server", run(ServerArgs::parse()).await)
}

async fn run(args: ServerArgs) -> Result<(), Box<dyn std::error::Error>> {
    args.address.install();
    let app = server_app::start(
        &args.listen,
        args.config()?,
        Providers::stand_ins(args.stt()?),
        args.pacing(),
        log_event,
    )
    .await
    .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    println!(
        "llmrtc server (offline stand-in STT/LLM/TTS) on {}",
        app.url()
    );
    tokio::signal::ctrl_c().await?;
    app.shutdown().await;
    Ok(())
}

fn log_event(ev: &ServerEvent) {
    if let Some(line) = server_log::describe(ev) {
        tracing::info!("{line}");
    }
}

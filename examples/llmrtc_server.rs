//! Reference llmrtc server with offline provider stand-ins.
//!
//! Serves the llmrtc protocol v1 on `--listen` (default 127.0.0.1:8787, the web client's
//! default signalling URL) with **stand-in providers, not real ones**: a scripted STT that
//! returns the next line of `--transcript` per utterance (default: the example script built
//! into the program, so it runs from anywhere), an LLM that echoes the transcript token by
//! token (and calls playbook tools whose name the user says), and a TTS that "speaks" in
//! PCM tones. `--playbook FILE` turns on playbook mode (stages and tools as JSON, see
//! `examples/llmrtc/data/playbook.json`); `--example-playbook` uses that file's built-in
//! copy. Events go to stderr as one sentence each (`RUST_LOG`).
//!
//! ```text
//! cargo run --release --example llmrtc_server -- --listen 127.0.0.1:8787 --example-playbook
//! ```

use agentwire::llmrtc::ServerEvent;
use agentwire_apps::llmrtc;
use clap::Parser;
use llmrtc::providers::Providers;
use llmrtc::server_app;
use llmrtc::server_cli::ServerArgs;
use llmrtc::server_log;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    agentwire_apps::common::init_tracing("info");
    match run(ServerArgs::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // A sentence, not the `Debug` form `main` would print for an `Err`.
            eprintln!("llmrtc_server: {e}");
            std::process::ExitCode::FAILURE
        }
    }
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

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
    run(ServerArgs::parse()).await
}

/// Runs the command with `args`, as `main` does after parsing them (the `agentwire`
/// binary's subcommand calls it with the same flags); installs no tracing subscriber.
pub async fn run(args: ServerArgs) -> std::process::ExitCode {
    crate::common::exit_code("llmrtc_server", body(args).await)
}

async fn body(args: ServerArgs) -> Result<(), Box<dyn std::error::Error>> {
    args.address.install();
    let providers = Providers::stand_ins(args.stt()?);
    let app = match args.webrtc() {
        Some(webrtc) => {
            server_app::start_webrtc(
                &args.listen,
                args.config()?,
                webrtc,
                providers,
                args.pacing(),
                log_event,
            )
            .await
        }
        None => {
            server_app::start(
                &args.listen,
                args.config()?,
                providers,
                args.pacing(),
                log_event,
            )
            .await
        }
    }
    .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    println!(
        "llmrtc server (offline stand-in STT/LLM/TTS) on {}",
        app.url()
    );
    match app.udp_addr() {
        Some(udp) => println!("WebRTC (data channel, audio tracks) on udp {udp}"),
        None => println!("WebRTC off: offers get WEBRTC_UNAVAILABLE"),
    }
    tokio::signal::ctrl_c().await?;
    app.shutdown().await;
    Ok(())
}

fn log_event(ev: &ServerEvent) {
    if let Some(line) = server_log::describe(ev) {
        tracing::info!("{line}");
    }
}

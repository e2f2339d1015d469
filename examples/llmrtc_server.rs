//! Reference llmrtc server with offline provider stand-ins.
//!
//! Serves the llmrtc protocol v1 on `--listen` (default 127.0.0.1:8787, the web client's
//! default signalling URL) with **stand-in providers, not real ones**: a scripted STT that
//! returns the next line of `--transcript` per utterance, an LLM that echoes the transcript
//! token by token (and calls playbook tools whose name the user says), and a TTS that
//! "speaks" in PCM tones. `--playbook FILE` turns on playbook mode (stages and tools as
//! JSON, see `examples/llmrtc/data/playbook.json`). Events go to stderr (`RUST_LOG`).
//!
//! ```text
//! cargo run --example llmrtc_server -- --listen 127.0.0.1:8787 \
//!     --playbook examples/llmrtc/data/playbook.json
//! ```

#[path = "llmrtc/mod.rs"]
mod llmrtc;

use std::path::PathBuf;
use std::time::Duration;

use agentwire::llmrtc::{ServerConfig, ServerEvent};
use clap::Parser;
use llmrtc::providers::{load_playbook, Providers, ScriptedStt};
use llmrtc::server_app::{self, Pacing};

/// Reference llmrtc server (offline stand-in providers).
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8787")]
    listen: String,
    /// Playbook JSON (stages and tools); without it, plain conversation.
    #[arg(long)]
    playbook: Option<PathBuf>,
    /// Stand-in STT script: one utterance's text per line.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/llmrtc/data/transcript.txt"))]
    transcript: PathBuf,
    /// Stream LLM tokens and TTS audio fast instead of at about real time.
    #[arg(long)]
    fast: bool,
    /// Minutes a disconnected session waits for a `reconnect`.
    #[arg(long, default_value_t = 30)]
    session_ttl_minutes: u64,
    /// Per-address connection limits (the same flags in every reference server).
    #[command(flatten)]
    address: llmrtc::AddressLimits,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    llmrtc::init_tracing("info");
    let args = Args::parse();
    args.address.install();
    let mut config = ServerConfig::default()
        .with_session_ttl(Duration::from_secs(args.session_ttl_minutes * 60));
    if let Some(path) = &args.playbook {
        config = config.with_playbook(load_playbook(path)?);
    }
    let stt = ScriptedStt::from_file(&args.transcript)
        .map_err(|e| format!("{}: {e}", args.transcript.display()))?;
    let pacing = if args.fast {
        Pacing::fast()
    } else {
        Pacing::real_time()
    };
    let app = server_app::start(
        &args.listen,
        config,
        Providers::stand_ins(stt),
        pacing,
        log_event,
    )
    .await?;
    println!(
        "llmrtc server (offline stand-in STT/LLM/TTS) on {}",
        app.url()
    );
    tokio::signal::ctrl_c().await?;
    app.shutdown().await;
    Ok(())
}

fn log_event(ev: &ServerEvent) {
    match ev {
        ServerEvent::DataChannel { .. } => {}
        ServerEvent::Stt(r) => tracing::info!(
            session = %r.session,
            ms = r.segment.duration_ms(),
            "stt request"
        ),
        ServerEvent::Llm(r) => tracing::info!(
            session = %r.session,
            history = r.history.len(),
            stage = ?r.stage.as_ref().map(|s| &s.name),
            "llm request"
        ),
        ServerEvent::Tts(r) => tracing::info!(session = %r.session, text = %r.text, "tts request"),
        other => tracing::info!(?other, "event"),
    }
}

//! The `llmrtc_server` command line: its flags, and the server they describe.
//!
//! No default is a path baked in at build time: the stand-in STT script and the example
//! playbook are compiled into the program (their text, from `src/llmrtc/data/` of this crate),
//! so an installed binary and one run from a checkout behave the same from any directory.

use std::path::PathBuf;
use std::time::Duration;

use agentwire::llmrtc::ServerConfig;
use clap::Parser;

use super::providers::{example_playbook, load_playbook, ScriptedStt};
use super::server_app::Pacing;

/// Reference llmrtc server (offline stand-in providers).
#[derive(Parser, Debug)]
#[command(name = "llmrtc_server", version)]
pub struct ServerArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8787")]
    pub listen: String,
    /// Playbook JSON (stages and tools); without it, plain conversation.
    #[arg(long, conflicts_with = "example_playbook")]
    pub playbook: Option<PathBuf>,
    /// Playbook mode with the example playbook built into the program
    /// (`crates/agentwire-apps/src/llmrtc/data/playbook.json`: a `bookTable` tool, two
    /// stages).
    #[arg(long)]
    pub example_playbook: bool,
    /// Stand-in STT script: one utterance's text per line. Default: the example script built
    /// into the program (`crates/agentwire-apps/src/llmrtc/data/transcript.txt`).
    #[arg(long)]
    pub transcript: Option<PathBuf>,
    /// Stream LLM tokens and TTS audio fast instead of at about real time.
    #[arg(long)]
    pub fast: bool,
    /// Send each reply's audio whole, in one `tts` message (WAV for PCM), instead of
    /// streaming `tts-chunk`s: the spec's non-streaming fallback, as the real backend's
    /// `STREAMING_TTS=false`.
    #[arg(long)]
    pub no_streaming_tts: bool,
    /// Minutes a disconnected session waits for a `reconnect`.
    #[arg(long, default_value_t = 30)]
    pub session_ttl_minutes: u64,
    /// Per-address connection limits (the same flags in every reference server).
    #[command(flatten)]
    pub address: crate::common::AddressLimits,
}

impl ServerArgs {
    /// The machine's configuration: session TTL, streaming TTS and playbook (read from
    /// `--playbook`).
    pub fn config(&self) -> Result<ServerConfig, String> {
        let mut config = ServerConfig::default()
            .with_session_ttl(Duration::from_secs(self.session_ttl_minutes * 60))
            .with_streaming_tts(!self.no_streaming_tts);
        if let Some(path) = &self.playbook {
            config = config.with_playbook(load_playbook(path)?);
        } else if self.example_playbook {
            config = config.with_playbook(example_playbook()?);
        }
        Ok(config)
    }

    /// The stand-in STT: `--transcript`'s script, or the built-in example.
    pub fn stt(&self) -> Result<ScriptedStt, String> {
        match &self.transcript {
            Some(path) => {
                ScriptedStt::from_file(path).map_err(|e| format!("{}: {e}", path.display()))
            }
            None => Ok(ScriptedStt::example()),
        }
    }

    /// How fast the stand-ins stream.
    pub fn pacing(&self) -> Pacing {
        if self.fast {
            Pacing::fast()
        } else {
            Pacing::real_time()
        }
    }
}

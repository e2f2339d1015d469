//! The `llmrtc_server` command line: its flags, and the server they describe.
//!
//! No default is a path baked in at build time: the stand-in STT script and the example
//! playbook are compiled into the program (their text, from `src/llmrtc/data/` of this crate),
//! so an installed binary and one run from a checkout behave the same from any directory.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use agentwire::llmrtc::{IceServer, ServerConfig};
use clap::Parser;

use super::providers::{example_playbook, load_playbook, ScriptedStt};
use super::server_app::{Pacing, WebrtcOptions};

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
    /// (`crates/agentwire-server/src/llmrtc/data/playbook.json`: a `bookTable` tool, two
    /// stages).
    #[arg(long)]
    pub example_playbook: bool,
    /// Stand-in STT script: one utterance's text per line. Default: the example script built
    /// into the program (`crates/agentwire-server/src/llmrtc/data/transcript.txt`).
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
    /// UDP port of WebRTC (ICE, DTLS, SCTP, SRTP: every peer on one socket), bound on the
    /// IP of `--listen`. 0: any free port (printed at startup).
    #[arg(long, default_value_t = 0)]
    pub udp_port: u16,
    /// Public IP of this server when it is behind NAT with the UDP port forwarded
    /// (repeatable): offered to clients as a host candidate beside the bound address.
    #[arg(long = "public-ip", value_name = "IP")]
    pub public_ips: Vec<IpAddr>,
    /// An ICE server for `ready.iceServers` (repeatable): `URL`, or
    /// `URL,USERNAME,CREDENTIAL` for TURN (e.g. `stun:stun.l.google.com:19302`).
    #[arg(long = "ice-server", value_name = "URL[,USERNAME,CREDENTIAL]")]
    pub ice_servers: Vec<String>,
    /// Serve no WebRTC: every `offer` gets `error WEBRTC_UNAVAILABLE` and the session
    /// runs over the WebSocket alone (no UDP socket is bound).
    #[arg(long)]
    pub no_webrtc: bool,
    /// Per-address connection limits (the same flags in every reference server).
    #[command(flatten)]
    pub address: crate::common::AddressLimits,
}

/// An `--ice-server` value: `URL`, or `URL,USERNAME,CREDENTIAL`.
pub fn parse_ice_server(arg: &str) -> Result<IceServer, String> {
    let mut parts = arg.split(',');
    let url = parts.next().unwrap_or_default().trim();
    if !(url.starts_with("stun:")
        || url.starts_with("stuns:")
        || url.starts_with("turn:")
        || url.starts_with("turns:"))
    {
        return Err(format!(
            "--ice-server {arg:?}: the URL must start with stun:, stuns:, turn: or turns:"
        ));
    }
    let mut server = IceServer::stun(url);
    match (parts.next(), parts.next(), parts.next()) {
        (None, _, _) => {}
        (Some(user), Some(credential), None) => {
            server.username = Some(user.to_owned());
            server.credential = Some(credential.to_owned());
        }
        _ => {
            return Err(format!(
                "--ice-server {arg:?}: expected URL or URL,USERNAME,CREDENTIAL"
            ))
        }
    }
    Ok(server)
}

impl ServerArgs {
    /// The machine's configuration: session TTL, streaming TTS, ICE servers and playbook
    /// (read from `--playbook`).
    pub fn config(&self) -> Result<ServerConfig, String> {
        let mut config = ServerConfig::default()
            .with_session_ttl(Duration::from_secs(self.session_ttl_minutes * 60))
            .with_streaming_tts(!self.no_streaming_tts);
        if !self.ice_servers.is_empty() {
            let servers = self
                .ice_servers
                .iter()
                .map(|s| parse_ice_server(s))
                .collect::<Result<Vec<_>, _>>()?;
            config = config.with_ice_servers(servers);
        }
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

    /// How the server serves WebRTC (`--udp-port`, `--public-ip`), or `None` with
    /// `--no-webrtc`.
    pub fn webrtc(&self) -> Option<WebrtcOptions> {
        if self.no_webrtc {
            return None;
        }
        let mut options = WebrtcOptions::default().with_udp_port(self.udp_port);
        for ip in &self.public_ips {
            options = options.with_public_ip(*ip);
        }
        Some(options)
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

//! The `llmrtc_client` command: its flags and its `main`. `examples/llmrtc_client.rs` is the
//! binary, and its documentation says what the command does and how to run it.

use std::path::PathBuf;
use std::time::Duration;

use crate::llmrtc;
use agentwire::llmrtc::{ClientConfig, ClientEvent, ConnectionState, ServerMessage};
use clap::Parser;
use llmrtc::audio::{utterance_wav, write_wav_file};
use llmrtc::client_app::{attachment_from_arg, LlmrtcClientApp, Transcript};
use llmrtc::webrtc::{AudioOffer, WebrtcClientEvent};

/// Reference llmrtc client.
#[derive(Parser, Debug)]
#[command(name = "agentwire", version)]
struct Args {
    /// Server URL.
    #[arg(long, default_value = "ws://127.0.0.1:8787/")]
    url: String,
    /// A WAV file (PCM 16-bit, mono or stereo) to send; default: a generated utterance.
    #[arg(long)]
    wav: Option<PathBuf>,
    /// How many turns (the same audio each time).
    #[arg(long, default_value_t = 1)]
    turns: u32,
    /// Drop the connection after this turn, then reconnect and resume the session.
    #[arg(long)]
    drop_after: Option<u32>,
    /// Directory for the received TTS audio.
    #[arg(long, default_value = ".")]
    out: PathBuf,
    /// Seconds to wait for each turn.
    #[arg(long, default_value_t = 60)]
    turn_timeout: u64,
    /// An image for the first turn (repeatable): a `data:` URI or an `http(s)://` URL as it
    /// is, or the path of a .png/.jpg/.jpeg/.gif/.webp file (sent as a base64 data URI,
    /// at most 4 MiB). They go in one `attachments` message before the first `audio`.
    #[arg(long = "attach", value_name = "FILE|DATA_URI|URL")]
    attach: Vec<String>,
    /// Offer a WebRTC peer connection after `ready` (and after every reconnect): payloads
    /// then arrive on the data channel, each once. The turn's audio still goes as `audio`
    /// messages on the WebSocket (the client has no microphone track yet).
    #[arg(long)]
    webrtc: bool,
}

/// Runs the `llmrtc_client` command, as `cargo run --example llmrtc_client` does.
pub async fn main() -> std::process::ExitCode {
    crate::common::init_tracing("warn");
    crate::common::exit_code("llmrtc_client", run(Args::parse()).await)
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let wav = match &args.wav {
        Some(p) => std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?,
        None => utterance_wav(700),
    };
    let attachments = args
        .attach
        .iter()
        .map(|a| attachment_from_arg(a))
        .collect::<Result<Vec<_>, _>>()?;
    let (_, seed) = crate::common::clocks();
    let mut client = if args.webrtc {
        LlmrtcClientApp::start_webrtc(&args.url, ClientConfig::default(), seed, AudioOffer::None)
            .await?
    } else {
        LlmrtcClientApp::start(&args.url, ClientConfig::default(), seed).await?
    };
    let patience = Duration::from_secs(args.turn_timeout);
    let mut transcript = Transcript::new("");
    // Each failed try is printed as it happens (the transport logs the OS error); once the
    // client has used up its tries, stop instead of waiting out the patience.
    let first = client
        .wait_for(
            "ready",
            patience,
            |e| transcript.print(e),
            |e| {
                matches!(
                    e,
                    ClientEvent::Ready { .. }
                        | ClientEvent::StateChanged {
                            to: ConnectionState::Failed,
                            ..
                        }
                )
            },
        )
        .await?;
    if !matches!(first, ClientEvent::Ready { .. }) {
        return Err(format!("could not connect to {}; gave up after every try", args.url).into());
    }
    if args.webrtc {
        // The offer went out with `ready`; wait for the channel, or for the server's
        // refusal (then the session goes on over the WebSocket).
        let opened = client
            .wait_for_event(
                "the data channel",
                patience,
                |e| transcript.print_event(e),
                |e| {
                    matches!(
                        e,
                        WebrtcClientEvent::ChannelOpen
                            | WebrtcClientEvent::Llmrtc(ClientEvent::Message(
                                ServerMessage::Error(_)
                            ))
                    )
                },
            )
            .await?;
        if !matches!(opened, WebrtcClientEvent::ChannelOpen) {
            println!("--- no WebRTC: the session goes on over the WebSocket");
        }
        if args.wav.is_some() {
            println!(
                "--- the WAV goes as `audio` messages on the WebSocket (no microphone track in \
                 this client yet); the replies come on the data channel"
            );
        }
    }
    if !attachments.is_empty() {
        println!(
            "--- sending {} attachment(s) for the first turn",
            attachments.len()
        );
        client.send_attachments(attachments).await?;
    }
    for turn in 1..=args.turns {
        println!("--- turn {turn}: sending {} bytes of WAV", wav.len());
        client.send_audio(wav.clone()).await?;
        let audio = client
            .wait_for(
                "the reply's audio",
                patience,
                |e| transcript.print(e),
                |e| {
                    matches!(
                        e,
                        ClientEvent::TtsAudio { .. }
                            | ClientEvent::Message(ServerMessage::Error(_))
                    )
                },
            )
            .await?;
        if let ClientEvent::TtsAudio {
            format,
            sample_rate,
            audio,
        } = audio
        {
            // PCM gets a WAV header; a whole file (wav, mp3, ...) is written as it came.
            let path = if format == "pcm" {
                let path = args.out.join(format!("reply-{turn}.wav"));
                write_wav_file(&path, sample_rate.unwrap_or(24_000), &audio)?;
                path
            } else {
                let mut ext: String = format.chars().filter(char::is_ascii_alphanumeric).collect();
                if ext.is_empty() {
                    ext = "bin".into();
                }
                let path = args.out.join(format!("reply-{turn}.{ext}"));
                std::fs::write(&path, &audio).map_err(|e| format!("{}: {e}", path.display()))?;
                path
            };
            println!("wrote {}", path.display());
        }
        if args.drop_after == Some(turn) {
            println!("--- dropping the connection (--drop-after {turn})");
            client.drop_connection().await?;
            client
                .wait_for(
                    "reconnect-ack",
                    patience,
                    |e| transcript.print(e),
                    |e| matches!(e, ClientEvent::Resumed { .. }),
                )
                .await?;
        }
    }
    client.close().await;
    Ok(())
}

//! The `llmrtc_client` command: its flags and its `main`. `examples/llmrtc_client.rs` is the
//! binary, and its documentation says what the command does and how to run it.

use std::path::PathBuf;
use std::time::Duration;

use crate::llmrtc;
use agentwire::llmrtc::{ClientConfig, ClientEvent, ConnectionState, ServerMessage};
use clap::Parser;
use llmrtc::audio::{utterance_wav, write_wav_file};
use llmrtc::client_app::{LlmrtcClientApp, Transcript};

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
    let (_, seed) = crate::common::clocks();
    let mut client = LlmrtcClientApp::start(&args.url, ClientConfig::default(), seed).await?;
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
            sample_rate, audio, ..
        } = audio
        {
            let path = args.out.join(format!("reply-{turn}.wav"));
            write_wav_file(&path, sample_rate.unwrap_or(24_000), &audio)?;
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

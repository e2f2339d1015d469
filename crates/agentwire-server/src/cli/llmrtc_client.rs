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
pub struct Args {
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
    /// then arrive on the data channel, each once (each turn ends with a line counting
    /// them and the UDP bytes received). With `--wav`, the peer also has an Opus
    /// audio track both ways: the WAV is spoken on the microphone track (in real time) and
    /// the reply's speech comes back on the server's track (written to `--out` at 48 kHz).
    #[arg(long)]
    webrtc: bool,
    /// `wss://` settings.
    #[command(flatten)]
    tls: super::client_tls::TlsFlags,
}

/// Runs the `llmrtc_client` command, as `cargo run --example llmrtc_client` does.
pub async fn main() -> std::process::ExitCode {
    crate::common::init_tracing("warn");
    run(Args::parse()).await
}

/// Runs the command with `args`, as `main` does after parsing them (the `agentwire`
/// binary's subcommand calls it with the same flags); installs no tracing subscriber.
pub async fn run(args: Args) -> std::process::ExitCode {
    crate::common::exit_code("llmrtc_client", body(args).await)
}

async fn body(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    args.tls.install(None)?;
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
    // With --webrtc and --wav the utterance goes on a microphone track.
    let mic = args.webrtc && args.wav.is_some();
    let mut client = if args.webrtc {
        let audio = if mic {
            AudioOffer::SendRecv
        } else {
            AudioOffer::None
        };
        LlmrtcClientApp::start_webrtc(&args.url, ClientConfig::default(), seed, audio).await?
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
        // The offer went out with `ready`; wait for the channel (and the track), or for
        // the server's refusal (then the session goes on over the WebSocket).
        if !peer_up(&mut client, &mut transcript, mic, false, patience).await? {
            println!("--- no WebRTC: the session goes on over the WebSocket");
            if mic {
                return Err("the server refused WebRTC; run without --webrtc".into());
            }
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
        let udp_before = client.udp_stats().map_or(0, |s| s.received_bytes);
        transcript.take_channel_payloads();
        if mic {
            println!(
                "--- turn {turn}: speaking {} bytes of WAV on the microphone track",
                wav.len()
            );
            client.send_mic_wav(&wav).await?;
            let samples = track_reply(&mut client, &mut transcript, patience).await?;
            let path = args.out.join(format!("reply-{turn}.wav"));
            let pcm: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
            write_wav_file(&path, 48_000, &pcm)?;
            println!(
                "heard {:.2} s of speech on the server's track; wrote {}",
                samples.len() as f64 / 48_000.0,
                path.display()
            );
        } else {
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
                    let mut ext: String =
                        format.chars().filter(char::is_ascii_alphanumeric).collect();
                    if ext.is_empty() {
                        ext = "bin".into();
                    }
                    let path = args.out.join(format!("reply-{turn}.{ext}"));
                    std::fs::write(&path, &audio)
                        .map_err(|e| format!("{}: {e}", path.display()))?;
                    path
                };
                println!("wrote {}", path.display());
            }
        }
        if args.webrtc {
            let udp =
                (client.udp_stats().map_or(0, |s| s.received_bytes)).saturating_sub(udp_before);
            println!(
                "--- turn {turn} over WebRTC: {} payload messages came on the data channel, \
                 {udp} bytes of UDP received",
                transcript.take_channel_payloads()
            );
        }
        if args.drop_after == Some(turn) {
            println!("--- dropping the connection (--drop-after {turn})");
            client.drop_connection().await?;
            if args.webrtc {
                // The reconnect-ack and the new peer come in either order.
                peer_up(&mut client, &mut transcript, mic, true, patience).await?;
            } else {
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
    }
    client.close().await;
    Ok(())
}

/// Waits for the data channel (and, with `mic`, the microphone track) of the peer offered
/// after `ready`, and with `resume` for the `reconnect-ack` too; `false` if the server
/// answered the offer with an error instead.
async fn peer_up(
    client: &mut LlmrtcClientApp,
    transcript: &mut Transcript,
    mic: bool,
    resume: bool,
    patience: Duration,
) -> Result<bool, Box<dyn std::error::Error>> {
    let (mut open, mut track, mut resumed) = (false, !mic, !resume);
    let last = client
        .wait_for_event(
            "the WebRTC peer",
            patience,
            |e| transcript.print_event(e),
            |e| {
                match e {
                    WebrtcClientEvent::ChannelOpen => open = true,
                    WebrtcClientEvent::TrackReady => track = true,
                    WebrtcClientEvent::Llmrtc(ClientEvent::Resumed { .. }) => resumed = true,
                    WebrtcClientEvent::Llmrtc(ClientEvent::Message(ServerMessage::Error(_))) => {
                        return true
                    }
                    _ => {}
                }
                open && track && resumed
            },
        )
        .await?;
    Ok(!matches!(
        last,
        WebrtcClientEvent::Llmrtc(ClientEvent::Message(ServerMessage::Error(_)))
    ))
}

/// The reply to an utterance spoken on the microphone track: the events up to
/// `tts-complete` (or an error), and the speech heard on the server's track meanwhile and
/// in the half second after (the track plays in real time; its last frames may trail).
async fn track_reply(
    client: &mut LlmrtcClientApp,
    transcript: &mut Transcript,
    patience: Duration,
) -> Result<Vec<i16>, Box<dyn std::error::Error>> {
    let mut samples = Vec::new();
    let mut take = |e: &WebrtcClientEvent, transcript: &mut Transcript| {
        if let WebrtcClientEvent::TrackAudio { samples: s, .. } = e {
            samples.extend_from_slice(s);
        }
        transcript.print_event(e);
    };
    let end = client
        .wait_for_event(
            "the reply",
            patience,
            |e| take(e, transcript),
            |e| {
                matches!(e, WebrtcClientEvent::Llmrtc(ClientEvent::Message(m))
                    if matches!(m.type_name(), "tts-complete" | "error"))
            },
        )
        .await?;
    if let WebrtcClientEvent::Llmrtc(ClientEvent::Message(ServerMessage::Error(e))) = end {
        return Err(format!("the server answered with an error: {}", e.message).into());
    }
    // The trailing frames: whatever arrives in the next half second.
    let _ = client
        .wait_for_event(
            "trailing track audio",
            Duration::from_millis(500),
            |e| take(e, transcript),
            |_| false,
        )
        .await;
    Ok(samples)
}

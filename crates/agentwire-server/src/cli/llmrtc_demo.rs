//! The `llmrtc_demo` command: its flags and its `main`. `examples/llmrtc_demo.rs` is the binary,
//! and its documentation says what the command does and how to run it. [`server`] and
//! [`script`] are its two halves, which `agentwire demo` runs on its shared listener.

use std::time::Duration;

use crate::endpoint::Place;
use crate::llmrtc;

use super::script::DemoError;
use agentwire::llmrtc::{ClientConfig, ClientEvent, ConnectionState, IgnoreReason, ServerConfig};
use llmrtc::audio::utterance_wav;
use llmrtc::client_app::{LlmrtcClientApp, Transcript};
use llmrtc::providers::{example_playbook, Providers, ScriptedStt};
use llmrtc::server_app::{self, Pacing, WebrtcOptions};
use llmrtc::webrtc::{AudioOffer, WebrtcClientEvent};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const PATIENCE: Duration = Duration::from_secs(15);

fn is_message(e: &ClientEvent, ty: &str) -> bool {
    matches!(e, ClientEvent::Message(m) if m.type_name() == ty)
}

fn check(ok: bool, what: &str) -> Res<()> {
    if ok {
        Ok(())
    } else {
        Err(format!("demo check failed: {what}").into())
    }
}

/// Runs the `llmrtc_demo` command, as `cargo run --example llmrtc_demo` does: the demo's
/// server on 127.0.0.1 (a free port, WebRTC on a free UDP port), then [`script`] against it.
pub async fn main() -> std::process::ExitCode {
    crate::common::init_tracing("warn");
    let outcome = async {
        let app = server(Place::Bind("127.0.0.1:0")).await?;
        let result = script(&app).await;
        app.shutdown().await;
        result
    };
    match outcome.await {
        Ok(()) => {
            println!("== demo complete");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("== demo failed: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The demo's server at `place`: offline stand-in STT/LLM/TTS with the example playbook and
/// transcript built into the program, fast pacing, WebRTC on a UDP socket on the IP of
/// `place`.
pub async fn server(place: Place<'_>) -> Result<server_app::LlmrtcApp, DemoError> {
    let playbook = example_playbook().map_err(|e| e.to_string())?;
    let config = ServerConfig::default().with_playbook(playbook);
    let providers = Providers::stand_ins(ScriptedStt::example());
    let webrtc = WebrtcOptions::default();
    let app = match place {
        Place::Bind(addr) => {
            server_app::start_webrtc(addr, config, webrtc, providers, Pacing::fast(), |_| {})
                .await?
        }
        Place::Route(at) => {
            server_app::mount(at, config, Some(webrtc), providers, Pacing::fast(), |_| {}).await?
        }
    };
    Ok(app)
}

/// The voice session against the demo's server `app`: a turn over WebRTC, a barge-in, a
/// playbook tool call, a reconnect with a new peer, and a turn spoken on a microphone track.
pub async fn script(app: &server_app::LlmrtcApp) -> Result<(), DemoError> {
    println!(
        "== llmrtc server (offline stand-in STT/LLM/TTS) at {}, WebRTC on udp {}",
        app.url(),
        app.udp_addr().ok_or("no UDP socket")?
    );
    run(app).await.map_err(|e| e.to_string().into())
}

async fn run(app: &server_app::LlmrtcApp) -> Res<()> {
    let started = tokio::time::Instant::now();
    let mut client =
        LlmrtcClientApp::start_webrtc(&app.url(), ClientConfig::default(), 7, AudioOffer::None)
            .await?;
    let mut t = Transcript::new("    ");
    client
        .wait_for_event(
            "the WebRTC data channel",
            PATIENCE,
            |e| t.print_event(e),
            |e| matches!(e, WebrtcClientEvent::ChannelOpen),
        )
        .await?;
    println!(
        "    (offer, answer, ICE, DTLS and SCTP took {} ms)",
        started.elapsed().as_millis()
    );
    check(
        client.state().await? == ConnectionState::Connected,
        "connected",
    )?;
    let session = client.session_id().await?.ok_or("no session id")?;
    let mut show = |e: &ClientEvent| t.print(e);

    println!("\n== 1. a full turn over WebRTC (transcript, streamed reply and speech on the data channel)");
    let udp_before = client.udp_stats().map_or(0, |s| s.received_bytes);
    client.send_audio(utterance_wav(600)).await?;
    let mut on_channel = 0;
    client
        .wait_for(
            "turn 1 audio",
            PATIENCE,
            |e| {
                show(e);
                // The WebSocket copy of each payload is set aside: it came on the channel.
                if matches!(
                    e,
                    ClientEvent::Ignored {
                        reason: IgnoreReason::OtherChannel,
                        ..
                    }
                ) {
                    on_channel += 1;
                }
            },
            |e| matches!(e, ClientEvent::TtsAudio { .. }),
        )
        .await?;
    let udp_bytes = client.udp_stats().map_or(0, |s| s.received_bytes) - udp_before;
    println!(
        "    ({on_channel} payload messages taken from the data channel, their WebSocket \
         copies ignored; {udp_bytes} bytes of UDP received)"
    );
    check(on_channel > 0, "payloads on the data channel")?;

    println!("\n== 2. barge-in (the user talks over a long reply)");
    client.send_audio(utterance_wav(600)).await?;
    client
        .wait_for("tts-start of the long reply", PATIENCE, &mut show, |e| {
            is_message(e, "tts-start")
        })
        .await?;
    println!("    (user interrupts)");
    client.send_audio(utterance_wav(500)).await?;
    let mut order = Vec::new();
    client
        .wait_for("tts-cancelled", PATIENCE, &mut show, |e| {
            is_message(e, "tts-cancelled")
        })
        .await?;
    order.push("tts-cancelled");
    client
        .wait_for("speech-start after the cancel", PATIENCE, &mut show, |e| {
            is_message(e, "speech-start")
        })
        .await?;
    order.push("speech-start");
    check(order == ["tts-cancelled", "speech-start"], "barge-in order")?;
    client
        .wait_for("the interrupting turn's audio", PATIENCE, &mut show, |e| {
            matches!(e, ClientEvent::TtsAudio { .. })
        })
        .await?;

    println!("\n== 3. a playbook tool call (bookTable, then a stage change)");
    client.send_audio(utterance_wav(700)).await?;
    let mut saw_tool = false;
    let mut saw_stage = false;
    client
        .wait_for(
            "the booking reply's audio",
            PATIENCE,
            |e| {
                show(e);
                saw_tool |= is_message(e, "tool-call-end");
                saw_stage |= is_message(e, "stage-change");
            },
            |e| matches!(e, ClientEvent::TtsAudio { .. }),
        )
        .await?;
    check(saw_tool && saw_stage, "tool-call-end and stage-change")?;

    println!("\n== 4. reconnect (the client drops its connection, resumes the session, new peer)");
    client.drop_connection().await?;
    // The reconnect-ack and the new peer's data channel come in either order.
    let mut ack = None;
    let mut reopened = false;
    client
        .wait_for_event(
            "reconnect-ack and the new data channel",
            PATIENCE,
            |e| t.print_event(e),
            |e| {
                match e {
                    WebrtcClientEvent::Llmrtc(r @ ClientEvent::Resumed { .. }) => {
                        ack = Some(r.clone());
                    }
                    WebrtcClientEvent::ChannelOpen => reopened = true,
                    _ => {}
                }
                ack.is_some() && reopened
            },
        )
        .await?;
    let ack = ack.ok_or("no reconnect-ack")?;
    check(
        ack == ClientEvent::Resumed {
            success: true,
            session_id: session.clone().into(),
            history_recovered: true,
        },
        "history recovered",
    )?;
    check(
        client.state().await? == ConnectionState::Connected,
        "connected again",
    )?;
    let s = session.clone();
    let history = app
        .handle
        .call(move |m, _| m.history(&s).map_or(0, Iterator::count))
        .await?;
    println!("    server history of {session}: {history} messages");
    check(history >= 6, "history kept across the reconnect")?;
    client.close().await;
    spoken_on_the_track(app).await
}

/// A second client whose utterance goes on a microphone track and whose reply's speech
/// comes back on the server's track.
async fn spoken_on_the_track(app: &server_app::LlmrtcApp) -> Res<()> {
    println!("\n== 5. a turn spoken on a WebRTC microphone track (the reply's speech on the server's track)");
    let mut client =
        LlmrtcClientApp::start_webrtc(&app.url(), ClientConfig::default(), 8, AudioOffer::SendRecv)
            .await?;
    let mut t = Transcript::new("    ");
    let (mut open, mut track) = (false, false);
    client
        .wait_for_event(
            "the data channel and the microphone track",
            PATIENCE,
            |e| t.print_event(e),
            |e| {
                match e {
                    WebrtcClientEvent::ChannelOpen => open = true,
                    WebrtcClientEvent::TrackReady => track = true,
                    _ => {}
                }
                open && track
            },
        )
        .await?;
    println!("    microphone track up; speaking (in real time)");
    client.send_mic_wav(&utterance_wav(600)).await?;
    let mut heard = 0usize;
    let mut peak = 0i16;
    client
        .wait_for_event(
            "tts-complete",
            PATIENCE,
            |e| {
                if let WebrtcClientEvent::TrackAudio { samples, .. } = e {
                    heard += samples.len();
                    peak = peak.max(
                        samples
                            .iter()
                            .map(|s| s.saturating_abs())
                            .max()
                            .unwrap_or(0),
                    );
                }
                t.print_event(e);
            },
            |e| {
                matches!(e, WebrtcClientEvent::Llmrtc(ClientEvent::Message(m))
                    if m.type_name() == "tts-complete")
            },
        )
        .await?;
    println!(
        "    heard {:.2} s of the reply's speech on the server's track (peak level {peak})",
        heard as f64 / 48_000.0
    );
    check(
        heard > 0 && peak > 1000,
        "speech on the server's audio track",
    )?;
    client.close().await;
    Ok(())
}

//! The `llmrtc_demo` command: its flags and its `main`. `examples/llmrtc_demo.rs` is the binary,
//! and its documentation says what the command does and how to run it.

use std::time::Duration;

use crate::llmrtc;
use agentwire::llmrtc::{ClientConfig, ClientEvent, ConnectionState, ServerConfig};
use llmrtc::audio::utterance_wav;
use llmrtc::client_app::{LlmrtcClientApp, Transcript};
use llmrtc::providers::{example_playbook, Providers, ScriptedStt};
use llmrtc::server_app::{self, Pacing};

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

/// Runs the `llmrtc_demo` command, as `cargo run --example llmrtc_demo` does.
pub async fn main() -> std::process::ExitCode {
    crate::common::init_tracing("warn");
    match demo().await {
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

async fn demo() -> Res<()> {
    // The example playbook and transcript are built into the program.
    let playbook = example_playbook()?;
    let stt = ScriptedStt::example();
    let app = server_app::start(
        "127.0.0.1:0",
        ServerConfig::default().with_playbook(playbook),
        Providers::stand_ins(stt),
        Pacing::fast(),
        |_| {},
    )
    .await?;
    println!(
        "== llmrtc server (offline stand-in STT/LLM/TTS) on {}",
        app.url()
    );
    let result = run(&app).await;
    app.shutdown().await;
    result
}

async fn run(app: &server_app::LlmrtcApp) -> Res<()> {
    let mut client = LlmrtcClientApp::start(&app.url(), ClientConfig::default(), 7).await?;
    let mut t = Transcript::new("    ");
    let mut show = |e: &ClientEvent| t.print(e);
    client
        .wait_for("connected", PATIENCE, &mut show, |e| {
            matches!(
                e,
                ClientEvent::StateChanged {
                    to: ConnectionState::Connected,
                    ..
                }
            )
        })
        .await?;
    let session = client.session_id().await?.ok_or("no session id")?;

    println!("\n== 1. a full turn (user speaks; transcript, streamed reply, speech)");
    client.send_audio(utterance_wav(600)).await?;
    client
        .wait_for("turn 1 audio", PATIENCE, &mut show, |e| {
            matches!(e, ClientEvent::TtsAudio { .. })
        })
        .await?;

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

    println!("\n== 4. reconnect (the client drops its connection and resumes the session)");
    client.drop_connection().await?;
    let ack = client
        .wait_for("reconnect-ack", PATIENCE, &mut show, |e| {
            matches!(e, ClientEvent::Resumed { .. })
        })
        .await?;
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
    Ok(())
}

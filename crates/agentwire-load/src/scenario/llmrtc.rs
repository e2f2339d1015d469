//! llmrtc under load: M concurrent sessions (`--connections`), each doing voice turns one
//! after another against `agentwire serve`'s llmrtc server with the offline stand-in
//! providers at their fast pace (`llmrtc.fast=true`: 2 ms per LLM token and interim
//! transcript, 25 ms per spoken word of TTS) over the WebSocket alone (`llmrtc.webrtc=false`).
//!
//! One message is one turn: the client's `audio` (a 600 ms utterance as a base64 WAV) and
//! everything the server answers until `tts-complete` (`speech-start`, `speech-end`, the
//! interim and final `transcript`s, the `llm-chunk`s, `llm`, `tts-start`, the `tts-chunk`s);
//! those server messages are the deliveries. The latency is the turn's, from sending `audio`
//! to `tts-complete`, so it is mostly the stand-ins' pace; turns/s and the server's CPU per
//! turn are the figures to compare.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use agentwire::llmrtc::encode_audio;
use agentwire_server::llmrtc::audio::utterance_wav;
use futures_util::{FutureExt, SinkExt};
use serde_json::Value;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use super::{Ctx, Outcome, Scenario};
use crate::drive::{self, Sent};
use crate::error::LoadError;
use crate::latency::{stamp, Latency};
use crate::options::Budget;
use crate::server::ServerKind;
use crate::ws::{self, Ws};

/// The stand-ins at their fast pace, the WebSocket alone, and room for every session; the
/// relay (not under load) off, so the server writes no study-log folder into the working
/// directory.
const SETTINGS: &[&str] = &[
    "relay.enabled=false",
    "llmrtc.fast=true",
    "llmrtc.webrtc=false",
    "llmrtc.max_connections=200000",
    "llmrtc.max_sessions=200000",
];

/// Longest a turn (or the wait for `ready`) may take before the run fails.
const TURN_BOUND: Duration = Duration::from_secs(30);

/// How often a session sends the spec's `ping` under load (the client's 15 s), so a run
/// longer than the server's heartbeat timeout (45 s) keeps its sessions. Not counted.
const PING: Duration = Duration::from_secs(15);

/// Speech in the utterance each turn sends, in milliseconds.
const SPEECH_MS: u32 = 600;

/// The llmrtc scenario.
pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario::new(
        "llmrtc-turns",
        "--connections sessions each doing voice turns in turn (stand-in providers, fast \
         pace); a message is a turn (audio to tts-complete), deliveries are the server's \
         messages of the turn",
        ServerKind::Agentwire {
            protocol: "llmrtc",
            settings: SETTINGS,
        },
        |ctx| run(ctx).boxed(),
    )]
}

async fn run(ctx: Ctx) -> Result<Outcome, LoadError> {
    let sessions = ctx.options().connections;
    let mut peers = Vec::new();
    for _ in 0..sessions {
        peers.push(connect(ctx.address()).await?);
    }
    let mut audio = Vec::new();
    encode_audio(&mut audio, &utterance_wav(SPEECH_MS), &[]);
    let audio = Utf8Bytes::try_from(audio)
        .map_err(|_| LoadError::Protocol("the audio message is not UTF-8".into()))?;

    let frames = Arc::new(AtomicU64::new(0));
    let budget = ctx.start();
    let tasks: Vec<_> = peers
        .into_iter()
        .map(|ws| {
            let frames = Arc::clone(&frames);
            tokio::spawn(session(ws, audio.clone(), budget.clone(), frames))
        })
        .collect();
    let (turns, errors, latency) = drive::collect(tasks).await?;
    ctx.stop();
    Ok(Outcome {
        messages: turns,
        deliveries: frames.load(Ordering::Relaxed),
        errors,
        latency,
        ..Outcome::default()
    })
}

/// Connects one session and waits for its `ready`.
async fn connect(url: &str) -> Result<Ws, LoadError> {
    let mut ws = ws::connect(url).await?;
    let ready = tokio::time::timeout(TURN_BOUND, next_type(&mut ws))
        .await
        .map_err(|_| LoadError::Protocol("no `ready` within 30 s".into()))??;
    if ready != "ready" {
        return Err(LoadError::Protocol(format!(
            "`{ready}` instead of `ready` on connect"
        )));
    }
    Ok(ws)
}

/// Turns one after another while the budget lasts.
/// Counts a turn that ended in an `error` message as a message and an error.
async fn session(
    mut ws: Ws,
    audio: Utf8Bytes,
    budget: Budget,
    frames: Arc<AtomicU64>,
) -> Result<Sent, LoadError> {
    let (mut turns, mut errors, mut latency) = (0, 0, Latency::new());
    let mut pinged = stamp();
    while budget.take() {
        let sent = stamp();
        if sent.saturating_sub(pinged) >= u64::try_from(PING.as_nanos()).unwrap_or(u64::MAX) {
            // The spec's heartbeat; its `pong` is skipped while the next turn is read.
            pinged = sent;
            ws::send(&mut ws, format!(r#"{{"type":"ping","timestamp":{sent}}}"#)).await?;
        }
        ws.send(Message::Text(audio.clone()))
            .await
            .map_err(|e| LoadError::ws("sending audio", e))?;
        let turn = async {
            loop {
                let ty = next_type(&mut ws).await?;
                match ty.as_str() {
                    "tts-complete" => return Ok(true),
                    "error" => return Ok(false),
                    // Heartbeat answers are not part of a turn.
                    "pong" => {}
                    _ => {
                        frames.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        };
        let ok = tokio::time::timeout(TURN_BOUND, turn)
            .await
            .map_err(|_| LoadError::Protocol("a turn took over 30 s".into()))??;
        frames.fetch_add(1, Ordering::Relaxed);
        turns += 1;
        if ok {
            latency.record_since(sent);
        } else {
            errors += 1;
        }
    }
    let _ = ws.close(None).await;
    Ok((turns, errors, latency))
}

/// The `type` of the next text message.
async fn next_type(ws: &mut Ws) -> Result<String, LoadError> {
    let text = ws::next_text(ws).await?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| LoadError::Protocol(format!("not JSON from the server: {e}")))?;
    Ok(v["type"].as_str().unwrap_or_default().to_owned())
}

//! The real llmrtc packages from npm against our llmrtc server and client, over 127.0.0.1:
//!
//! - every frame our server sends in a scripted session (plain and playbook) passes core's
//!   `parseMessage`/`isServerMessage` and `tsc --strict` against core's `protocol.d.ts`, and a
//!   deliberately wrong frame fails that check;
//! - our client against the real backend (`tests/interop/llmrtc_backend.mjs`, offline
//!   stand-in providers): ready, pings, a WAV turn, a reconnect that keeps the history, and a
//!   reconnect after a backend restart; with its `streamingTTS` off, a whole `tts` between
//!   `tts-start` and `tts-complete`, as our server sends it;
//! - the real web client in Node (`tests/interop/llmrtc_web_client.mjs`) against our server
//!   over the WebSocket path: `ready` on 20 of 20 connections, an audio turn through the
//!   fallback (partial transcripts, then the final one), a reconnect that resumes the
//!   session, and a whole `tts` reply from a server with streaming TTS off.
//!
//! The packages are pinned in `tests/interop/package.json`/`package-lock.json` and installed
//! with `npm ci --ignore-scripts --prefix tests/interop` (`.ci/run` does it). Without them
//! (or without `node`, or `AGENTWIRE_NODE` naming another binary) these tests skip with the
//! reason printed, except under `CI`, where they fail.

#[path = "support/llmrtc_node.rs"]
mod llmrtc_node;

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentwire::llmrtc::{
    ClientConfig, ClientEvent, ConnectionState, Reconnection, ServerConfig, ServerEvent,
    ServerMessage, SessionId,
};
use agentwire_server::llmrtc;
use futures_util::{SinkExt, StreamExt};
use llmrtc::audio::utterance_wav;
use llmrtc::client_app::LlmrtcClientApp;
use llmrtc::providers::{load_playbook, Providers, ScriptedStt};
use llmrtc::server_app::{self, LlmrtcApp, Pacing};
use llmrtc_node::{
    history_of_named_session, node_peers, run_script, scratch, script_outcome, Backend, Tools,
};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

const PATIENCE: Duration = Duration::from_secs(20);

/// One test of this file at a time: node, tsc and the backend are CPU-heavy, and the
/// `ready` check measures what a normally loaded client sees, not two cores shared by four
/// node processes.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The packages the scripts import, with the versions `package.json` pins.
const PINNED: &[(&str, &str)] = &[
    ("@llmrtc/llmrtc-core", "1.3.0"),
    ("@llmrtc/llmrtc-backend", "1.3.0"),
    ("@llmrtc/llmrtc-web-client", "1.2.0"),
    ("@roamhq/wrtc", "0.9.1"),
    ("ws", "8.18.3"),
    ("typescript", "5.9.3"),
];

fn data(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/agentwire-server/src/llmrtc/data")
        .join(file)
}

/// Our reference server (the example's code) on 127.0.0.1, port 0.
async fn our_server(playbook: bool) -> (LlmrtcApp, mpsc::UnboundedReceiver<ServerEvent>) {
    our_server_with(playbook, true).await
}

/// [`our_server`], with streaming TTS on or off (whole `tts` replies).
async fn our_server_with(
    playbook: bool,
    streaming_tts: bool,
) -> (LlmrtcApp, mpsc::UnboundedReceiver<ServerEvent>) {
    let mut config = ServerConfig::default().with_streaming_tts(streaming_tts);
    if playbook {
        config = config.with_playbook(load_playbook(&data("playbook.json")).expect("playbook"));
    }
    let stt = ScriptedStt::from_file(&data("transcript.txt")).expect("transcript");
    let (tx, rx) = mpsc::unbounded_channel();
    let app = server_app::start(
        "127.0.0.1:0",
        config,
        Providers::stand_ins(stt),
        Pacing::fast(),
        move |e| {
            let _ = tx.send(e.clone());
        },
    )
    .await
    .expect("bind");
    (app, rx)
}

// ---------------------------------------------------------------------------------------
// Our server's frames, checked by core's parseMessage/isServerMessage and by tsc.

type RawWs =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A raw WebSocket peer that keeps every text frame the server sent, verbatim.
struct Recorder {
    ws: RawWs,
    frames: Vec<String>,
}

impl Recorder {
    async fn connect(url: &str) -> Self {
        let (ws, _) = tokio::time::timeout(PATIENCE, tokio_tungstenite::connect_async(url))
            .await
            .expect("connect in time")
            .expect("connect");
        Self {
            ws,
            frames: Vec::new(),
        }
    }

    async fn send(&mut self, text: &str) {
        self.ws.send(Message::text(text)).await.expect("send");
    }

    /// The next text frame (recorded), as JSON.
    async fn next(&mut self) -> Value {
        let ws = &mut self.ws;
        let text = tokio::time::timeout(PATIENCE, async {
            loop {
                match ws.next().await {
                    Some(Ok(Message::Text(t))) => return t.to_string(),
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                    other => panic!("unexpected {other:?}"),
                }
            }
        })
        .await
        .expect("a frame in time");
        let v = serde_json::from_str(&text).expect("json");
        self.frames.push(text);
        v
    }

    /// Frames up to and including one of type `ty`.
    async fn until(&mut self, ty: &str) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let v = self.next().await;
            let done = v["type"] == ty;
            seen.push(v);
            if done {
                return seen;
            }
        }
    }

    async fn audio(&mut self, speech_ms: u32) {
        use base64::Engine as _;
        let wav = base64::engine::general_purpose::STANDARD.encode(utterance_wav(speech_ms));
        self.send(&format!(r#"{{"type":"audio","data":"{wav}"}}"#))
            .await;
    }
}

fn types(frames: &[Value]) -> Vec<String> {
    frames
        .iter()
        .map(|v| v["type"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// Drives our server through every message it can send in one kind of session (playbook or
/// not; streamed or whole TTS) and returns the frames, verbatim, in the order they came.
async fn scripted_session(playbook: bool, streaming_tts: bool) -> Vec<String> {
    let (app, _events) = our_server_with(playbook, streaming_tts).await;
    let url = app.url();
    let mut a = Recorder::connect(&url).await;
    let ready = a.next().await;
    assert_eq!(ready["type"], "ready", "{ready}");
    assert_eq!(
        ready["mode"], "pipeline",
        "core 1.3.0's ready.mode: {ready}"
    );
    let session = ready["id"].as_str().expect("ready.id").to_owned();
    a.send(r#"{"type":"ping","timestamp":1700000000123}"#).await;
    a.send(r#"{"type":"ping","timestamp":1700000000123.5}"#)
        .await;
    assert_eq!(a.next().await["type"], "pong");
    assert_eq!(a.next().await["type"], "pong");

    // Turns: the last one waits for tts-complete.
    let mut seen = Vec::new();
    for _ in 0..2 {
        a.audio(600).await;
        seen.extend(a.until("tts-complete").await);
    }
    // Barge-in: talk over the reply.
    a.audio(600).await;
    seen.extend(a.until("tts-start").await);
    a.audio(500).await;
    seen.extend(a.until("tts-complete").await);
    // Errors: an offer (no WebRTC here), malformed messages, audio that is not a WAV.
    a.send(r#"{"type":"offer","signal":{"type":"offer","sdp":"v=0\r\n"}}"#)
        .await;
    let offer = a.next().await;
    assert_eq!(offer["code"], "WEBRTC_UNAVAILABLE", "{offer}");
    for (bad, code) in [
        (r#"{"type":"audio"}"#, "INVALID_MESSAGE"),
        ("not json", "INVALID_MESSAGE"),
        (r#"{"type":"audio","data":"AAAA"}"#, "INVALID_AUDIO_FORMAT"),
        (r#"{"type":"audio","data":"!!"}"#, "AUDIO_PROCESSING_ERROR"),
    ] {
        a.send(bad).await;
        let error = a.next().await;
        assert_eq!(error["code"], code, "{bad} -> {error}");
    }

    // A second connection: an unknown session, then the first one.
    let mut b = Recorder::connect(&url).await;
    assert_eq!(b.next().await["type"], "ready");
    b.send(r#"{"type":"reconnect","sessionId":"no-such-session"}"#)
        .await;
    let nack = b.next().await;
    assert_eq!(nack["success"], false, "{nack}");
    let not_found = b.next().await;
    assert_eq!(not_found["code"], "SESSION_NOT_FOUND", "{not_found}");
    b.send(&format!(
        r#"{{"type":"reconnect","sessionId":"{session}"}}"#
    ))
    .await;
    let ack = b.next().await;
    assert_eq!(ack["success"], true, "{ack}");
    assert_eq!(ack["historyRecovered"], true, "{ack}");
    b.audio(600).await;
    seen.extend(b.until("tts-complete").await);

    let covered = types(&seen);
    let audio = if streaming_tts { "tts-chunk" } else { "tts" };
    for ty in [
        "speech-start",
        "speech-end",
        "transcript",
        "llm-chunk",
        "llm",
        "tts-start",
        audio,
        "tts-complete",
        "tts-cancelled",
    ] {
        assert!(covered.iter().any(|t| t == ty), "no {ty} in {covered:?}");
    }
    assert!(
        seen.iter()
            .any(|v| v["type"] == "transcript" && v["isFinal"] == false),
        "partial transcripts"
    );
    if playbook {
        for ty in ["tool-call-start", "tool-call-end", "stage-change"] {
            assert!(covered.iter().any(|t| t == ty), "no {ty} in {covered:?}");
        }
    }
    let mut frames = a.frames;
    frames.append(&mut b.frames);
    app.shutdown().await;
    frames
}

/// Runs `llmrtc_check_frames.mjs` on `frames`: (passed, stdout + stderr).
async fn check_frames(node: &Path, name: &str, frames: &[String]) -> (bool, String) {
    let dir = scratch(name);
    let file = dir.join("frames.jsonl");
    std::fs::write(&file, frames.join("\n") + "\n").expect("write frames");
    let work = dir.join("ts");
    std::fs::create_dir_all(&work).expect("ts dir");
    let (ok, out, err) = script_outcome(
        node,
        "llmrtc_check_frames.mjs",
        vec![file.display().to_string(), work.display().to_string()],
        Duration::from_secs(120),
    )
    .await;
    (ok, format!("{out}{err}"))
}

#[tokio::test]
async fn every_frame_of_our_server_passes_core_checks_and_tsc() {
    let test = "every_frame_of_our_server_passes_core_checks_and_tsc";
    let Some(node) = node_peers(test, PINNED, Tools::default()) else {
        return;
    };
    let _serial = ONE_AT_A_TIME.lock().await;
    for (playbook, streaming_tts) in [(false, true), (true, true), (false, false)] {
        let frames = scripted_session(playbook, streaming_tts).await;
        let name = match (playbook, streaming_tts) {
            (true, _) => "playbook",
            (false, true) => "plain",
            (false, false) => "whole-tts",
        };
        let (ok, report) = check_frames(&node, name, &frames).await;
        assert!(ok, "{name} session:\n{report}");
        assert!(
            report.contains(&format!("frames ok: {} frames", frames.len())),
            "{report}"
        );
        eprintln!("{name}: {}", report.trim());
    }
}

#[tokio::test]
async fn a_wrong_frame_fails_the_core_check() {
    let test = "a_wrong_frame_fails_the_core_check";
    let Some(node) = node_peers(test, PINNED, Tools::default()) else {
        return;
    };
    let _serial = ONE_AT_A_TIME.lock().await;
    let good = [
        r#"{"type":"ready","id":"s-1","protocolVersion":1,"mode":"pipeline"}"#,
        r#"{"type":"pong","timestamp":5}"#,
    ];
    let (ok, report) = check_frames(&node, "good", &good.map(String::from)).await;
    assert!(ok, "{report}");
    // Each wrong in one way: a field of the wrong type, a missing field, an extra field, a
    // mode core does not know, and a type core does not know (the only one parseMessage sees).
    let wrong = [
        (
            r#"{"type":"tts-chunk","format":"pcm","sampleRate":"24000","data":"AAAA"}"#,
            "not assignable to type 'number'",
        ),
        (r#"{"type":"llm-chunk","content":"Hi"}"#, "done"),
        (
            r#"{"type":"transcript","text":"Hi","isFinal":true,"confidence":1}"#,
            "confidence",
        ),
        (
            r#"{"type":"ready","id":"s-1","protocolVersion":1,"mode":"turbo"}"#,
            "turbo",
        ),
        (
            r#"{"type":"transcript-final","text":"Hi"}"#,
            "parseMessage rejects it",
        ),
    ];
    for (i, (frame, says)) in wrong.iter().enumerate() {
        let frames = [good[0].to_owned(), good[1].to_owned(), (*frame).to_owned()];
        let (ok, report) = check_frames(&node, &format!("wrong-{i}"), &frames).await;
        assert!(!ok, "{frame} passed:\n{report}");
        assert!(report.contains("frame 3"), "{frame}:\n{report}");
        assert!(
            report.contains(says),
            "{frame}: wanted {says:?} in\n{report}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Our client against the real backend.

/// What our client saw of one turn: the transcript and the reply.
async fn client_turn(c: &mut LlmrtcClientApp) -> (String, String) {
    c.send_audio(utterance_wav(600)).await.expect("send");
    let mut transcript = None;
    let mut reply = None;
    c.wait_for(
        "the reply's audio",
        PATIENCE,
        |e| match e {
            ClientEvent::Message(ServerMessage::Transcript(t)) if t.is_final => {
                transcript = Some(t.text.clone());
            }
            ClientEvent::LlmReply { text, streamed } => {
                assert_eq!(text, streamed, "the chunks add up to the llm text");
                reply = Some(text.clone());
            }
            _ => {}
        },
        |e| matches!(e, ClientEvent::TtsAudio { audio, .. } if !audio.is_empty()),
    )
    .await
    .expect("a turn");
    (
        transcript.expect("a final transcript"),
        reply.expect("an llm reply"),
    )
}

async fn resumed(c: &mut LlmrtcClientApp) -> (bool, SessionId, bool) {
    match c
        .wait_for(
            "reconnect-ack",
            PATIENCE,
            |_| {},
            |e| matches!(e, ClientEvent::Resumed { .. }),
        )
        .await
        .expect("reconnect-ack")
    {
        ClientEvent::Resumed {
            success,
            session_id,
            history_recovered,
        } => (success, session_id, history_recovered),
        _ => unreachable!(),
    }
}

#[tokio::test]
async fn our_client_against_the_real_backend() {
    let test = "our_client_against_the_real_backend";
    let Some(node) = node_peers(test, PINNED, Tools::default()) else {
        return;
    };
    let _serial = ONE_AT_A_TIME.lock().await;
    let backend = Backend::start(&node, 0, false).await;
    let port = backend.port;
    // Pings every 200 ms; reconnects patient enough to outlast a backend restart (node takes
    // a second or two to start).
    let mut r = Reconnection::default();
    r.base_delay = Duration::from_millis(100);
    r.max_delay = Duration::from_secs(1);
    r.max_retries = 30;
    let config = ClientConfig::default()
        .with_heartbeat(Duration::from_millis(200), Duration::from_secs(5))
        .with_reconnection(r);
    let mut c = LlmrtcClientApp::start(&backend.url(), config, 7)
        .await
        .expect("client");

    // ready.
    let ready = c
        .wait_for(
            "ready",
            PATIENCE,
            |_| {},
            |e| matches!(e, ClientEvent::Ready { .. }),
        )
        .await
        .expect("ready");
    let ClientEvent::Ready {
        id,
        protocol_version,
        ice_servers,
        ..
    } = ready
    else {
        unreachable!()
    };
    assert_eq!(protocol_version, 1);
    assert_eq!(
        ice_servers.map(|s| s.len()),
        Some(1),
        "the backend's ICE list"
    );
    let first = id;

    // Pings: the backend answers each with its timestamp.
    let mut pongs = 0;
    c.wait_for(
        "two pongs",
        PATIENCE,
        |_| {},
        |e| {
            if matches!(e, ClientEvent::Pong { rtt: Some(_), .. }) {
                pongs += 1;
            }
            pongs == 2
        },
    )
    .await
    .expect("pongs");

    // A WAV turn.
    let (heard, reply) = client_turn(&mut c).await;
    assert_eq!(heard, "hello number 1");
    assert_eq!(reply, "You said: hello number 1. I remember 1 messages.");

    // Reconnect with history: the backend keeps the session.
    assert!(c.drop_connection().await.expect("call"));
    assert_eq!(resumed(&mut c).await, (true, first.clone(), true));
    let (_, reply) = client_turn(&mut c).await;
    assert_eq!(
        reply, "You said: hello number 2. I remember 3 messages.",
        "the recovered history reaches the LLM"
    );

    // A backend restart on the same port: the old session is gone, the client moves on.
    backend.stop().await;
    let backend = Backend::start(&node, port, false).await;
    let (success, session, history) = resumed(&mut c).await;
    assert!(!success && !history, "a new backend knows no old session");
    assert_ne!(session, first);
    assert_eq!(
        c.session_id().await.expect("call").as_deref(),
        Some(session.as_str())
    );
    assert_eq!(
        c.state().await.expect("call"),
        ConnectionState::Connected,
        "connected to the new backend"
    );
    let (heard, reply) = client_turn(&mut c).await;
    assert_eq!(heard, "hello number 1");
    assert_eq!(reply, "You said: hello number 1. I remember 1 messages.");

    tokio::time::timeout(PATIENCE, c.close())
        .await
        .expect("client close");
    backend.stop().await;
}

#[tokio::test]
async fn the_real_backend_without_streaming_tts_sends_tts_between_start_and_complete() {
    let test = "the_real_backend_without_streaming_tts_sends_tts_between_start_and_complete";
    let Some(node) = node_peers(test, PINNED, Tools::default()) else {
        return;
    };
    let _serial = ONE_AT_A_TIME.lock().await;
    let backend = Backend::start(&node, 0, true).await;
    let mut c = LlmrtcClientApp::start(&backend.url(), ClientConfig::default(), 8)
        .await
        .expect("client");
    c.wait_for(
        "ready",
        PATIENCE,
        |_| {},
        |e| matches!(e, ClientEvent::Ready { .. }),
    )
    .await
    .expect("ready");
    c.send_audio(utterance_wav(600)).await.expect("send");
    let mut seen = Vec::new();
    c.wait_for(
        "tts-complete",
        PATIENCE,
        |e| seen.push(e.clone()),
        |e| matches!(e, ClientEvent::Message(ServerMessage::TtsComplete)),
    )
    .await
    .expect("a turn");
    // What our server sends with streaming TTS off (spec decision 24): the reply, then
    // tts-start, the whole audio in one `tts`, tts-complete; no tts-chunk.
    let order: Vec<&str> = seen
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Message(m) if m.type_name() != "llm-chunk" => Some(m.type_name()),
            ClientEvent::TtsAudio { .. } => Some("tts"),
            ClientEvent::TtsChunk { .. } => Some("tts-chunk"),
            _ => None,
        })
        .collect();
    assert_eq!(
        order,
        ["transcript", "llm", "tts-start", "tts", "tts-complete"],
        "{seen:?}"
    );
    let audio = seen
        .iter()
        .find_map(|e| match e {
            ClientEvent::TtsAudio {
                format,
                sample_rate,
                audio,
            } => Some((format.clone(), *sample_rate, audio.len())),
            _ => None,
        })
        .expect("audio");
    assert_eq!((audio.0.as_str(), audio.1), ("pcm", None), "{audio:?}");
    assert!(audio.2 > 0);
    tokio::time::timeout(PATIENCE, c.close())
        .await
        .expect("client close");
    backend.stop().await;
}

// ---------------------------------------------------------------------------------------
// The real web client against our server.

#[tokio::test]
async fn the_real_web_client_catches_ready_on_20_of_20_connections() {
    let test = "the_real_web_client_catches_ready_on_20_of_20_connections";
    let Some(node) = node_peers(test, PINNED, Tools::default()) else {
        return;
    };
    let _serial = ONE_AT_A_TIME.lock().await;
    let (app, _events) = our_server(false).await;
    let out = run_script(
        &node,
        "llmrtc_web_client.mjs",
        vec!["ready".into(), app.url()],
        Duration::from_secs(120),
    )
    .await;
    assert!(
        out.contains("ready caught on 20 of 20 connections"),
        "{out}"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn the_real_web_client_plays_a_whole_tts_reply() {
    let test = "the_real_web_client_plays_a_whole_tts_reply";
    let Some(node) = node_peers(test, PINNED, Tools::default()) else {
        return;
    };
    let _serial = ONE_AT_A_TIME.lock().await;
    let (app, _events) = our_server_with(false, false).await;
    let out = run_script(
        &node,
        "llmrtc_web_client.mjs",
        vec!["whole-tts".into(), app.url()],
        Duration::from_secs(120),
    )
    .await;
    assert!(out.contains("whole tts ok: "), "{out}");
    assert!(out.contains("web client interop ok"), "{out}");
    app.shutdown().await;
}

#[tokio::test]
async fn the_real_web_client_over_the_websocket_path() {
    let test = "the_real_web_client_over_the_websocket_path";
    let Some(node) = node_peers(test, PINNED, Tools::default()) else {
        return;
    };
    let _serial = ONE_AT_A_TIME.lock().await;
    let (app, _events) = our_server(false).await;
    // The client's 30 s peer-connection timeout sets this test's pace.
    let out = run_script(
        &node,
        "llmrtc_web_client.mjs",
        vec!["session".into(), app.url()],
        Duration::from_secs(180),
    )
    .await;
    assert!(out.contains("web client interop ok"), "{out}");
    let history = history_of_named_session(&app, &out).await;
    assert_eq!(
        history, 4,
        "two turns, user and assistant each, in one session"
    );
    app.shutdown().await;
}

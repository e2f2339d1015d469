//! The real llmrtc web client over real WebRTC, on 127.0.0.1, in Node and in Chromium:
//!
//! - `tests/interop/llmrtc_webrtc_client.mjs`: `@llmrtc/llmrtc-web-client` in Node with `ws`
//!   and `@roamhq/wrtc`: `start()` resolves once the data channel is open, the state is
//!   `connected`, a turn spoken on the microphone track (speech from `espeak-ng` through
//!   wrtc's `RTCAudioSource`) gives `speech-start`/`speech-end`, transcripts, a streamed
//!   reply and TTS on the server's audio track (wrtc's `RTCAudioSink` hears it), with the
//!   payloads on the data channel and each delivered once; the client's own heartbeat (ping
//!   every 15 s, pong back); a reconnect that resumes the session with a new peer and a
//!   second spoken turn;
//! - `tests/interop/llmrtc_browser.mjs`: the page of `examples/llmrtc/` (bundled by esbuild)
//!   in Debian's headless Chromium driven by `puppeteer-core`, with a fake microphone playing
//!   `espeak-ng` speech: `ready`, the data channel opens, the spoken turn gives a transcript,
//!   a streamed reply and TTS heard on the audio track by the page's WebAudio analyser; the
//!   page's screenshot is saved under `target/tmp/llmrtc_webrtc_real/` (its path printed).
//!
//! - our client over WebRTC (`LlmrtcClientApp::start_webrtc`) against the real backend: the
//!   data channel opens, a turn's payloads come from it (each once), and the backend's speech
//!   arrives on the audio track the client offered to receive, decoded from Opus.
//!
//! Each harness runs against the real backend (`tests/interop/llmrtc_backend.mjs`, offline
//! stand-in providers), which pins what the real peers do over WebRTC and proves the
//! harnesses, and against our `llmrtc_server` (the apps' `server_app::start_webrtc`, as the
//! example runs it by default: one UDP socket on 127.0.0.1 for every peer).
//!
//! Needs `node` with the packages of `tests/interop/package.json` (`npm ci --ignore-scripts
//! --prefix tests/interop`), `espeak-ng`, and for the browser Debian's `chromium` (`CHROMIUM`
//! names another binary); `.ci/run` installs them. Without them these tests skip with the
//! reason printed, except under `CI`, where they fail.

#[path = "support/llmrtc_node.rs"]
mod llmrtc_node;

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentwire::llmrtc::{ClientConfig, ClientEvent, ServerConfig, ServerEvent, ServerMessage};
use agentwire_apps::llmrtc;
use llmrtc::audio::utterance_wav;
use llmrtc::client_app::LlmrtcClientApp;
use llmrtc::providers::{Providers, ScriptedStt};
use llmrtc::server_app::{self, LlmrtcApp, Pacing, WebrtcOptions};
use llmrtc::webrtc::{AudioOffer, WebrtcClientEvent};
use llmrtc_node::{node_peers, run_script, scratch, Backend, Tools};
use tokio::sync::mpsc;

/// How long a harness may take: the Node one waits 15 s for the client's own heartbeat, and
/// the real backend's `ready` race can cost a reconnect attempt its 10 s ready timeout.
const HARNESS_BOUND: Duration = Duration::from_secs(240);

/// The failure bound of every wait of our client (never a timing assertion).
const PATIENCE: Duration = Duration::from_secs(30);

/// One test of this file at a time: WebRTC peers, Chromium and real-time audio on two cores.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The packages the harnesses import, with the versions `package.json` pins.
const PINNED: &[(&str, &str)] = &[
    ("@llmrtc/llmrtc-backend", "1.3.0"),
    ("@llmrtc/llmrtc-web-client", "1.2.0"),
    ("@roamhq/wrtc", "0.9.1"),
    ("ws", "8.18.3"),
    ("puppeteer-core", "24.43.1"),
    ("esbuild", "0.28.2"),
];

/// The `node` binary when it, the pinned packages, `espeak-ng` and (for `browser`) Chromium
/// are there. Otherwise `None` (the test skips, saying why), or a failure under CI.
fn webrtc_peers(test: &str, browser: bool) -> Option<PathBuf> {
    let tools = Tools {
        espeak_ng: true,
        chromium: browser,
    };
    node_peers(test, PINNED, tools)
}

/// Our reference server (the example's code) on 127.0.0.1, port 0, serving WebRTC as
/// `llmrtc_server` does by default (one UDP socket on 127.0.0.1, any free port).
async fn our_server() -> (LlmrtcApp, mpsc::UnboundedReceiver<ServerEvent>) {
    let transcript = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/agentwire-apps/src/llmrtc/data/transcript.txt");
    let stt = ScriptedStt::from_file(&transcript).expect("transcript");
    let (tx, rx) = mpsc::unbounded_channel();
    let app = server_app::start_webrtc(
        "127.0.0.1:0",
        ServerConfig::default(),
        WebrtcOptions::default(),
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

/// What every run of the Node harness must have printed.
fn assert_node_steps(out: &str) {
    for step in [
        "start() resolved over WebRTC",
        "microphone track shared (renegotiated)",
        "spoken turn ok over WebRTC",
        "heartbeat ok",
        "reconnect ok",
        "second spoken turn ok after the reconnect",
        "webrtc web client ok",
    ] {
        assert!(out.contains(step), "missing {step:?} in:\n{out}");
    }
}

/// What every run of the browser harness must have printed; returns the screenshot's path.
fn assert_browser_steps(out: &str) -> PathBuf {
    for step in [
        "ready",
        "data channel open; start() resolved",
        "fake microphone shared as an audio track",
        "spoken turn ok in Chromium",
        "tts heard on the audio track",
        "browser web client ok",
    ] {
        assert!(out.contains(step), "missing {step:?} in:\n{out}");
    }
    let shot = out
        .lines()
        .find_map(|l| l.strip_prefix("screenshot "))
        .expect("the harness names its screenshot");
    let shot = PathBuf::from(shot.trim());
    let png = std::fs::read(&shot).expect("the screenshot exists");
    assert!(png.starts_with(b"\x89PNG"), "a PNG at {}", shot.display());
    shot
}

// ---------------------------------------------------------------------------------------
// Against the real backend: the harnesses, and what the real peers do over WebRTC.

#[tokio::test]
async fn the_real_web_client_in_node_over_webrtc_against_the_real_backend() {
    let test = "the_real_web_client_in_node_over_webrtc_against_the_real_backend";
    let Some(node) = webrtc_peers(test, false) else {
        return;
    };
    let _serial = ONE_AT_A_TIME.lock().await;
    let backend = Backend::start(&node, 0, false).await;
    let out = run_script(
        &node,
        "llmrtc_webrtc_client.mjs",
        vec![backend.url()],
        HARNESS_BOUND,
    )
    .await;
    assert_node_steps(&out);
    // The stand-in LLM counts the history it was given: the reconnect kept it.
    assert!(
        out.contains("\"You said: hello number 2. I remember 3 messages.\""),
        "{out}"
    );
}

#[tokio::test]
async fn the_real_web_client_in_chromium_against_the_real_backend() {
    let test = "the_real_web_client_in_chromium_against_the_real_backend";
    let Some(node) = webrtc_peers(test, true) else {
        return;
    };
    let _serial = ONE_AT_A_TIME.lock().await;
    let backend = Backend::start(&node, 0, false).await;
    let dir = scratch("chromium-real-backend");
    let out = run_script(
        &node,
        "llmrtc_browser.mjs",
        vec![backend.url(), dir.display().to_string()],
        HARNESS_BOUND,
    )
    .await;
    let shot = assert_browser_steps(&out);
    eprintln!("screenshot of the page: {}", shot.display());
}

/// Our client over WebRTC (`LlmrtcClientApp::start_webrtc`, offering to receive TTS on an
/// Opus track) against the real backend: the data channel opens, and a turn sent as an
/// `audio` message completes with its payloads taken from the data channel, each once, while
/// the backend plays the reply on the audio track.
#[tokio::test]
async fn our_client_over_webrtc_against_the_real_backend() {
    let test = "our_client_over_webrtc_against_the_real_backend";
    let Some(node) = webrtc_peers(test, false) else {
        return;
    };
    let _serial = ONE_AT_A_TIME.lock().await;
    let backend = Backend::start(&node, 0, false).await;
    let mut c = LlmrtcClientApp::start_webrtc(
        &backend.url(),
        ClientConfig::default(),
        11,
        AudioOffer::RecvOnly,
    )
    .await
    .expect("client");
    c.wait_for_event(
        "the data channel to open",
        PATIENCE,
        |_| {},
        |e| matches!(e, WebrtcClientEvent::ChannelOpen),
    )
    .await
    .expect("the data channel opens");
    assert!(c.channel_open().await.expect("call"));

    c.send_audio(utterance_wav(600)).await.expect("send");
    let (mut finals, mut replies, mut track_loud, mut tts_chunks) = (Vec::new(), 0, 0, 0);
    let mut speaking = false;
    c.wait_for_event(
        "tts-complete",
        PATIENCE,
        |e| match e {
            WebrtcClientEvent::Llmrtc(ClientEvent::Message(ServerMessage::Transcript(t)))
                if t.is_final =>
            {
                finals.push(t.text.clone());
            }
            WebrtcClientEvent::Llmrtc(ClientEvent::LlmReply { text, streamed }) => {
                assert_eq!(text, streamed, "the chunks add up to the llm text");
                replies += 1;
            }
            WebrtcClientEvent::Llmrtc(ClientEvent::Message(ServerMessage::TtsStart)) => {
                speaking = true;
            }
            WebrtcClientEvent::Llmrtc(ClientEvent::TtsChunk { .. }) => tts_chunks += 1,
            WebrtcClientEvent::TrackAudio { samples, .. }
                if speaking && samples.iter().any(|s| s.unsigned_abs() >= 300) =>
            {
                track_loud += 1;
            }
            _ => {}
        },
        |e| {
            matches!(
                e,
                WebrtcClientEvent::Llmrtc(ClientEvent::Message(ServerMessage::TtsComplete))
            )
        },
    )
    .await
    .expect("a turn over the data channel");
    assert_eq!(
        finals,
        ["hello number 1"],
        "one final transcript, delivered once"
    );
    assert_eq!(replies, 1, "one llm reply, delivered once");
    assert_eq!(
        tts_chunks, 0,
        "the backend speaks on the track, not in tts-chunk"
    );
    assert!(
        track_loud > 0,
        "the reply's speech arrived on the audio track, decoded"
    );
    assert!(
        c.channel_open().await.expect("call"),
        "the channel stays open"
    );
    tokio::time::timeout(PATIENCE, c.close())
        .await
        .expect("client close");
    backend.stop().await;
}

// ---------------------------------------------------------------------------------------
// Against our server.

#[tokio::test]
async fn the_real_web_client_in_node_over_webrtc() {
    let Some(node) = webrtc_peers("the_real_web_client_in_node_over_webrtc", false) else {
        return;
    };
    let _serial = ONE_AT_A_TIME.lock().await;
    let (app, _events) = our_server().await;
    let out = run_script(
        &node,
        "llmrtc_webrtc_client.mjs",
        vec![app.url()],
        HARNESS_BOUND,
    )
    .await;
    assert_node_steps(&out);
    let session = out
        .lines()
        .find_map(|l| l.strip_prefix("session "))
        .expect("the harness names its session")
        .trim()
        .to_owned();
    let history = app
        .handle
        .call(move |m, _| m.history(&session).map_or(0, Iterator::count))
        .await
        .expect("call");
    assert_eq!(
        history, 4,
        "two spoken turns, user and assistant each, in one session across the reconnect"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn the_real_web_client_in_chromium() {
    let Some(node) = webrtc_peers("the_real_web_client_in_chromium", true) else {
        return;
    };
    let _serial = ONE_AT_A_TIME.lock().await;
    let (app, _events) = our_server().await;
    let dir = scratch("chromium");
    let out = run_script(
        &node,
        "llmrtc_browser.mjs",
        vec![app.url(), dir.display().to_string()],
        HARNESS_BOUND,
    )
    .await;
    let shot = assert_browser_steps(&out);
    eprintln!("screenshot of the page: {}", shot.display());
    app.shutdown().await;
}

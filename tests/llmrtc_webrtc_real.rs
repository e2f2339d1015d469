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
//! - hostile datagrams (garbage, oversized, protocol-shaped, replayed, and the web client's
//!   own STUN requests replayed) sprayed from a plain UDP socket at our server's UDP port
//!   while the real web client in Node runs its whole harness: the session is unharmed.
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
use agentwire_server::llmrtc;
use llmrtc::audio::utterance_wav;
use llmrtc::client_app::LlmrtcClientApp;
use llmrtc::providers::{Providers, ScriptedStt};
use llmrtc::server_app::{self, LlmrtcApp, Pacing, WebrtcOptions};
use llmrtc::webrtc::{AudioOffer, WebrtcClientEvent};
use llmrtc_node::{history_of_named_session, node_peers, run_script, scratch, Backend, Tools};
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
        .join("crates/agentwire-server/src/llmrtc/data/transcript.txt");
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
    let history = history_of_named_session(&app, &out).await;
    assert_eq!(
        history, 4,
        "two spoken turns, user and assistant each, in one session across the reconnect"
    );
    app.shutdown().await;
}

/// The real web client against `agentwire serve`'s gateway (what the binary runs): all five
/// protocols on one listener by path, llmrtc at `/llmrtc` with its WebRTC socket beside it.
#[tokio::test]
async fn the_real_web_client_in_node_over_webrtc_through_the_gateway() {
    use agentwire_server::config::{Config, Protocol};
    use agentwire_server::gateway::Gateway;
    let test = "the_real_web_client_in_node_over_webrtc_through_the_gateway";
    let Some(node) = webrtc_peers(test, false) else {
        return;
    };
    let _serial = ONE_AT_A_TIME.lock().await;
    let logs = scratch("gateway").join("logs");
    let sets = [
        "listener.0.listen=127.0.0.1:0".to_owned(),
        "admin.enabled=false".to_owned(),
        "llmrtc.fast=true".to_owned(),
        format!("relay.log_dir={}", logs.display()),
    ];
    let config = Config::resolve(None, Vec::new(), &sets).expect("configuration");
    let gateway = Gateway::start(&config).await.expect("the gateway starts");
    let url = gateway.url(Protocol::Llmrtc).expect("llmrtc is served");
    assert!(url.ends_with("/llmrtc"), "{url}");
    let out = run_script(&node, "llmrtc_webrtc_client.mjs", vec![url], HARNESS_BOUND).await;
    assert_node_steps(&out);
    gateway.shutdown().await;
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

// ---------------------------------------------------------------------------------------
// Hostile datagrams at our server's UDP socket while the real web client talks over it.

/// The most bursts of hostile datagrams one test sends for each kind of trigger.
const MAX_BURSTS_EACH: usize = 8;

/// The most of the client's own datagrams the trap keeps for replay.
const MAX_CAPTURED: usize = 16;

/// Datagrams no peer sends, for every class the socket tells apart by the first byte
/// (RFC 7983: 0-3 STUN, 20-63 DTLS, 128-191 RTP/RTCP, and the rest): empty, one byte,
/// oversized (9,000 bytes, and 65,507, the largest IPv4 UDP payload), STUN, DTLS and RTP
/// headers with nonsense behind them, and seeded pseudo-random bytes.
fn hostile_datagrams() -> Vec<Vec<u8>> {
    let mut all = vec![
        Vec::new(),
        vec![0x01],
        vec![0x80; 9_000],
        vec![0x16; 65_507],
    ];
    // A STUN binding request (magic cookie) whose USERNAME names no session and whose
    // length runs past the datagram.
    let mut stun = vec![0x00, 0x01, 0x00, 0x40, 0x21, 0x12, 0xa4, 0x42];
    stun.extend_from_slice(&[0x5a; 12]);
    stun.extend_from_slice(&[0x00, 0x06, 0x00, 0x0b]);
    stun.extend_from_slice(b"nobody:none\0");
    all.push(stun);
    // A DTLS ClientHello record header claiming 16 KiB, and an alert for no association.
    all.push(vec![
        22, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x00, 1, 0, 0x3f,
    ]);
    all.push(vec![21, 0xfe, 0xfd, 0, 1, 0, 0, 0, 0, 0, 9, 0, 2, 2, 40]);
    // RTP with Opus's payload type and RTCP sender-report headers, for no SSRC known.
    all.push(vec![
        0x80, 111, 0, 7, 0, 0, 3, 0xc0, 0xca, 0xfe, 0xba, 0xbe, 0xf8, 0xff, 0xfe,
    ]);
    all.push(vec![0x81, 200, 0, 6, 0xca, 0xfe, 0xba, 0xbe]);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for first in [
        0u8, 1, 2, 3, 16, 19, 20, 22, 23, 63, 64, 79, 127, 128, 160, 191, 192, 255,
    ] {
        let mut d = vec![first];
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = usize::try_from(x % 1_400).expect("small") + 1;
        for _ in 0..len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            d.push(x.to_le_bytes()[0]);
        }
        all.push(d);
    }
    all
}

/// A UDP socket the Node harness is told is its STUN server: it never answers, keeps the
/// first [`MAX_CAPTURED`] datagrams the client sends it (its own binding requests, from the
/// port its ICE agent uses) for replay at the server, and reports each one that arrives
/// (the client sends them while it gathers candidates for a new peer connection, and
/// retransmits them through its ICE and DTLS handshake). An empty datagram stops it.
struct StunTrap {
    addr: std::net::SocketAddr,
    captured: std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
    thread: std::thread::JoinHandle<()>,
}

impl StunTrap {
    fn start(arrived: mpsc::UnboundedSender<()>) -> Self {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind the trap");
        let addr = socket.local_addr().expect("trap address");
        let captured = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let keep = captured.clone();
        let thread = std::thread::spawn(move || {
            let mut buf = vec![0u8; 2048];
            while let Ok((n, _)) = socket.recv_from(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut kept = keep.lock().expect("trap lock");
                if kept.len() < MAX_CAPTURED {
                    kept.push(buf[..n].to_vec());
                }
                drop(kept);
                let _ = arrived.send(());
            }
        });
        Self {
            addr,
            captured,
            thread,
        }
    }

    fn captured(&self) -> Vec<Vec<u8>> {
        self.captured.lock().expect("trap lock").clone()
    }

    /// Stops the thread (an empty datagram) and returns what it kept.
    fn stop(self) -> Vec<Vec<u8>> {
        let stopper = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        stopper.send_to(&[], self.addr).expect("stop the trap");
        self.thread.join().expect("trap thread");
        self.captured.lock().expect("trap lock").clone()
    }
}

/// What the spray did: its bursts' triggers, the client's STUN requests seen, datagrams
/// sent, and replays of the client's own among them.
#[derive(Debug, Default)]
struct Spray {
    triggers: Vec<&'static str>,
    client_stun: usize,
    sent: usize,
    replayed: usize,
}

/// The real web client in Node over WebRTC completes its whole run (two spoken turns, its
/// heartbeat, a reconnect with a new peer connection) while a plain `std::net::UdpSocket`
/// sprays our server's UDP port with hostile datagrams: a burst at every session start,
/// the client's STUN requests (while it sets up a peer connection: gathering, then its
/// retransmissions through ICE and DTLS; the 1st, 2nd, 4th, 8th...), every speech segment sent to the STT
/// (mid-turn) and every resumed session, at most [`MAX_BURSTS_EACH`] of each. Each burst sends
/// [`hostile_datagrams`] twice (replayed) and replays, twice each, the client's own STUN
/// requests caught by a [`StunTrap`] posing as its STUN server. The session is unharmed:
/// every step of the harness passes, the session has both turns in its history, and the
/// server dropped and counted the junk.
#[tokio::test]
async fn hostile_datagrams_leave_the_real_web_client_unharmed() {
    let test = "hostile_datagrams_leave_the_real_web_client_unharmed";
    let Some(node) = webrtc_peers(test, false) else {
        return;
    };
    let _serial = ONE_AT_A_TIME.lock().await;
    let (app, mut events) = our_server().await;
    let server_udp = app.udp_addr().expect("the server serves WebRTC");
    let (arrived_tx, mut arrived) = mpsc::unbounded_channel();
    let trap = StunTrap::start(arrived_tx);
    let replays = trap.captured.clone();
    let attacker = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind the attacker");
    let dropped_before = app
        .handle
        .call(|m, _| m.webrtc_ref().map_or(0, |w| w.dropped_datagrams()))
        .await
        .expect("call");

    let spray = tokio::spawn(async move {
        let junk = hostile_datagrams();
        let mut spray = Spray::default();
        loop {
            // Until the server's events end (it shut down).
            let trigger = tokio::select! {
                ev = events.recv() => match ev {
                    None => break,
                    Some(ServerEvent::SessionStarted { .. }) => "session-started",
                    Some(ServerEvent::Stt(_)) => "stt",
                    Some(ServerEvent::SessionResumed { .. }) => "session-resumed",
                    Some(_) => continue,
                },
                Some(()) = arrived.recv() => {
                    // The 1st, 2nd, 4th, 8th... request: spread over the client's
                    // exponentially backed-off retransmissions, so over its handshake.
                    spray.client_stun += 1;
                    if !spray.client_stun.is_power_of_two() {
                        continue;
                    }
                    "client-stun"
                }
            };
            if spray.triggers.iter().filter(|t| **t == trigger).count() == MAX_BURSTS_EACH {
                continue;
            }
            spray.triggers.push(trigger);
            let own = replays.lock().expect("trap lock").clone();
            for _ in 0..2 {
                for d in junk.iter().chain(&own) {
                    // A datagram the OS refuses to send is no test of the server; skip it.
                    if attacker.send_to(d, server_udp).is_ok() {
                        spray.sent += 1;
                    }
                }
            }
            spray.replayed += 2 * own.len();
        }
        spray
    });

    let out = run_script(
        &node,
        "llmrtc_webrtc_client.mjs",
        vec![app.url(), format!("stun:{}", trap.addr)],
        HARNESS_BOUND,
    )
    .await;
    assert_node_steps(&out);
    let history = history_of_named_session(&app, &out).await;
    assert_eq!(history, 4, "both spoken turns reached the session");
    let dropped_after = app
        .handle
        .call(|m, _| m.webrtc_ref().map_or(0, |w| w.dropped_datagrams()))
        .await
        .expect("call");
    let caught = trap.captured().len();
    app.shutdown().await;
    let spray = tokio::time::timeout(PATIENCE, spray)
        .await
        .expect("the spray ends with the server's events")
        .expect("spray task");
    let kept = trap.stop();
    eprintln!(
        "hostile bursts at {:?} ({} STUN requests of the client seen): {} datagrams sent, {} \
         of them the client's own {} STUN requests replayed; the server dropped {} datagrams",
        spray.triggers,
        spray.client_stun,
        spray.sent,
        spray.replayed,
        kept.len(),
        dropped_after - dropped_before
    );
    for trigger in ["session-started", "client-stun", "stt", "session-resumed"] {
        assert!(
            spray.triggers.contains(&trigger),
            "a burst at {trigger}: {spray:?}"
        );
    }
    assert!(
        caught > 0,
        "the client sent its STUN server binding requests"
    );
    assert!(
        spray.replayed > 0,
        "the client's own datagrams were replayed"
    );
    assert!(
        dropped_after > dropped_before,
        "junk is dropped and counted: {dropped_before} -> {dropped_after}"
    );
}

//! The llmrtc commands with WebRTC as a user runs them, on 127.0.0.1 with real sockets:
//!
//! - the server's public address, from `llmrtc_server --public-ip` and from the `[llmrtc]`
//!   section of a configuration file, is a host candidate of the SDP answer beside the
//!   bound UDP address, and the answer is ICE-lite;
//! - `agentwire llmrtc client --webrtc` (the `agentwire` binary) against a server on port 0
//!   opens the data channel and completes a turn whose payloads come on it;
//! - `llmrtc_client --webrtc --wav FILE` (the example program) speaks the WAV on its
//!   microphone track and hears the reply's speech on the server's track.

#[path = "support/example_bin.rs"]
#[allow(dead_code)]
// `interrupt` and `lines_of` are for programs that run until stopped; these run to their end
mod example_bin;
#[path = "support/temp_dir.rs"]
mod temp_dir;

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use agentwire::llmrtc::ServerConfig;
use agentwire_server::config::Config;
use agentwire_server::llmrtc;
use clap::Parser as _;
use futures_util::{SinkExt as _, StreamExt as _};
use llmrtc::audio::utterance_wav;
use llmrtc::providers::{Providers, ScriptedStt};
use llmrtc::server_app::{self, LlmrtcApp, Pacing, WebrtcOptions};
use llmrtc::server_cli::ServerArgs;
use tokio_tungstenite::tungstenite::Message;

/// The failure bound of every wait (never a timing assertion).
const PATIENCE: Duration = Duration::from_secs(60);

async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// The reference server on 127.0.0.1 (any free ports) with `config` and `webrtc`.
async fn webrtc_server(config: ServerConfig, webrtc: WebrtcOptions) -> LlmrtcApp {
    server_app::start_webrtc(
        "127.0.0.1:0",
        config,
        webrtc,
        Providers::stand_ins(ScriptedStt::example()),
        Pacing::fast(),
        |_| {},
    )
    .await
    .expect("bind")
}

/// An offer as a browser writes one for a data channel (the server only answers it; no
/// peer connection is made).
const OFFER_SDP: &str = "v=0\r\n\
o=- 4611731400430051336 2 IN IP4 127.0.0.1\r\n\
s=-\r\n\
t=0 0\r\n\
a=group:BUNDLE 0\r\n\
a=extmap-allow-mixed\r\n\
a=msid-semantic: WMS\r\n\
m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\n\
c=IN IP4 0.0.0.0\r\n\
a=ice-ufrag:Hx4q\r\n\
a=ice-pwd:3Jf8sDpOaTqYz2KvLmN0bWcE\r\n\
a=ice-options:trickle\r\n\
a=fingerprint:sha-256 8C:71:B3:8D:A5:38:FD:8F:A4:2E:A2:65:6C:86:52:BC:E0:6E:94:F2:9F:7C:4D:B1:DF:AF:88:9F:A5:19:B6:1E\r\n\
a=setup:actpass\r\n\
a=mid:0\r\n\
a=sctp-port:5000\r\n\
a=max-message-size:262144\r\n";

/// Connects to `app` over a plain WebSocket, waits for `ready`, sends [`OFFER_SDP`] as an
/// `offer` and returns the SDP of the `signal` answer.
async fn answer_of(app: &LlmrtcApp) -> String {
    let (mut ws, _) = within("connect", tokio_tungstenite::connect_async(app.url()))
        .await
        .expect("connect");
    let mut ready = false;
    within("ready and the answer", async {
        while let Some(msg) = ws.next().await {
            let Message::Text(text) = msg.expect("frame") else {
                continue;
            };
            let v: serde_json::Value = serde_json::from_str(&text).expect("json");
            match v["type"].as_str() {
                Some("ready") if !ready => {
                    ready = true;
                    let offer = serde_json::json!({
                        "type": "offer",
                        "signal": {"type": "offer", "sdp": OFFER_SDP},
                    });
                    ws.send(Message::text(offer.to_string()))
                        .await
                        .expect("send");
                }
                Some("signal") => {
                    assert_eq!(v["signal"]["type"], "answer", "{v}");
                    let _ = ws.close(None).await;
                    return v["signal"]["sdp"].as_str().expect("sdp").to_owned();
                }
                Some("error") => panic!("the offer was refused: {v}"),
                _ => {}
            }
        }
        panic!("the server hung up before answering");
    })
    .await
}

/// The address of every UDP host candidate of `sdp`.
fn host_candidates(sdp: &str) -> Vec<SocketAddr> {
    sdp.lines()
        .filter_map(|l| l.strip_prefix("a=candidate:"))
        .map(|c| {
            let f: Vec<&str> = c.split_whitespace().collect();
            assert!(f.len() >= 8 && f[2].eq_ignore_ascii_case("udp"), "{c}");
            assert_eq!((f[6], f[7]), ("typ", "host"), "{c}");
            SocketAddr::new(
                f[4].parse().expect("candidate ip"),
                f[5].parse().expect("candidate port"),
            )
        })
        .collect()
}

/// Asserts that `app`'s answer is ICE-lite with its bound UDP address and `public` (on the
/// bound port) as host candidates, in that order.
async fn assert_answer_names(app: &LlmrtcApp, public: IpAddr) {
    let udp = app.udp_addr().expect("udp");
    let sdp = answer_of(app).await;
    let session: Vec<&str> = sdp.lines().take_while(|l| !l.starts_with("m=")).collect();
    assert!(session.contains(&"a=ice-lite"), "ICE-lite:\n{sdp}");
    assert_eq!(
        host_candidates(&sdp),
        vec![udp, SocketAddr::new(public, udp.port())],
        "the bound address, then the public one on the same port:\n{sdp}"
    );
}

#[tokio::test]
async fn the_public_ip_of_the_command_line_and_of_the_config_file_is_a_host_candidate() {
    // `llmrtc_server --public-ip 203.0.113.7` (and `agentwire llmrtc server`, the same flags).
    let args = ServerArgs::parse_from(["llmrtc_server", "--public-ip", "203.0.113.7"]);
    let app = webrtc_server(
        args.config().expect("config"),
        args.webrtc().expect("webrtc"),
    )
    .await;
    assert_answer_names(&app, "203.0.113.7".parse().expect("ip")).await;
    within("shutdown", app.shutdown()).await;

    // `[llmrtc] public_ips` of a configuration file.
    let config = Config::from_toml_str(
        "[llmrtc]\npublic_ips = [\"198.51.100.4\"]\n",
        "llmrtc_webrtc_cli.toml",
    )
    .expect("config");
    let app = webrtc_server(
        config.llmrtc.server_config().expect("llmrtc config"),
        config
            .llmrtc
            .webrtc_options()
            .expect("webrtc on by default"),
    )
    .await;
    assert_answer_names(&app, "198.51.100.4".parse().expect("ip")).await;
    within("shutdown", app.shutdown()).await;
}

/// Runs `program args` to its end (killed after [`PATIENCE`]) and returns its stdout,
/// asserting a clean exit.
async fn run(program: PathBuf, args: Vec<String>) -> String {
    let what = format!("{} {}", program.display(), args.join(" "));
    let child = std::process::Command::new(&program)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let pid = child.id();
    let waited = tokio::time::timeout(
        PATIENCE,
        tokio::task::spawn_blocking(move || child.wait_with_output()),
    )
    .await;
    let Ok(out) = waited else {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
        panic!("timed out: {what}");
    };
    let out = out.expect("join").expect("wait");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what}: {:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    stdout
}

/// The numbers of the line `--- turn N over WebRTC: P payload messages came on the data
/// channel, B bytes of UDP received`: `(P, B)`.
fn turn_over_webrtc(stdout: &str, turn: u32) -> (usize, u64) {
    let prefix = format!("--- turn {turn} over WebRTC: ");
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no '{prefix}' line:\n{stdout}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let payloads = words[0].parse().expect("payload count");
    let bytes_at = words.iter().position(|w| *w == "bytes").expect("bytes") - 1;
    let bytes = words[bytes_at]
        .trim_end_matches(',')
        .parse()
        .expect("bytes");
    (payloads, bytes)
}

fn assert_no_fallback(stdout: &str) {
    for bad in [
        "no WebRTC",
        "peer connection closed",
        "[ignored]",
        "[violation]",
    ] {
        assert!(!stdout.contains(bad), "{bad:?} in:\n{stdout}");
    }
}

#[tokio::test]
async fn agentwire_llmrtc_client_webrtc_runs_a_turn_on_the_data_channel() {
    let app = webrtc_server(ServerConfig::default(), WebrtcOptions::default()).await;
    let bin = tokio::task::spawn_blocking(example_bin::agentwire)
        .await
        .expect("build");
    let out = temp_dir::temp_dir("client-webrtc");
    let stdout = run(
        bin,
        vec![
            "llmrtc".into(),
            "client".into(),
            "--url".into(),
            app.url(),
            "--webrtc".into(),
            "--out".into(),
            out.display().to_string(),
        ],
    )
    .await;
    let opened = stdout
        .find("WebRTC data channel open")
        .unwrap_or_else(|| panic!("the data channel opened:\n{stdout}"));
    let turn = stdout.find("--- turn 1:").expect("the turn started");
    assert!(opened < turn, "open before the turn:\n{stdout}");
    for line in [
        "[transcript] \"Hello there, who am I talking to?\"",
        "[reply] ",
        "[speech] ",
    ] {
        assert!(stdout.contains(line), "{line:?} in:\n{stdout}");
    }
    assert_no_fallback(&stdout);
    // The transcript, the streamed reply and its speech came on the data channel (their
    // WebSocket copies set aside), over UDP.
    let (payloads, udp_bytes) = turn_over_webrtc(&stdout, 1);
    assert!(payloads >= 5, "payloads on the data channel:\n{stdout}");
    assert!(udp_bytes > 1000, "the payloads came over UDP:\n{stdout}");
    let reply = std::fs::metadata(out.join("reply-1.wav")).expect("reply-1.wav");
    assert!(reply.len() > 44, "the reply's audio was written");
    let server_udp = app.server.udp_stats().expect("server udp stats");
    assert!(server_udp.sent_bytes > udp_bytes / 2, "{server_udp:?}");
    within("shutdown", app.shutdown()).await;
}

#[tokio::test]
async fn llmrtc_client_webrtc_wav_speaks_on_the_microphone_track() {
    let app = webrtc_server(ServerConfig::default(), WebrtcOptions::default()).await;
    let bin = tokio::task::spawn_blocking(|| example_bin::example("llmrtc_client"))
        .await
        .expect("build");
    let dir = temp_dir::temp_dir("client-webrtc-wav");
    let wav = dir.join("hello.wav");
    std::fs::write(&wav, utterance_wav(600)).expect("write wav");
    let stdout = run(
        bin,
        vec![
            "--url".into(),
            app.url(),
            "--webrtc".into(),
            "--wav".into(),
            wav.display().to_string(),
            "--out".into(),
            dir.display().to_string(),
        ],
    )
    .await;
    assert!(
        stdout.contains("WebRTC data channel open"),
        "the data channel opened:\n{stdout}"
    );
    assert!(
        stdout.contains("--- turn 1: speaking"),
        "the WAV went on the microphone track:\n{stdout}"
    );
    // The server's VAD heard the track: speech started and ended, and the utterance was
    // transcribed.
    let spoken = stdout.find("--- turn 1: speaking").expect("speaking");
    let transcript = stdout
        .find("[transcript] \"Hello there, who am I talking to?\"")
        .unwrap_or_else(|| panic!("the track's utterance was transcribed:\n{stdout}"));
    assert!(spoken < transcript, "{stdout}");
    assert!(stdout.contains("[reply] "), "{stdout}");
    // The reply's speech came on the server's track, not as tts-chunk messages.
    assert!(
        !stdout.contains("[speech] "),
        "no TTS in messages:\n{stdout}"
    );
    let heard: f64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("heard "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no 'heard' line:\n{stdout}"))
        .parse()
        .expect("seconds");
    assert!(heard > 0.0, "speech heard on the server's track:\n{stdout}");
    assert_no_fallback(&stdout);
    let (payloads, udp_bytes) = turn_over_webrtc(&stdout, 1);
    assert!(payloads >= 3, "payloads on the data channel:\n{stdout}");
    assert!(
        udp_bytes > 10_000,
        "the track's audio came over UDP:\n{stdout}"
    );
    let reply = std::fs::metadata(dir.join("reply-1.wav")).expect("reply-1.wav");
    assert!(reply.len() > 44, "the track's speech was written");
    within("shutdown", app.shutdown()).await;
}

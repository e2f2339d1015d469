//! Rust ↔ Rust over real WebRTC on 127.0.0.1: the reference llmrtc server with WebRTC
//! (`server_app::start_webrtc`: one UDP socket, `WebrtcServer`) and the reference client
//! (`LlmrtcClientApp::start_webrtc`: `WebrtcClient` on its own UDP socket), both driven by
//! agentwire-tokio's UDP support:
//!
//! - offer/answer and the data channel opening within the 2 s, counted from the
//!   client's start (WebSocket, `ready`, offer) to the open channel (typically tens of
//!   milliseconds: the bound is functional, a connection that takes seconds is broken);
//! - a turn whose payloads (transcripts, streamed reply, TTS) arrive on the data channel,
//!   each delivered to the application once (the WebSocket copies are ignored);
//! - a reconnect that resumes the session with a new peer connection;
//! - a client that drops all its UDP: the server gives up on the peer after its connect
//!   timeout with `error CONNECTION_FAILED` and the session goes on over the WebSocket;
//! - garbage, oversized and protocol-shaped junk datagrams sprayed at the server's socket
//!   hurt no session, nor do the client's own datagrams (valid STUN checks, the DTLS
//!   handshake, SCTP) replayed from another address;
//! - a turn spoken on the microphone track with TTS heard on the server's track, and a
//!   barge-in over it;
//! - with WebRTC off (`--no-webrtc`), an offer still gets `WEBRTC_UNAVAILABLE`.

use std::future::Future;
use std::time::Duration;

use agentwire::llmrtc::{ClientConfig, ClientEvent, IgnoreReason, Reconnection, ServerConfig};
use agentwire::llmrtc::{ErrorCode, ServerMessage, SplitMix64};
use std::net::SocketAddr;

use agentwire::core::{
    ConnId, DatagramMachine, Dial, Dialer, Frame, Machine, Output, PeerInfo, Transmit,
};
use agentwire::tokio::Client;
use agentwire_server::llmrtc;
use clap::Parser as _;
use llmrtc::audio::utterance_wav;
use llmrtc::client_app::{transport_config, LlmrtcClientApp};
use llmrtc::machine::ClientMachine;
use llmrtc::providers::{Providers, ScriptedStt};
use llmrtc::server_app::{self, LlmrtcApp, Pacing, WebrtcOptions};
use llmrtc::server_cli::ServerArgs;
use llmrtc::webrtc::{AudioOffer, WebrtcClient, WebrtcClientEvent, WebrtcConfig};

/// The failure bound of every wait (never a timing assertion).
const PATIENCE: Duration = Duration::from_secs(20);

async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// Reconnects within milliseconds, so reconnect tests stay fast.
fn fast_client() -> ClientConfig {
    let mut r = Reconnection::default();
    r.base_delay = Duration::from_millis(20);
    r.max_delay = Duration::from_millis(200);
    ClientConfig::default().with_reconnection(r)
}

/// The reference server with WebRTC on 127.0.0.1 (any free ports).
async fn webrtc_server(options: WebrtcOptions) -> LlmrtcApp {
    server_app::start_webrtc(
        "127.0.0.1:0",
        ServerConfig::default(),
        options,
        Providers::stand_ins(ScriptedStt::example()),
        Pacing::fast(),
        |_| {},
    )
    .await
    .expect("bind")
}

/// A WebRTC client of `app`, its data channel open. Returns how long the channel took to
/// open after the client started.
async fn open_client(app: &LlmrtcApp, seed: u64) -> (LlmrtcClientApp, Duration) {
    let started = tokio::time::Instant::now();
    let mut c = LlmrtcClientApp::start_webrtc(&app.url(), fast_client(), seed, AudioOffer::None)
        .await
        .expect("client");
    channel_open(&mut c).await;
    (c, started.elapsed())
}

async fn channel_open(c: &mut LlmrtcClientApp) {
    c.wait_for_event(
        "the data channel to open",
        PATIENCE,
        |_| {},
        |e| matches!(e, WebrtcClientEvent::ChannelOpen),
    )
    .await
    .expect("data channel open");
    assert!(c.channel_open().await.expect("call"));
}

/// What the application saw of one turn.
#[derive(Debug, Default)]
struct Turn {
    /// Payload messages handed to the application, by type.
    handled: Vec<&'static str>,
    /// Copies ignored because the other channel carries them, by type.
    ignored_copies: Vec<String>,
    transcript: Option<String>,
    reply: Option<(String, String)>,
}

impl Turn {
    fn count(&self, ty: &str) -> usize {
        self.handled.iter().filter(|t| **t == ty).count()
    }

    fn ignored(&self, ty: &str) -> usize {
        self.ignored_copies.iter().filter(|t| *t == ty).count()
    }
}

/// Sends one utterance as `audio` and collects what the client hands over up to the
/// reply's audio.
async fn turn(c: &mut LlmrtcClientApp) -> Turn {
    c.send_audio(utterance_wav(600)).await.expect("send");
    let mut t = Turn::default();
    c.wait_for(
        "the reply's audio",
        PATIENCE,
        |e| match e {
            ClientEvent::Message(m) => {
                t.handled.push(m.type_name());
                if let ServerMessage::Transcript(tr) = m {
                    if tr.is_final {
                        t.transcript = Some(tr.text.clone());
                    }
                }
            }
            ClientEvent::LlmReply { text, streamed } => {
                t.reply = Some((text.clone(), streamed.clone()));
            }
            ClientEvent::Ignored {
                type_name,
                reason: IgnoreReason::OtherChannel,
            } => t.ignored_copies.push(type_name.clone()),
            _ => {}
        },
        |e| matches!(e, ClientEvent::TtsAudio { audio, .. } if !audio.is_empty()),
    )
    .await
    .expect("a turn");
    t
}

/// A turn whose payloads came on the data channel, each handed over once.
fn assert_turn_on_the_data_channel(t: &Turn) {
    assert!(t.transcript.is_some(), "a final transcript: {t:?}");
    let (text, streamed) = t.reply.clone().expect("an llm reply");
    assert!(!text.is_empty());
    assert_eq!(text, streamed, "the chunks add up to the reply once: {t:?}");
    for ty in ["transcript", "llm-chunk", "llm", "tts-start"] {
        assert!(t.count(ty) >= 1, "{ty} handed over: {t:?}");
        assert_eq!(
            t.ignored(ty),
            t.count(ty),
            "every {ty} came on the data channel and its WebSocket copy was ignored: {t:?}"
        );
    }
    // TTS chunks are handed over as the reply's audio (`TtsAudio`, the wait's end), their
    // WebSocket copies set aside as the others'.
    assert!(t.ignored("tts-chunk") >= 1, "{t:?}");
    assert_eq!(
        t.count("tts-complete"),
        1,
        "one reply, completed once: {t:?}"
    );
}

#[tokio::test]
async fn the_data_channel_opens_and_a_turn_runs_on_it_each_payload_once() {
    let app = webrtc_server(WebrtcOptions::default()).await;
    let udp = app.udp_addr().expect("udp");
    assert_eq!(udp.ip(), app.local_addr().ip(), "UDP on the WebSocket's IP");
    let (mut c, took) = open_client(&app, 1).await;
    assert!(
        took < Duration::from_secs(2),
        "the data channel opened {took:?} after the client started (WebSocket, ready, offer); \
         the issue asks for 2 s"
    );
    let peers = app
        .handle
        .call(|m, _| m.webrtc_ref().map(|w| w.peers()))
        .await
        .expect("call");
    assert_eq!(peers, Some(1));
    let before = c.udp_stats().expect("udp stats");
    let t = turn(&mut c).await;
    assert_turn_on_the_data_channel(&t);
    let after = c.udp_stats().expect("udp stats");
    assert!(
        after.received_bytes > before.received_bytes + 1000,
        "the turn's payloads came over UDP: {before:?} -> {after:?}"
    );
    // A second turn on the same channel.
    assert_turn_on_the_data_channel(&turn(&mut c).await);
    let server_udp = app.server.udp_stats().expect("server udp stats");
    assert_eq!(server_udp.send_errors, 0, "{server_udp:?}");
    c.close().await;
    within("shutdown", app.shutdown()).await;
}

#[tokio::test]
async fn a_reconnect_resumes_the_session_with_a_new_peer_connection() {
    let app = webrtc_server(WebrtcOptions::default()).await;
    let (mut c, _) = open_client(&app, 2).await;
    assert_turn_on_the_data_channel(&turn(&mut c).await);
    let session = c.session_id().await.expect("call").expect("session");
    c.drop_connection().await.expect("drop");
    let mut closed = false;
    let mut resumed = None;
    c.wait_for_event(
        "the new peer's data channel",
        PATIENCE,
        |e| match e {
            WebrtcClientEvent::PeerClosed => closed = true,
            WebrtcClientEvent::Llmrtc(ClientEvent::Resumed {
                success,
                session_id,
                ..
            }) => resumed = Some((*success, session_id.to_string())),
            _ => {}
        },
        |e| matches!(e, WebrtcClientEvent::ChannelOpen),
    )
    .await
    .expect("a new data channel");
    assert!(closed, "the old peer connection closed with the WebSocket");
    assert_eq!(resumed, Some((true, session.clone())));
    assert_turn_on_the_data_channel(&turn(&mut c).await);
    // The old peer is gone on the server: one peer for the one connection.
    let peers = app
        .handle
        .call(|m, _| m.webrtc_ref().map(|w| w.peers()))
        .await
        .expect("call");
    assert_eq!(peers, Some(1));
    c.close().await;
    within("shutdown", app.shutdown()).await;
}

#[tokio::test]
async fn a_client_that_drops_its_udp_gets_connection_failed_and_goes_on_over_the_websocket() {
    let options = WebrtcOptions::default()
        .with_config(WebrtcConfig::default().with_connect_timeout(Duration::from_secs(2)));
    let app = webrtc_server(options).await;
    // A WebRTC client driven without a UDP socket: its offer goes out, but no datagram ever
    // leaves or reaches it, so ICE never completes.
    let bind = "127.0.0.1:9".parse().expect("addr");
    let mut machine = WebrtcClient::new(fast_client(), SplitMix64::new(3), WebrtcConfig::new(bind))
        .expect("client");
    machine.set_auto_offer(Some(AudioOffer::None));
    let (handle, events) = Client::connect_dialer(
        &app.url(),
        ClientMachine::webrtc(machine),
        transport_config(),
    )
    .expect("connect");
    let (now, unix_ms) = agentwire_server::common::clocks();
    handle
        .call(move |c, _| {
            c.set_wall_clock(now, unix_ms);
            c.start(now)
        })
        .await
        .expect("call")
        .expect("start");
    let mut c = LlmrtcClientApp { handle, events };
    let failed = c
        .wait_for(
            "CONNECTION_FAILED",
            PATIENCE,
            |_| {},
            |e| {
                matches!(e, ClientEvent::Message(ServerMessage::Error(err))
                    if err.code == ErrorCode::CONNECTION_FAILED)
            },
        )
        .await;
    assert!(failed.is_ok(), "{failed:?}");
    let peers = app
        .handle
        .call(|m, _| m.webrtc_ref().map(|w| w.peers()))
        .await
        .expect("call");
    assert_eq!(peers, Some(0), "the server dropped the peer");
    // The session goes on over the WebSocket: a whole turn, each payload once.
    let t = turn(&mut c).await;
    assert!(t.transcript.is_some(), "{t:?}");
    let (text, streamed) = t.reply.clone().expect("reply");
    assert_eq!(text, streamed, "{t:?}");
    assert!(t.ignored_copies.is_empty(), "nothing came twice: {t:?}");
    c.close().await;
    within("shutdown", app.shutdown()).await;
}

/// Junk shaped like every protocol on the socket, and worse.
fn junk() -> Vec<Vec<u8>> {
    let mut all = vec![
        Vec::new(),
        vec![0],
        vec![0xff; 3000], // over the datagram limit
        vec![0xab; 65_000],
    ];
    // STUN-shaped: binding request header with the magic cookie, truncated and with a
    // USERNAME attribute naming no peer.
    let mut stun = vec![0x00, 0x01, 0x00, 0x0c, 0x21, 0x12, 0xa4, 0x42];
    stun.extend_from_slice(&[7; 12]);
    stun.extend_from_slice(&[0x00, 0x06, 0x00, 0x08]);
    stun.extend_from_slice(b"nobody:x");
    all.push(stun.clone());
    all.push(stun[..10].to_vec());
    // DTLS-shaped: a handshake record header with a huge length, and a ClientHello start.
    all.push(vec![
        22, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 1, 2, 3,
    ]);
    all.push(vec![
        22, 0xfe, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 20, 1, 0, 0, 16,
    ]);
    // SRTP/RTP-shaped: version 2 headers with payload types of Opus and RTCP.
    all.push(vec![
        0x80, 111, 0, 1, 0, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4,
    ]);
    all.push(vec![0x80, 200, 0, 6, 0xde, 0xad, 0xbe, 0xef]);
    // Pseudo-random bytes of every first byte.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for first in 0..=255u8 {
        let mut d = vec![first];
        for _ in 0..(usize::from(first) % 200 + 1) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            d.push(x as u8);
        }
        all.push(d);
    }
    all
}

#[tokio::test]
async fn junk_datagrams_hurt_no_session() {
    let app = webrtc_server(WebrtcOptions::default()).await;
    let server_udp = app.udp_addr().expect("udp");
    let (mut c, _) = open_client(&app, 4).await;
    let dropped_before = app
        .handle
        .call(|m, _| m.webrtc_ref().map_or(0, |w| w.dropped_datagrams()))
        .await
        .expect("call");
    let attacker = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let junk = junk();
    for round in 0..3 {
        for d in &junk {
            // A datagram the OS refuses (too large for loopback) is no test; skip it.
            let _ = attacker.send_to(d, server_udp).await;
        }
        if round == 1 {
            // A turn in the middle of the spray.
            assert_turn_on_the_data_channel(&turn(&mut c).await);
        }
    }
    // Everything still works, on the same channel.
    assert!(c.channel_open().await.expect("call"));
    assert_turn_on_the_data_channel(&turn(&mut c).await);
    let dropped_after = app
        .handle
        .call(|m, _| m.webrtc_ref().map_or(0, |w| w.dropped_datagrams()))
        .await
        .expect("call");
    assert!(
        dropped_after > dropped_before,
        "junk is dropped and counted: {dropped_before} -> {dropped_after}"
    );
    // A second client connects after the spray.
    let (mut d, _) = open_client(&app, 5).await;
    assert_turn_on_the_data_channel(&turn(&mut d).await);
    c.close().await;
    d.close().await;
    within("shutdown", app.shutdown()).await;
}

#[tokio::test]
async fn the_server_command_serves_webrtc_unless_told_not_to() {
    let args = ServerArgs::parse_from(["llmrtc_server"]);
    let options = args.webrtc().expect("webrtc by default");
    assert_eq!(options.udp_port, 0, "any free port by default");
    let args = ServerArgs::parse_from([
        "llmrtc_server",
        "--udp-port",
        "50123",
        "--public-ip",
        "203.0.113.7",
        "--ice-server",
        "stun:stun.example.org:3478",
        "--ice-server",
        "turn:turn.example.org:3478,user,secret",
    ]);
    let options = args.webrtc().expect("webrtc");
    assert_eq!(options.udp_port, 50123);
    assert_eq!(
        options.public_ips,
        vec!["203.0.113.7".parse::<std::net::IpAddr>().expect("ip")]
    );
    let config = args.config().expect("config");
    assert_eq!(config.ice_servers.len(), 2);
    assert_eq!(config.ice_servers[1].username.as_deref(), Some("user"));
    assert!(ServerArgs::parse_from(["llmrtc_server", "--no-webrtc"])
        .webrtc()
        .is_none());
    assert!(
        ServerArgs::parse_from(["llmrtc_server", "--ice-server", "http://x"])
            .config()
            .is_err()
    );

    // Without WebRTC an offer gets WEBRTC_UNAVAILABLE, and the same client works on.
    let app = server_app::start(
        "127.0.0.1:0",
        ServerConfig::default(),
        Providers::stand_ins(ScriptedStt::example()),
        Pacing::fast(),
        |_| {},
    )
    .await
    .expect("bind");
    assert!(app.udp_addr().is_none());
    let mut c = LlmrtcClientApp::start_webrtc(&app.url(), fast_client(), 6, AudioOffer::None)
        .await
        .expect("client");
    let unavailable = c
        .wait_for(
            "WEBRTC_UNAVAILABLE",
            PATIENCE,
            |_| {},
            |e| {
                matches!(e, ClientEvent::Message(ServerMessage::Error(err))
                    if err.code == ErrorCode::WEBRTC_UNAVAILABLE)
            },
        )
        .await;
    assert!(unavailable.is_ok(), "{unavailable:?}");
    let t = turn(&mut c).await;
    assert!(t.reply.is_some(), "{t:?}");
    c.close().await;
    within("shutdown", app.shutdown()).await;
}

/// A client offering a microphone track, its data channel open and its track up.
async fn open_audio_client(app: &LlmrtcApp, seed: u64) -> LlmrtcClientApp {
    let mut c =
        LlmrtcClientApp::start_webrtc(&app.url(), fast_client(), seed, AudioOffer::SendRecv)
            .await
            .expect("client");
    let (mut open, mut track) = (false, false);
    c.wait_for_event(
        "the data channel and the microphone track",
        PATIENCE,
        |_| {},
        |e| {
            match e {
                WebrtcClientEvent::ChannelOpen => open = true,
                WebrtcClientEvent::TrackReady => track = true,
                _ => {}
            }
            open && track
        },
    )
    .await
    .expect("channel and track");
    c
}

/// What the client saw of a turn spoken on the microphone track, up to `until`.
#[derive(Debug, Default)]
struct TrackTurn {
    handled: Vec<&'static str>,
    transcript: Option<String>,
    /// Loudest sample of the TTS heard on the server's track.
    track_peak: i16,
    track_samples: usize,
    tts_messages: usize,
}

async fn speak(c: &mut LlmrtcClientApp, until: &'static str) -> TrackTurn {
    c.send_mic_wav(&utterance_wav(600)).await.expect("mic");
    listen(c, until).await
}

async fn listen(c: &mut LlmrtcClientApp, until: &'static str) -> TrackTurn {
    let mut t = TrackTurn::default();
    c.wait_for_event(
        until,
        PATIENCE,
        |e| match e {
            WebrtcClientEvent::TrackAudio { samples, .. } => {
                t.track_samples += samples.len();
                t.track_peak = t
                    .track_peak
                    .max(samples.iter().map(|s| s.saturating_abs()).max().unwrap_or(0));
            }
            WebrtcClientEvent::Llmrtc(ClientEvent::Message(m)) => {
                t.handled.push(m.type_name());
                if let ServerMessage::Transcript(tr) = m {
                    if tr.is_final {
                        t.transcript = Some(tr.text.clone());
                    }
                }
            }
            WebrtcClientEvent::Llmrtc(ClientEvent::TtsAudio { .. }) => t.tts_messages += 1,
            _ => {}
        },
        |e| matches!(e, WebrtcClientEvent::Llmrtc(ClientEvent::Message(m)) if m.type_name() == until),
    )
    .await
    .expect(until);
    t
}

#[tokio::test]
async fn a_turn_over_the_audio_tracks_and_a_barge_in() {
    let app = webrtc_server(WebrtcOptions::default()).await;
    let mut c = open_audio_client(&app, 7).await;

    // A turn spoken on the microphone track; the reply's speech comes on the server's track.
    let t = speak(&mut c, "tts-complete").await;
    for ty in [
        "speech-start",
        "speech-end",
        "transcript",
        "llm",
        "tts-start",
    ] {
        assert!(t.handled.contains(&ty), "{ty}: {t:?}");
    }
    assert_eq!(
        t.transcript.as_deref(),
        Some("Hello there, who am I talking to?"),
        "{t:?}"
    );
    assert!(
        !t.handled.contains(&"tts-chunk"),
        "TTS goes on the track: {t:?}"
    );
    assert_eq!(t.tts_messages, 0, "{t:?}");
    // The track's audio may trail tts-complete by its jitter; hear it in the next turn's
    // silence if not yet.
    let heard_first = t.track_samples;

    // Barge-in: the long reply starts speaking on the track, the user talks over it.
    let t = speak(&mut c, "tts-start").await;
    assert_eq!(
        t.transcript.as_deref(),
        Some("Tell me a story please."),
        "{t:?}"
    );
    c.send_mic_wav(&utterance_wav(500)).await.expect("mic");
    let cancelled = listen(&mut c, "tts-cancelled").await;
    assert!(
        !cancelled.handled.contains(&"tts-complete"),
        "the long reply is cut off, never completed: {cancelled:?}"
    );
    let next = listen(&mut c, "speech-end").await;
    assert!(
        next.handled.contains(&"speech-start") || cancelled.handled.contains(&"speech-start"),
        "the interruption is heard as speech: {cancelled:?} {next:?}"
    );
    let t = listen(&mut c, "tts-complete").await;
    assert_eq!(
        t.transcript.as_deref(),
        Some("Sorry to interrupt, what time is it?"),
        "{t:?}"
    );
    let heard = heard_first + cancelled.track_samples + next.track_samples + t.track_samples;
    assert!(heard > 0, "TTS was heard on the server's track");
    assert!(
        t.track_peak > 1000 || cancelled.track_peak > 1000,
        "the track carries sound, not silence: {t:?} {cancelled:?}"
    );
    c.close().await;
    within("shutdown", app.shutdown()).await;
}

/// A WebRTC client machine that keeps a copy of every datagram it sends, for replays.
struct Tap {
    inner: ClientMachine,
    sent: std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
}

impl Machine for Tap {
    type Event = WebrtcClientEvent;

    fn handle_connect(&mut self, conn: ConnId, peer: &PeerInfo, now: std::time::Instant) {
        self.inner.handle_connect(conn, peer, now);
    }

    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: std::time::Instant) {
        self.inner.handle_frame(conn, frame, now);
    }

    fn handle_disconnect(&mut self, conn: ConnId, now: std::time::Instant) {
        self.inner.handle_disconnect(conn, now);
    }

    fn handle_timeout(&mut self, now: std::time::Instant) {
        self.inner.handle_timeout(now);
    }

    fn poll_timeout(&self) -> Option<std::time::Instant> {
        self.inner.poll_timeout()
    }

    fn poll_output(&mut self) -> Option<Output<WebrtcClientEvent>> {
        self.inner.poll_output()
    }

    fn handle_wall_clock(&mut self, now: std::time::Instant, unix_ms: u64) {
        self.inner.handle_wall_clock(now, unix_ms);
    }
}

impl Dialer for Tap {
    fn poll_dial(&self) -> Dial {
        self.inner.poll_dial()
    }

    fn handle_dial_failed(&mut self, reason: &str, now: std::time::Instant) {
        self.inner.handle_dial_failed(reason, now);
    }
}

impl DatagramMachine for Tap {
    fn handle_datagram(
        &mut self,
        remote: SocketAddr,
        local: SocketAddr,
        contents: &[u8],
        now: std::time::Instant,
    ) {
        self.inner.handle_datagram(remote, local, contents, now);
    }

    fn poll_transmit(&mut self) -> Option<Transmit> {
        let t = self.inner.poll_transmit()?;
        if let Ok(mut sent) = self.sent.lock() {
            sent.push(t.contents.clone());
        }
        Some(t)
    }
}

/// Events of a tapped client until one matches `pred`.
async fn tapped_wait(
    events: &mut agentwire::tokio::Events<WebrtcClientEvent>,
    what: &str,
    mut pred: impl FnMut(&WebrtcClientEvent) -> bool,
) {
    within(what, async {
        while let Some(e) = events.recv().await {
            if pred(&e) {
                return;
            }
        }
        panic!("client ended before {what}");
    })
    .await;
}

#[tokio::test]
async fn the_clients_own_datagrams_replayed_from_another_address_hurt_no_session() {
    let app = webrtc_server(WebrtcOptions::default()).await;
    let server_udp = app.udp_addr().expect("udp");
    let udp = llmrtc::client_app::udp_socket_towards(&app.url())
        .await
        .expect("udp");
    let bind = udp.local_addr().expect("addr");
    let mut client = WebrtcClient::new(fast_client(), SplitMix64::new(9), WebrtcConfig::new(bind))
        .expect("client");
    client.set_auto_offer(Some(AudioOffer::None));
    let sent = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let tap = Tap {
        inner: ClientMachine::webrtc(client),
        sent: std::sync::Arc::clone(&sent),
    };
    let (handle, mut events) =
        Client::connect_dialer_with_udp(&app.url(), udp, tap, transport_config()).expect("connect");
    let (now, unix_ms) = agentwire_server::common::clocks();
    handle
        .call(move |t, _| {
            t.inner.set_wall_clock(now, unix_ms);
            t.inner.start(now)
        })
        .await
        .expect("call")
        .expect("start");
    tapped_wait(&mut events, "the data channel", |e| {
        matches!(e, WebrtcClientEvent::ChannelOpen)
    })
    .await;
    // Every datagram the client sent so far (STUN checks with valid credentials, the DTLS
    // handshake, SCTP), replayed twice from another address, in order and reversed.
    let recorded = sent.lock().expect("lock").clone();
    assert!(recorded.len() > 5, "{} datagrams recorded", recorded.len());
    let attacker = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("bind");
    for d in recorded.iter().chain(recorded.iter().rev()) {
        attacker.send_to(d, server_udp).await.expect("replay");
    }
    // The session still works on its data channel: a turn's payloads arrive on it, once.
    handle
        .call(|t, now| t.inner.send_audio(&utterance_wav(600), &[], now))
        .await
        .expect("call")
        .expect("audio");
    let (mut on_channel, mut reply) = (0, None);
    tapped_wait(&mut events, "the reply's audio", |e| match e {
        WebrtcClientEvent::Llmrtc(ClientEvent::Ignored {
            reason: IgnoreReason::OtherChannel,
            ..
        }) => {
            on_channel += 1;
            false
        }
        WebrtcClientEvent::Llmrtc(ClientEvent::LlmReply { text, streamed }) => {
            reply = Some((text.clone(), streamed.clone()));
            false
        }
        WebrtcClientEvent::Llmrtc(ClientEvent::TtsAudio { .. }) => true,
        _ => false,
    })
    .await;
    let (text, streamed) = reply.expect("a reply");
    assert_eq!(text, streamed, "each chunk once");
    assert!(
        on_channel > 5,
        "the payloads came on the data channel: {on_channel}"
    );
    let open = handle
        .call(|t, _| {
            t.inner
                .webrtc_ref()
                .is_some_and(WebrtcClient::is_channel_open)
        })
        .await
        .expect("call");
    assert!(open, "the channel is still open");
    handle.shutdown().await;
    within("shutdown", app.shutdown()).await;
}

//! The reference llmrtc server: an `LlmrtcServer` machine served by agentwire-tokio, with
//! WebRTC ([`start_webrtc`]: a data channel and audio tracks for every session, all peers
//! on one UDP socket) or over the WebSocket alone ([`start`]), its provider requests
//! answered by [`Providers`] (the offline stand-ins unless you plug in real ones), LLM
//! tokens and TTS audio streamed with a configurable pace.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use agentwire::core::UuidV4Ids;
use agentwire::llmrtc::{LlmrtcServer, ProviderError, RequestId, ServerConfig, ServerEvent};
use agentwire::tokio::{Events, Handle, ServerConfig as TransportConfig};
use llmrtc_webrtc::{WebrtcConfig, WebrtcServer, WebrtcServerEvent};

use super::machine::ServerMachine;
use super::providers::{LlmStep, Providers, Transcription};
use crate::endpoint::{Endpoint, Mount, Place};

/// How fast the stand-ins stream (a real LLM or TTS streams at its own pace).
#[derive(Debug, Clone, Copy)]
pub struct Pacing {
    /// Wait before each LLM token.
    pub token: Duration,
    /// Wait before each TTS piece (one word of tones).
    pub tts_piece: Duration,
}

impl Pacing {
    /// About real time: 30 ms per token, 150 ms per spoken word.
    pub fn real_time() -> Self {
        Self {
            token: Duration::from_millis(30),
            tts_piece: Duration::from_millis(150),
        }
    }

    /// Fast, for the demo and tests: 2 ms per token, 25 ms per spoken word (still slow
    /// enough to interrupt).
    pub fn fast() -> Self {
        Self {
            token: Duration::from_millis(2),
            tts_piece: Duration::from_millis(25),
        }
    }
}

/// How the server serves WebRTC ([`start_webrtc`]).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct WebrtcOptions {
    /// The UDP port, bound on the IP of the WebSocket's address. Default 0: any free port
    /// ([`LlmrtcApp::udp_addr`] tells which).
    pub udp_port: u16,
    /// Public IPs of a server behind NAT whose UDP port is forwarded: offered as host
    /// candidates (with the bound port) beside the bound address. Default none.
    pub public_ips: Vec<IpAddr>,
    /// The WebRTC settings (connect timeout, limits, audio). Its `bind` and
    /// `public_addrs` are filled in from the socket and [`public_ips`](Self::public_ips).
    /// Default: [`WebrtcConfig::default`].
    pub config: WebrtcConfig,
}

impl WebrtcOptions {
    /// Sets [`udp_port`](Self::udp_port).
    pub fn with_udp_port(mut self, port: u16) -> Self {
        self.udp_port = port;
        self
    }

    /// Adds a public IP ([`public_ips`](Self::public_ips)).
    pub fn with_public_ip(mut self, ip: IpAddr) -> Self {
        self.public_ips.push(ip);
        self
    }

    /// Sets [`config`](Self::config).
    pub fn with_config(mut self, config: WebrtcConfig) -> Self {
        self.config = config;
        self
    }
}

/// A running llmrtc server.
pub struct LlmrtcApp {
    /// Where the server is served (address, UDP address, shutdown): a listener of its own
    /// ([`start`], [`start_webrtc`]) or a route of a shared one ([`mount`]).
    pub server: Endpoint<ServerMachine>,
    /// Commands to the machine (which dereferences to the `LlmrtcServer`).
    pub handle: Handle<ServerMachine>,
    /// The task answering provider requests; ends when the server stops.
    pub events_task: tokio::task::JoinHandle<()>,
}

impl LlmrtcApp {
    /// `ws://<addr>/` (the route's path when mounted; `wss://` over TLS).
    pub fn url(&self) -> String {
        self.server.url("/")
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// The UDP socket's address, when the server serves WebRTC.
    pub fn udp_addr(&self) -> Option<SocketAddr> {
        self.server.udp_local_addr()
    }

    /// Shuts the server down (peers get 1001) and waits for the event task.
    pub async fn shutdown(self) {
        self.server.shutdown().await;
        let _ = self.events_task.await;
    }
}

/// How long `ready` waits after the upgrade. The real web client in Node (with `ws`) misses a
/// `ready` that shares a TCP read with the HTTP 101 (see `Limits::first_frame_delay`); the
/// hold must outlast the client's wait between the two reads, which grows with CPU load.
/// Measured with its 20-connection check (tests/interop/llmrtc_web_client.mjs) on 2 cores:
/// with no hold it loses `ready` within the first 3 connections; 1-5 ms still lose it; 10-20
/// ms hold on an idle machine but not with six CPU-bound processes beside it; 40 ms held
/// every connection of 8 runs of 20 with them. Browsers deliver `open` and each message as
/// separate tasks and never needed it: for them and every other client, `ready` comes 40 ms
/// later (measured from the connect call: median 1.5 ms before, 43 ms after), once per
/// connection, beside a WebRTC setup of 200 ms or more.
const FIRST_FRAME_DELAY: Duration = Duration::from_millis(40);

/// Transport settings for `config`: message and frame caps follow its `max_message_bytes`.
pub fn transport_config(config: &ServerConfig) -> TransportConfig {
    let transport = TransportConfig::default().with_limits(
        crate::common::message_limits(config.limits.max_message_bytes)
            .with_first_frame_delay(FIRST_FRAME_DELAY),
    );
    crate::common::protect(transport, "llmrtc", "/", address_refusal())
}

/// How the server refuses a connection over the per-address cap: as it refuses one over its
/// `max_connections`, with `error RATE_LIMITED` (no `ready`) and close 1013.
pub fn address_refusal() -> agentwire::tokio::Refusal {
    let text = serde_json::json!({
        "type": "error",
        "code": "RATE_LIMITED",
        "message": "too many connections from this address",
    })
    .to_string();
    agentwire::tokio::Refusal::close(
        agentwire::core::CloseCode::TRY_AGAIN_LATER,
        "too-many-connections",
    )
    .with_frame(agentwire::core::FrameBuf::text(text))
}

/// Starts a server on `addr` over the WebSocket alone (`offer` gets `error
/// WEBRTC_UNAVAILABLE` unless `config.webrtc` is on). `on_event` sees every machine event
/// first (in the event task: keep it quick).
pub async fn start(
    addr: &str,
    config: ServerConfig,
    providers: Providers,
    pacing: Pacing,
    on_event: impl FnMut(&ServerEvent) + Send + 'static,
) -> std::io::Result<LlmrtcApp> {
    let transport = transport_config(&config);
    let app = Stack {
        config,
        webrtc: None,
        providers,
        pacing,
    };
    app.serve(Place::Bind(addr), transport, on_event).await
}

/// Starts a server on `addr` that serves WebRTC: a UDP socket on the same IP (port
/// [`WebrtcOptions::udp_port`]) carries every session's peer connection; `offer` gets a
/// real answer. Peer events (answered, connected, failed, closed) are logged at `info`;
/// `on_event` sees every llmrtc event first.
///
/// An address with an unspecified IP (`0.0.0.0`, `::`) needs a reachable address for the
/// candidates: [`WebrtcOptions::public_ips`]; without one, the loopback address is offered
/// (WebRTC then reaches only this machine; a warning says so).
pub async fn start_webrtc(
    addr: &str,
    config: ServerConfig,
    webrtc: WebrtcOptions,
    providers: Providers,
    pacing: Pacing,
    on_event: impl FnMut(&ServerEvent) + Send + 'static,
) -> std::io::Result<LlmrtcApp> {
    let transport = transport_config(&config);
    let app = Stack {
        config,
        webrtc: Some(webrtc),
        providers,
        pacing,
    };
    app.serve(Place::Bind(addr), transport, on_event).await
}

/// Serves the server on the route `at` of a shared listener, with [`transport_config`]
/// (its plain-HTTP answer naming the route's path): with WebRTC when `webrtc` is given (the
/// UDP socket on the IP of the listener's configured address, as [`start_webrtc`]), over
/// the WebSocket alone otherwise (as [`start`]).
pub async fn mount(
    at: Mount<'_>,
    config: ServerConfig,
    webrtc: Option<WebrtcOptions>,
    providers: Providers,
    pacing: Pacing,
    on_event: impl FnMut(&ServerEvent) + Send + 'static,
) -> std::io::Result<LlmrtcApp> {
    let transport = transport_config(&config).with_endpoint("llmrtc", at.path);
    mount_with(at, config, webrtc, providers, pacing, transport, on_event).await
}

/// [`mount`] with explicit transport settings.
pub async fn mount_with(
    at: Mount<'_>,
    config: ServerConfig,
    webrtc: Option<WebrtcOptions>,
    providers: Providers,
    pacing: Pacing,
    transport: TransportConfig,
    on_event: impl FnMut(&ServerEvent) + Send + 'static,
) -> std::io::Result<LlmrtcApp> {
    let app = Stack {
        config,
        webrtc,
        providers,
        pacing,
    };
    app.serve(Place::Route(at), transport, on_event).await
}

/// What a server is made of, before it is served somewhere.
struct Stack {
    config: ServerConfig,
    webrtc: Option<WebrtcOptions>,
    providers: Providers,
    pacing: Pacing,
}

impl Stack {
    /// The one body of every start and mount: the machine (with WebRTC on a UDP socket
    /// beside `place` when asked), its transport, and the task that answers its provider
    /// requests.
    async fn serve(
        self,
        place: Place<'_>,
        transport: TransportConfig,
        on_event: impl FnMut(&ServerEvent) + Send + 'static,
    ) -> std::io::Result<LlmrtcApp> {
        let Some(webrtc) = self.webrtc else {
            let machine = LlmrtcServer::new(self.config, UuidV4Ids).map_err(invalid)?;
            let machine = ServerMachine::websocket(machine);
            let (server, events) = place.serve(machine, transport).await?;
            return Ok(answer_requests(
                server,
                events,
                self.providers,
                self.pacing,
                on_event,
            ));
        };
        let listen = place.listen();
        let ws_addr = tokio::net::lookup_host(listen)
            .await?
            .next()
            .ok_or_else(|| invalid(format!("{listen}: no address")))?;
        let udp =
            tokio::net::UdpSocket::bind(SocketAddr::new(ws_addr.ip(), webrtc.udp_port)).await?;
        let bound = udp.local_addr()?;
        let mut public_ips = webrtc.public_ips;
        if bound.ip().is_unspecified() && public_ips.is_empty() {
            let loopback = if bound.is_ipv4() {
                IpAddr::V4(Ipv4Addr::LOCALHOST)
            } else {
                IpAddr::V6(Ipv6Addr::LOCALHOST)
            };
            tracing::warn!(
                "WebRTC on {bound} offers only {loopback} as its address: pass a public IP \
                 (--public-ip) for clients on other machines"
            );
            public_ips.push(loopback);
        }
        let mut rtc = webrtc.config;
        rtc.bind = bound;
        for ip in public_ips {
            rtc = rtc.with_public_addr(SocketAddr::new(ip, bound.port()));
        }
        let machine = WebrtcServer::new(self.config, rtc, UuidV4Ids).map_err(invalid)?;
        let machine = ServerMachine::webrtc(machine);
        let (server, events) = place.serve_with_udp(udp, machine, transport).await?;
        Ok(answer_requests(
            server,
            events,
            self.providers,
            self.pacing,
            on_event,
        ))
    }
}

fn invalid(e: impl ToString) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())
}

/// Spawns the task that answers the provider requests of `server`'s machine.
fn answer_requests(
    server: Endpoint<ServerMachine>,
    mut events: Events<WebrtcServerEvent>,
    mut providers: Providers,
    pacing: Pacing,
    mut on_event: impl FnMut(&ServerEvent) + Send + 'static,
) -> LlmrtcApp {
    let handle = server.handle();
    let h = handle.clone();
    let events_task = tokio::spawn(async move {
        while let Some(ev) = events.recv().await {
            match ev {
                WebrtcServerEvent::Llmrtc(ev) => {
                    on_event(&ev);
                    answer(&h, &mut providers, pacing, ev).await;
                }
                other => log_peer_event(&other),
            }
        }
    });
    LlmrtcApp {
        server,
        handle,
        events_task,
    }
}

/// One line per WebRTC peer event.
fn log_peer_event(ev: &WebrtcServerEvent) {
    match ev {
        WebrtcServerEvent::PeerAnswered { conn, renegotiated } => {
            tracing::info!(
                conn = conn.get(),
                "offer answered{}",
                if *renegotiated { " (renegotiated)" } else { "" }
            );
        }
        WebrtcServerEvent::OfferRefused { conn, error } => {
            tracing::info!(conn = conn.get(), "offer refused: {error}");
        }
        WebrtcServerEvent::PeerConnected { conn } => {
            tracing::info!(conn = conn.get(), "data channel open");
        }
        WebrtcServerEvent::PeerFailed { conn } => {
            tracing::info!(
                conn = conn.get(),
                "peer did not connect; the session goes on over the WebSocket"
            );
        }
        WebrtcServerEvent::PeerClosed { conn } => {
            tracing::info!(conn = conn.get(), "peer closed");
        }
        _ => tracing::debug!("{ev:?}"),
    }
}

fn failed(e: String) -> ProviderError {
    ProviderError::Failed(e)
}

/// Runs one provider call; a panic in it becomes [`ProviderError::Internal`] (sent as
/// `INTERNAL_ERROR`), so a buggy provider fails its turn instead of the server's event task.
fn guarded<T>(
    what: &str,
    call: impl FnOnce() -> Result<T, String>,
) -> Result<Result<T, String>, ProviderError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)).map_err(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_owned());
        ProviderError::Internal(format!("the {what} provider failed unexpectedly: {why}"))
    })
}

/// Answers one provider request (streams run in their own tasks).
async fn answer(h: &Handle<ServerMachine>, p: &mut Providers, pacing: Pacing, ev: ServerEvent) {
    match ev {
        ServerEvent::Stt(r) => {
            let heard = guarded("speech-to-text", || p.stt.transcribe(&r.segment));
            tokio::spawn(stream_stt(h.clone(), r.request, heard, pacing.token));
        }
        ServerEvent::Llm(r) => {
            let step = guarded("language model", || p.llm.reply(&r));
            tokio::spawn(stream_llm(h.clone(), r.request, step, pacing.token));
        }
        ServerEvent::Tts(r) => {
            // With streaming TTS off (`r.streaming` false) the machine gathers the pieces
            // into one whole `tts` message; they are paced the same, as synthesis time.
            let rate = p.tts.sample_rate();
            let pieces = guarded("text-to-speech", || p.tts.synthesize(&r.text));
            tokio::spawn(stream_tts(
                h.clone(),
                r.request,
                rate,
                pieces,
                pacing.tts_piece,
            ));
        }
        ServerEvent::ToolCall(r) => {
            let outcome = guarded("tool", || p.tools.call(&r.name, &r.arguments)).unwrap_or_else(
                |e| match e {
                    ProviderError::Internal(m) | ProviderError::Failed(m) => Err(m),
                    _ => Err("the tool failed".to_owned()),
                },
            );
            let _ = h
                .call(move |m, now| m.tool_result(r.request, outcome, now))
                .await;
        }
        // Cancelled requests fail their next call with UnknownRequest, which ends their
        // stream task; nothing else to do for the stand-ins.
        _ => {}
    }
}

/// Sends the interim transcripts (paced like tokens), then the final one.
async fn stream_stt(
    h: Handle<ServerMachine>,
    request: RequestId,
    heard: Result<Result<Transcription, String>, ProviderError>,
    pace: Duration,
) {
    let heard = match heard {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            let _ = h
                .call(move |m, now| m.stt_result(request, Err(failed(e)), now))
                .await;
            return;
        }
        Err(e) => {
            let _ = h
                .call(move |m, now| m.stt_result(request, Err(e), now))
                .await;
            return;
        }
    };
    for partial in heard.partials {
        tokio::time::sleep(pace).await;
        match h
            .call(move |m, now| m.stt_partial(request, &partial, now))
            .await
        {
            Ok(Ok(())) => {}
            _ => return, // cancelled (disconnect, timeout) or the server stopped
        }
    }
    let text = heard.text;
    let _ = h
        .call(move |m, now| m.stt_result(request, Ok(text), now))
        .await;
}

async fn stream_llm(
    h: Handle<ServerMachine>,
    request: RequestId,
    step: Result<Result<LlmStep, String>, ProviderError>,
    pace: Duration,
) {
    let step = step.and_then(|s| s.map_err(failed));
    let (tokens, tool) = match step {
        Err(e) => {
            let _ = h.call(move |m, now| m.llm_failed(request, e, now)).await;
            return;
        }
        Ok(LlmStep::Tokens(t)) => (t, None),
        Ok(LlmStep::ToolCall {
            preamble,
            name,
            arguments,
        }) => (preamble, Some((name, arguments))),
    };
    for t in tokens {
        tokio::time::sleep(pace).await;
        match h.call(move |m, now| m.llm_chunk(request, &t, now)).await {
            Ok(Ok(())) => {}
            _ => return, // cancelled (barge-in, disconnect) or the server stopped
        }
    }
    if let Some((name, arguments)) = tool {
        let _ = h
            .call(move |m, now| m.llm_tool_call(request, &name, arguments, now))
            .await;
    }
    let _ = h.call(move |m, now| m.llm_done(request, now)).await;
}

async fn stream_tts(
    h: Handle<ServerMachine>,
    request: RequestId,
    rate: u32,
    pieces: Result<Result<Vec<Vec<u8>>, String>, ProviderError>,
    pace: Duration,
) {
    let pieces = match pieces.and_then(|p| p.map_err(failed)) {
        Ok(p) => p,
        Err(e) => {
            let _ = h.call(move |m, now| m.tts_failed(request, e, now)).await;
            return;
        }
    };
    for piece in pieces {
        tokio::time::sleep(pace).await;
        match h
            .call(move |m, now| m.tts_chunk(request, "pcm", rate, &piece, now))
            .await
        {
            Ok(Ok(())) => {}
            _ => return,
        }
    }
    let _ = h.call(move |m, now| m.tts_done(request, now)).await;
}

//! [`WebrtcServer`]: an [`LlmrtcServer`] whose `offer`s get real WebRTC peers, all served
//! from one UDP socket.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::Instant;

use agentwire_core::json::RawJson;
use agentwire_core::{
    ConnId, DatagramMachine, Disconnect, Flow, Frame, FrameBuf, IdGen, Machine, Output, PeerInfo,
    TokenBucket, Transmit,
};
use llmrtc_proto::{ErrorCode, LlmrtcServer, ServerConfig, ServerEvent};
use str0m::{Candidate, IceCreds, Rtc};

use crate::config::WebrtcConfig;
use crate::error::{OfferError, WebrtcConfigError};
use crate::event::WebrtcServerEvent;
use crate::peer::{Peer, PeerEvent, PeerState};
use crate::peers::Peers;
use crate::sdp;

/// The llmrtc server with WebRTC: a [`Machine`] (the WebSocket side, exactly the wrapped
/// [`LlmrtcServer`]'s) and a [`DatagramMachine`] (every peer's STUN, DTLS and SRTP on one
/// UDP socket).
///
/// - An `offer` builds a str0m [`Rtc`] in ICE-lite mode with the configured host candidates
///   and answers with `signal` (see the crate's spec decisions for renegotiation, limits
///   and errors).
/// - When the data channel opens, the wrapped server is told
///   ([`LlmrtcServer::set_data_channel_open`]) and every payload message it sends also goes
///   on the channel; messages the client sends on the channel are handled as frames of its
///   connection.
/// - A peer that does not connect within [`WebrtcConfig::connect_timeout`] is dropped and
///   the client gets `error CONNECTION_FAILED`; the session goes on over the WebSocket.
/// - A closed WebSocket, a session taken over by a `reconnect` on another connection, and
///   a new peer connection on the same WebSocket each tear the old peer down.
///
/// Provider answers (STT, LLM, TTS, tools) go to the wrapped server through
/// [`llmrtc`](Self::llmrtc); their outputs come out of this machine's
/// [`poll_output`](Machine::poll_output) and [`poll_transmit`](DatagramMachine::poll_transmit).
pub struct WebrtcServer {
    inner: LlmrtcServer,
    config: WebrtcConfig,
    candidates: Vec<SocketAddr>,
    peers: Peers,
    out: VecDeque<Output<WebrtcServerEvent>>,
    transmits: VecDeque<Transmit>,
    offer_buckets: HashMap<ConnId, OfferBucket>,
    dropped_offers: u64,
    events: Vec<PeerEvent>,
    last_now: Option<Instant>,
    dropped_channel_messages: u64,
    /// Peers written to since they were last driven: driven once, after every write of the
    /// step, so SCTP bundles the step's messages into as few packets (DTLS records, UDP
    /// datagrams) as fit.
    written: Vec<ConnId>,
}

impl std::fmt::Debug for WebrtcServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebrtcServer")
            .field("peers", &self.peers.len())
            .field("candidates", &self.candidates)
            .finish_non_exhaustive()
    }
}

impl WebrtcServer {
    /// A server with `llmrtc` (its [`ServerConfig::webrtc`] is turned on) and `webrtc`,
    /// taking session ids from `ids`.
    ///
    /// Errors when the llmrtc configuration is invalid, or when no host candidate can be
    /// made: [`WebrtcConfig::bind`] must have a port, and an unspecified IP (`0.0.0.0`)
    /// needs at least one [`WebrtcConfig::public_addrs`] entry.
    pub fn new(
        llmrtc: ServerConfig,
        webrtc: WebrtcConfig,
        ids: impl IdGen + 'static,
    ) -> Result<Self, WebrtcConfigError> {
        let inner = LlmrtcServer::new(llmrtc.with_webrtc(true), ids)?;
        let mut candidates = Vec::new();
        for addr in std::iter::once(webrtc.bind).chain(webrtc.public_addrs.iter().copied()) {
            if addr.port() == 0 {
                return Err(WebrtcConfigError::BadAddress(addr));
            }
            if addr.ip().is_unspecified() {
                continue;
            }
            Candidate::host(addr, "udp").map_err(|_| WebrtcConfigError::BadAddress(addr))?;
            if !candidates.contains(&addr) {
                candidates.push(addr);
            }
        }
        if candidates.is_empty() {
            return Err(WebrtcConfigError::BadAddress(webrtc.bind));
        }
        Ok(Self {
            inner,
            peers: Peers::new(webrtc.limits.max_addrs_per_peer),
            config: webrtc,
            candidates,
            out: VecDeque::new(),
            transmits: VecDeque::new(),
            offer_buckets: HashMap::new(),
            dropped_offers: 0,
            events: Vec::new(),
            last_now: None,
            dropped_channel_messages: 0,
            written: Vec::new(),
        })
    }

    /// The wrapped llmrtc server, for provider answers and other commands. What they send
    /// comes out of this machine's `poll_output` and `poll_transmit`.
    pub fn llmrtc(&mut self) -> &mut LlmrtcServer {
        &mut self.inner
    }

    /// The wrapped llmrtc server, for its getters.
    pub fn llmrtc_ref(&self) -> &LlmrtcServer {
        &self.inner
    }

    /// The WebRTC settings.
    pub fn config(&self) -> &WebrtcConfig {
        &self.config
    }

    /// The host candidates written into answers.
    pub fn candidates(&self) -> &[SocketAddr] {
        &self.candidates
    }

    /// Peer connections held (connecting or connected).
    pub fn peers(&self) -> usize {
        self.peers.len()
    }

    /// Whether `conn`'s data channel is open.
    pub fn is_channel_open(&self, conn: ConnId) -> bool {
        self.peers
            .get(conn)
            .is_some_and(|p| p.state == PeerState::Open)
    }

    /// Datagrams dropped since the server started: larger than
    /// [`Limits::max_datagram_bytes`](crate::Limits::max_datagram_bytes), not STUN, DTLS or
    /// SRTP, or for no known peer.
    pub fn dropped_datagrams(&self) -> u64 {
        self.peers.dropped_datagrams
    }

    /// Messages not carried on a data channel since the server started: payload copies
    /// that did not fit a peer's send queue
    /// ([`Limits::max_channel_buffered_bytes`](crate::Limits::max_channel_buffered_bytes)),
    /// and signalling messages (`offer`, `reconnect`, `ping`) a client sent on its data
    /// channel, which are only taken from the WebSocket.
    pub fn dropped_channel_messages(&self) -> u64 {
        self.dropped_channel_messages
    }

    /// Offers dropped unanswered since the server started: every offer of a run over
    /// [`Limits::offer_rate`](crate::Limits::offer_rate) after the first, which got
    /// `error RATE_LIMITED` (so a flood of offers gets no flood of replies).
    pub fn dropped_offers(&self) -> u64 {
        self.dropped_offers
    }

    /// Moves the wrapped server's outputs into this machine's queues: offers are answered,
    /// data-channel copies written to their peers, everything else passed on.
    fn pump(&mut self) {
        while let Some(o) = self.inner.poll_output() {
            match o {
                Output::Event(ServerEvent::Offer { conn, signal, .. }) => {
                    self.on_offer(conn, &signal);
                }
                Output::Event(ServerEvent::DataChannel { conn, frame }) => {
                    self.write_channel(conn, frame);
                }
                #[cfg(feature = "opus")]
                Output::Event(ServerEvent::TrackAudio {
                    conn,
                    samples,
                    sample_rate,
                }) => self.track_audio(conn, &samples, sample_rate),
                #[cfg(feature = "opus")]
                Output::Event(ServerEvent::TrackAudioEnd { conn, cancelled }) => {
                    if let Some(t) = self.peers.get_mut(conn).and_then(|p| p.track_out.as_mut()) {
                        if cancelled {
                            t.clear();
                        } else {
                            t.finish();
                        }
                    }
                }
                Output::Event(e) => self
                    .out
                    .push_back(Output::Event(WebrtcServerEvent::Llmrtc(e))),
                Output::Send { conn, frame } => self.out.push_back(Output::Send { conn, frame }),
                Output::Close { conn, code, reason } => {
                    // The session leaves this connection (closed, moved to another by a
                    // reconnect, or the server is full): its peer goes with it.
                    self.drop_peer(conn);
                    self.out.push_back(Output::Close { conn, code, reason });
                }
            }
        }
    }

    fn write_channel(&mut self, conn: ConnId, frame: FrameBuf) {
        let Some(p) = self.peers.get_mut(conn) else {
            return;
        };
        let drops = p.channel_drops;
        p.send(frame);
        if p.channel_drops != drops {
            self.dropped_channel_messages += 1;
        }
        if p.mark_written() {
            self.written.push(conn);
        }
    }

    /// Drives every peer written to since it was last driven: the step's channel messages
    /// go out together (see `written`).
    fn drive_written(&mut self) {
        let Some(now) = self.last_now else {
            return;
        };
        while let Some(conn) = self.written.pop() {
            self.drive(conn, now);
            // Whatever the drive made the wrapped server send.
            self.pump();
        }
    }

    /// TTS for `conn`'s outbound track: queued and paced out, one frame per 20 ms.
    #[cfg(feature = "opus")]
    fn track_audio(&mut self, conn: ConnId, samples: &[i16], sample_rate: u32) {
        let Some(now) = self.last_now else {
            return;
        };
        if let Some(t) = self.peers.get_mut(conn).and_then(|p| p.track_out.as_mut()) {
            t.push(samples, sample_rate, now);
            self.drive(conn, now);
        }
    }

    fn on_offer(&mut self, conn: ConnId, signal: &RawJson) {
        let Some(now) = self.last_now else {
            return;
        };
        match self.answer(conn, signal, now) {
            Ok((answer, renegotiated)) => {
                let _ = self.inner.signal(conn, answer);
                self.out
                    .push_back(Output::Event(WebrtcServerEvent::PeerAnswered {
                        conn,
                        renegotiated,
                    }));
                self.drive(conn, now);
            }
            Err(OfferError::Dropped) => self.dropped_offers += 1,
            Err(error) => {
                let _ = self.inner.send_error(conn, error.code(), error.text());
                self.out
                    .push_back(Output::Event(WebrtcServerEvent::OfferRefused {
                        conn,
                        error,
                    }));
            }
        }
        // The `signal` or `error` just queued in the wrapped server.
        self.pump();
    }

    fn answer(
        &mut self,
        conn: ConnId,
        signal: &RawJson,
        now: Instant,
    ) -> Result<(RawJson, bool), OfferError> {
        let rate = self.config.limits.offer_rate;
        let bucket = self.offer_buckets.entry(conn).or_insert(OfferBucket {
            bucket: TokenBucket::new(now),
            limited: false,
        });
        if !bucket.bucket.take(&rate, now) {
            if std::mem::replace(&mut bucket.limited, true) {
                return Err(OfferError::Dropped);
            }
            return Err(OfferError::RateLimited);
        }
        bucket.limited = false;
        let offer = sdp::parse_offer(signal, &self.config.limits)?;
        if !offer.has_application {
            return Err(OfferError::NoDataChannel);
        }
        // Spec decision 2: the same ICE username fragment is the same RTCPeerConnection
        // renegotiating (a track added or removed): the existing peer answers.
        if let Some(p) = self.peers.get_mut(conn) {
            if p.state != PeerState::Closed && p.remote_ufrag == offer.ice_ufrag {
                let answer = p
                    .rtc()
                    .sdp_api()
                    .accept_offer(offer.sdp)
                    .map_err(|e| OfferError::Sdp(e.to_string()))?;
                return Ok((sdp::answer_json(&answer), true));
            }
        }
        self.drop_peer(conn);
        if self.peers.len() >= self.config.limits.max_peers {
            return Err(OfferError::TooManyPeers);
        }
        let creds = IceCreds::new();
        let mut builder = Rtc::builder()
            .set_ice_lite(true)
            .set_local_ice_credentials(creds.clone())
            .set_sctp_max_buffered_amount(self.config.limits.max_channel_buffered_bytes)
            .clear_codecs();
        if self.config.audio {
            builder = builder.enable_opus(true, false);
        }
        let mut rtc = builder.build(now);
        for addr in &self.candidates {
            if let Ok(c) = Candidate::host(*addr, "udp") {
                rtc.add_local_candidate(c);
            }
        }
        let answer = rtc
            .sdp_api()
            .accept_offer(offer.sdp)
            .map_err(|e| OfferError::Sdp(e.to_string()))?;
        let deadline = now + self.config.connect_timeout;
        let mut peer = Peer::new(
            rtc,
            conn,
            creds.ufrag,
            deadline,
            &self.config.limits,
            self.config.audio,
        );
        peer.remote_ufrag = offer.ice_ufrag;
        self.peers.insert(peer);
        Ok((sdp::answer_json(&answer), false))
    }

    /// Closes and forgets `conn`'s peer, if any (its close datagrams are sent).
    fn drop_peer(&mut self, conn: ConnId) {
        let Some(mut p) = self.peers.remove(conn) else {
            return;
        };
        let was_open = p.was_open() && p.state != PeerState::Closed;
        if let Some(now) = self.last_now {
            let mut events = Vec::new();
            if p.is_written() {
                // This step's channel writes leave before the close.
                p.drive(now, &mut self.transmits, &mut events);
            }
            p.close();
            p.drive(now, &mut self.transmits, &mut events);
        } else {
            p.close();
        }
        if was_open {
            let _ = self.inner.set_data_channel_open(conn, false);
            #[cfg(feature = "opus")]
            let _ = self.inner.set_audio_track(conn, false);
            self.out
                .push_back(Output::Event(WebrtcServerEvent::PeerClosed { conn }));
        }
    }

    /// Drives `conn`'s peer at `now` and acts on what it reports.
    fn drive(&mut self, conn: ConnId, now: Instant) {
        let mut events = std::mem::take(&mut self.events);
        self.peers
            .drive(conn, now, &mut self.transmits, &mut events);
        for e in events.drain(..) {
            self.on_peer_event(conn, e, now);
        }
        self.events = events;
    }

    fn on_peer_event(&mut self, conn: ConnId, e: PeerEvent, now: Instant) {
        match e {
            PeerEvent::ChannelOpen => {
                let _ = self.inner.set_data_channel_open(conn, true);
                self.out
                    .push_back(Output::Event(WebrtcServerEvent::PeerConnected { conn }));
            }
            PeerEvent::ChannelData { binary, data } => {
                self.on_channel_data(conn, binary, &data, now)
            }
            #[cfg(feature = "opus")]
            PeerEvent::Pcm { samples } => {
                let _ = self
                    .inner
                    .track_audio(conn, &samples, crate::opus::SAMPLE_RATE, now);
                self.pump();
            }
            #[cfg(feature = "opus")]
            PeerEvent::TrackReady => {
                let _ = self.inner.set_audio_track(conn, true);
            }
            PeerEvent::Closed => self.on_peer_closed(conn),
        }
    }

    fn on_channel_data(&mut self, conn: ConnId, binary: bool, data: &[u8], now: Instant) {
        if is_signalling(data) {
            self.dropped_channel_messages += 1;
            return;
        }
        match (binary, std::str::from_utf8(data)) {
            (false, Ok(text)) => self.inner.handle_frame(conn, Frame::Text(text), now),
            _ => self.inner.handle_frame(conn, Frame::Binary(data), now),
        }
        self.pump();
    }

    fn on_peer_closed(&mut self, conn: ConnId) {
        let Some(mut p) = self.peers.remove(conn) else {
            return;
        };
        // Its close datagrams (DTLS close_notify) go out with the next transmits.
        if let Some(now) = self.last_now {
            let mut ignored = Vec::new();
            p.drive(now, &mut self.transmits, &mut ignored);
        }
        if p.was_open() {
            let _ = self.inner.set_data_channel_open(conn, false);
            #[cfg(feature = "opus")]
            let _ = self.inner.set_audio_track(conn, false);
            self.out
                .push_back(Output::Event(WebrtcServerEvent::PeerClosed { conn }));
        } else {
            let _ = self.inner.send_error(
                conn,
                ErrorCode::CONNECTION_FAILED,
                crate::texts::CONNECT_TIMEOUT,
            );
            self.out
                .push_back(Output::Event(WebrtcServerEvent::PeerFailed { conn }));
        }
        self.pump();
    }

    /// Records `now` and returns it, or the latest time seen if `now` is earlier (a
    /// driver's clock may step back; peers never see time go backwards).
    fn observe(&mut self, now: Instant) -> Instant {
        let now = self.last_now.map_or(now, |t| t.max(now));
        self.last_now = Some(now);
        now
    }
}

/// One connection's offer budget.
#[derive(Debug)]
struct OfferBucket {
    bucket: TokenBucket,
    /// The last offer was over the rate (and the client was told).
    limited: bool,
}

/// Whether a data-channel message is one of the client's signalling types (`offer`,
/// `reconnect`, `ping`), which are only taken from the WebSocket (spec decision 3).
fn is_signalling(data: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Probe<'a> {
        #[serde(rename = "type", borrow)]
        kind: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_slice::<Probe<'_>>(data)
        .ok()
        .and_then(|p| p.kind)
        .is_some_and(|k| matches!(&*k, "offer" | "reconnect" | "ping"))
}

impl Machine for WebrtcServer {
    type Event = WebrtcServerEvent;

    fn handle_connect(&mut self, conn: ConnId, peer: &PeerInfo, now: Instant) {
        let now = self.observe(now);
        self.inner.handle_connect(conn, peer, now);
        self.pump();
    }

    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        let now = self.observe(now);
        self.inner.handle_frame(conn, frame, now);
        self.pump();
    }

    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        self.handle_disconnect_with(conn, &Disconnect::Ended, now);
    }

    fn handle_disconnect_with(&mut self, conn: ConnId, how: &Disconnect, now: Instant) {
        let now = self.observe(now);
        self.drop_peer(conn);
        self.offer_buckets.remove(&conn);
        self.inner.handle_disconnect_with(conn, how, now);
        self.pump();
    }

    fn handle_pong(&mut self, conn: ConnId, now: Instant) {
        let now = self.observe(now);
        self.inner.handle_pong(conn, now);
        self.pump();
    }

    fn handle_timeout(&mut self, now: Instant) {
        let now = self.observe(now);
        self.inner.handle_timeout(now);
        self.pump();
        self.drive_written();
        for conn in self.peers.due(now) {
            self.drive(conn, now);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        if !self.written.is_empty() {
            // Channel writes not yet driven (outputs not drained): due now.
            return self.last_now;
        }
        match (self.inner.poll_timeout(), self.peers.next_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn poll_output(&mut self) -> Option<Output<WebrtcServerEvent>> {
        self.pump();
        if self.out.is_empty() {
            self.drive_written();
        }
        self.out.pop_front()
    }

    fn poll_flow(&mut self) -> Option<Flow> {
        self.inner.poll_flow()
    }

    fn handle_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        self.inner.handle_wall_clock(now, unix_ms);
    }
}

impl DatagramMachine for WebrtcServer {
    fn handle_datagram(
        &mut self,
        remote: SocketAddr,
        local: SocketAddr,
        contents: &[u8],
        now: Instant,
    ) {
        let now = self.observe(now);
        if contents.len() > self.config.limits.max_datagram_bytes {
            self.peers.dropped_datagrams += 1;
            return;
        }
        // A socket bound to 0.0.0.0 reports an unspecified local address: the datagram was
        // addressed to the candidate of that port.
        let local = if local.ip().is_unspecified() {
            self.candidates
                .iter()
                .copied()
                .find(|c| c.port() == local.port())
                .unwrap_or(local)
        } else {
            local
        };
        if let Some(conn) = self.peers.route(remote, local, contents, now) {
            self.drive(conn, now);
        }
    }

    fn poll_transmit(&mut self) -> Option<Transmit> {
        self.pump();
        self.drive_written();
        self.transmits.pop_front()
    }
}

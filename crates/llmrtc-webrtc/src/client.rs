//! [`WebrtcClient`]: an [`LlmrtcClient`] that offers a WebRTC peer connection and takes its
//! payload messages from the data channel once it is open.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

use agentwire_core::{
    ConnId, DatagramMachine, Dial, Dialer, Disconnect, Frame, FrameBuf, Machine, Output, PeerInfo,
    Transmit,
};
use llmrtc_proto::{ClientConfig, ClientEvent, JitterSource, LlmrtcClient, ServerMessage};
use str0m::change::SdpPendingOffer;
use str0m::media::{Direction, MediaKind};
use str0m::{Candidate, Rtc};

use crate::config::WebrtcConfig;
use crate::error::{WebrtcClientError, WebrtcConfigError};
use crate::event::WebrtcClientEvent;
use crate::peer::{Peer, PeerEvent, PeerState};
use crate::sdp;
use crate::texts;

/// What a [`WebrtcClient`] offers besides the data channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum AudioOffer {
    /// The data channel only.
    #[default]
    None,
    /// An Opus track both ways: microphone audio out, TTS in.
    SendRecv,
    /// Receive TTS on an Opus track; no microphone.
    RecvOnly,
}

/// The llmrtc client with WebRTC: a [`Machine`] and [`Dialer`] (the WebSocket side, the
/// wrapped [`LlmrtcClient`]'s) and a [`DatagramMachine`] (its one peer connection's UDP).
///
/// After `ready`, [`offer`](Self::offer) builds a str0m [`Rtc`] with the data channel
/// `"data"` (the real web client's label) and, if asked, an Opus track, and sends `offer`;
/// the server's `signal` completes it. Once the channel opens, the wrapped client takes
/// payload messages from it and ignores their WebSocket copies (the real client's rule);
/// [`ClientEvent`]s come out once. While the channel is open, `attachments` go on it (the
/// real client sends them there); everything else stays on the WebSocket. With
/// [`set_auto_offer`](Self::set_auto_offer) the client offers by itself after every `ready` (a reconnect makes a new peer connection, as the
/// real client does). A lost WebSocket closes the peer.
pub struct WebrtcClient {
    inner: LlmrtcClient,
    config: WebrtcConfig,
    peer: Option<Peer>,
    pending: Option<SdpPendingOffer>,
    auto_offer: Option<AudioOffer>,
    out: VecDeque<Output<WebrtcClientEvent>>,
    transmits: VecDeque<Transmit>,
    events: Vec<PeerEvent>,
    last_now: Option<Instant>,
    dropped_datagrams: u64,
}

impl std::fmt::Debug for WebrtcClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebrtcClient")
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

impl WebrtcClient {
    /// A client with `llmrtc` settings and `jitter` for its reconnect backoff, whose UDP
    /// socket is bound to `webrtc.bind` (its host candidate: a concrete IP and port).
    pub fn new(
        llmrtc: ClientConfig,
        jitter: impl JitterSource + 'static,
        webrtc: WebrtcConfig,
    ) -> Result<Self, WebrtcConfigError> {
        let bind = webrtc.bind;
        if bind.port() == 0 || bind.ip().is_unspecified() || Candidate::host(bind, "udp").is_err() {
            return Err(WebrtcConfigError::BadAddress(bind));
        }
        Ok(Self {
            inner: LlmrtcClient::new(llmrtc, jitter),
            config: webrtc,
            peer: None,
            pending: None,
            auto_offer: None,
            out: VecDeque::new(),
            transmits: VecDeque::new(),
            events: Vec::new(),
            last_now: None,
            dropped_datagrams: 0,
        })
    }

    /// The wrapped llmrtc client, for its commands (`start`, `send_audio`, ...). What they
    /// send comes out of this machine's `poll_output`.
    pub fn llmrtc(&mut self) -> &mut LlmrtcClient {
        &mut self.inner
    }

    /// The wrapped llmrtc client, for its getters.
    pub fn llmrtc_ref(&self) -> &LlmrtcClient {
        &self.inner
    }

    /// Offer by itself after every `ready` (`Some`), or only on [`offer`](Self::offer)
    /// (`None`, the default).
    pub fn set_auto_offer(&mut self, audio: Option<AudioOffer>) {
        self.auto_offer = audio;
    }

    /// Whether the data channel is open.
    pub fn is_channel_open(&self) -> bool {
        self.peer
            .as_ref()
            .is_some_and(|p| p.state == PeerState::Open)
    }

    /// Whether a peer connection exists (offered, connecting or connected).
    pub fn has_peer(&self) -> bool {
        self.peer.is_some()
    }

    /// Datagrams dropped (oversized, or not for the peer).
    pub fn dropped_datagrams(&self) -> u64 {
        self.dropped_datagrams
    }

    /// Builds a peer connection and sends its `offer`. Needs a connection that got
    /// `ready`; an existing peer connection is closed first.
    pub fn offer(&mut self, audio: AudioOffer, now: Instant) -> Result<(), WebrtcClientError> {
        let now = self.observe(now);
        if self.inner.ready_id().is_none() || self.inner.conn().is_none() {
            return Err(WebrtcClientError::NotReady);
        }
        self.close_peer();
        // Opus only, so that a later `share_audio` offers it too.
        let mut rtc = Rtc::builder()
            .set_sctp_max_buffered_amount(self.config.limits.max_channel_buffered_bytes)
            .clear_codecs()
            .enable_opus(true, false)
            .build(now);
        let candidate = Candidate::host(self.config.bind, "udp")
            .map_err(|e| WebrtcClientError::Rtc(e.to_string()))?;
        rtc.add_local_candidate(candidate);
        let mut api = rtc.sdp_api();
        api.add_channel(texts::CHANNEL_LABEL.to_owned());
        let audio_mid = match audio {
            AudioOffer::None => None,
            AudioOffer::SendRecv => {
                Some(api.add_media(MediaKind::Audio, Direction::SendRecv, None, None, None))
            }
            AudioOffer::RecvOnly => {
                api.add_media(MediaKind::Audio, Direction::RecvOnly, None, None, None);
                None
            }
        };
        let Some((offer, pending)) = api.apply() else {
            return Err(WebrtcClientError::Rtc("nothing to offer".into()));
        };
        let ufrag = sdp::attribute(&offer.to_sdp_string(), "ice-ufrag")
            .unwrap_or_default()
            .to_owned();
        self.inner.offer(sdp::offer_json(&offer), now)?;
        let conn = self.inner.conn().unwrap_or(ConnId::new(0));
        let mut peer = Peer::new(
            rtc,
            conn,
            ufrag,
            now + self.config.connect_timeout,
            &self.config.limits,
            cfg!(feature = "opus"),
        );
        peer.audio_out = audio_mid;
        self.peer = Some(peer);
        self.pending = Some(pending);
        self.drive(now);
        Ok(())
    }

    /// Sends `frame` on the data channel. Errors when the channel is not open. (The
    /// wrapped client's `attachments` go there by themselves while the channel is open, as
    /// the real web client's do; everything else it sends goes on the WebSocket.)
    pub fn send_channel(&mut self, frame: FrameBuf, now: Instant) -> Result<(), WebrtcClientError> {
        let now = self.observe(now);
        match self.peer.as_mut() {
            Some(p) if p.state == PeerState::Open => p.send(frame),
            _ => return Err(WebrtcClientError::ChannelClosed),
        }
        self.drive(now);
        Ok(())
    }

    /// Sends microphone audio (16-bit mono PCM at `sample_rate`) on the outbound track,
    /// encoded to Opus and paced at one 20 ms frame per 20 ms. Errors without an open peer
    /// whose offer has a sending audio track ([`WebrtcClientEvent::TrackReady`]).
    #[cfg(feature = "opus")]
    pub fn send_mic(
        &mut self,
        samples: &[i16],
        sample_rate: u32,
        now: Instant,
    ) -> Result<(), WebrtcClientError> {
        let now = self.observe(now);
        let Some(t) = self.peer.as_mut().and_then(|p| p.track_out.as_mut()) else {
            return Err(WebrtcClientError::ChannelClosed);
        };
        t.push(samples, sample_rate, now);
        self.drive(now);
        Ok(())
    }

    /// Adds a microphone track (Opus, send and receive) to the connected peer and
    /// renegotiates: a second `offer` with the same ICE credentials, as the real web
    /// client's `shareAudio` does. The server answers on the same peer.
    pub fn share_audio(&mut self, now: Instant) -> Result<(), WebrtcClientError> {
        let now = self.observe(now);
        let Some(p) = self.peer.as_mut() else {
            return Err(WebrtcClientError::ChannelClosed);
        };
        if p.state != PeerState::Open || self.pending.is_some() || p.audio_out.is_some() {
            return Err(WebrtcClientError::ChannelClosed);
        }
        let mut api = p.rtc().sdp_api();
        let mid = api.add_media(MediaKind::Audio, Direction::SendRecv, None, None, None);
        let Some((offer, pending)) = api.apply() else {
            return Err(WebrtcClientError::Rtc("nothing to offer".into()));
        };
        self.inner.offer(sdp::offer_json(&offer), now)?;
        p.audio_out = Some(mid);
        self.pending = Some(pending);
        self.drive(now);
        Ok(())
    }

    fn on_signal(&mut self, signal: &agentwire_core::json::RawJson, now: Instant) {
        let (Some(peer), Some(pending)) = (self.peer.as_mut(), self.pending.take()) else {
            return;
        };
        let accepted = sdp::parse_answer(signal, &self.config.limits).and_then(|answer| {
            peer.rtc()
                .sdp_api()
                .accept_answer(pending, answer)
                .map_err(|e| crate::error::OfferError::Sdp(e.to_string()))
        });
        if accepted.is_err() {
            self.fail_peer();
            return;
        }
        // A track the answer rejected (port 0: a server without audio) carries nothing.
        if let Some(mid) = peer.audio_out {
            if peer.rtc().media(mid).is_none_or(|m| m.disabled()) {
                peer.audio_out = None;
            }
        }
        self.drive(now);
    }

    fn close_peer(&mut self) {
        self.pending = None;
        if let Some(mut p) = self.peer.take() {
            let was_open = p.state == PeerState::Open;
            p.close();
            if let Some(now) = self.last_now {
                let mut ignored = Vec::new();
                p.drive(now, &mut self.transmits, &mut ignored);
            }
            if was_open {
                if let Some(now) = self.last_now {
                    self.inner.set_data_channel_open(false, now);
                }
                self.out
                    .push_back(Output::Event(WebrtcClientEvent::PeerClosed));
            }
        }
    }

    fn fail_peer(&mut self) {
        self.pending = None;
        if let Some(mut p) = self.peer.take() {
            p.close();
            if let Some(now) = self.last_now {
                let mut ignored = Vec::new();
                p.drive(now, &mut self.transmits, &mut ignored);
                self.inner.set_data_channel_open(false, now);
            }
            self.out
                .push_back(Output::Event(WebrtcClientEvent::PeerClosed));
        }
    }

    fn drive(&mut self, now: Instant) {
        let Some(p) = self.peer.as_mut() else {
            return;
        };
        let mut events = std::mem::take(&mut self.events);
        p.drive(now, &mut self.transmits, &mut events);
        for e in events.drain(..) {
            match e {
                PeerEvent::ChannelOpen => {
                    self.inner.set_data_channel_open(true, now);
                    self.out
                        .push_back(Output::Event(WebrtcClientEvent::ChannelOpen));
                }
                PeerEvent::ChannelData { binary, data } => {
                    match (binary, std::str::from_utf8(&data)) {
                        (false, Ok(text)) => {
                            self.inner.handle_data_channel_frame(Frame::Text(text), now)
                        }
                        _ => self
                            .inner
                            .handle_data_channel_frame(Frame::Binary(&data), now),
                    }
                }
                #[cfg(feature = "opus")]
                PeerEvent::Pcm { samples } => {
                    self.out
                        .push_back(Output::Event(WebrtcClientEvent::TrackAudio {
                            samples,
                            sample_rate: crate::opus::SAMPLE_RATE,
                        }));
                }
                #[cfg(feature = "opus")]
                PeerEvent::TrackReady => {
                    self.out
                        .push_back(Output::Event(WebrtcClientEvent::TrackReady));
                }
                PeerEvent::Closed => {
                    self.fail_peer();
                    break;
                }
            }
        }
        self.events = events;
    }

    /// Moves the wrapped client's outputs into this machine's queue, acting on `signal`,
    /// `ready` (auto offer) and lost connections.
    fn pump(&mut self) {
        while let Some(o) = self.inner.poll_output() {
            match o {
                Output::Event(ClientEvent::Message(ServerMessage::Signal(s))) => {
                    if let Some(now) = self.last_now {
                        self.on_signal(&s.signal, now);
                    }
                }
                Output::Event(ClientEvent::ConnectionLost { reason }) => {
                    self.close_peer();
                    self.out.push_back(Output::Event(WebrtcClientEvent::Llmrtc(
                        ClientEvent::ConnectionLost { reason },
                    )));
                }
                Output::Event(e @ ClientEvent::Ready { .. }) => {
                    self.out
                        .push_back(Output::Event(WebrtcClientEvent::Llmrtc(e)));
                    if let (Some(audio), Some(now)) = (self.auto_offer, self.last_now) {
                        // Queued after the `reconnect` the wrapped client sends first.
                        let _ = self.offer(audio, now);
                    }
                }
                Output::Event(ClientEvent::DataChannelSend { frame }) => {
                    // `attachments` while the channel is open, as the real web client
                    // sends them.
                    if let (Some(p), Some(now)) = (self.peer.as_mut(), self.last_now) {
                        p.send(frame);
                        self.drive(now);
                    }
                }
                Output::Event(e) => self
                    .out
                    .push_back(Output::Event(WebrtcClientEvent::Llmrtc(e))),
                Output::Send { conn, frame } => self.out.push_back(Output::Send { conn, frame }),
                Output::Close { conn, code, reason } => {
                    self.close_peer();
                    self.out.push_back(Output::Close { conn, code, reason });
                }
            }
        }
    }

    /// Records `now` and returns it, or the latest time seen if `now` is earlier (a
    /// driver's clock may step back; peers never see time go backwards).
    fn observe(&mut self, now: Instant) -> Instant {
        let now = self.last_now.map_or(now, |t| t.max(now));
        self.last_now = Some(now);
        now
    }
}

impl Machine for WebrtcClient {
    type Event = WebrtcClientEvent;

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
        self.close_peer();
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
        if self
            .peer
            .as_ref()
            .and_then(Peer::next_timeout)
            .is_some_and(|t| t <= now)
        {
            self.drive(now);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let peer = self.peer.as_ref().and_then(Peer::next_timeout);
        match (self.inner.poll_timeout(), peer) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn poll_output(&mut self) -> Option<Output<WebrtcClientEvent>> {
        self.pump();
        self.out.pop_front()
    }

    fn handle_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        self.inner.handle_wall_clock(now, unix_ms);
    }
}

impl Dialer for WebrtcClient {
    fn poll_dial(&self) -> Dial {
        self.inner.poll_dial()
    }

    fn handle_dial_failed(&mut self, reason: &str, now: Instant) {
        let now = self.observe(now);
        self.inner.handle_dial_failed(reason, now);
        self.pump();
    }
}

impl DatagramMachine for WebrtcClient {
    fn handle_datagram(
        &mut self,
        remote: SocketAddr,
        local: SocketAddr,
        contents: &[u8],
        now: Instant,
    ) {
        let now = self.observe(now);
        let local = if local.ip().is_unspecified() {
            self.config.bind
        } else {
            local
        };
        let taken = contents.len() <= self.config.limits.max_datagram_bytes
            && self
                .peer
                .as_mut()
                .is_some_and(|p| p.receive(remote, local, contents, now));
        if taken {
            self.drive(now);
        } else {
            self.dropped_datagrams += 1;
        }
    }

    fn poll_transmit(&mut self) -> Option<Transmit> {
        self.pump();
        self.transmits.pop_front()
    }
}

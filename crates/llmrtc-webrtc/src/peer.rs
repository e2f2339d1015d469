//! One WebRTC peer connection: a str0m [`Rtc`] and what this crate keeps beside it (its
//! connection, its data channel, its connect deadline, the data-channel messages waiting
//! for room in the SCTP send buffer).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

use agentwire_core::{ConnId, FrameBuf, Transmit};
use str0m::channel::ChannelId;
use str0m::media::{Direction, MediaKind, Mid};
use str0m::net::{Protocol, Receive};
use str0m::{Event, IceConnectionState, Input, Output, Rtc};

/// What a peer reports to its machine while it is driven.
#[derive(Debug)]
pub(crate) enum PeerEvent {
    /// The data channel opened: payloads may flow.
    ChannelOpen,
    /// A message arrived on the data channel.
    ChannelData {
        /// Sent as binary.
        binary: bool,
        /// Its bytes.
        data: Vec<u8>,
    },
    /// Audio arrived on the inbound track, decoded: 16-bit mono PCM at 48 kHz.
    #[cfg(feature = "opus")]
    Pcm {
        /// The samples.
        samples: Vec<i16>,
    },
    /// The outbound audio track can carry audio from now on (the peer is connected and
    /// has a track we send on).
    #[cfg(feature = "opus")]
    TrackReady,
    /// The peer connection ended (the remote closed it, ICE disconnected, or str0m failed).
    Closed,
}

/// Where a peer is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PeerState {
    /// ICE, DTLS and SCTP under way; must reach `Open` by the deadline.
    Connecting {
        /// The connect deadline.
        deadline: Instant,
    },
    /// The data channel is open.
    Open,
    /// Ended; the machine removes it.
    Closed,
}

/// One peer connection.
pub(crate) struct Peer {
    rtc: Rtc,
    conn: ConnId,
    /// Our ICE username fragment (the demultiplexing key of STUN).
    pub(crate) local_ufrag: String,
    /// The remote's ICE username fragment from its offer.
    pub(crate) remote_ufrag: Option<String>,
    channel: Option<ChannelId>,
    pub(crate) state: PeerState,
    pending: VecDeque<FrameBuf>,
    pending_bytes: usize,
    max_pending_bytes: usize,
    max_message_bytes: usize,
    /// Whether audio m-lines are served (else they were rejected in the answer).
    audio: bool,
    next_timeout: Option<Instant>,
    /// Remote addresses learned for this peer (bounded).
    pub(crate) addrs: Vec<SocketAddr>,
    /// The audio m-line we send on, if any.
    pub(crate) audio_out: Option<Mid>,
    /// Data-channel messages dropped for lack of room.
    pub(crate) channel_drops: u64,
    opened: bool,
    /// Written to since the last [`drive`](Self::drive).
    written: bool,
    #[cfg(feature = "opus")]
    track_in: Option<crate::audio::TrackIn>,
    #[cfg(feature = "opus")]
    pub(crate) track_out: Option<crate::audio::TrackOut>,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer")
            .field("conn", &self.conn)
            .field("state", &self.state)
            .field("local_ufrag", &self.local_ufrag)
            .finish_non_exhaustive()
    }
}

impl Peer {
    /// Wraps `rtc`, whose local ICE username fragment is `local_ufrag`.
    pub(crate) fn new(
        rtc: Rtc,
        conn: ConnId,
        local_ufrag: String,
        deadline: Instant,
        limits: &crate::config::Limits,
        audio: bool,
    ) -> Self {
        Self {
            rtc,
            conn,
            local_ufrag,
            remote_ufrag: None,
            channel: None,
            state: PeerState::Connecting { deadline },
            pending: VecDeque::new(),
            pending_bytes: 0,
            max_pending_bytes: limits.max_channel_buffered_bytes,
            max_message_bytes: limits.max_channel_message_bytes,
            audio,
            next_timeout: None,
            addrs: Vec::new(),
            audio_out: None,
            channel_drops: 0,
            opened: false,
            written: false,
            #[cfg(feature = "opus")]
            track_in: None,
            #[cfg(feature = "opus")]
            track_out: None,
        }
    }

    /// Whether the data channel ever opened.
    pub(crate) fn was_open(&self) -> bool {
        self.opened
    }

    /// The connection this peer belongs to.
    pub(crate) fn conn(&self) -> ConnId {
        self.conn
    }

    /// The str0m instance (for SDP changes and media writers).
    pub(crate) fn rtc(&mut self) -> &mut Rtc {
        &mut self.rtc
    }

    /// When this peer next needs [`drive`](Self::drive) without input: str0m's timeout,
    /// or the connect deadline while connecting.
    pub(crate) fn next_timeout(&self) -> Option<Instant> {
        let deadline = match self.state {
            PeerState::Connecting { deadline } => Some(deadline),
            _ => None,
        };
        #[cfg(feature = "opus")]
        let audio = self
            .track_out
            .as_ref()
            .and_then(crate::audio::TrackOut::next_due);
        #[cfg(not(feature = "opus"))]
        let audio = None;
        [self.next_timeout, deadline, audio]
            .into_iter()
            .flatten()
            .min()
    }

    /// Whether str0m would take `input` (see [`Rtc::accepts`]).
    pub(crate) fn accepts(&self, input: &Input<'_>) -> bool {
        self.rtc.accepts(input)
    }

    /// Hands str0m one datagram. A datagram str0m refuses ends nothing.
    pub(crate) fn receive(
        &mut self,
        remote: SocketAddr,
        local: SocketAddr,
        contents: &[u8],
        now: Instant,
    ) -> bool {
        let Ok(r) = Receive::new(Protocol::Udp, remote, local, contents) else {
            return false;
        };
        let input = Input::Receive(now, r);
        if !self.rtc.accepts(&input) {
            return false;
        }
        // An error here is about this datagram (a bad DTLS record, an undecryptable SRTP
        // packet): str0m drops it and the peer goes on.
        let _ = self.rtc.handle_input(input);
        true
    }

    /// Writes `frame` on the data channel, or queues it while the SCTP buffer is full. A
    /// frame that does not fit the queue is dropped and counted.
    pub(crate) fn send(&mut self, frame: FrameBuf) {
        if frame.len() > self.max_message_bytes {
            self.channel_drops += 1;
            return;
        }
        if self.pending.is_empty() && self.try_write(&frame) {
            return;
        }
        if self.pending_bytes + frame.len() > self.max_pending_bytes {
            self.channel_drops += 1;
            return;
        }
        self.pending_bytes += frame.len();
        self.pending.push_back(frame);
    }

    fn try_write(&mut self, frame: &FrameBuf) -> bool {
        let Some(id) = self.channel else {
            return false;
        };
        let Some(mut ch) = self.rtc.channel(id) else {
            return false;
        };
        let binary = frame.as_text().is_none();
        matches!(ch.write(binary, frame.as_bytes()), Ok(true))
    }

    fn flush(&mut self) {
        while let Some(frame) = self.pending.front() {
            let frame = frame.clone();
            if !self.try_write(&frame) {
                break;
            }
            self.pending_bytes -= frame.len();
            self.pending.pop_front();
        }
    }

    /// Notes a write that the next [`drive`](Self::drive) sends; whether it is the first
    /// since the last drive (the caller then schedules one).
    pub(crate) fn mark_written(&mut self) -> bool {
        !std::mem::replace(&mut self.written, true)
    }

    /// Whether it was written to since the last [`drive`](Self::drive).
    pub(crate) fn is_written(&self) -> bool {
        self.written
    }

    /// Starts a local close (DTLS close_notify, SCTP shutdown); the next drives send it.
    pub(crate) fn close(&mut self) {
        let _ = self.rtc.close();
        self.state = PeerState::Closed;
    }

    /// Gives str0m the time, then drains it: transmits into `transmits`, events into
    /// `events`. A peer whose connect deadline passed, or whose ICE disconnected, is closed
    /// with a [`PeerEvent::Closed`].
    pub(crate) fn drive(
        &mut self,
        now: Instant,
        transmits: &mut VecDeque<Transmit>,
        events: &mut Vec<PeerEvent>,
    ) {
        self.written = false;
        // str0m's timers only need the time when one is due (a datagram handed over with
        // `receive` has already moved them); new writes go out on the poll below.
        if self.next_timeout.is_none_or(|t| t <= now)
            && self.rtc.handle_input(Input::Timeout(now)).is_err()
        {
            self.fail(events);
        }
        if let PeerState::Connecting { deadline } = self.state {
            if now >= deadline {
                self.fail(events);
            }
        }
        self.flush();
        #[cfg(feature = "opus")]
        if let Some(t) = self.track_out.as_mut() {
            t.send_due(&mut self.rtc, now);
        }
        self.poll(transmits, events);
        #[cfg(feature = "opus")]
        self.start_track(events);
        if !self.pending.is_empty() {
            // A poll may have made room (SACKs processed): try again once.
            self.flush();
            self.poll(transmits, events);
        }
    }

    fn poll(&mut self, transmits: &mut VecDeque<Transmit>, events: &mut Vec<PeerEvent>) {
        self.next_timeout = None;
        loop {
            match self.rtc.poll_output() {
                Ok(Output::Timeout(t)) => {
                    self.next_timeout = self.rtc.is_alive().then_some(t);
                    break;
                }
                Ok(Output::Transmit(t)) => transmits.push_back(Transmit {
                    local: t.source,
                    remote: t.destination,
                    contents: t.contents.into(),
                }),
                Ok(Output::Event(e)) => self.on_event(e, events),
                Err(_) => {
                    self.fail(events);
                    break;
                }
            }
        }
    }

    fn on_event(&mut self, e: Event, events: &mut Vec<PeerEvent>) {
        match e {
            // The first channel the client opens is the llmrtc channel (the real client
            // opens one, labelled "data"); later ones are ignored.
            Event::ChannelOpen(id, _label) if self.channel.is_none() => {
                self.channel = Some(id);
                if self.state != PeerState::Closed {
                    self.state = PeerState::Open;
                    self.opened = true;
                    events.push(PeerEvent::ChannelOpen);
                }
            }
            Event::ChannelData(d) if Some(d.id) == self.channel => {
                events.push(PeerEvent::ChannelData {
                    binary: d.binary,
                    data: d.data,
                });
            }
            Event::ChannelClose(id) if Some(id) == self.channel => self.fail(events),
            Event::IceConnectionStateChange(IceConnectionState::Disconnected) | Event::Closed => {
                self.fail(events)
            }
            Event::MediaAdded(m)
                if self.audio
                    && m.kind == MediaKind::Audio
                    && self.rtc.media(m.mid).is_some_and(|x| !x.disabled())
                    && matches!(m.direction, Direction::SendRecv | Direction::SendOnly) =>
            {
                self.audio_out = Some(m.mid);
            }
            #[cfg(feature = "opus")]
            Event::MediaData(d) if self.audio => {
                if self.track_in.is_none() {
                    self.track_in = crate::audio::TrackIn::new();
                }
                if let Some(pcm) = self.track_in.as_mut().and_then(|t| t.decode(&d.data)) {
                    events.push(PeerEvent::Pcm {
                        samples: pcm.to_vec(),
                    });
                }
            }
            _ => {}
        }
    }

    /// Makes the outbound track's encoder once the peer is open and has a track to send
    /// on, and reports it.
    #[cfg(feature = "opus")]
    fn start_track(&mut self, events: &mut Vec<PeerEvent>) {
        if self.state != PeerState::Open {
            return;
        }
        let Some(mid) = self.audio_out else {
            return;
        };
        if self.track_out.as_ref().is_some_and(|t| t.mid() == mid) {
            return;
        }
        self.track_out = crate::audio::TrackOut::new(mid);
        if self.track_out.is_some() {
            events.push(PeerEvent::TrackReady);
        }
    }

    fn fail(&mut self, events: &mut Vec<PeerEvent>) {
        if self.state != PeerState::Closed {
            let _ = self.rtc.close();
            self.state = PeerState::Closed;
            events.push(PeerEvent::Closed);
        }
    }
}

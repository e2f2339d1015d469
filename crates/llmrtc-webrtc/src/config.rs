//! Settings of the WebRTC machines and their limits, with documented defaults.

use std::net::SocketAddr;
use std::time::Duration;

use agentwire_core::Rate;

/// Bounds on what peers can make a [`WebrtcServer`](crate::WebrtcServer) hold or do.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Largest SDP offer in bytes (the `sdp` string of the `offer`'s
    /// `RTCSessionDescriptionInit`). Default 64 KiB: a browser's offer with a data channel
    /// and one audio track is 2 to 6 KiB. A larger offer gets `error CONNECTION_FAILED` and
    /// builds nothing.
    pub max_sdp_bytes: usize,
    /// Peer connections at once, connecting or connected. Default 256. An offer over the
    /// limit gets `error CONNECTION_FAILED`; the session goes on over the WebSocket.
    pub max_peers: usize,
    /// Offers one connection may make: default 4 per minute with bursts of 4 (the real
    /// client makes one per `start()` and one per reconnect). An offer beyond it gets
    /// `error RATE_LIMITED` and builds nothing, so a flood of offers costs one SDP parse
    /// at most per token.
    pub offer_rate: Rate,
    /// Largest datagram accepted, in bytes. Default 2,048 (an Ethernet MTU with room to
    /// spare; WebRTC keeps its packets under about 1,200). A larger datagram is dropped
    /// unread and counted.
    pub max_datagram_bytes: usize,
    /// Remote addresses remembered per peer for demultiplexing. Default 8 (a client
    /// offers a handful of host candidates); addresses beyond it are still served through
    /// the slower per-peer check.
    pub max_addrs_per_peer: usize,
    /// Largest message written on a data channel, in bytes. Default 256 KiB, the
    /// `max-message-size` browsers announce (and str0m's own receive limit). A larger
    /// payload copy is not written (counted); see the crate's spec decision 7.
    pub max_channel_message_bytes: usize,
    /// Data-channel messages queued for one peer while its channel's send buffer is full.
    /// Default 1 MiB (str0m's SCTP send buffer is set to the same); a message that does
    /// not fit is dropped (the WebSocket copy of every payload message still goes out) and
    /// counted.
    pub max_channel_buffered_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_sdp_bytes: 64 * 1024,
            max_peers: 256,
            offer_rate: Rate::per_minute(4, 4),
            max_datagram_bytes: 2048,
            max_addrs_per_peer: 8,
            max_channel_message_bytes: 256 * 1024,
            max_channel_buffered_bytes: 1024 * 1024,
        }
    }
}

/// Settings of a [`WebrtcServer`](crate::WebrtcServer).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WebrtcConfig {
    /// The local UDP address the driver's socket is bound to: the host candidate written
    /// into every answer, and the `local` of every [`Transmit`](agentwire_core::Transmit).
    /// Default `127.0.0.1:0`, which a driver replaces with its socket's real address
    /// before it builds the machine (a candidate with port 0 reaches nobody).
    pub bind: SocketAddr,
    /// Extra host candidates, e.g. the public address of a server behind NAT whose port is
    /// forwarded to `bind`. Default none. Datagrams that arrive for them arrive on the one
    /// socket at `bind`.
    pub public_addrs: Vec<SocketAddr>,
    /// How long a peer may take from its answer to a connected data channel (ICE and DTLS
    /// and SCTP). Default 10 s; a peer not connected by then is dropped and its client gets
    /// `error CONNECTION_FAILED` (the session goes on over the WebSocket).
    pub connect_timeout: Duration,
    /// Whether answers accept audio m-lines (Opus, for microphone audio in and TTS out).
    /// Default true when the crate is built with feature `opus`, false without it: then an
    /// offer's audio m-lines are rejected in the answer (port 0) and only the data channel
    /// is set up.
    pub audio: bool,
    /// The bounds.
    pub limits: Limits,
}

impl Default for WebrtcConfig {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            public_addrs: Vec::new(),
            connect_timeout: Duration::from_secs(10),
            audio: cfg!(feature = "opus"),
            limits: Limits::default(),
        }
    }
}

impl WebrtcConfig {
    /// The defaults with `bind` as the local address.
    pub fn new(bind: SocketAddr) -> Self {
        Self {
            bind,
            ..Self::default()
        }
    }

    /// Adds a public (NAT) address as an extra host candidate.
    pub fn with_public_addr(mut self, addr: SocketAddr) -> Self {
        self.public_addrs.push(addr);
        self
    }

    /// Sets [`connect_timeout`](Self::connect_timeout).
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets [`audio`](Self::audio).
    pub fn with_audio(mut self, audio: bool) -> Self {
        self.audio = audio;
        self
    }

    /// Sets [`limits`](Self::limits).
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }
}

//! What the WebRTC machines report to the application.

use agentwire_core::ConnId;
use llmrtc_proto::{ClientEvent, ServerEvent};

use crate::error::OfferError;

/// An [`Output::Event`](agentwire_core::Output::Event) of the
/// [`WebrtcServer`](crate::WebrtcServer).
#[derive(Debug)]
#[non_exhaustive]
pub enum WebrtcServerEvent {
    /// An event of the wrapped [`LlmrtcServer`](llmrtc_proto::LlmrtcServer): provider
    /// requests (STT, LLM, TTS, tools), cancels, session and turn events. Never
    /// `ServerEvent::Offer` or `ServerEvent::DataChannel`: this machine handles those.
    Llmrtc(ServerEvent),
    /// `conn`'s offer was answered (`signal` sent).
    PeerAnswered {
        /// The connection.
        conn: ConnId,
        /// The offer renegotiated the connection's existing peer (same ICE username
        /// fragment: the client added or removed a track) instead of making a new one.
        renegotiated: bool,
    },
    /// `conn`'s offer was refused with the `error` of [`OfferError::code`].
    OfferRefused {
        /// The connection.
        conn: ConnId,
        /// Why.
        error: OfferError,
    },
    /// `conn`'s data channel opened: payload messages now also go on it.
    PeerConnected {
        /// The connection.
        conn: ConnId,
    },
    /// `conn`'s peer did not connect within
    /// [`WebrtcConfig::connect_timeout`](crate::WebrtcConfig::connect_timeout) or failed
    /// before its data channel opened; the client got `error CONNECTION_FAILED` and the
    /// session goes on over the WebSocket.
    PeerFailed {
        /// The connection.
        conn: ConnId,
    },
    /// `conn`'s connected peer ended (the client closed it, ICE disconnected, the
    /// WebSocket closed, or a new peer replaced it).
    PeerClosed {
        /// The connection.
        conn: ConnId,
    },
}

/// An [`Output::Event`](agentwire_core::Output::Event) of the
/// [`WebrtcClient`](crate::WebrtcClient).
#[derive(Debug)]
#[non_exhaustive]
pub enum WebrtcClientEvent {
    /// An event of the wrapped [`LlmrtcClient`](llmrtc_proto::LlmrtcClient) (each payload
    /// once, from the channel the real client's rule picks).
    Llmrtc(ClientEvent),
    /// The data channel opened.
    ChannelOpen,
    /// The peer connection failed or closed; payloads come over the WebSocket again.
    PeerClosed,
    /// The outbound audio track is up: [`WebrtcClient::send_mic`](crate::WebrtcClient::send_mic)
    /// may send (feature `opus`).
    TrackReady,
    /// TTS audio from the server's outbound track, decoded (feature `opus`).
    TrackAudio {
        /// 16-bit mono PCM.
        samples: Vec<i16>,
        /// Its sample rate (48,000).
        sample_rate: u32,
    },
}

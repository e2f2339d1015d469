//! Every error of the crate.

use std::net::SocketAddr;

use llmrtc_proto::{ClientCommandError, ConfigError};

/// Why an offer was not answered. Each maps to the `error` the client gets
/// ([`code`](Self::code), [`text`](Self::text)).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OfferError {
    /// The `signal` is not `{type: "offer", sdp: string}`.
    #[error("offer is not an RTCSessionDescriptionInit of type offer")]
    NotAnOffer,
    /// The SDP is larger than [`Limits::max_sdp_bytes`](crate::Limits::max_sdp_bytes).
    #[error("SDP of {len} bytes exceeds the limit of {max}")]
    TooLarge {
        /// SDP length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The SDP does not parse, or str0m cannot answer it.
    #[error("SDP rejected: {0}")]
    Sdp(String),
    /// The offer has no data channel (`m=application`): an llmrtc peer connection always
    /// carries one.
    #[error("offer has no data channel")]
    NoDataChannel,
    /// The server is at [`Limits::max_peers`](crate::Limits::max_peers).
    #[error("too many peers")]
    TooManyPeers,
    /// The connection is over [`Limits::offer_rate`](crate::Limits::offer_rate): the
    /// first offer of a run gets `error RATE_LIMITED`.
    #[error("offer rate exceeded")]
    RateLimited,
    /// A later offer of the same run over the rate: dropped without a reply, counted
    /// ([`WebrtcServer::dropped_offers`](crate::WebrtcServer::dropped_offers)).
    #[error("offer dropped (rate exceeded)")]
    Dropped,
}

impl OfferError {
    /// The `error` code the client gets.
    pub fn code(&self) -> llmrtc_proto::ErrorCode {
        match self {
            Self::RateLimited | Self::Dropped => llmrtc_proto::ErrorCode::RATE_LIMITED,
            _ => llmrtc_proto::ErrorCode::CONNECTION_FAILED,
        }
    }

    /// The `error` text the client gets.
    pub fn text(&self) -> &'static str {
        match self {
            Self::NotAnOffer => crate::texts::BAD_OFFER,
            Self::Sdp(_) => crate::texts::BAD_OFFER,
            Self::TooLarge { .. } => crate::texts::OFFER_TOO_LARGE,
            Self::TooManyPeers => crate::texts::TOO_MANY_PEERS,
            Self::NoDataChannel => crate::texts::OFFER_REJECTED,
            Self::RateLimited | Self::Dropped => crate::texts::OFFER_RATE,
        }
    }
}

/// Why a [`WebrtcClient`](crate::WebrtcClient) command failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WebrtcClientError {
    /// The session is not ready (no `ready` yet), or already has a peer connection.
    #[error("no session to offer on, or a peer connection exists")]
    NotReady,
    /// The data channel is not open.
    #[error("data channel not open")]
    ChannelClosed,
    /// The wrapped llmrtc client refused the command.
    #[error(transparent)]
    Client(#[from] ClientCommandError),
    /// str0m refused the command.
    #[error("webrtc: {0}")]
    Rtc(String),
}

/// Why a [`WebrtcServer`](crate::WebrtcServer) or [`WebrtcClient`](crate::WebrtcClient)
/// could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WebrtcConfigError {
    /// The wrapped llmrtc configuration is invalid.
    #[error(transparent)]
    Llmrtc(#[from] ConfigError),
    /// No host candidate can be made of this address (port 0, or an unspecified IP with
    /// no public address beside it).
    #[error("no host candidate for {0}")]
    BadAddress(SocketAddr),
}

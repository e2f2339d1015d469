//! The exact wire strings the WebRTC machines send: `error` texts and data-channel labels.

/// `error CONNECTION_FAILED` text: the offer is not an `RTCSessionDescriptionInit` of type
/// `offer` with an `sdp` string, or its SDP does not parse.
pub const BAD_OFFER: &str = "Invalid WebRTC offer";
/// `error CONNECTION_FAILED` text: the offer's SDP is over
/// [`Limits::max_sdp_bytes`](crate::Limits::max_sdp_bytes).
pub const OFFER_TOO_LARGE: &str = "WebRTC offer too large";
/// `error CONNECTION_FAILED` text: the offer is valid but cannot be answered (no data
/// channel m-line, no usable transport).
pub const OFFER_REJECTED: &str = "WebRTC offer could not be answered";
/// `error CONNECTION_FAILED` text: the server is at
/// [`Limits::max_peers`](crate::Limits::max_peers).
pub const TOO_MANY_PEERS: &str = "Too many WebRTC peers";
/// `error RATE_LIMITED` text: an offer beyond
/// [`Limits::offer_rate`](crate::Limits::offer_rate).
pub const OFFER_RATE: &str = "Too many WebRTC offers";
/// `error CONNECTION_FAILED` text: ICE, DTLS or SCTP did not complete within
/// [`WebrtcConfig::connect_timeout`](crate::WebrtcConfig::connect_timeout), or the peer
/// connection failed after it connected.
pub const CONNECT_TIMEOUT: &str = "WebRTC connection failed";
/// The label of the data channel [`WebrtcClient`](crate::WebrtcClient) opens: the real web
/// client's `"data"`. The server takes the first channel the client opens, whatever its
/// label.
pub const CHANNEL_LABEL: &str = "data";

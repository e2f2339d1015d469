//! Sans-IO **WebRTC for llmrtc** on [`str0m`]: the data channel and Opus audio tracks of an
//! llmrtc session, as machines that take and send UDP datagrams.
//!
//! An llmrtc client sends `offer` (an `RTCSessionDescriptionInit`) over the WebSocket; the
//! server answers with `signal`, and the two set up a WebRTC peer connection: ICE, DTLS, then
//! SCTP for the data channel and SRTP for the audio tracks. Payload messages (`transcript`,
//! `llm-chunk`, `tts-*`, `error`, ...) then travel on both the WebSocket and the data channel
//! (spec "Transport Channels"), and the client takes each from one of them.
//!
//! This crate never opens a socket, reads a clock or spawns: drive its machines with
//! `agentwire-tokio` (which owns the WebSocket side and one UDP socket) or your own loop.
//! Both implement [`agentwire_core::Machine`] and [`agentwire_core::DatagramMachine`].
//! (str0m draws the DTLS certificate, ICE credentials and SRTP keys from the operating
//! system's random source, as cryptography must.)
//!
//! # API map
//!
//! | you want to | use |
//! |---|---|
//! | serve llmrtc with WebRTC | [`WebrtcServer::new`]`(ServerConfig, `[`WebrtcConfig`]`, ids)`; events [`WebrtcServerEvent`] (`Llmrtc(ServerEvent)` for provider requests, plus `PeerAnswered`, `OfferRefused`, `PeerConnected`, `PeerFailed`, `PeerClosed`) |
//! | answer providers (STT, LLM, TTS, tools) | [`WebrtcServer::llmrtc`] → `&mut LlmrtcServer`; its outputs come out of the `WebrtcServer` |
//! | connect as a client with WebRTC | [`WebrtcClient::new`]`(ClientConfig, jitter, `[`WebrtcConfig`]`)` (a [`Dialer`](agentwire_core::Dialer) too); after `ready`: [`WebrtcClient::offer`]`(`[`AudioOffer`]`, now)`, or [`WebrtcClient::set_auto_offer`]; commands on [`WebrtcClient::llmrtc`]; events [`WebrtcClientEvent`] |
//! | audio tracks (feature `opus`) | server: automatic (the client's microphone track feeds [`LlmrtcServer::track_audio`](llmrtc_proto::LlmrtcServer::track_audio); TTS goes on the server's track once the peer is up and the offer receives audio, [`LlmrtcServer::set_audio_track`](llmrtc_proto::LlmrtcServer::set_audio_track)); client: [`AudioOffer::SendRecv`], [`WebrtcClient::share_audio`] (renegotiate to add the microphone), [`WebrtcClient::send_mic`], events [`WebrtcClientEvent::TrackReady`] and [`WebrtcClientEvent::TrackAudio`] |
//! | client payloads on the data channel | [`WebrtcClient::send_channel`] (the real client sends `attachments` there) |
//! | settings and limits | [`WebrtcConfig`] (bind address, public addresses, connect timeout, audio), [`Limits`] |
//! | observe | [`WebrtcServer::peers`], [`WebrtcServer::is_channel_open`], [`WebrtcServer::dropped_datagrams`], [`WebrtcServer::dropped_channel_messages`], [`WebrtcClient::is_channel_open`] |
//! | handle errors | [`OfferError`] (each maps to the `error` the client gets), [`WebrtcClientError`], [`WebrtcConfigError`] |
//!
//! # A run loop
//!
//! A driver owns the WebSocket listener and one UDP socket bound to [`WebrtcConfig::bind`]
//! (a concrete address: it is the host candidate written into answers). After every input
//! (`handle_connect`, `handle_frame`, `handle_disconnect`, `handle_timeout`,
//! `handle_datagram`) it drains `poll_output` (frames, closes, events) and `poll_transmit`
//! (datagrams to send) until both are empty, then sleeps until `poll_timeout`, which covers
//! the WebSocket side's timers and every peer's.
//!
//! # Limits
//!
//! | limit | default | beyond it |
//! |---|---|---|
//! | [`Limits::max_sdp_bytes`] | 64 KiB | `error CONNECTION_FAILED` |
//! | [`Limits::max_peers`] | 256 | `error CONNECTION_FAILED` |
//! | [`Limits::offer_rate`] | 4 per minute, burst 4, per connection | `error RATE_LIMITED` |
//! | [`Limits::max_datagram_bytes`] | 2,048 | dropped, counted |
//! | [`Limits::max_addrs_per_peer`] | 8 | not learned (STUN still reaches the peer) |
//! | [`Limits::max_channel_message_bytes`] | 256 KiB | the data-channel copy is not written, counted |
//! | [`Limits::max_channel_buffered_bytes`] | 1 MiB per peer | the data-channel copy is dropped, counted |
//! | [`WebrtcConfig::connect_timeout`] | 10 s | peer dropped, `error CONNECTION_FAILED` |
//!
//! # Spec decisions
//!
//! 1. **Bad offers get `CONNECTION_FAILED`.** The spec has no code for a malformed offer;
//!    `INVALID_MESSAGE` is for messages that do not decode, and an `offer` whose `signal` is
//!    not an SDP offer decodes fine. A `signal` that is not `{type: "offer", sdp: string}`,
//!    SDP that does not parse or cannot be answered, an offer without a data channel, an
//!    offer over [`Limits::max_sdp_bytes`] and an offer over [`Limits::max_peers`] all get
//!    `error CONNECTION_FAILED` (texts in [`texts`]): "WebRTC connection failed" is what
//!    the client must act on. The session stays usable over the WebSocket. Offers over
//!    [`Limits::offer_rate`] get `RATE_LIMITED`, like other floods.
//! 2. **Renegotiation or a new peer, by ICE username fragment.** The real web client sends a
//!    second `offer` on the same WebSocket when it adds its microphone (`shareAudio` →
//!    renegotiation of the same `RTCPeerConnection`), and the real backend answers it on the
//!    same peer. An offer whose `a=ice-ufrag` equals that of the connection's live peer is
//!    therefore applied to that peer (`PeerAnswered { renegotiated: true }`); any other offer
//!    (a new `RTCPeerConnection`, an ICE restart) closes the old peer and builds a new one.
//! 3. **Client messages on the data channel.** The real web client sends `attachments` on
//!    the data channel and everything else on the WebSocket, each message on one channel
//!    only. The server handles every data-channel message as a frame of its connection,
//!    once, as it arrives; it does not look for copies on the other channel (messages carry
//!    no id to match). Signalling (`offer`, `reconnect`, `ping`) is taken from the WebSocket
//!    only (spec "Transport Channels"): on the data channel it is dropped and counted
//!    ([`WebrtcServer::dropped_channel_messages`]).
//! 4. **`CONNECTION_FAILED` only for peers that never connected.** A peer whose ICE, DTLS or
//!    SCTP does not complete within [`WebrtcConfig::connect_timeout`] (or that fails before
//!    its data channel opens) is dropped and the client gets `error CONNECTION_FAILED`. A
//!    peer that was connected and then ends (the client closed it, ICE disconnected) is
//!    dropped quietly (`PeerClosed`): payloads go on over the WebSocket, as they always do.
//! 5. **Any data channel label.** The server takes the first data channel the client opens,
//!    whatever its label (the real web client's is `"data"`); later ones are ignored.
//! 6. **The session's peer follows the session.** When the wrapped server closes a
//!    connection (a `reconnect` on another connection took its session, the server is
//!    full, [`LlmrtcServer::close`](llmrtc_proto::LlmrtcServer::close)) or the WebSocket
//!    ends, that connection's peer is closed at once; the reconnected client offers again
//!    on its new connection (the real client does) and gets a new peer.
//! 7. **Payloads too large for a data channel stay on the WebSocket.** Browsers take data
//!    channel messages up to 256 KiB (their SDP `max-message-size`). A payload message over
//!    [`Limits::max_channel_message_bytes`] (in practice only a whole `tts` with streaming
//!    TTS off) is not written to the channel, and one that finds the peer's send queue full
//!    is dropped from it; both are counted
//!    ([`WebrtcServer::dropped_channel_messages`]). Its WebSocket copy always goes out, but
//!    the real web client ignores WebSocket payloads while its channel is open: serve such
//!    clients with streaming TTS (the default), whose `tts-chunk`s are small.
//! 8. **Audio tracks follow the offer.** With feature `opus` and [`WebrtcConfig::audio`]
//!    on, an offer's audio m-line is answered with Opus (48 kHz). Audio the client sends on
//!    it is decoded and fed to the session's VAD and STT (a packet that does not decode is
//!    dropped); when the m-line lets the server send (`sendrecv` or `recvonly` from the
//!    client's side), the wrapped server is told once the peer is connected, and a reply's
//!    TTS goes on the track instead of `tts-chunk` messages, paced one 20 ms frame every
//!    20 ms (a late timer sends at most a second's frames at once), dropped at once on
//!    barge-in. Without `opus`, or with `audio` off, the answer rejects audio m-lines (port
//!    0) and TTS stays in messages.
//!
//! # Minimum Rust
//!
//! str0m 0.25 needs Rust 1.89, so this crate's `rust-version` is 1.89 while the rest of the
//! workspace keeps its own (1.85): only users of WebRTC need the newer compiler.
//!
//! # Crypto
//!
//! str0m is built with one crypto backend, `aws-lc-rs`: DTLS 1.2 with an ECDSA P-256
//! certificate and the SRTP profiles libwebrtc offers (`AES128_CM_SHA1_80`,
//! `AEAD_AES_128_GCM`). It builds with a C compiler only (no cmake, no nasm, no OpenSSL
//! headers). str0m's pure-Rust backend (`str0m-rust-crypto` 0.7) is not in the crates.io
//! index this workspace builds from, nor is its OpenSSL backend.
#![forbid(unsafe_code)]

#[cfg(feature = "opus")]
mod audio;
mod client;
pub mod config;
pub mod error;
pub mod event;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
#[cfg(feature = "opus")]
pub mod opus;
mod peer;
mod peers;
mod sdp;
mod server;
pub mod texts;

pub use client::{AudioOffer, WebrtcClient};
pub use config::{Limits, WebrtcConfig};
pub use error::{OfferError, WebrtcClientError, WebrtcConfigError};
pub use event::{WebrtcClientEvent, WebrtcServerEvent};
pub use server::WebrtcServer;

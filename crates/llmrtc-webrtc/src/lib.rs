//! Sans-IO **WebRTC for llmrtc** on [`str0m`]: the data channel and Opus audio tracks of an
//! llmrtc session, as machines that take and send UDP datagrams.
//!
//! An llmrtc client sends `offer` (an `RTCSessionDescriptionInit`) over the WebSocket; the
//! server answers with `signal`, and the two set up a WebRTC peer connection: ICE, DTLS, then
//! SCTP for the data channel `"llmrtc"` and SRTP for the audio tracks. Payload messages
//! (`transcript`, `llm-chunk`, `tts-*`, ...) then travel on both the WebSocket and the data
//! channel (spec "Transport Channels").
//!
//! This crate never opens a socket, reads a clock or spawns: drive its machines with
//! `agentwire-tokio` (which owns the WebSocket listener and one UDP socket) or your own loop.
//! They implement [`agentwire_core::Machine`] and [`agentwire_core::DatagramMachine`].
//!
//! # Minimum Rust
//!
//! str0m 0.25 needs Rust 1.89, so this crate's `rust-version` is 1.89 while the rest of the
//! workspace keeps its own (1.85): only users of WebRTC need the newer compiler.
//!
//! # Crypto
//!
//! str0m is built with one crypto backend, `aws-lc-rs` (DTLS 1.2 with an ECDSA P-256
//! certificate, SRTP `AES128_CM_SHA1_80` and `AEAD_AES_128_GCM`: what libwebrtc offers).
//! It builds with a C compiler only (no cmake, no nasm, no OpenSSL headers).
#![forbid(unsafe_code)]

pub mod config;
pub mod error;
pub mod texts;

pub use config::{Limits, WebrtcConfig};
pub use error::{OfferError, WebrtcClientError, WebrtcServerError};

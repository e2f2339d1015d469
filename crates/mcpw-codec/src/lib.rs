//! Sans-IO codec for **MCPW**, the agent-orchestration WebSocket protocol of
//! `specs/mcpw.md` (in the project's shared docs), byte-compatible with its reference Go
//! implementation where the two differ on the wire (`INTEROP.md`, mcpw section: big-endian
//! header, gzip, the 1 MiB size limit, method codes 1-9).
//!
//! Agents and an orchestration server exchange the same messages in two forms: **binary**
//! frames (a 24-byte header, then the params' JSON, gzipped when that pays) and **JSON** text
//! frames (`{"id", "type", "method", "params"}`). This crate encodes and decodes both, never
//! opens a socket and never reads a clock. It works over WebSocket frames or over a plain
//! byte stream ([`Codec::decode_stream`], or `tokio_util` with the `tokio-util` feature).
//!
//! # API map
//!
//! | item | what it is |
//! |---|---|
//! | [`Header`], [`HeaderError`] | the 24-byte header: `parse` (checks magic, version, size, reserved) and `write` |
//! | [`MessageType`], [`Flags`], [`Method`] | open code spaces: unknown values survive a round trip |
//! | [`Message`], [`Body`], [`OtherCall`] | one message, the same value in both forms; typed body per method |
//! | [`params`] | typed params of every spec message (`AgentRegister`, `StateSync`, ...; re-exported at the root) |
//! | [`ErrorBody`], [`ErrorCode`] | type-3 error messages, codes 4000-4008 as an open newtype |
//! | [`Codec`] | binary encode/decode with reused gzip state, raw frames, the streaming decoder, WebSocket frames |
//! | [`json`] | the JSON form as free functions (`json::decode`, `json::encode`) |
//! | [`Limits`], [`Compression`], [`CodecConfig`] | every limit and compression setting, with defaults |
//! | [`gzip`] | single-member gzip with a hard output cap and typed [`GzipError`]s |
//! | [`signing`] | HMAC-SHA256 signing and constant-time verification |
//! | [`DecodeError`], [`EncodeError`] | typed errors; [`DecodeError::code`] is the spec code to answer with |
//!
//! # Example
//!
//! ```
//! use mcpw_codec::{AgentHeartbeat, Body, Codec, Form, Message, MessageType};
//!
//! let mut codec = Codec::default();
//! let beat = Message::new(
//!     MessageType::REQUEST,
//!     Body::AgentHeartbeat(AgentHeartbeat {
//!         agent_id: "agent-123".into(),
//!         status: Some("healthy".into()),
//!         metrics: None,
//!         workload: None,
//!     }),
//! )
//! .with_seq(1);
//!
//! // Binary form: 24-byte header + JSON params.
//! let mut frame = Vec::new();
//! let header = codec.encode(&beat, &mut frame).unwrap();
//! assert_eq!(&frame[..4], b"MCPW");
//! assert_eq!(header.method.as_str(), Some("agent.heartbeat"));
//! assert_eq!(codec.decode(&frame).unwrap(), beat);
//!
//! // JSON form, in a text frame.
//! let text = codec.encode_ws(&beat.clone().with_id("hb-1"), Form::Json).unwrap();
//! assert_eq!(
//!     text.as_text().unwrap(),
//!     r#"{"id":"hb-1","type":0,"method":"agent.heartbeat","params":{"agent_id":"agent-123","status":"healthy"}}"#
//! );
//! ```
//!
//! # Limits
//!
//! | limit ([`Limits`]) | default | beyond it |
//! |---|---|---|
//! | `max_payload` | 1 MiB (exactly 1 MiB allowed) | [`HeaderError::PayloadTooLarge`], code 4007, before any allocation |
//! | `max_decompressed` | 10 MiB | [`GzipError::TooLarge`], code 4007, inflating stops at cap + 1 |
//! | `max_batch` | 100 messages | [`DecodeError::BatchTooLarge`], code 4007, counted while parsing |
//! | `max_text` | 1 MiB | [`DecodeError::TextTooLarge`], code 4007 |
//! | `reserved` | [`ReservedPolicy::Reject`] | [`HeaderError::ReservedNotZero`], code 4000 |
//!
//! | compression ([`Compression`]) | default |
//! |---|---|
//! | `threshold` | 1024: only longer payloads are compressed, and only if gzip is smaller |
//! | `level` | 1 |
//! | `backend` | zlib-rs (feature `zlib-rs`, default), else miniz_oxide |
//! | `policy` | [`CompressPolicy::IfSmaller`]; [`CompressPolicy::SPEC_ENTROPY`] is the spec's `ShouldCompress` |
//!
//! # Spec decisions
//!
//! 1. **Byte order and compression follow the reference**: big-endian header, gzip (RFC
//!    1952) payloads, one member per payload. (`header::tests::go_test_vector`,
//!    `tests/gzip_interop.rs`)
//! 2. **Method codes**: 1-9 as the reference (`initialize` ... `pong`); the spec's agent
//!    methods get 10-19 ([`Method`] lists them); 0 means the name travels in the payload as
//!    `{"method": name, "params": ...}`. A code-0 payload of any other shape is taken as the
//!    params of an unnamed method, as the reference sends unknown methods. Batches and errors
//!    use 0. (`tests/binary.rs`)
//! 3. **Binary payload = the params' JSON** (the reference's `json.Marshal(msg.Params)`);
//!    an error frame's payload is the error object, a batch's is
//!    `{"messages": [JSON form...], "count": n}` (the reference's `BatchMessage`). The binary
//!    form has no `id`, the JSON form no sequence id or flags.
//! 4. **Type and body agree**: type 3 is exactly [`Body::Error`], type 6 exactly
//!    [`Body::Batch`]; the encoder refuses anything else ([`EncodeError::KindMismatch`]).
//!    A binary frame is a batch if its type is 6 *or* its `BATCH` flag is set (the reference
//!    sets only the type; we set both). Batches do not nest.
//! 5. **JSON `result`**: params are written under `params`; on decode, `result` is accepted
//!    when `params` is absent.
//! 6. **Reserved field**: written 0; a non-zero value is refused by default (the spec says
//!    "must be 0"), or kept with [`ReservedPolicy::Ignore`] (the reference ignores it).
//! 7. **Encrypted frames** (flag `ENCRYPTED`): the spec names no cipher, so the typed codec
//!    refuses them ([`DecodeError::Encrypted`]); [`Codec::decode_frame`] and
//!    [`Codec::encode_frame`] pass the bytes through, never compressing or inflating them.
//! 8. **gzip strictness**: truncated members, bad CRC-32, bad ISIZE, trailing garbage and a
//!    second member are each a [`GzipError`] (Go's reader would accept several members).
//! 9. **Params optionality**: the spec has one example per message; the ids a message is
//!    about and its essential lists are required, everything else optional (see [`params`]).
//!    `registration.confirmed` has no example: its fields are ours.
//! 10. **Signing** covers exactly the bytes given; where the tag travels is left to the
//!     application (the spec does not say).
//!
//! # Features
//!
//! - `zlib-rs` (default): the zlib-rs deflate backend through flate2. miniz_oxide is always
//!   available as [`Backend::MinizOxide`].
//! - `tokio-util`: `tokio_codec::McpwFrames`, a `Decoder`/`Encoder` for MCPW frames over
//!   byte streams (`FramedRead`/`FramedWrite`).
//! - `fuzzing`: `#[doc(hidden)]` entry points for the cargo-fuzz targets.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod binary;
mod codec;
mod config;
mod deflate;
mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod gzip;
mod header;
pub mod json;
mod message;
pub mod params;
pub mod signing;
#[cfg(feature = "tokio-util")]
pub mod tokio_codec;

pub use codec::{Codec, Form, RawFrame};
pub use config::{Backend, CodecConfig, CompressPolicy, Compression, Limits, ReservedPolicy};
pub use error::{DecodeError, EncodeError, ErrorBody, ErrorCode};
pub use gzip::GzipError;
pub use header::{Flags, Header, HeaderError, MessageType, Method, HEADER_LEN, MAGIC, VERSION};
pub use message::{Body, Message, OtherCall, BATCH_METHOD};
pub use params::*;

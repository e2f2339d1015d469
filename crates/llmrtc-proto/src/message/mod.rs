//! Wire types: one enum per sender, exact names of the spec.
//!
//! - [`ClientMessage`]: client → server (`ping`, `offer`, `reconnect`, `audio`, `attachments`).
//! - [`ServerMessage`]: server → client (`ready` ... `error`: the spec's 18 types and core
//!   1.3.0's `assistant-transcript`, `usage` and `mode-changed`).
//!
//! `type` values are kebab-case, fields camelCase. Optionality follows the spec's notation:
//! `field?` is an `Option` omitted when `None`. Unknown fields are ignored on decode; an
//! unknown `type` decodes to [`Decoded::Unknown`](crate::Decoded::Unknown), which callers
//! ignore (spec "Compatibility Notes"). SDP payloads (`offer.signal`, `signal.signal`) are
//! opaque JSON ([`RawJson`]), never parsed.

mod client_message;
mod code;
mod common;
mod server_message;

pub use agentwire_core::json::RawJson;
pub use client_message::{
    Attachments, Audio, AudioRef, ClientMessage, ClientMessageRef, Offer, Ping, Reconnect,
};
pub use code::ErrorCode;
pub use common::{IceServer, IceUrls, SessionMode, Timestamp, VisionAttachment};
pub use server_message::{
    channel_of, AssistantTranscript, Channel, ErrorMessage, Llm, LlmChunk, ModeChanged, Pong,
    Ready, ReconnectAck, ServerMessage, Signal, StageChange, ToolCallEnd, ToolCallStart,
    Transcript, Tts, TtsChunk, Usage,
};

/// The protocol version this crate speaks and writes in `ready.protocolVersion` (a number).
pub const PROTOCOL_VERSION: u32 = 1;

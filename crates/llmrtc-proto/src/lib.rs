//! Sans-IO **llmrtc** voice-AI protocol v1 (`@metered/llmrtc`, now `@llmrtc/llmrtc-*`).
//!
//! Work in progress on this branch: the wire types, the codec and the WAV parser are done;
//! the server machine follows.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod codec;
mod error;
pub mod message;
pub mod wav;

pub use codec::{
    decode_base64, encode_audio, encode_tts, encode_tts_chunk, write_base64, Decoded,
    DEFAULT_MAX_MESSAGE_BYTES,
};
pub use error::{DecodeError, ErrorCode};
pub use message::{
    channel_of, Attachments, Audio, Channel, ClientMessage, ErrorMessage, IceServer, IceUrls, Llm,
    LlmChunk, Offer, Ping, Pong, RawJson, Ready, Reconnect, ReconnectAck, ServerMessage, Signal,
    StageChange, Timestamp, ToolCallEnd, ToolCallStart, Transcript, Tts, TtsChunk,
    VisionAttachment, PROTOCOL_VERSION,
};
pub use wav::{parse_wav, write_wav, Wav, WavError, WavFormat};

//! What the client tells its application: state changes and assembled server events.

use std::time::Duration;

use agentwire_core::FrameBuf;

use crate::error::ProtocolError;
use crate::ids::SessionId;
use crate::message::{IceServer, ServerMessage, SessionMode};

use super::state::ConnectionState;

/// Why the client dropped or lost a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LossReason {
    /// The socket ended (closed by the server or the network).
    Disconnected,
    /// The attempt failed before the WebSocket opened.
    DialFailed,
    /// No `ready` within [`ClientConfig::ready_timeout`](crate::ClientConfig::ready_timeout).
    ReadyTimeout,
    /// [`ClientConfig::max_missed_pongs`](crate::ClientConfig::max_missed_pongs) pongs in a row did not come.
    HeartbeatTimeout,
    /// The application asked for it ([`LlmrtcClient::drop_connection`](super::LlmrtcClient::drop_connection)).
    Requested,
}

/// An [`Output::Event`](agentwire_core::Output::Event) of the
/// [`LlmrtcClient`](super::LlmrtcClient).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ClientEvent {
    /// The connection state changed.
    StateChanged {
        /// The previous state.
        from: ConnectionState,
        /// The new state.
        to: ConnectionState,
    },
    /// `ready` arrived on a new connection.
    Ready {
        /// `ready.id`: this connection's session id.
        id: SessionId,
        /// The server's protocol version.
        protocol_version: u32,
        /// STUN/TURN servers for WebRTC.
        ice_servers: Option<Vec<IceServer>>,
        /// `ready.mode` as sent (core 1.3.0); `None` from older servers, which always run
        /// the pipeline ([`LlmrtcClient::mode`](super::LlmrtcClient::mode) says so).
        mode: Option<SessionMode>,
    },
    /// The server speaks another protocol version: a warning; the connection proceeds
    /// (spec "Compatibility Notes").
    VersionMismatch {
        /// The server's version.
        server: u32,
        /// Ours ([`PROTOCOL_VERSION`](crate::PROTOCOL_VERSION)).
        client: u32,
    },
    /// `reconnect` was sent for `previous` (before anything else on the connection).
    ResumeRequested {
        /// The session asked for.
        previous: SessionId,
    },
    /// `reconnect-ack` arrived.
    Resumed {
        /// Whether the previous session was found.
        success: bool,
        /// The session now in use (the previous one, or this connection's new one).
        session_id: SessionId,
        /// Whether the conversation history came along.
        history_recovered: bool,
    },
    /// A `pong` answered our `ping`.
    Pong {
        /// The echoed timestamp.
        timestamp: u64,
        /// Round-trip time, when the pong matched the last ping.
        rtt: Option<Duration>,
    },
    /// A `ping` got no `pong` in time.
    PongMissed {
        /// Misses in a row so far.
        missed: u32,
    },
    /// The connection was lost or dropped.
    ConnectionLost {
        /// Why.
        reason: LossReason,
    },
    /// A reconnect try is scheduled.
    Reconnecting {
        /// This try's number, from 1.
        attempt: u32,
        /// [`Reconnection::max_retries`](crate::Reconnection::max_retries).
        max_attempts: u32,
        /// The wait before it.
        delay: Duration,
    },
    /// A server message, handled once (after the dual-channel rule): every payload event
    /// (`transcript`, `llm-chunk`, `tts-start`, `error`, core 1.3.0's
    /// `assistant-transcript`, `usage` and `mode-changed`, ...) and `signal`.
    Message(ServerMessage),
    /// A `tts-chunk`'s audio, decoded from base64.
    TtsChunk {
        /// Audio format (`"pcm"`: 16-bit little-endian mono).
        format: String,
        /// Sample rate in Hz.
        sample_rate: u32,
        /// The decoded bytes.
        audio: Vec<u8>,
    },
    /// The reply's LLM text: on `llm`, with what the `llm-chunk`s streamed before it.
    LlmReply {
        /// The `llm` message's text.
        text: String,
        /// The chunks' contents joined (empty when the server did not stream).
        streamed: String,
    },
    /// A whole TTS reply: the chunks joined at `tts-complete`, or a `tts` message decoded.
    TtsAudio {
        /// Audio format.
        format: String,
        /// Sample rate: from the chunks, or from the WAV header of a `tts` message whose
        /// format is `wav`; `None` for other `tts` messages, which carry none.
        sample_rate: Option<u32>,
        /// The decoded audio.
        audio: Vec<u8>,
    },
    /// A server message this client ignored: an unknown `type` (spec: ignore), a message
    /// before `ready`, or a copy that the dual-channel rule sends through the other channel.
    Ignored {
        /// Its `type` (cut to 64 bytes).
        type_name: String,
        /// Why.
        reason: IgnoreReason,
    },
    /// Send `frame` on the WebRTC data channel (it is open): a payload message the client
    /// sends there rather than on the WebSocket (`attachments`, as the real web client
    /// does). Signalling and `audio` always go on the WebSocket.
    DataChannelSend {
        /// The message.
        frame: FrameBuf,
    },
    /// A message that could not be decoded (or broke a limit); ignored, the connection stays.
    ProtocolViolation {
        /// What was wrong.
        error: ProtocolError,
    },
}

/// Why a server message was ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IgnoreReason {
    /// The `type` is not one the server sends.
    UnknownType,
    /// It came before `ready`.
    BeforeReady,
    /// The dual-channel rule takes this message from the other channel.
    OtherChannel,
    /// The data channel repeated a payload message already handled from the WebSocket just
    /// before the channel opened ([`ClientConfig::data_channel_overlap`](crate::ClientConfig::data_channel_overlap)).
    Duplicate,
}

//! What the server tells the application.

use agentwire_core::{ConnId, FrameBuf};

use crate::ids::{RequestId, SessionId};
use crate::message::ErrorCode;
use crate::message::RawJson;
use crate::provider::{LlmRequest, ProviderKind, SttRequest, ToolCallRequest, TtsRequest};

/// An [`Output::Event`](agentwire_core::Output::Event) of the
/// [`LlmrtcServer`](crate::LlmrtcServer).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ServerEvent {
    /// A connection got `ready` with a new session.
    SessionStarted {
        /// The connection.
        conn: ConnId,
        /// The new session's id (`ready.id`).
        session: SessionId,
    },
    /// A `reconnect` moved session `session` (and its history) to `conn`.
    SessionResumed {
        /// The connection.
        conn: ConnId,
        /// The recovered session.
        session: SessionId,
        /// The session made for `conn` at connect, now discarded.
        replaced: SessionId,
    },
    /// A `reconnect` named a session that does not exist (`expired` tells which error).
    ResumeFailed {
        /// The connection.
        conn: ConnId,
        /// The id the client named.
        requested: SessionId,
        /// Whether the id belonged to a session that expired.
        expired: bool,
    },
    /// A session's connection ended; it waits for a reconnect until its TTL.
    SessionDetached {
        /// The session.
        session: SessionId,
    },
    /// A disconnected session reached its TTL (or was evicted for room) and is gone.
    SessionExpired {
        /// The session.
        session: SessionId,
    },
    /// The server closed a connection that sent no `ping` in time.
    HeartbeatTimeout {
        /// The connection.
        conn: ConnId,
    },
    /// Transcribe a speech segment.
    Stt(SttRequest),
    /// Ask the LLM.
    Llm(LlmRequest),
    /// Synthesize speech.
    Tts(TtsRequest),
    /// Run a playbook tool.
    ToolCall(ToolCallRequest),
    /// The machine no longer wants the answer to `request` (barge-in, disconnect, timeout,
    /// a failed turn): stop work on it.
    Cancel {
        /// The request.
        request: RequestId,
        /// Its provider.
        kind: ProviderKind,
    },
    /// A WebRTC `offer` (only with [`ServerConfig::webrtc`](crate::ServerConfig::webrtc)):
    /// answer with [`LlmrtcServer::signal`](crate::LlmrtcServer::signal).
    Offer {
        /// The connection.
        conn: ConnId,
        /// Its session.
        session: SessionId,
        /// The SDP offer.
        signal: RawJson,
    },
    /// The data-channel copy of a payload message (spec "Transport Channels"): carry it on
    /// `conn`'s WebRTC data channel, or ignore it. Emitted only while the application has
    /// reported the channel open ([`LlmrtcServer::set_data_channel_open`](crate::LlmrtcServer::set_data_channel_open)),
    /// right after the WebSocket copy.
    DataChannel {
        /// The connection whose peer connection carries the channel.
        conn: ConnId,
        /// The same frame as sent on the WebSocket.
        frame: FrameBuf,
    },
    /// A message with a `type` the server does not handle, ignored as the spec says.
    Ignored {
        /// The connection.
        conn: ConnId,
        /// Its `type`.
        type_name: String,
    },
    /// The server sent `error` to a connection (for logs and metrics).
    ErrorSent {
        /// The connection.
        conn: ConnId,
        /// The code.
        code: ErrorCode,
        /// The text.
        message: String,
    },
    /// A turn ended (answered, failed, or cut by barge-in or a disconnect).
    TurnEnded {
        /// The session.
        session: SessionId,
        /// How.
        outcome: TurnOutcome,
    },
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TurnOutcome {
    /// `tts-complete` was sent (or the reply was empty, so there was nothing to speak).
    Completed,
    /// The transcript was empty: no LLM call.
    NothingHeard,
    /// Barge-in: `tts-cancelled` was sent.
    Interrupted,
    /// A provider failed or timed out; the `error` code sent.
    Failed(ErrorCode),
    /// The connection ended, or a reconnect replaced the session.
    Abandoned,
}

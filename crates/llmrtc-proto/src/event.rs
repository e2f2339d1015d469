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
    /// TTS audio for `conn`'s outbound WebRTC audio track (only while the application has
    /// reported the track with [`LlmrtcServer::set_audio_track`](crate::LlmrtcServer::set_audio_track)):
    /// encode it (Opus, 20 ms frames) and send it in real time, one frame per 20 ms. It
    /// takes the place of `tts-chunk` messages; `tts-start` comes before the first piece,
    /// and the server sends `tts-complete` once the audio has had time to play (counted
    /// from the first piece, in real time).
    TrackAudio {
        /// The connection whose peer connection carries the track.
        conn: ConnId,
        /// 16-bit mono PCM.
        samples: Vec<i16>,
        /// Its sample rate in Hz (the TTS provider's; resample to the codec's rate).
        sample_rate: u32,
    },
    /// No more [`ServerEvent::TrackAudio`] for this reply on `conn`. With `cancelled` false
    /// the reply ended normally: play out what is buffered (pad the last frame). With
    /// `cancelled` true (barge-in, a failed or abandoned turn): drop what is buffered now;
    /// the client got `tts-cancelled` (or an error) instead of `tts-complete`.
    TrackAudioEnd {
        /// The connection.
        conn: ConnId,
        /// Whether the rest of the reply is dropped.
        cancelled: bool,
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

//! What the relay and the host tell the application.

use std::net::SocketAddr;

use agentwire_core::ConnId;

use crate::error::{DecodeError, ProtocolError};
use crate::id::{ClientId, RequestId, SessionId, StudySessionId};
use crate::log::LogRecord;
use crate::message::{ErrorCode, ErrorPayload, RelayPresence, Role};

/// Names a session end awaiting its log flush ([`HostEvent::SessionEnding`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EndTicket(pub(crate) u64);

/// Why a connection was refused as it connected (it was closed at once).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// Its path is not [`RelayConfig::path`](crate::RelayConfig::path) (closed 1008
    /// `unknown-path`).
    WrongPath {
        /// The path it came in on.
        path: String,
    },
    /// [`Limits::max_connections`](crate::Limits::max_connections) was reached (closed 1013
    /// `server-full`).
    ServerFull,
}

/// Why an accepted message reached nobody.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Undelivered {
    /// An agent message while the session has no host; the agent got SESSION_NOT_ACTIVE.
    NoHost,
    /// A host reply whose `replyTo` matches no outstanding request of the session (the asker
    /// left, the request expired, or it never existed); dropped.
    UnknownReplyTo {
        /// The `replyTo` (at most [`Limits::max_id_bytes`](crate::Limits::max_id_bytes) of it).
        reply_to: RequestId,
    },
    /// A host message without `replyTo` that is no push ([`types::PUSHES`]): it answers a
    /// request but names none, so it is dropped rather than sent to every agent.
    ///
    /// [`types::PUSHES`]: crate::message::types::PUSHES
    NoReplyTo,
}

/// An event of the [`Relay`](crate::Relay).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RelayEvent {
    /// A connection was accepted (it has not joined yet).
    Connected {
        /// The connection.
        conn: ConnId,
        /// Its remote address, if known.
        remote: Option<SocketAddr>,
    },
    /// A connection was refused as it connected and closed.
    Refused {
        /// The connection.
        conn: ConnId,
        /// Why.
        reason: Refusal,
    },
    /// A connection joined a session (or repeated its join).
    Joined {
        /// The connection.
        conn: ConnId,
        /// The session.
        session: SessionId,
        /// Its role.
        role: Role,
        /// The relay's id for it (the `id` in `relay.presence`).
        client_id: ClientId,
        /// Its display name (agents).
        client_name: Option<String>,
    },
    /// A newer host took over a session; the old one got SESSION_NOT_ACTIVE and close 1000.
    HostReplaced {
        /// The session.
        session: SessionId,
        /// The replaced host's connection.
        old: ConnId,
        /// The new host's connection.
        new: ConnId,
    },
    /// A member left its session (disconnected, replaced, or joined another).
    Left {
        /// The connection.
        conn: ConnId,
        /// The session it left.
        session: SessionId,
        /// Its role there.
        role: Role,
        /// Requests that failed because of it: for a host, the agents' outstanding requests
        /// (each answered SESSION_NOT_ACTIVE); for an agent, its own (forgotten).
        failed_requests: usize,
    },
    /// A connection ended (reported for every connection the relay accepted).
    Disconnected {
        /// The connection.
        conn: ConnId,
    },
    /// A message was forwarded.
    Forwarded {
        /// The sender.
        from: ConnId,
        /// Its session.
        session: SessionId,
        /// The message type.
        msg_type: &'static str,
        /// Connections it was sent to (0 for a host push while no agent is joined).
        recipients: usize,
    },
    /// An accepted message reached nobody.
    Undelivered {
        /// The sender.
        from: ConnId,
        /// Its session.
        session: SessionId,
        /// The message type.
        msg_type: &'static str,
        /// Why.
        reason: Undelivered,
    },
    /// The relay stopped waiting for the host's reply to an agent request
    /// ([`RelayConfig::pending_timeout`](crate::RelayConfig::pending_timeout)).
    RequestExpired {
        /// The session.
        session: SessionId,
        /// The agent that asked.
        agent: ConnId,
        /// The request's `id`.
        id: RequestId,
    },
    /// A peer broke the protocol (the wire reply, if any, has been queued).
    ProtocolViolation {
        /// The connection.
        conn: ConnId,
        /// What it did.
        error: ProtocolError,
    },
    /// A study-log record, emitted before the output that sends what it records.
    Log(LogRecord),
}

/// An event of the [`Host`](crate::Host).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum HostEvent {
    /// The relay answered `relay.join`: the host serves the session's agents on this
    /// connection (pushes queued meanwhile have been sent).
    Joined {
        /// The relay session joined.
        relay_session: SessionId,
    },
    /// The relay refused `relay.join`; the host closed the connection (1000 `join-refused`)
    /// so the driver reconnects with its backoff.
    JoinRefused {
        /// The relay's code.
        code: ErrorCode,
        /// The relay's text.
        message: String,
    },
    /// The relay did not answer `relay.join` within
    /// [`HostConfig::join_timeout`](crate::HostConfig::join_timeout); the host closed the
    /// connection (1000 `join-timeout`).
    JoinTimedOut,
    /// The connection ended. A study session in progress stays active; the host joins
    /// again on the next connect.
    Disconnected,
    /// A newer host took over the relay session (the relay sent SESSION_NOT_ACTIVE "Host
    /// connection replaced by a newer host." and closes this connection). Reconnecting
    /// would take the session back: the application decides.
    Replaced,
    /// The relay's `relay.presence`: the agents of the session changed.
    Presence(RelayPresence),
    /// Any other `error` from the relay (e.g. LIMIT_EXCEEDED for something the host sent).
    RelayError {
        /// The code.
        code: ErrorCode,
        /// The text.
        message: String,
        /// The `replyTo`, if any.
        reply_to: Option<RequestId>,
    },
    /// `session.start` began a study session (answered `session.started`).
    SessionStarted {
        /// The new session id, `s-YYYYMMDD-NNN`.
        session_id: StudySessionId,
        /// `studyId`.
        study_id: String,
        /// `participantId`.
        participant_id: String,
    },
    /// A tool ran (answered `tool.result`).
    ToolApplied {
        /// The tool.
        tool_name: String,
        /// The agent's reason.
        reason: String,
    },
    /// A participant's action ran ([`Host::user_action`](crate::Host::user_action)); its
    /// `state.updated` (source `user`) follows if it changed anything.
    UserAction {
        /// The tool.
        tool_name: String,
        /// Whether it changed the visible state.
        applied: bool,
    },
    /// `agent.message` was added to the chat timeline.
    AgentMessage {
        /// The text.
        text: String,
    },
    /// The visible state (`uiSpec` or `messageHistory`) changed; `state.updated` was sent,
    /// or will be once the host is joined again. Re-render on it.
    StateChanged {
        /// What changed it: `"tool"`, `"agent"`, `"user"`, `"reset"`, or the application's.
        source: String,
    },
    /// A session is ending: flush the study log (fsync), then call
    /// [`Host::confirm_flush`](crate::Host::confirm_flush) with `ticket` and the log file's
    /// path, or [`Host::fail_flush`](crate::Host::fail_flush).
    SessionEnding {
        /// The session.
        session_id: StudySessionId,
        /// `session.end`'s `reason`, if any.
        reason: Option<String>,
        /// What the confirmation names.
        ticket: EndTicket,
    },
    /// The session ended: state reset, `session.ended` sent (or queued until joined).
    SessionEnded {
        /// The session.
        session_id: StudySessionId,
        /// The log file reported in `session.ended`.
        log_file: String,
    },
    /// The log flush failed or timed out: the session stays active, the agent got
    /// LOG_FLUSH_FAILED.
    SessionEndFailed {
        /// The session.
        session_id: StudySessionId,
        /// Why.
        message: String,
    },
    /// The host answered an agent request with an `error`.
    Refused {
        /// The request's type.
        msg_type: &'static str,
        /// The request's `id`, if any (the error's `replyTo`).
        reply_to: Option<RequestId>,
        /// What was sent.
        error: ErrorPayload,
    },
    /// A frame from the relay that could not be decoded or has a type a host never
    /// receives; dropped without a reply.
    ProtocolViolation {
        /// What was wrong.
        error: DecodeError,
    },
}

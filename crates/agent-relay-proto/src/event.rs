//! What the relay tells the application.

use std::net::SocketAddr;

use agentwire_core::ConnId;

use crate::error::ProtocolError;
use crate::log::{LogRecord, SessionId};
use crate::message::Role;

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
        /// The `replyTo`.
        reply_to: String,
    },
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
        client_id: String,
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
        id: String,
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

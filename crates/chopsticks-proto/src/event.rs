//! Events the roles report to the application.

use std::net::SocketAddr;

use agentwire_core::{ConnId, Id128};

use crate::error::{DecodeError, ProtocolError};
use crate::message::{Req, Resp, SessionKind};

/// Why an agent left the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DropReason {
    /// Its connection ended.
    Disconnected,
    /// No message (or reported pong) within `stale_after`.
    Stale,
    /// A later `hello` on the same connection failed the version or secret check.
    Rejected,
}

/// What the [`Controller`](crate::Controller) reports.
#[derive(Debug)]
#[non_exhaustive]
pub enum ControllerEvent {
    /// A connection was accepted (before any hello).
    Connected {
        /// The connection.
        conn: ConnId,
        /// Its remote address.
        remote: Option<SocketAddr>,
    },
    /// An agent sent its first valid `hello` (or replaced an earlier connection).
    AgentRegistered {
        /// The agent.
        agent_id: String,
        /// Its connection.
        conn: ConnId,
        /// The connection it replaced, if the agent was already live on another one.
        replaced: Option<ConnId>,
        /// The protocol version it speaks.
        protocol_version: String,
    },
    /// A later `hello` changed the agent's record (ready, tag, bot id, pool, version).
    AgentUpdated {
        /// The agent.
        agent_id: String,
    },
    /// An agent left the registry; its pending requests have failed.
    AgentDropped {
        /// The agent.
        agent_id: String,
        /// Why.
        reason: DropReason,
    },
    /// An agent's guild list changed (from `hello` or `guilds`).
    GuildsChanged {
        /// The agent.
        agent_id: String,
        /// Guilds it joined.
        added: Vec<String>,
        /// Guilds it left.
        removed: Vec<String>,
    },
    /// An `add` event with `ok: true` bound an agent to a session.
    SessionBound {
        /// The agent now bound.
        agent_id: String,
        /// Session kind.
        kind: SessionKind,
        /// Guild.
        guild_id: String,
        /// Voice channel.
        voice_channel_id: String,
        /// Text channel, if given.
        text_channel_id: Option<String>,
        /// Session owner, if given.
        owner_user_id: Option<String>,
    },
    /// An `add` event with `ok: false`: the agent could not join.
    SessionJoinFailed {
        /// The agent.
        agent_id: String,
        /// Session kind.
        kind: SessionKind,
        /// Guild.
        guild_id: String,
        /// Voice channel.
        voice_channel_id: String,
        /// The agent's error text.
        error: String,
    },
    /// A `released` event from the bound agent freed a session.
    SessionReleased {
        /// The agent that was bound.
        agent_id: String,
        /// Session kind.
        kind: SessionKind,
        /// Guild.
        guild_id: String,
        /// Voice channel.
        voice_channel_id: String,
        /// The agent's reason (e.g. `USER_LEFT`).
        reason: String,
    },
    /// The agent the request went to answered it.
    RequestCompleted {
        /// Request id.
        id: Id128,
        /// The agent.
        agent_id: String,
        /// The request's op.
        op: String,
        /// The agent's reply (`resp.result()` gives data or error).
        resp: Resp,
    },
    /// A request failed without an answer because its agent went away (`agent-offline`).
    RequestFailed {
        /// Request id.
        id: Id128,
        /// The agent.
        agent_id: String,
        /// The request's op.
        op: String,
        /// The error string: `agent-offline`.
        error: &'static str,
    },
    /// No answer within the request timeout (`agent-timeout`).
    RequestTimedOut {
        /// Request id.
        id: Id128,
        /// The agent.
        agent_id: String,
        /// The request's op.
        op: String,
    },
    /// A peer broke a rule; what it was told (if anything) has already been queued.
    ProtocolViolation {
        /// The connection.
        conn: ConnId,
        /// What it did.
        error: ProtocolError,
    },
    /// A connection ended.
    Disconnected {
        /// The connection.
        conn: ConnId,
    },
}

/// What the [`Agent`](crate::Agent) reports.
#[derive(Debug)]
#[non_exhaustive]
pub enum AgentEvent {
    /// Connected; `hello` and `guilds` have been queued.
    Connected {
        /// The connection.
        conn: ConnId,
    },
    /// The connection ended; the driver reconnects, the agent keeps its state.
    Disconnected {
        /// The connection that ended.
        conn: ConnId,
    },
    /// The controller sent a request; answer it with [`Agent::respond`](crate::Agent::respond).
    Request(Req),
    /// The controller sent an `error` message (it usually closes the connection after it).
    ControllerError {
        /// The error text.
        error: String,
    },
    /// A controller message that did not decode (ignored).
    Malformed {
        /// Why.
        error: DecodeError,
    },
}

//! Events the roles report to the application.

use std::net::SocketAddr;

use agentwire_core::{ConnId, Id128};

use crate::error::{DecodeError, ProtocolError};
use crate::id::{AgentId, ChannelId, GuildId, UserId};
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

/// What bound a session to an agent (see [`ControllerEvent::SessionBound`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BindSource {
    /// The controller selected the agent for a request that starts the session (the real
    /// controller's way: real agents never send `add`).
    Selection,
    /// The agent's `add` event with `ok: true`.
    Add,
}

/// Why the controller freed a session (see [`ControllerEvent::SessionFreed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FreeReason {
    /// The bound agent left the registry (disconnected, stale, or rejected).
    AgentDropped,
    /// The request that bound the agent by selection failed (an error answer, a timeout, or
    /// the agent's connection ended) before any `add` confirmed the session: the agent never
    /// joined, so it must not stay busy.
    StartFailed,
    /// The bound agent reported `add` with `ok: false`.
    JoinFailed,
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
        agent_id: AgentId,
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
        agent_id: AgentId,
    },
    /// An agent left the registry; its pending requests have failed.
    AgentDropped {
        /// The agent.
        agent_id: AgentId,
        /// Why.
        reason: DropReason,
    },
    /// An agent's guild list changed (from `hello` or `guilds`).
    GuildsChanged {
        /// The agent.
        agent_id: AgentId,
        /// Guilds it joined.
        added: Vec<GuildId>,
        /// Guilds it left.
        removed: Vec<GuildId>,
    },
    /// A session was bound to an agent: by selection (the agent chosen for a request that
    /// starts the session) or by the agent's `add` (confirming or moving the binding).
    SessionBound {
        /// The agent now bound.
        agent_id: AgentId,
        /// Session kind.
        kind: SessionKind,
        /// Guild.
        guild_id: GuildId,
        /// Voice channel.
        voice_channel_id: ChannelId,
        /// Text channel, if the `add` gave one.
        text_channel_id: Option<ChannelId>,
        /// Session owner, if the `add` gave one.
        owner_user_id: Option<UserId>,
        /// What bound it.
        source: BindSource,
        /// The agent the session was bound to before, if it was another one (a move).
        replaced: Option<AgentId>,
    },
    /// An `add` event with `ok: false`: the agent could not join.
    SessionJoinFailed {
        /// The agent.
        agent_id: AgentId,
        /// Session kind.
        kind: SessionKind,
        /// Guild.
        guild_id: GuildId,
        /// Voice channel.
        voice_channel_id: ChannelId,
        /// The agent's error text.
        error: String,
    },
    /// A `released` event from the bound agent freed a session.
    SessionReleased {
        /// The agent that was bound.
        agent_id: AgentId,
        /// Session kind.
        kind: SessionKind,
        /// Guild.
        guild_id: GuildId,
        /// Voice channel.
        voice_channel_id: ChannelId,
        /// The agent's reason (e.g. `USER_LEFT`).
        reason: String,
    },
    /// A `released` from an agent that is not bound to that session was ignored (the real
    /// controller ignores it silently; worth a debug log, not a protocol violation).
    ReleaseIgnored {
        /// The sending agent.
        agent_id: AgentId,
        /// Session kind.
        kind: SessionKind,
        /// Guild.
        guild_id: GuildId,
        /// Voice channel.
        voice_channel_id: ChannelId,
        /// The agent's reason.
        reason: String,
    },
    /// The controller freed a session itself (not on the agent's `released`).
    SessionFreed {
        /// The agent that was bound.
        agent_id: AgentId,
        /// Session kind.
        kind: SessionKind,
        /// Guild.
        guild_id: GuildId,
        /// Voice channel.
        voice_channel_id: ChannelId,
        /// Why.
        reason: FreeReason,
    },
    /// The agent the request went to answered it.
    RequestCompleted {
        /// Request id.
        id: Id128,
        /// The agent.
        agent_id: AgentId,
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
        agent_id: AgentId,
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
        agent_id: AgentId,
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

//! The exact wire texts: the `message` of every `error` the relay and the host send, and
//! the `source` values of the host's own `state.updated` pushes.
//!
//! The relay's first five texts are the reference relay's, word for word (INTEROP.md); the
//! rest are ours. The host's texts are all ours: the reference host skips these checks.

/// Unparseable input, or no string `type` (INVALID_MESSAGE; the reference's text).
pub const INVALID_JSON: &str = "Message must be valid JSON with a string \"type\".";
/// Any message but `relay.join` before joining (SESSION_NOT_ACTIVE; the reference's text).
pub const NOT_JOINED: &str = "You must send relay.join before other messages.";
/// An agent message while the session has no host (SESSION_NOT_ACTIVE; the reference's text).
pub const NO_HOST: &str = "No active host connection for this session.";
/// To a host replaced by a newer one, before its close 1000 (SESSION_NOT_ACTIVE; the
/// reference's text).
pub const HOST_REPLACED: &str = "Host connection replaced by a newer host.";
/// `relay.join` whose `role` is neither `host` nor `agent` (INVALID_MESSAGE; the reference's
/// text).
pub const INVALID_ROLE: &str = "relay.join payload.role must be \"host\" or \"agent\".";
/// `relay.join` whose `sessionId` is present but not a string (INVALID_MESSAGE; ours, the
/// reference silently uses `"default"`).
pub const INVALID_SESSION_ID: &str = "relay.join payload.sessionId must be a string.";
/// To each agent whose request was outstanding when the host left or was replaced
/// (SESSION_NOT_ACTIVE, with `replyTo`; ours, the reference never answers these).
pub const HOST_GONE: &str = "Host disconnected before replying.";
/// `v` missing or not `"mvp-0.2"` (INVALID_MESSAGE; ours, the reference does not check `v`).
pub const BAD_VERSION: &str = "Unsupported protocol version: \"v\" must be \"mvp-0.2\".";
/// `id` present but not a string (INVALID_MESSAGE; ours).
pub const BAD_ID: &str = "Envelope field \"id\" must be a string.";
/// `replyTo` present but not a string (INVALID_MESSAGE; ours).
pub const BAD_REPLY_TO: &str = "Envelope field \"replyTo\" must be a string.";
/// `payload` missing or not an object (INVALID_MESSAGE; ours).
pub const BAD_PAYLOAD: &str = "Envelope field \"payload\" must be an object.";
/// A message over the rate limit (LIMIT_EXCEEDED; ours).
pub const RATE_LIMITED: &str = "Rate limit exceeded; message dropped.";
/// An agent request over `max_pending_per_agent` (LIMIT_EXCEEDED; ours).
pub const TOO_MANY_PENDING: &str = "Too many requests awaiting a reply; message dropped.";
/// A join that would create one session too many (LIMIT_EXCEEDED; ours).
pub const TOO_MANY_SESSIONS: &str = "The relay has reached its session limit.";
/// An agent join into a full session (LIMIT_EXCEEDED; ours).
pub const TOO_MANY_AGENTS: &str = "This session has reached its agent limit.";
/// Sent just before closing a connection over `max_connections` (LIMIT_EXCEEDED; ours).
pub const TOO_MANY_CONNECTIONS: &str = "The relay has reached its connection limit.";
/// An `id` longer than `max_id_bytes` (LIMIT_EXCEEDED; ours).
pub const ID_TOO_LONG: &str = "Envelope field \"id\" is too long.";
/// A `sessionId` longer than `max_session_id_bytes` (LIMIT_EXCEEDED; ours).
pub const SESSION_ID_TOO_LONG: &str = "relay.join payload.sessionId is too long.";
/// A message whose study-log records would pass `max_log_bytes_per_session`
/// (LIMIT_EXCEEDED; ours).
pub const LOG_FULL: &str =
    "The study log of this session is full; message dropped (it ends at session.ended).";

/// The exact `message` texts of the errors the [`Host`](crate::Host) sends (all ours: the
/// reference host skips these checks, INTEROP.md).
pub mod host {
    /// A request other than `session.start` outside a session (SESSION_NOT_ACTIVE).
    pub const NO_SESSION: &str = "No active session. Send session.start first.";
    /// `tool.call`, `agent.message` or `session.end` while the session's end is flushing
    /// its logs (SESSION_NOT_ACTIVE).
    pub const SESSION_ENDING: &str = "The session is ending.";
    /// `tool.call` with a missing, non-string or blank `reason` (INVALID_PARAMS).
    pub const REASON_REQUIRED: &str = "tool.call requires a non-empty reason.";
    /// `tool.call` without a string `toolName` (INVALID_MESSAGE).
    pub const TOOL_NAME_REQUIRED: &str = "tool.call requires a string toolName.";
    /// `tool.call` while no UI spec is loaded (NO_ACTIVE_SPEC).
    pub const NO_ACTIVE_SPEC: &str = "No UI spec is loaded.";
    /// `agent.message` when the chat timeline is full (LIMIT_EXCEEDED).
    pub const HISTORY_FULL: &str = "The chat history is full.";
    /// The application did not confirm the log flush in time (LOG_FLUSH_FAILED).
    pub const FLUSH_TIMEOUT: &str = "The study log was not flushed in time.";
}

/// The `source` values of the `state.updated` pushes the host makes itself.
pub mod sources {
    /// A tool applied by an agent's `tool.call`.
    pub const TOOL: &str = "tool";
    /// An `agent.message` added to the chat.
    pub const AGENT: &str = "agent";
    /// The participant's chat message ([`Host::user_message`](crate::Host::user_message)).
    /// The spec's example source; use it for the participant's own UI actions too.
    pub const USER: &str = "user";
    /// The state reset at the end of a session.
    pub const RESET: &str = "reset";
}

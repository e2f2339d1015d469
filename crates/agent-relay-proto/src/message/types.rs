//! Every message `type` of the spec, plus the reference relay's own, and which sender may
//! send which.

/// Relay → peer on connect (the reference relay's; not in the spec).
pub const RELAY_HELLO: &str = "relay.hello";
/// Host or agent → relay: join a session in a role.
pub const RELAY_JOIN: &str = "relay.join";
/// Relay → host or agent: the join succeeded (`replyTo` the join).
pub const RELAY_JOINED: &str = "relay.joined";
/// Relay → host: the agents of its session changed (the reference relay's; not in the spec).
pub const RELAY_PRESENCE: &str = "relay.presence";
/// Study-log only: a member's connection ended (the reference relay's record type).
pub const RELAY_DISCONNECT: &str = "relay.disconnect";
/// Agent → host: start a study session.
pub const SESSION_START: &str = "session.start";
/// Agent → host: ask for the visible state.
pub const SNAPSHOT_GET: &str = "snapshot.get";
/// Agent → host: run one UI tool.
pub const TOOL_CALL: &str = "tool.call";
/// Agent → host: text for the chat timeline (not a tool call).
pub const AGENT_MESSAGE: &str = "agent.message";
/// Agent → host: end the session.
pub const SESSION_END: &str = "session.end";
/// Host → agent: reply to `session.start`.
pub const SESSION_STARTED: &str = "session.started";
/// Host → agent: reply to `snapshot.get`.
pub const SNAPSHOT_STATE: &str = "snapshot.state";
/// Host → agent: reply to `tool.call`.
pub const TOOL_RESULT: &str = "tool.result";
/// Host → agents: pushed when the host state changes.
pub const STATE_UPDATED: &str = "state.updated";
/// Host → agents: the participant typed in the chat.
pub const USER_MESSAGE: &str = "user.message";
/// Host → agent: reply to `session.end`.
pub const SESSION_ENDED: &str = "session.ended";
/// Host or relay → agent (relay → host too): a failure, usually `replyTo` a request.
pub const ERROR: &str = "error";

/// The types the relay forwards from an agent to its session's host (INTEROP.md).
pub const AGENT_TO_HOST: [&str; 5] = [
    SESSION_START,
    SNAPSHOT_GET,
    TOOL_CALL,
    AGENT_MESSAGE,
    SESSION_END,
];
/// The types the relay forwards from a host to its session's agents (INTEROP.md).
pub const HOST_TO_AGENT: [&str; 7] = [
    SESSION_STARTED,
    SNAPSHOT_STATE,
    TOOL_RESULT,
    STATE_UPDATED,
    ERROR,
    SESSION_ENDED,
    USER_MESSAGE,
];

/// The host → agent types that may go to every agent of a session without `replyTo`: the
/// spec's pushes (`state.updated`, `user.message`) and a `session.ended` the host makes when
/// the application ends the session. Any other host message without `replyTo` answers a
/// request, so the relay never sends it to every agent.
pub const PUSHES: [&str; 3] = [STATE_UPDATED, USER_MESSAGE, SESSION_ENDED];

/// Whether the host may push `t` to every agent (see [`PUSHES`]).
pub fn is_push(t: &str) -> bool {
    PUSHES.contains(&t)
}

/// The `'static` name of `t` if an agent may send it to the host.
pub fn agent_to_host(t: &str) -> Option<&'static str> {
    AGENT_TO_HOST.iter().copied().find(|k| *k == t)
}

/// The `'static` name of `t` if a host may send it to agents.
pub fn host_to_agent(t: &str) -> Option<&'static str> {
    HOST_TO_AGENT.iter().copied().find(|k| *k == t)
}

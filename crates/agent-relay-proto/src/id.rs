//! The ids that travel in events and study-log records, as newtypes over shared text
//! (cloning one is a reference-count increment).

use crate::config::DEFAULT_SESSION;

agentwire_core::string_id! {
    /// A relay session id: the routing key a host and its agents join (`"default"` unless a
    /// join names another). Every log record and relay event carries one.
    pub struct SessionId [serde];
}

impl SessionId {
    /// The default session, `"default"`.
    pub fn default_session() -> Self {
        Self::new(DEFAULT_SESSION)
    }
}

agentwire_core::string_id! {
    /// The relay's id for a connection, made at its first join: the `id` of an agent in
    /// `relay.presence` and the `clientId` of its `relay.disconnect` record.
    pub struct ClientId;
}

agentwire_core::string_id! {
    /// An agent request's `id`, which its answer carries as `replyTo`. Agents choose them,
    /// so two agents may use the same one.
    pub struct RequestId;
}

agentwire_core::string_id! {
    /// A study session id, `s-YYYYMMDD-NNN`, which the host gives out at `session.start`.
    pub struct StudySessionId;
}

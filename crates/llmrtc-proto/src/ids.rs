//! The ids that travel in events: sessions, provider requests and tool calls.

use std::fmt;

agentwire_core::string_id! {
    /// A session's id: the `ready.id` the server made it with (a UUID), which a client names
    /// in `reconnect` to resume it.
    pub struct SessionId [serde];
}

agentwire_core::string_id! {
    /// A playbook tool call's id: the `callId` of its `tool-call-start` and `tool-call-end`
    /// (`call_<n>`, unique per server).
    pub struct CallId [serde];
}

/// Identifies one provider request (unique per server, never reused).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub u64);

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "req#{}", self.0)
    }
}

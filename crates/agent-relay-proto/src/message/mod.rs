//! Wire types: the payload of every message type, and one enum per sender.
//!
//! A message is an [`Envelope`] `{v, type, id?, replyTo?, payload}` whose
//! `type` and `payload` come from one of the sender enums:
//!
//! | enum | sender | types |
//! |---|---|---|
//! | [`AgentMessage`] | external agent | `relay.join`, `session.start`, `snapshot.get`, `tool.call`, `agent.message`, `session.end` |
//! | [`HostMessage`] | host (the UI) | `relay.join`, `session.started`, `snapshot.state`, `tool.result`, `state.updated`, `user.message`, `session.ended`, `error` |
//! | [`RelayMessage`] | the relay itself | `relay.hello`, `relay.joined`, `relay.presence`, `error` |
//!
//! `uiSpec`, `messageHistory` and tool `params` stay raw JSON ([`RawJson`]): the relay and
//! the agents forward or inspect them without a fixed schema. No snapshot type has a
//! `backendData` field, so backend payloads cannot reach an agent through these types.

mod code;
mod envelope;
mod payload;
pub mod types;

use serde::{Serialize, Serializer};

use envelope::sealed;

pub use agentwire_core::json::RawJson;
pub use code::ErrorCode;
pub use envelope::{Body, Envelope, Mvp02, VERSION};
pub use payload::{
    AgentText, ErrorPayload, PresenceAgent, RelayHello, RelayJoin, RelayJoined, RelayPresence,
    Role, SessionEnd, SessionEnded, SessionStart, SessionStarted, SnapshotGet, SnapshotState,
    StateUpdated, ToolCall, ToolResult, ToolSchema, UserText,
};

// ---- the sender enums ---------------------------------------------------------------------

/// Declares a sender enum and its [`Body`] impl from `Variant(Payload) = types::NAME` lines.
macro_rules! sender_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident($payload:ty) = $wire:path, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub enum $name {
            $( $(#[$vmeta])* $variant($payload), )*
        }

        impl $name {
            /// Every wire `type` of this sender.
            pub const TYPES: &'static [&'static str] = &[$($wire),*];
        }

        impl sealed::Sealed for $name {}

        impl Body for $name {
            fn msg_type(&self) -> &'static str {
                match self {
                    $( Self::$variant(_) => $wire, )*
                }
            }

            fn from_payload(msg_type: &str, payload: &str) -> Option<serde_json::Result<Self>> {
                $(
                    if msg_type == $wire {
                        return Some(serde_json::from_str(payload).map(Self::$variant));
                    }
                )*
                None
            }

            fn serialize_payload<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    $( Self::$variant(p) => p.serialize(s), )*
                }
            }
        }
    };
}

sender_enum! {
    /// Everything an external agent sends (to the relay, or through it to the host).
    pub enum AgentMessage {
        /// `relay.join` (role `agent`).
        Join(RelayJoin) = types::RELAY_JOIN,
        /// `session.start`.
        SessionStart(SessionStart) = types::SESSION_START,
        /// `snapshot.get`.
        SnapshotGet(SnapshotGet) = types::SNAPSHOT_GET,
        /// `tool.call`.
        ToolCall(ToolCall) = types::TOOL_CALL,
        /// `agent.message`.
        Message(AgentText) = types::AGENT_MESSAGE,
        /// `session.end`.
        SessionEnd(SessionEnd) = types::SESSION_END,
    }
}

sender_enum! {
    /// Everything a host sends (to the relay, or through it to agents).
    pub enum HostMessage {
        /// `relay.join` (role `host`).
        Join(RelayJoin) = types::RELAY_JOIN,
        /// `session.started`.
        SessionStarted(SessionStarted) = types::SESSION_STARTED,
        /// `snapshot.state`.
        SnapshotState(SnapshotState) = types::SNAPSHOT_STATE,
        /// `tool.result`.
        ToolResult(ToolResult) = types::TOOL_RESULT,
        /// `state.updated`.
        StateUpdated(StateUpdated) = types::STATE_UPDATED,
        /// `user.message`.
        UserMessage(UserText) = types::USER_MESSAGE,
        /// `session.ended`.
        SessionEnded(SessionEnded) = types::SESSION_ENDED,
        /// `error`.
        Error(ErrorPayload) = types::ERROR,
    }
}

sender_enum! {
    /// Everything the relay itself sends.
    pub enum RelayMessage {
        /// `relay.hello`, on connect.
        Hello(RelayHello) = types::RELAY_HELLO,
        /// `relay.joined`, `replyTo` a join.
        Joined(RelayJoined) = types::RELAY_JOINED,
        /// `relay.presence`, to a host.
        Presence(RelayPresence) = types::RELAY_PRESENCE,
        /// `error`.
        Error(ErrorPayload) = types::ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_sets_are_interop_lists() {
        assert_eq!(types::agent_to_host("tool.call"), Some("tool.call"));
        assert_eq!(types::agent_to_host("state.updated"), None);
        assert_eq!(types::host_to_agent("error"), Some("error"));
        assert_eq!(types::host_to_agent("relay.join"), None);
        // Every forwardable type has a variant in its sender's enum.
        for t in types::AGENT_TO_HOST {
            assert!(AgentMessage::TYPES.contains(&t), "{t}");
        }
        for t in types::HOST_TO_AGENT {
            assert!(HostMessage::TYPES.contains(&t), "{t}");
        }
    }

    #[test]
    fn unknown_payload_fields_are_ignored() {
        let m = AgentMessage::from_payload("snapshot.get", r#"{"extra":1}"#);
        assert!(matches!(m, Some(Ok(AgentMessage::SnapshotGet(_)))));
        assert!(AgentMessage::from_payload("state.updated", "{}").is_none());
    }
}

//! Request ops: which session an op belongs to, which ops start one, and what real agents
//! need in `data`.
//!
//! The spec lists `play`, `pause`, `resume`, `skip`, `stop`, `queue`, `search` and `status`
//! and leaves `data` open. What the real Node agent requires (INTEROP.md; read from its
//! source, `agentRunner.js`):
//!
//! | ops | required in `data` | refusal when missing |
//! |---|---|---|
//! | every op except `discordSend` | `guildId`, `voiceChannelId` | `missing-session` |
//! | every op except `discordSend` | an acting user: `actorUserId` (or `ownerUserId`, `adminUserId`), a member of the guild who is in that voice channel; or `adminToken` equal to the agent's admin token | `missing-actor`, then `not-in-guild` / `not-in-voice` |
//! | `play`, `search` | `query` (optional: `textChannelId`, `requester`, `defaultMode`, `defaultVolume`, `limits`, `controlMode`, `searchProviders`, `fallbackProviders`, `stopGraceMs`) | no tracks: `play` answers `action: "none"` |
//! | `pause`, `resume`, `skip`, `stop`, `queue`, `status`, `shuffle`, `clear` | nothing more; the session must exist on that agent | `no-session` |
//! | `volume` | `volume` | `bad-volume` |
//! | `remove` | `index` | `bad-index` |
//! | `move` | `from`, `to` | `bad-index` |
//! | `swap` | `a`, `b` | `bad-index` |
//! | `setMode` | `mode` (`open` or `dj`) | `not-owner` |
//! | `preset` | `preset` | — |
//! | `assistantSay` | `text` | `assistant-empty` |
//! | `assistantListen` | optional `durationMs`, `silenceMs`, `voice`, `system` | — |
//! | `discordSend` | `guildId`, `textChannelId`, an acting user in the guild (or `adminToken`); `content` and/or `embeds` | `missing-guild`, `missing-channel`, `missing-actor` |
//!
//! Any other op gets `unknown-op`. A controller that drives real agents must therefore send
//! an acting user with every op; this crate leaves `data` to the caller and does not add one.

use crate::message::SessionKind;

/// Ops that start a music session on the agent (it joins the voice channel for them):
/// `play` and `search` (the real agent creates its player session for both).
pub const MUSIC_START_OPS: &[&str] = &["play", "search"];

/// Ops that start an assistant session on the agent (it joins the voice channel for them).
pub const ASSISTANT_START_OPS: &[&str] = &[
    "assistantJoin",
    "assistantStart",
    "assistantListen",
    "assistantSay",
];

/// The kind of session `op` addresses: ops named `assistant…` address the assistant
/// session of the voice channel, every other op its music session.
pub fn session_kind_of(op: &str) -> SessionKind {
    if op.starts_with("assistant") {
        SessionKind::Assistant
    } else {
        SessionKind::Music
    }
}

/// Whether `op` starts a session (see [`MUSIC_START_OPS`], [`ASSISTANT_START_OPS`]): such a
/// request may go to a newly selected agent, which is bound to the session at selection;
/// every other op goes to the agent already bound.
pub fn starts_session(op: &str) -> bool {
    MUSIC_START_OPS.contains(&op) || ASSISTANT_START_OPS.contains(&op)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_ops_and_kinds() {
        for op in ["play", "search", "assistantJoin", "assistantSay"] {
            assert!(starts_session(op), "{op}");
        }
        for op in [
            "pause",
            "stop",
            "status",
            "queue",
            "assistantStatus",
            "",
            "PLAY",
        ] {
            assert!(!starts_session(op), "{op}");
        }
        assert_eq!(session_kind_of("assistantListen"), SessionKind::Assistant);
        assert_eq!(session_kind_of("play"), SessionKind::Music);
        assert_eq!(session_kind_of("discordSend"), SessionKind::Music);
    }
}

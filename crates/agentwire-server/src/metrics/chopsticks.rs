//! Chopsticks controller events: agents, bound sessions, request outcomes, errors, drops.

use std::collections::BTreeSet;

use agentwire::chopsticks::{ControllerEvent, DropReason, ProtocolError, SessionKind};

use super::families::{set, Families};
use super::transport::TransportCollector;
use super::MAX_TRACKED;
use crate::config::Protocol;

const P: Protocol = Protocol::Chopsticks;

/// What the chopsticks observer remembers between events.
#[derive(Debug, Default)]
pub(super) struct State {
    agents: usize,
    /// Bound sessions by kind, guild and voice channel.
    sessions: BTreeSet<(SessionKind, String, String)>,
}

fn session_key(
    kind: &SessionKind,
    guild: &impl ToString,
    voice: &impl ToString,
) -> (SessionKind, String, String) {
    (*kind, guild.to_string(), voice.to_string())
}

/// A short name for the kind of rule a peer broke.
fn violation_code(error: &ProtocolError) -> &'static str {
    match error {
        ProtocolError::Decode(_) => "decode",
        ProtocolError::MissingVersion => "missing-version",
        ProtocolError::IncompatibleVersion(_) => "incompatible-version",
        ProtocolError::Unauthorized => "unauthorized",
        ProtocolError::InvalidHello { .. } => "invalid-hello",
        ProtocolError::MissingAgentId => "missing-agent-id",
        ProtocolError::HelloRequired => "hello-required",
        ProtocolError::BeforeHello(_) => "before-hello",
        ProtocolError::RateLimited => "rate-limited",
        ProtocolError::WrongResponder { .. } => "wrong-responder",
        ProtocolError::TooManyConnectionsPerIp => "too-many-connections-per-ip",
        ProtocolError::ServerFull => "server-full",
        ProtocolError::Limit(_) => "limit",
        ProtocolError::Stale => "stale",
        _ => "other",
    }
}

pub(super) fn observe(
    f: &Families,
    t: &TransportCollector,
    s: &mut State,
    event: &ControllerEvent,
) {
    match event {
        ControllerEvent::AgentRegistered { replaced: None, .. } => s.agents += 1,
        ControllerEvent::AgentDropped { reason, .. } => {
            s.agents = s.agents.saturating_sub(1);
            if *reason == DropReason::Stale {
                t.dropped(P, "agent-stale", 1);
            }
        }
        ControllerEvent::SessionBound {
            kind,
            guild_id,
            voice_channel_id,
            ..
        } if s.sessions.len() < MAX_TRACKED => {
            s.sessions
                .insert(session_key(kind, guild_id, voice_channel_id));
        }
        ControllerEvent::SessionReleased {
            kind,
            guild_id,
            voice_channel_id,
            ..
        }
        | ControllerEvent::SessionFreed {
            kind,
            guild_id,
            voice_channel_id,
            ..
        } => {
            s.sessions
                .remove(&session_key(kind, guild_id, voice_channel_id));
        }
        ControllerEvent::RequestCompleted { resp, .. } => {
            let outcome = if resp.result().is_ok() { "ok" } else { "error" };
            f.request(P, "request", outcome);
        }
        ControllerEvent::RequestFailed { error, .. } => {
            f.request(P, "request", "agent-offline");
            f.error(P, error);
        }
        ControllerEvent::RequestTimedOut { .. } => {
            f.request(P, "request", "agent-timeout");
            f.error(P, "agent-timeout");
        }
        ControllerEvent::ProtocolViolation { error, .. } => f.error(P, violation_code(error)),
        _ => {}
    }
    set(&f.chopsticks_agents, s.agents);
    set(&f.chopsticks_sessions, s.sessions.len());
}

//! llmrtc server events: sessions, turns in flight and their duration, errors, drops.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use agentwire::llmrtc::{ServerEvent, SessionId, TurnOutcome};

use super::families::{set, Families};
use super::transport::TransportCollector;
use super::MAX_TRACKED;
use crate::config::Protocol;

const P: Protocol = Protocol::Llmrtc;

/// What the llmrtc observer remembers between events.
#[derive(Debug, Default)]
pub(super) struct State {
    sessions: BTreeSet<SessionId>,
    /// The turn in flight per session: when its first provider request went out.
    turns: BTreeMap<SessionId, Instant>,
}

fn outcome(o: &TurnOutcome) -> &'static str {
    match o {
        TurnOutcome::Completed => "completed",
        TurnOutcome::NothingHeard => "nothing-heard",
        TurnOutcome::Interrupted => "interrupted",
        TurnOutcome::Failed(_) => "failed",
        TurnOutcome::Abandoned => "abandoned",
        _ => "other",
    }
}

impl State {
    fn turn_started(&mut self, session: &SessionId, now: Instant) {
        if !self.turns.contains_key(session) && self.turns.len() < MAX_TRACKED {
            self.turns.insert(session.clone(), now);
        }
    }

    fn forget(&mut self, session: &SessionId) {
        self.sessions.remove(session);
        self.turns.remove(session);
    }
}

pub(super) fn observe(
    f: &Families,
    t: &TransportCollector,
    s: &mut State,
    event: &ServerEvent,
    now: Instant,
) {
    match event {
        ServerEvent::SessionStarted { session, .. } if s.sessions.len() < MAX_TRACKED => {
            s.sessions.insert(session.clone());
        }
        ServerEvent::SessionResumed { replaced, .. } => s.forget(replaced),
        ServerEvent::SessionExpired { session } => s.forget(session),
        ServerEvent::Stt(req) => s.turn_started(&req.session, now),
        ServerEvent::Llm(req) => s.turn_started(&req.session, now),
        ServerEvent::TurnEnded {
            session,
            outcome: o,
        } => {
            if let Some(start) = s.turns.remove(session) {
                f.duration(P, "turn", now.saturating_duration_since(start));
            }
            f.request(P, "turn", outcome(o));
        }
        ServerEvent::ErrorSent { code, .. } => f.error(P, code),
        ServerEvent::HeartbeatTimeout { .. } => t.dropped(P, "heartbeat-timeout", 1),
        _ => {}
    }
    set(&f.llmrtc_sessions, s.sessions.len());
    set(&f.llmrtc_turns, s.turns.len());
}

//! Relay events: sessions, tool-call latency, study-log bytes, errors, drops.

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use agentwire::agent_relay::{Refusal, RelayEvent, SessionId, Undelivered};

use super::families::{set, Families};
use super::transport::TransportCollector;
use super::MAX_TRACKED;
use crate::config::Protocol;
use crate::relay::logging_relay::ServerEvent;

const P: Protocol = Protocol::Relay;

/// Tool calls in flight remembered per relay session (the oldest is forgotten first).
const CALLS_PER_SESSION: usize = 1024;

/// What the relay observer remembers between events.
#[derive(Debug, Default)]
pub(super) struct State {
    /// Members (host and agents) per relay session.
    members: BTreeMap<SessionId, usize>,
    /// When each `tool.call` still unanswered was forwarded, oldest first, per session.
    calls: BTreeMap<SessionId, VecDeque<Instant>>,
    /// Scratch buffer to measure study-log lines.
    line: Vec<u8>,
}

impl State {
    fn call_started(&mut self, session: &SessionId, now: Instant) {
        if !self.calls.contains_key(session) && self.calls.len() >= MAX_TRACKED {
            return;
        }
        let q = self.calls.entry(session.clone()).or_default();
        if q.len() >= CALLS_PER_SESSION {
            q.pop_front();
        }
        q.push_back(now);
    }

    fn call_ended(&mut self, session: &SessionId) -> Option<Instant> {
        let q = self.calls.get_mut(session)?;
        let start = q.pop_front();
        if q.is_empty() {
            self.calls.remove(session);
        }
        start
    }
}

fn refusal(r: &Refusal) -> &'static str {
    match r {
        Refusal::WrongPath { .. } => "refused-wrong-path",
        Refusal::ServerFull => "refused-server-full",
        _ => "refused-other",
    }
}

fn undelivered(u: &Undelivered) -> &'static str {
    match u {
        Undelivered::NoHost => "undelivered-no-host",
        Undelivered::UnknownReplyTo { .. } => "undelivered-unknown-reply-to",
        Undelivered::NoReplyTo => "undelivered-no-reply-to",
        _ => "undelivered-other",
    }
}

fn observe_relay(
    f: &Families,
    t: &TransportCollector,
    s: &mut State,
    e: &RelayEvent,
    now: Instant,
) {
    match e {
        RelayEvent::Joined { session, .. }
            if s.members.contains_key(session) || s.members.len() < MAX_TRACKED =>
        {
            *s.members.entry(session.clone()).or_default() += 1;
        }
        RelayEvent::Left { session, .. } => {
            if let Some(n) = s.members.get_mut(session) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    s.members.remove(session);
                    s.calls.remove(session);
                }
            }
        }
        RelayEvent::Forwarded {
            session, msg_type, ..
        } => match *msg_type {
            "tool.call" => s.call_started(session, now),
            "tool.result" => {
                if let Some(start) = s.call_ended(session) {
                    f.duration(P, "tool_call", now.saturating_duration_since(start));
                    f.request(P, "tool_call", "ok");
                }
            }
            _ => {}
        },
        RelayEvent::RequestExpired { session, .. } => {
            s.call_ended(session);
            f.request(P, "tool_call", "expired");
        }
        RelayEvent::Refused { reason, .. } => t.dropped(P, refusal(reason), 1),
        RelayEvent::Undelivered { reason, .. } => t.dropped(P, undelivered(reason), 1),
        RelayEvent::ProtocolViolation { error, .. } => f.error(P, error.code()),
        _ => {}
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
        ServerEvent::Relay(e) => observe_relay(f, t, s, e, now),
        ServerEvent::Logged {
            record,
            event_index,
            ..
        } => {
            s.line.clear();
            record.write_jsonl(*event_index, &mut s.line);
            f.relay_log_bytes.inc_by(s.line.len() as u64 + 1); // and its newline
        }
        ServerEvent::LogFailed { .. } => f.error(P, "LOG_WRITE_FAILED"),
        _ => {}
    }
    set(&f.relay_sessions, s.members.len());
}

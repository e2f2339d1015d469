//! The relay's study-log state: whether records are made, the wall clock that dates them,
//! the study session each relay session's records belong to, and each session's usage of
//! [`Limits::max_log_bytes_per_session`](crate::Limits).

use std::collections::BTreeMap;
use std::time::Instant;

use agentwire_core::{Utf8Bytes, WallClock};

use crate::codec::Route;
use crate::id::SessionId;
use crate::log::{line_len_bound, Direction, LogRecord};
use crate::message::types;

/// What became of a record the relay wanted to make.
#[derive(Debug)]
pub(super) enum Recorded {
    /// Records are turned off ([`RelayConfig::log_records`](crate::RelayConfig)).
    Off,
    /// One of the relay's own records that would pass its session's cap: dropped.
    Dropped,
    /// The record, to emit.
    Record(LogRecord),
}

/// One relay session's study-log state.
#[derive(Debug, Default)]
struct SessionLog {
    /// Bytes (line-length bounds) since the last forwarded `session.ended`.
    usage: u64,
    /// The study session in progress (the `sessionId` of the host's `session.started`), whose
    /// id the records carry until its `session.ended` is forwarded.
    study: Option<SessionId>,
}

/// Dates records, names the session they belong to (the study session in progress, else
/// the relay session) and counts each relay session's study-log bytes since its last
/// forwarded `session.ended`.
#[derive(Debug)]
pub(super) struct StudyLog {
    enabled: bool,
    cap: Option<u64>,
    wall: WallClock,
    sessions: BTreeMap<SessionId, SessionLog>,
}

impl StudyLog {
    /// A log state; `unix_ms` is the wall-clock time at `now`.
    pub(super) fn new(enabled: bool, cap: Option<u64>, now: Instant, unix_ms: u64) -> Self {
        Self {
            enabled,
            cap,
            wall: WallClock::new(now, unix_ms),
            sessions: BTreeMap::new(),
        }
    }

    /// Whether records are made at all.
    pub(super) fn enabled(&self) -> bool {
        self.enabled
    }

    /// Re-anchors the wall clock: `unix_ms` is the wall-clock time at `now`.
    pub(super) fn set_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        self.wall.set(now, unix_ms);
    }

    /// The `sessionId` the records of relay session `session` carry now: its study
    /// session's while one is in progress, else its own.
    pub(super) fn log_id<'a>(&'a self, session: &'a SessionId) -> &'a SessionId {
        self.study_of(session).unwrap_or(session)
    }

    /// The study session in progress in relay session `session`, if any.
    pub(super) fn study_of(&self, session: &str) -> Option<&SessionId> {
        self.sessions.get(session).and_then(|s| s.study.as_ref())
    }

    /// The host of `session` started study session `study`: its records carry that id from
    /// now on, the `session.started` record first.
    pub(super) fn study_started(&mut self, session: &SessionId, study: SessionId) {
        self.sessions.entry(session.clone()).or_default().study = Some(study);
    }

    /// `session`'s study session ended (its `session.ended` is recorded): later records
    /// carry the relay session's id again.
    pub(super) fn study_ended(&mut self, session: &SessionId) {
        if let Some(s) = self.sessions.get_mut(session) {
            s.study = None;
        }
    }

    /// Makes a record of `session`. Messages (`in`, `out`) were checked against the cap
    /// before they were accepted; the relay's own records that would pass it are dropped.
    pub(super) fn record(
        &mut self,
        session: &SessionId,
        direction: Direction,
        msg_type: &'static str,
        payload: Utf8Bytes,
        now: Instant,
    ) -> Recorded {
        if !self.enabled {
            return Recorded::Off;
        }
        let log_id = self.log_id(session).clone();
        let bytes = line_len_bound(log_id.as_str(), msg_type, payload.len());
        if direction == Direction::Internal && !self.fits(session, bytes) {
            return Recorded::Dropped;
        }
        self.sessions.entry(session.clone()).or_default().usage += bytes;
        Recorded::Record(LogRecord {
            session_id: log_id,
            relay_session: session.clone(),
            direction,
            msg_type,
            payload,
            at_unix_ms: self.wall.unix_ms(now),
        })
    }

    /// Whether `bytes` more of study log fit `session`'s cap.
    fn fits(&self, session: &SessionId, bytes: u64) -> bool {
        let used = self.sessions.get(session).map_or(0, |s| s.usage);
        self.cap.is_none_or(|cap| used.saturating_add(bytes) <= cap)
    }

    /// Whether the records of an accepted message of `msg_type` with a payload of
    /// `payload_len` bytes (one `in`, one `out`) fit its session's log; `session.end` and
    /// `session.ended` always do, so a study can end.
    pub(super) fn message_fits(
        &self,
        session: &SessionId,
        msg_type: &str,
        payload_len: usize,
    ) -> bool {
        if !self.enabled || msg_type == types::SESSION_END || msg_type == types::SESSION_ENDED {
            return true;
        }
        let one = line_len_bound(self.log_id(session).as_str(), msg_type, payload_len);
        self.fits(session, one.saturating_mul(2))
    }

    /// `session`'s study session is complete: the cap counts the next one afresh.
    pub(super) fn session_ended(&mut self, session: &SessionId) {
        if let Some(s) = self.sessions.get_mut(session) {
            s.usage = 0;
        }
    }

    /// Forgets the usage and the study session of sessions that are not `live` once there
    /// are more than `bound`. (A study session survives its relay session emptying, as a
    /// host keeps it across reconnects, until then.)
    pub(super) fn prune(&mut self, bound: usize, live: impl Fn(&SessionId) -> bool) {
        if self.sessions.len() > bound {
            self.sessions.retain(|s, _| live(s));
        }
    }
}

/// The `sessionId` of a host's `session.started` payload, if it is a non-blank string of at
/// most `max` bytes (else the study session is not tracked and records keep the relay
/// session's id). The one payload the relay reads.
pub(super) fn study_id(route: &Route<'_>, max: usize) -> Option<SessionId> {
    #[derive(serde::Deserialize)]
    struct Started<'a> {
        #[serde(borrow, rename = "sessionId")]
        session_id: Option<std::borrow::Cow<'a, str>>,
    }
    let started: Started<'_> = serde_json::from_str(route.payload.get()).ok()?;
    let id = started.session_id?;
    (!id.trim().is_empty() && id.len() <= max).then(|| SessionId::new(&*id))
}

//! The relay's study-log state: whether records are made, the wall clock that dates them,
//! and each session's usage of [`Limits::max_log_bytes_per_session`](crate::Limits).

use std::collections::BTreeMap;
use std::time::Instant;

use agentwire_core::{Utf8Bytes, WallClock};

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

/// Dates records and counts each session's study-log bytes (line-length bounds) since its
/// last forwarded `session.ended`.
#[derive(Debug)]
pub(super) struct StudyLog {
    enabled: bool,
    cap: Option<u64>,
    wall: WallClock,
    usage: BTreeMap<SessionId, u64>,
}

impl StudyLog {
    /// A log state; `unix_ms` is the wall-clock time at `now`.
    pub(super) fn new(enabled: bool, cap: Option<u64>, now: Instant, unix_ms: u64) -> Self {
        Self {
            enabled,
            cap,
            wall: WallClock::new(now, unix_ms),
            usage: BTreeMap::new(),
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
        let bytes = line_len_bound(session.as_str(), msg_type, payload.len());
        if direction == Direction::Internal && !self.fits(session, bytes) {
            return Recorded::Dropped;
        }
        *self.usage.entry(session.clone()).or_default() += bytes;
        Recorded::Record(LogRecord {
            session_id: session.clone(),
            direction,
            msg_type,
            payload,
            at_unix_ms: self.wall.unix_ms(now),
        })
    }

    /// Whether `bytes` more of study log fit `session`'s cap.
    fn fits(&self, session: &SessionId, bytes: u64) -> bool {
        let used = self.usage.get(session).copied().unwrap_or(0);
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
        let one = line_len_bound(session.as_str(), msg_type, payload_len);
        self.fits(session, one.saturating_mul(2))
    }

    /// `session`'s study session is complete: the cap counts the next one afresh.
    pub(super) fn session_ended(&mut self, session: &SessionId) {
        self.usage.remove(session);
    }

    /// Forgets the usage of sessions that are not `live` once there are more than `bound`.
    pub(super) fn prune(&mut self, bound: usize, live: impl Fn(&SessionId) -> bool) {
        if self.usage.len() > bound {
            self.usage.retain(|s, _| live(s));
        }
    }
}

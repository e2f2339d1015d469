//! The driver's clock of the role-machine targets.

use std::time::{Duration, Instant};

/// The base time of a run. Only differences from it matter, so reading the real clock
/// once keeps every run deterministic. A day is added so that rewinding (at most
/// `MAX_OPS` × 60 s) never reaches the clock's origin, where `checked_sub` would fail and
/// make a run depend on the machine's uptime.
#[allow(clippy::disallowed_methods)]
fn base_time() -> Instant {
    Instant::now() + Duration::from_secs(86_400)
}

/// The driver's clock. `now` may go backwards; `seen` is the latest time actually passed
/// to the machine, which is what the machine clamps to (a time the driver moved to but
/// never passed does not count).
pub(super) struct Clock {
    base: Instant,
    now: Instant,
    seen: Option<Instant>,
}

impl Clock {
    pub(super) fn new() -> Self {
        let t = base_time();
        Self {
            base: t,
            now: t,
            seen: None,
        }
    }

    /// The time to pass to the machine now.
    pub(super) fn t(&mut self) -> Instant {
        self.seen = Some(self.seen.map_or(self.now, |s| s.max(self.now)));
        self.now
    }

    /// The latest time passed to the machine (`now` before the first call).
    pub(super) fn seen(&self) -> Instant {
        self.seen.unwrap_or(self.now)
    }

    /// `t` as an offset from the start, for messages.
    pub(super) fn since(&self, t: Option<Instant>) -> Option<Duration> {
        t.map(|t| t.saturating_duration_since(self.base))
    }

    pub(super) fn advance(&mut self, d: Duration) {
        self.now += d;
    }

    pub(super) fn rewind(&mut self, d: Duration) {
        self.now = self.now.checked_sub(d).unwrap_or(self.now);
    }

    pub(super) fn jump_to(&mut self, t: Instant) {
        self.now = self.now.max(t);
    }
}

//! The driver clock of fuzz bodies and stateful property tests (feature `fuzzing`).
//!
//! A fuzz body drives a machine through a run of operations, moving its clock forward,
//! backward (which the machine must clamp) and to the machine's next deadline. The clock
//! lives here, not in the publish = false `agentwire-testkit` (which re-exports it), because
//! each protocol crate's `fuzzing` module is published with the crate and can only depend on
//! published crates.

use std::time::{Duration, Instant};

/// The base time of a run: the real clock read once, plus a day. Only differences from it
/// matter, so every run is deterministic; the day keeps rewinding (a run rewinds at most a
/// few hours) from ever reaching the clock's origin, where `checked_sub` would fail and make
/// a run depend on the machine's uptime.
#[allow(clippy::disallowed_methods)] // the one clock read of a run
fn base_time() -> Instant {
    Instant::now() + Duration::from_secs(86_400)
}

/// A fuzz driver's clock. `now` may go backwards; [`seen`](Self::seen) is the latest time
/// actually passed to the machine, which is what the machine clamps to (a time the driver
/// moved to but never passed does not count).
///
/// ```
/// use std::time::Duration;
/// use agentwire_core::fuzzing::FuzzClock;
///
/// let mut clock = FuzzClock::new();
/// let t0 = clock.t();                        // pass to handle_*
/// clock.advance(Duration::from_secs(5));
/// clock.rewind(Duration::from_secs(7));      // the machine must clamp this
/// assert!(clock.now() < t0 && clock.seen() == t0);
/// assert_eq!(clock.since(Some(t0)), Some(Duration::ZERO));
/// ```
#[derive(Debug, Clone)]
pub struct FuzzClock {
    base: Instant,
    now: Instant,
    seen: Option<Instant>,
}

impl Default for FuzzClock {
    fn default() -> Self {
        Self::new()
    }
}

impl FuzzClock {
    /// A clock at the run's base time, nothing passed yet.
    pub fn new() -> Self {
        Self::at(base_time())
    }

    /// A clock starting at `base` (for a driver that already has its base time).
    pub fn at(base: Instant) -> Self {
        Self {
            base,
            now: base,
            seen: None,
        }
    }

    /// The time to pass to the machine now; records it as passed.
    pub fn t(&mut self) -> Instant {
        self.seen = Some(self.seen.map_or(self.now, |s| s.max(self.now)));
        self.now
    }

    /// The driver's current time, not recorded as passed.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The base time the clock started at.
    pub fn base(&self) -> Instant {
        self.base
    }

    /// The latest time passed to the machine ([`now`](Self::now) before the first
    /// [`t`](Self::t)).
    pub fn seen(&self) -> Instant {
        self.seen.unwrap_or(self.now)
    }

    /// `t` as an offset from the base time (zero for times before it), for messages.
    pub fn since(&self, t: Option<Instant>) -> Option<Duration> {
        t.map(|t| t.saturating_duration_since(self.base))
    }

    /// Moves forward by `d`.
    pub fn advance(&mut self, d: Duration) {
        self.now += d;
    }

    /// Moves backward by `d` (stays put if that would pass the clock's origin).
    pub fn rewind(&mut self, d: Duration) {
        self.now = self.now.checked_sub(d).unwrap_or(self.now);
    }

    /// Moves to `t` if that is later than now (a deadline after a rewind may still be
    /// earlier than the time passed last).
    pub fn jump_to(&mut self, t: Instant) {
        self.now = self.now.max(t);
    }

    /// Moves to `t`, but never earlier than now or than the latest time passed
    /// ([`seen`](Self::seen)): a deadline jump that also undoes a pending rewind.
    pub fn jump_past_seen_to(&mut self, t: Instant) {
        self.now = self.now.max(self.seen()).max(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seen_is_the_latest_time_passed() {
        let mut c = FuzzClock::new();
        let t0 = c.now();
        assert_eq!(c.seen(), t0);
        assert_eq!(c.t(), t0);
        c.advance(Duration::from_secs(10));
        assert_eq!(c.seen(), t0, "moved but not passed");
        let t1 = c.t();
        assert_eq!(t1, t0 + Duration::from_secs(10));
        c.rewind(Duration::from_secs(30));
        assert_eq!(c.t(), t0 - Duration::from_secs(20));
        assert_eq!(c.seen(), t1, "an earlier time does not lower seen");
        assert_eq!(c.since(Some(t1)), Some(Duration::from_secs(10)));
        assert_eq!(
            c.since(Some(t0 - Duration::from_secs(1))),
            Some(Duration::ZERO)
        );
        assert_eq!(c.since(None), None);
        assert_eq!(c.base(), t0);
    }

    #[test]
    fn the_two_jumps_differ_after_a_rewind() {
        let mut c = FuzzClock::new();
        let t0 = c.t();
        c.rewind(Duration::from_secs(5));
        let mut d = c.clone();
        c.jump_to(t0 - Duration::from_secs(2));
        assert_eq!(c.now(), t0 - Duration::from_secs(2));
        d.jump_past_seen_to(t0 - Duration::from_secs(2));
        assert_eq!(d.now(), t0);
        d.jump_past_seen_to(t0 + Duration::from_secs(1));
        assert_eq!(d.now(), t0 + Duration::from_secs(1));
        let mut e = FuzzClock::at(t0);
        e.jump_to(t0 - Duration::from_secs(1));
        assert_eq!(e.now(), t0, "never backwards");
    }
}

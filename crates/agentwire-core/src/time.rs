//! Time helpers for machines: a clamp for time going backwards, and a deadline set.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// Remembers the latest `now` a machine has seen and clamps earlier ones to it.
///
/// Every `handle_*` starts with `let now = self.clock.observe(now);` so a driver whose
/// clock steps backwards cannot make deadlines fire twice or move backwards (str0m's
/// `mediatime-backwards` rule).
#[derive(Debug, Clone, Copy, Default)]
pub struct Monotonic {
    latest: Option<Instant>,
}

impl Monotonic {
    /// A clock that has seen nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records `now` and returns it, or the latest time seen if `now` is earlier.
    pub fn observe(&mut self, now: Instant) -> Instant {
        match self.latest {
            Some(l) if now < l => l,
            _ => {
                self.latest = Some(now);
                now
            }
        }
    }

    /// The latest time observed.
    pub fn latest(&self) -> Option<Instant> {
        self.latest
    }
}

/// A set of named deadlines, one per key, ordered by time.
///
/// `set` replaces a key's deadline, `cancel` removes it, `pop_expired(now)` yields due keys
/// in deadline order (ties by key). Both lookups are `O(log n)`; iteration order is
/// deterministic (no hashing).
#[derive(Debug, Clone)]
pub struct TimerSet<K: Ord + Clone> {
    by_key: BTreeMap<K, Instant>,
    by_time: BTreeSet<(Instant, K)>,
}

impl<K: Ord + Clone> Default for TimerSet<K> {
    fn default() -> Self {
        Self {
            by_key: BTreeMap::new(),
            by_time: BTreeSet::new(),
        }
    }
}

impl<K: Ord + Clone> TimerSet<K> {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets (or moves) the deadline of `key` to `at`.
    pub fn set(&mut self, key: K, at: Instant) {
        if let Some(old) = self.by_key.insert(key.clone(), at) {
            self.by_time.remove(&(old, key.clone()));
        }
        self.by_time.insert((at, key));
    }

    /// Removes the deadline of `key`; returns it if there was one.
    pub fn cancel(&mut self, key: &K) -> Option<Instant> {
        let at = self.by_key.remove(key)?;
        self.by_time.remove(&(at, key.clone()));
        Some(at)
    }

    /// The deadline of `key`.
    pub fn get(&self, key: &K) -> Option<Instant> {
        self.by_key.get(key).copied()
    }

    /// The earliest deadline and its key.
    pub fn next(&self) -> Option<(Instant, &K)> {
        self.by_time.first().map(|(t, k)| (*t, k))
    }

    /// The earliest deadline.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.by_time.first().map(|(t, _)| *t)
    }

    /// Removes and returns the earliest key whose deadline is at or before `now`.
    pub fn pop_expired(&mut self, now: Instant) -> Option<K> {
        let (at, _) = self.by_time.first()?;
        if *at > now {
            return None;
        }
        let (_, key) = self.by_time.pop_first()?;
        self.by_key.remove(&key);
        Some(key)
    }

    /// Number of deadlines.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Whether there are no deadlines.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Removes every deadline.
    pub fn clear(&mut self) {
        self.by_key.clear();
        self.by_time.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[allow(clippy::disallowed_methods)] // test base time
    fn t0() -> Instant {
        Instant::now()
    }

    #[test]
    fn monotonic_clamps_backwards_time() {
        let base = t0();
        let mut m = Monotonic::new();
        assert_eq!(
            m.observe(base + Duration::from_secs(5)),
            base + Duration::from_secs(5)
        );
        assert_eq!(m.observe(base), base + Duration::from_secs(5));
        assert_eq!(
            m.observe(base + Duration::from_secs(6)),
            base + Duration::from_secs(6)
        );
    }

    #[test]
    fn timers_pop_in_deadline_order_and_can_move() {
        let base = t0();
        let s = Duration::from_secs(1);
        let mut t = TimerSet::new();
        t.set("b", base + 2 * s);
        t.set("a", base + 3 * s);
        t.set("c", base + s);
        t.set("c", base + 4 * s); // moved
        assert_eq!(t.next_deadline(), Some(base + 2 * s));
        assert_eq!(t.pop_expired(base), None);
        assert_eq!(t.pop_expired(base + 10 * s), Some("b"));
        assert_eq!(t.cancel(&"a"), Some(base + 3 * s));
        assert_eq!(t.pop_expired(base + 10 * s), Some("c"));
        assert!(t.is_empty());
    }
}

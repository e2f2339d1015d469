//! Time helpers for machines: a clamp for time going backwards, a deadline set, and a
//! deadline queue for timeouts that all have the same length.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
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

/// Deadlines pushed in time order, cancelled lazily: for timeouts that all have one length
/// and start at a machine's monotonic `now` (per-request and per-hop timeouts), where a
/// [`TimerSet`]'s two ordered trees cost more than the work they time.
///
/// `push` appends (O(1)); nothing is removed on cancel. Instead the owner gives each entry a
/// key that it can tell is stale (say, a request id it no longer waits for, or a step
/// counter that has moved on) and drops stale entries from the front with
/// [`drop_stale_front`](Self::drop_stale_front) after it cancels, so the front is live
/// whenever the owner reports [`next_deadline`](Self::next_deadline). Entries stuck behind a
/// live one are removed by [`retain`](Self::retain), which the owner calls when
/// [`len`](Self::len) outgrows its count of live timeouts (twice that, say), so memory stays
/// proportional to live timeouts at amortized O(1) per push.
///
/// A deadline earlier than the last one pushed is raised to it, so the queue stays sorted
/// (with one timeout length and a monotonic clock this never happens).
#[derive(Debug, Clone)]
pub struct DeadlineQueue<K> {
    queue: VecDeque<(Instant, K)>,
}

impl<K> Default for DeadlineQueue<K> {
    fn default() -> Self {
        Self {
            queue: VecDeque::new(),
        }
    }
}

impl<K> DeadlineQueue<K> {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a deadline for `key` (raised to the last deadline if earlier).
    pub fn push(&mut self, at: Instant, key: K) {
        let at = match self.queue.back() {
            Some(&(last, _)) if at < last => last,
            _ => at,
        };
        self.queue.push_back((at, key));
    }

    /// The first deadline in the queue and its key (live or not).
    pub fn front(&self) -> Option<(Instant, &K)> {
        self.queue.front().map(|(at, k)| (*at, k))
    }

    /// The first deadline in the queue; exact when the owner keeps the front live.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.queue.front().map(|(at, _)| *at)
    }

    /// Removes and returns the first key whose deadline is at or before `now` (live or not:
    /// the owner checks).
    pub fn pop_expired(&mut self, now: Instant) -> Option<K> {
        match self.queue.front() {
            Some((at, _)) if *at <= now => self.queue.pop_front().map(|(_, k)| k),
            _ => None,
        }
    }

    /// Drops entries from the front while `stale` says so.
    pub fn drop_stale_front(&mut self, mut stale: impl FnMut(&K) -> bool) {
        while self.queue.front().is_some_and(|(_, k)| stale(k)) {
            self.queue.pop_front();
        }
    }

    /// Keeps only the entries for which `live` holds, in order.
    pub fn retain(&mut self, mut live: impl FnMut(&K) -> bool) {
        self.queue.retain(|(_, k)| live(k));
    }

    /// Entries held, stale ones included.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether the queue holds nothing.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
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

    #[test]
    fn deadline_queue_keeps_order_and_drops_stale_entries() {
        #[allow(clippy::disallowed_methods)] // the one base time of a test
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut q = DeadlineQueue::new();
        assert_eq!(q.next_deadline(), None);
        q.push(ms(10), 1u32);
        q.push(ms(20), 2);
        q.push(ms(15), 3); // raised to 20
        q.push(ms(30), 4);
        assert_eq!(q.len(), 4);
        assert_eq!(q.front(), Some((ms(10), &1)));
        assert_eq!(q.pop_expired(ms(9)), None);
        assert_eq!(q.pop_expired(ms(10)), Some(1));
        // 2 is cancelled: dropping stale heads exposes 3, raised to 20.
        q.drop_stale_front(|k| *k == 2);
        assert_eq!(q.next_deadline(), Some(ms(20)));
        q.retain(|k| *k != 3);
        assert_eq!(q.len(), 1);
        assert_eq!(q.pop_expired(ms(29)), None);
        assert_eq!(q.pop_expired(ms(31)), Some(4));
        assert!(q.is_empty());
        q.drop_stale_front(|_| true);
        assert_eq!(q.pop_expired(ms(100)), None);
    }
}

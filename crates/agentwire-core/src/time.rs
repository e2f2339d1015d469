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

/// Wall-clock time for machines that read no clock: an anchor pairing a monotonic [`Instant`]
/// with the Unix time in milliseconds at that instant.
///
/// The driver passes both when it builds a machine (`now` and `unix_ms`, in that order
/// everywhere) and re-anchors it through
/// [`Machine::handle_wall_clock`](crate::Machine::handle_wall_clock), which calls
/// [`set`](Self::set): the tokio driver does so at least every `wall_clock_period` and
/// whenever the system clock jumps against monotonic time (a suspend stops the monotonic
/// clock; a correction steps the wall clock), and `Sim::set_wall_clock` (feature `sim`) moves it
/// in simulated time. Between anchors the machine derives wall time from the `now`
/// it is handed, so simulated time gives simulated timestamps. Wall time moves only forward
/// from the anchor: a `now` before the anchor reads as the anchor.
///
/// ```
/// use std::time::{Duration, Instant};
/// use agentwire_core::WallClock;
///
/// # #[allow(clippy::disallowed_methods)]
/// let now = Instant::now();
/// let wall = WallClock::new(now, 1_739_534_400_000);
/// let later = now + Duration::from_millis(1_500);
/// assert_eq!(wall.unix_ms(later), 1_739_534_401_500);
/// assert_eq!(wall.rfc3339(later), "2025-02-14T12:00:01Z");
/// assert_eq!(wall.iso8601_ms(later), "2025-02-14T12:00:01.500Z");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WallClock {
    at: Instant,
    unix_ms: u64,
}

impl WallClock {
    /// A clock on which `now` is `unix_ms` milliseconds after the Unix epoch.
    pub fn new(now: Instant, unix_ms: u64) -> Self {
        Self { at: now, unix_ms }
    }

    /// Re-anchors: `now` is `unix_ms` milliseconds after the Unix epoch.
    pub fn set(&mut self, now: Instant, unix_ms: u64) {
        *self = Self::new(now, unix_ms);
    }

    /// The anchor: the instant and its Unix milliseconds.
    pub fn anchor(&self) -> (Instant, u64) {
        (self.at, self.unix_ms)
    }

    /// The Unix time at `now` in milliseconds (the anchor's for a `now` before it; saturates
    /// at `u64::MAX`).
    pub fn unix_ms(&self, now: Instant) -> u64 {
        let elapsed = now.saturating_duration_since(self.at).as_millis();
        self.unix_ms
            .saturating_add(u64::try_from(elapsed).unwrap_or(u64::MAX))
    }

    /// The time at `now` as RFC 3339 UTC with second precision: [`rfc3339_utc`].
    pub fn rfc3339(&self, now: Instant) -> String {
        rfc3339_utc(self.unix_ms(now))
    }

    /// The time at `now` as ISO 8601 UTC with milliseconds: [`iso8601_ms`].
    pub fn iso8601_ms(&self, now: Instant) -> String {
        iso8601_ms(self.unix_ms(now))
    }
}

/// A UTC calendar date and time of day, from Unix milliseconds ([`UtcDateTime::from_unix_ms`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub struct UtcDateTime {
    /// The year (four digits until 9999, more after).
    pub year: u64,
    /// The month, 1-12.
    pub month: u8,
    /// The day of the month, 1-31.
    pub day: u8,
    /// The hour, 0-23.
    pub hour: u8,
    /// The minute, 0-59.
    pub minute: u8,
    /// The second, 0-59.
    pub second: u8,
    /// The millisecond, 0-999.
    pub millisecond: u16,
}

impl UtcDateTime {
    /// The UTC date and time `unix_ms` milliseconds after 1970-01-01T00:00:00Z (proleptic
    /// Gregorian calendar, Howard Hinnant's `civil_from_days`).
    pub fn from_unix_ms(unix_ms: u64) -> Self {
        let millisecond = (unix_ms % 1000) as u16;
        let secs = unix_ms / 1000;
        let days = secs / 86_400;
        let rem = secs % 86_400;
        let z = days + 719_468;
        let era = z / 146_097;
        let doe = z % 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
        let year = yoe + era * 400 + u64::from(month <= 2);
        Self {
            year,
            month,
            day,
            hour: (rem / 3600) as u8,
            minute: (rem % 3600 / 60) as u8,
            second: (rem % 60) as u8,
            millisecond,
        }
    }

    /// `YYYYMMDD`, e.g. `20260213`; always eight digits: a date after 9999 reads as
    /// `99991231` (see [`MAX_FORMATTED_UNIX_MS`]).
    pub fn yyyymmdd(&self) -> String {
        if self.year > 9999 {
            return "99991231".to_owned();
        }
        format!("{:04}{:02}{:02}", self.year, self.month, self.day)
    }
}

/// The latest time the text formatters write, 9999-12-31T23:59:59.999Z in Unix ms.
///
/// RFC 3339 and the peers' fixed-width timestamps and dated ids have four-digit years, so
/// [`rfc3339_utc`], [`iso8601_ms`] and [`UtcDateTime::yyyymmdd`] write any later time (a
/// wall clock set far ahead) as this one: their output keeps its length and form for every
/// `u64`.
pub const MAX_FORMATTED_UNIX_MS: u64 = 253_402_300_799_999;

/// Unix milliseconds as RFC 3339 UTC with second precision (milliseconds dropped):
/// `2025-02-14T12:00:00Z`. Times after 9999 read as [`MAX_FORMATTED_UNIX_MS`].
pub fn rfc3339_utc(unix_ms: u64) -> String {
    let t = UtcDateTime::from_unix_ms(unix_ms.min(MAX_FORMATTED_UNIX_MS));
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        t.year, t.month, t.day, t.hour, t.minute, t.second
    )
}

/// Unix milliseconds as ISO 8601 UTC with milliseconds (JavaScript's `toISOString` form):
/// `2026-02-13T10:22:17.123Z`. Times after 9999 read as [`MAX_FORMATTED_UNIX_MS`].
pub fn iso8601_ms(unix_ms: u64) -> String {
    let t = UtcDateTime::from_unix_ms(unix_ms.min(MAX_FORMATTED_UNIX_MS));
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year, t.month, t.day, t.hour, t.minute, t.second, t.millisecond
    )
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

    #[test]
    fn wall_clock_follows_now_from_its_anchor() {
        let t = t0();
        let mut w = WallClock::new(t, 1_000);
        assert_eq!(w.unix_ms(t), 1_000);
        assert_eq!(w.unix_ms(t + Duration::from_millis(2_345)), 3_345);
        // Before the anchor: the anchor's time, never earlier.
        w.set(t + Duration::from_secs(10), 50_000);
        assert_eq!(w.anchor(), (t + Duration::from_secs(10), 50_000));
        assert_eq!(w.unix_ms(t), 50_000);
        assert_eq!(w.unix_ms(t + Duration::from_secs(11)), 51_000);
        let near_max = WallClock::new(t, u64::MAX - 1);
        assert_eq!(near_max.unix_ms(t + Duration::from_secs(1)), u64::MAX);
        assert_eq!(
            WallClock::new(t, 1_770_978_137_000).iso8601_ms(t + Duration::from_millis(123)),
            "2026-02-13T10:22:17.123Z"
        );
        assert_eq!(
            WallClock::new(t, 1_735_140_600_000).rfc3339(t + Duration::from_millis(999)),
            "2024-12-25T15:30:00Z"
        );
    }

    #[test]
    fn civil_formats_at_known_points() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_utc(1_739_534_400_000), "2025-02-14T12:00:00Z");
        assert_eq!(rfc3339_utc(1_735_140_600_000), "2024-12-25T15:30:00Z");
        assert_eq!(rfc3339_utc(951_782_400_999), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339_utc(4_107_542_399_000), "2100-02-28T23:59:59Z");
        assert_eq!(iso8601_ms(1_770_978_137_123), "2026-02-13T10:22:17.123Z");
        assert_eq!(iso8601_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso8601_ms(4_107_542_399_999), "2100-02-28T23:59:59.999Z");
        assert_eq!(iso8601_ms(253_402_300_799_999), "9999-12-31T23:59:59.999Z");
        // Later times keep the four-digit form: the last millisecond of 9999.
        assert_eq!(iso8601_ms(253_402_300_800_000), "9999-12-31T23:59:59.999Z");
        assert_eq!(iso8601_ms(u64::MAX), "9999-12-31T23:59:59.999Z");
        assert_eq!(rfc3339_utc(u64::MAX), "9999-12-31T23:59:59Z");
        assert_eq!(UtcDateTime::from_unix_ms(u64::MAX).yyyymmdd(), "99991231");
        assert_eq!(UtcDateTime::from_unix_ms(253_402_300_800_000).year, 10_000);
        assert_eq!(
            UtcDateTime::from_unix_ms(1_770_978_137_123).yyyymmdd(),
            "20260213"
        );
        // The largest input does not overflow.
        assert!(rfc3339_utc(u64::MAX).ends_with('Z'));
    }

    proptest::proptest! {
        /// Every day of the calendar follows the one before it, and each day starts at 00:00:00.
        #[test]
        fn consecutive_days_are_consecutive_dates(day in 0u64..3_000_000) {
            let a = UtcDateTime::from_unix_ms(day * 86_400_000 + 86_399_999);
            let b = UtcDateTime::from_unix_ms((day + 1) * 86_400_000);
            proptest::prop_assert_eq!((a.hour, a.minute, a.second, a.millisecond), (23, 59, 59, 999));
            proptest::prop_assert_eq!((b.hour, b.minute, b.second, b.millisecond), (0, 0, 0, 0));
            let next = if b.year == a.year {
                (b.month == a.month && b.day == a.day + 1) || (b.month == a.month + 1 && b.day == 1)
            } else {
                b.year == a.year + 1 && a.month == 12 && a.day == 31 && b.month == 1 && b.day == 1
            };
            proptest::prop_assert!(next, "{a:?} -> {b:?}");
            let leap = |y: u64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
            let days_in = [31, if leap(a.year) { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
            proptest::prop_assert!(a.day <= days_in[usize::from(a.month - 1)]);
        }
    }
}

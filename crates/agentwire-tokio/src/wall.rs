//! Keeping a machine's wall clock right: where wall time is read ([`WallSource`]), when the
//! driver re-anchors ([`WallClockSync`]), and the owner task's bookkeeping of the last anchor.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where the driver reads wall-clock time, in milliseconds after the Unix epoch. Default:
/// the system clock. Tests inject their own to move the wall clock under a running machine.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use agentwire_tokio::WallSource;
///
/// let offset = Arc::new(AtomicU64::new(0));
/// let shifted = Arc::clone(&offset);
/// let source = WallSource::from_fn(move || 1_700_000_000_000 + shifted.load(Ordering::Relaxed));
/// offset.store(3_600_000, Ordering::Relaxed); // an hour later, all at once
/// assert_eq!(source.unix_ms(), 1_700_003_600_000);
/// ```
#[derive(Clone)]
pub struct WallSource(Arc<dyn Fn() -> u64 + Send + Sync>);

impl WallSource {
    /// The system clock (`SystemTime::now`).
    pub fn system() -> Self {
        Self(Arc::new(crate::clock::system_unix_ms))
    }

    /// A source that calls `f` for the Unix milliseconds now.
    pub fn from_fn(f: impl Fn() -> u64 + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// The wall-clock time now, in Unix milliseconds.
    pub fn unix_ms(&self) -> u64 {
        (self.0)()
    }
}

impl Default for WallSource {
    fn default() -> Self {
        Self::system()
    }
}

impl fmt::Debug for WallSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WallSource")
    }
}

/// How the driver keeps its machine's wall clock right (rule 9 of the `Machine` contract),
/// shared by [`ServerConfig`](crate::ServerConfig) and [`ClientConfig`](crate::ClientConfig).
///
/// At every wake-up of the owner task (input, command, timer), before the machine sees
/// it, the driver reads [`source`](Self::source) and calls
/// [`Machine::handle_wall_clock`](agentwire_core::Machine::handle_wall_clock) when
/// [`period`](Self::period) has passed since the last anchor, or when the wall clock has
/// moved more than [`max_jump`](Self::max_jump) away from where monotonic time since that
/// anchor puts it (a suspend stops the monotonic clock; an NTP step or a manual change moves
/// the wall clock). The first wake-up anchors. An idle machine is not woken for it: the
/// anchor is checked before anything the machine does.
///
/// | field | default | why |
/// |---|---|---|
/// | `source` | the system clock | tests inject their own |
/// | `period` | 60 s | slow drift (NTP slewing, at most 0.5 ms/s) stays under 30 ms |
/// | `max_jump` | 100 ms | a step the size of a log timestamp's precision is corrected at once; slewing never reaches it within a period |
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WallClockSync {
    /// Where wall time is read. Default: [`WallSource::system`].
    pub source: WallSource,
    /// Re-anchor at least this often (at the first wake-up once it has passed); `None`:
    /// never call `handle_wall_clock` (the machine keeps the anchor it was built with).
    /// Default: 60 s.
    pub period: Option<Duration>,
    /// A disagreement between the wall clock and the anchor's projection larger than this
    /// is a jump, re-anchored at once and logged at `info`. Default: 100 ms.
    pub max_jump: Duration,
}

impl Default for WallClockSync {
    fn default() -> Self {
        Self {
            source: WallSource::system(),
            period: Some(Duration::from_secs(60)),
            max_jump: Duration::from_millis(100),
        }
    }
}

impl WallClockSync {
    /// Never re-anchors: the driver does not call `handle_wall_clock`.
    pub fn off() -> Self {
        Self {
            period: None,
            ..Self::default()
        }
    }

    /// Sets [`source`](Self::source).
    pub fn with_source(mut self, source: WallSource) -> Self {
        self.source = source;
        self
    }

    /// Sets [`period`](Self::period).
    pub fn with_period(mut self, period: Option<Duration>) -> Self {
        self.period = period;
        self
    }

    /// Sets [`max_jump`](Self::max_jump).
    pub fn with_max_jump(mut self, max_jump: Duration) -> Self {
        self.max_jump = max_jump;
        self
    }
}

/// The owner task's record of the last anchor it gave the machine.
pub(crate) struct WallAnchor {
    sync: WallClockSync,
    last: Option<(Instant, u64)>,
}

impl WallAnchor {
    pub(crate) fn new(sync: WallClockSync) -> Self {
        Self { sync, last: None }
    }

    /// The Unix milliseconds to re-anchor the machine to at `now`, if it is due (first
    /// call, period passed, or a jump); `None` otherwise or when re-anchoring is off.
    pub(crate) fn due(&mut self, now: Instant) -> Option<u64> {
        let period = self.sync.period?;
        let wall = self.sync.source.unix_ms();
        if let Some((at, unix_ms)) = self.last {
            let elapsed = now.saturating_duration_since(at);
            let projected = unix_ms.saturating_add(millis(elapsed));
            let off = wall.abs_diff(projected);
            let jumped = off > millis(self.sync.max_jump);
            if !jumped && elapsed < period {
                return None;
            }
            if jumped {
                let ahead = wall >= projected;
                tracing::info!(
                    off_ms = off,
                    direction = if ahead { "forward" } else { "backward" },
                    "the wall clock jumped; the machine's wall clock is re-anchored"
                );
            }
        }
        self.last = Some((now, wall));
        Some(wall)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[allow(clippy::disallowed_methods)] // the one base time of a test
    fn t0() -> Instant {
        Instant::now()
    }

    fn fake(start: u64) -> (Arc<AtomicU64>, WallSource) {
        let wall = Arc::new(AtomicU64::new(start));
        let read = Arc::clone(&wall);
        (
            wall,
            WallSource::from_fn(move || read.load(Ordering::Relaxed)),
        )
    }

    #[test]
    fn anchors_first_then_on_the_period_and_on_jumps_either_way() {
        let t = t0();
        let ms = Duration::from_millis;
        let (wall, source) = fake(1_000_000);
        let mut a = WallAnchor::new(WallClockSync::default().with_source(source));
        assert_eq!(a.due(t), Some(1_000_000), "the first wake-up anchors");
        // Wall and monotonic agree (within max_jump): nothing to do until the period.
        wall.store(1_030_050, Ordering::Relaxed);
        assert_eq!(a.due(t + ms(30_000)), None);
        wall.store(1_060_000, Ordering::Relaxed);
        assert_eq!(a.due(t + ms(60_000)), Some(1_060_000), "period");
        // A suspend: an hour of wall time, no monotonic time.
        wall.store(1_060_000 + 3_600_000, Ordering::Relaxed);
        assert_eq!(a.due(t + ms(60_001)), Some(4_660_000), "jump forward");
        // A correction backwards by a second.
        wall.store(4_659_000, Ordering::Relaxed);
        assert_eq!(a.due(t + ms(60_002)), Some(4_659_000), "jump backward");
        // Just within max_jump: no re-anchor.
        wall.store(4_659_000 + 1_100, Ordering::Relaxed);
        assert_eq!(a.due(t + ms(61_002)), None);
    }

    #[test]
    fn off_never_anchors() {
        let (_, source) = fake(5);
        let mut a = WallAnchor::new(WallClockSync::off().with_source(source));
        assert_eq!(a.due(t0()), None);
    }
}

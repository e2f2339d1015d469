//! Latency recording: an HDR histogram in nanoseconds, and the send stamp every payload
//! carries so a receiver can tell how long a message travelled.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// Highest latency recorded exactly (larger ones are clamped to it): 60 s.
const MAX_NS: u64 = 60_000_000_000;

/// Latencies of one run (or one connection, merged at the end), 3 significant digits.
#[derive(Clone, Debug)]
pub struct Latency {
    hist: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

impl Latency {
    /// An empty record.
    pub fn new() -> Self {
        Self {
            hist: Histogram::new_with_bounds(1, MAX_NS, 3).expect("static histogram bounds"),
        }
    }

    /// Records one latency.
    pub fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos())
            .unwrap_or(MAX_NS)
            .clamp(1, MAX_NS);
        self.hist.saturating_record(ns);
    }

    /// Records the time since a [`stamp`] taken by the sender.
    pub fn record_since(&mut self, stamp_ns: u64) {
        self.record(Duration::from_nanos(stamp().saturating_sub(stamp_ns)));
    }

    /// Adds another record's latencies.
    pub fn merge(&mut self, other: &Self) {
        // Both have the same bounds, so adding cannot fail.
        let _ = self.hist.add(&other.hist);
    }

    /// How many latencies were recorded.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// The latency at quantile `q` (0.5 for the median), `None` when nothing was recorded.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        (!self.hist.is_empty()).then(|| Duration::from_nanos(self.hist.value_at_quantile(q)))
    }
}

/// Nanoseconds since a process-wide origin: the send stamp a payload carries (sender and
/// receiver are tasks of the same process, so the stamps compare).
pub fn stamp() -> u64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    let origin = *ORIGIN.get_or_init(Instant::now);
    u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

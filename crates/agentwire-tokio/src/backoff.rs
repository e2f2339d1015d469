//! Reconnect delays: exponential backoff with a cap and uniform jitter.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// How long a [`Client`](crate::Client) waits before each reconnect attempt.
///
/// The delay before attempt `n` (counting from 0 after the last connection that stayed open
/// for [`ClientConfig::stable_after`](crate::ClientConfig::stable_after)) is
/// `min(initial * 2^n, max)` plus a uniform jitter in `0..jitter`, so with the defaults a
/// client retries after about 1 s, 2 s, 4 s, 8 s, 16 s, 30 s, 30 s, ...
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Backoff {
    /// The first delay. Default: 1 s.
    pub initial: Duration,
    /// The largest delay before jitter. Default: 30 s.
    pub max: Duration,
    /// Upper bound (exclusive) of the uniform random delay added to every attempt, so
    /// clients dropped together do not reconnect together. Default: 500 ms.
    pub jitter: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(30),
            jitter: Duration::from_millis(500),
        }
    }
}

impl Backoff {
    /// A backoff from `initial` doubling up to `max`, with no jitter.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            jitter: Duration::ZERO,
        }
    }

    /// Sets the jitter bound.
    pub fn with_jitter(mut self, jitter: Duration) -> Self {
        self.jitter = jitter;
        self
    }

    /// The delay before attempt `attempt` (0-based); deterministic given `rand`.
    ///
    /// `rand` is any random `u64`; the jitter added is `rand % jitter` (in nanoseconds).
    pub fn delay(&self, attempt: u32, rand: u64) -> Duration {
        let base = 2u32
            .checked_pow(attempt)
            .and_then(|f| self.initial.checked_mul(f))
            .map_or(self.max, |d| d.min(self.max));
        let jitter_ns = u64::try_from(self.jitter.as_nanos()).unwrap_or(u64::MAX);
        let extra = if jitter_ns == 0 { 0 } else { rand % jitter_ns };
        base.saturating_add(Duration::from_nanos(extra))
    }
}

/// A random `u64` for jitter, from the standard library's randomly keyed hasher.
pub(crate) fn random_u64(salt: u64) -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(salt);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_initial_and_caps_at_max() {
        let b = Backoff::default().with_jitter(Duration::ZERO);
        let secs: Vec<u64> = (0..8).map(|n| b.delay(n, 12345).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(b.delay(u32::MAX, 0), Duration::from_secs(30));
    }

    #[test]
    fn jitter_is_uniform_below_the_bound_and_deterministic() {
        let b = Backoff::default();
        assert_eq!(b.delay(0, 0), Duration::from_secs(1));
        assert_eq!(
            b.delay(0, 499_999_999),
            Duration::from_millis(1500) - Duration::from_nanos(1)
        );
        assert_eq!(b.delay(0, 500_000_000), Duration::from_secs(1));
        assert_eq!(b.delay(1, 7), b.delay(1, 7));
        assert_eq!(b.delay(2, 250_000_000), Duration::from_millis(4250));
    }

    #[test]
    fn random_values_differ() {
        assert_ne!(random_u64(1), random_u64(1));
    }
}

//! A per-connection token bucket in integer milli-tokens (deterministic, no floats).

use std::time::{Duration, Instant};

use crate::config::RateLimit;

/// `burst` tokens at most, `per_second` added per second; one message costs one token.
#[derive(Debug, Clone)]
pub(crate) struct TokenBucket {
    /// Thousandths of a token.
    milli: u64,
    /// Time up to which refills have been counted.
    last: Instant,
}

impl TokenBucket {
    /// A full bucket.
    pub(crate) fn new(rate: RateLimit, now: Instant) -> Self {
        Self {
            milli: u64::from(rate.burst) * 1000,
            last: now,
        }
    }

    /// Takes one token at `now`; `false` if there is none.
    pub(crate) fn take(&mut self, rate: RateLimit, now: Instant) -> bool {
        let elapsed_ms =
            u64::try_from(now.saturating_duration_since(self.last).as_millis()).unwrap_or(u64::MAX);
        if elapsed_ms > 0 {
            let cap = u64::from(rate.burst) * 1000;
            let added = elapsed_ms.saturating_mul(u64::from(rate.per_second));
            self.milli = self.milli.saturating_add(added).min(cap);
            // Count whole milliseconds only, so no fraction of a refill is lost.
            self.last = self
                .last
                .checked_add(Duration::from_millis(elapsed_ms))
                .unwrap_or(now);
        }
        if self.milli >= 1000 {
            self.milli -= 1000;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::disallowed_methods)] // test base time
    fn t0() -> Instant {
        Instant::now()
    }

    #[test]
    fn burst_then_refill_at_the_rate() {
        let rate = RateLimit {
            per_second: 10,
            burst: 3,
        };
        let t = t0();
        let mut b = TokenBucket::new(rate, t);
        assert!((0..3).all(|_| b.take(rate, t)));
        assert!(!b.take(rate, t));
        // 10/s: one token per 100 ms, counted across several short gaps.
        assert!(!b.take(rate, t + Duration::from_millis(60)));
        assert!(b.take(rate, t + Duration::from_millis(100)));
        assert!(!b.take(rate, t + Duration::from_millis(150)));
        // A long quiet period refills only up to the burst.
        let later = t + Duration::from_secs(60);
        assert!((0..3).all(|_| b.take(rate, later)));
        assert!(!b.take(rate, later));
    }
}

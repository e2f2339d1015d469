//! The per-connection token bucket: `agentwire_core`'s, configured by [`RateLimit`].

use std::time::Instant;

use agentwire_core::Rate;

use crate::config::RateLimit;

impl From<RateLimit> for Rate {
    fn from(r: RateLimit) -> Self {
        Self::per_second(r.per_second, r.burst)
    }
}

/// `burst` tokens at most, `per_second` added per second; one message costs one token.
#[derive(Debug, Clone)]
pub(crate) struct TokenBucket(agentwire_core::TokenBucket);

impl TokenBucket {
    /// A full bucket.
    pub(crate) fn new(_rate: RateLimit, now: Instant) -> Self {
        Self(agentwire_core::TokenBucket::new(now))
    }

    /// Takes one token at `now`; `false` if there is none.
    pub(crate) fn take(&mut self, rate: RateLimit, now: Instant) -> bool {
        self.0.take(&rate.into(), now)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

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

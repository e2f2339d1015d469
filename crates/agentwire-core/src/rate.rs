//! A token-bucket rate limiter with the time passed in (GCRA form: exact, no floats).

use std::time::{Duration, Instant};

/// A rate: `count` events per `period`, with up to `burst` at once after a quiet spell.
///
/// Stored as the interval between two events at the sustained rate (`period / count`,
/// rounded down to the nanosecond), so `1000` per minute is exactly one per 60 ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    interval: Duration,
    burst: u32,
}

impl Rate {
    /// `count` events per `period`, `burst` at once. `count == 0` or `burst == 0` allows
    /// nothing.
    pub fn new(count: u32, period: Duration, burst: u32) -> Self {
        match count {
            0 => Self {
                interval: Duration::MAX,
                burst: 0,
            },
            _ => Self {
                interval: period / count,
                burst,
            },
        }
    }

    /// `count` events per second, `burst` at once.
    pub fn per_second(count: u32, burst: u32) -> Self {
        Self::new(count, Duration::from_secs(1), burst)
    }

    /// `count` events per minute, `burst` at once.
    pub fn per_minute(count: u32, burst: u32) -> Self {
        Self::new(count, Duration::from_secs(60), burst)
    }

    /// Time between two events at the sustained rate.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Events allowed at once after a quiet spell.
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// How far ahead of `now` the bucket's debt may run: `(burst - 1) * interval`.
    fn tolerance(&self) -> Option<Duration> {
        let extra = self.burst.checked_sub(1)?;
        Some(self.interval.checked_mul(extra).unwrap_or(Duration::MAX))
    }
}

/// One bucket: starts full (`burst` tokens), refills at the [`Rate`], one token per event.
///
/// Holds two words; the rate is passed to every call so many buckets can share one
/// configuration. Time going backwards is clamped (an earlier `now` refills nothing).
/// Implemented as GCRA (the "virtual scheduling" form of a token bucket): the bucket keeps
/// how much sustained-rate time its events are ahead of `now`, which needs no floats and
/// loses no fraction of a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBucket {
    /// The latest time seen.
    anchor: Instant,
    /// Sustained-rate time already spent beyond `anchor` (0 = full bucket).
    debt: Duration,
}

impl TokenBucket {
    /// A full bucket at `now`.
    pub fn new(now: Instant) -> Self {
        Self {
            anchor: now,
            debt: Duration::ZERO,
        }
    }

    fn advance(&mut self, now: Instant) {
        if now > self.anchor {
            self.debt = self.debt.saturating_sub(now - self.anchor);
            self.anchor = now;
        }
    }

    /// Takes one token at `now`; `false` (and nothing taken) if the bucket is empty.
    pub fn take(&mut self, rate: &Rate, now: Instant) -> bool {
        self.advance(now);
        match rate.tolerance() {
            Some(tol) if self.debt <= tol => {
                self.debt = self.debt.saturating_add(rate.interval);
                true
            }
            _ => false,
        }
    }

    /// How long from `now` until [`take`](Self::take) would succeed (zero if it would now).
    /// `Duration::MAX` when it never will (a rate that allows nothing).
    pub fn retry_after(&self, rate: &Rate, now: Instant) -> Duration {
        let mut b = *self;
        b.advance(now);
        match rate.tolerance() {
            Some(tol) => b.debt.saturating_sub(tol),
            None => Duration::MAX,
        }
    }

    /// Whole tokens available at `now`.
    pub fn available(&self, rate: &Rate, now: Instant) -> u32 {
        let mut b = *self;
        b.advance(now);
        let Some(tol) = rate.tolerance() else {
            return 0;
        };
        if b.debt > tol {
            return 0;
        }
        if rate.interval.is_zero() {
            return rate.burst;
        }
        let spare = (tol - b.debt).as_nanos() / rate.interval.as_nanos();
        u32::try_from(spare + 1).map_or(rate.burst, |n| n.min(rate.burst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::disallowed_methods)] // test base time
    fn t0() -> Instant {
        Instant::now()
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn burst_then_refill_at_the_rate() {
        let rate = Rate::per_second(10, 3);
        let t = t0();
        let mut b = TokenBucket::new(t);
        assert_eq!(b.available(&rate, t), 3);
        assert!((0..3).all(|_| b.take(&rate, t)));
        assert!(!b.take(&rate, t));
        assert_eq!(b.retry_after(&rate, t), ms(100));
        // 10/s: one token per 100 ms, counted across several short gaps.
        assert!(!b.take(&rate, t + ms(60)));
        assert!(b.take(&rate, t + ms(100)));
        assert!(!b.take(&rate, t + ms(150)));
        // A long quiet period refills only up to the burst.
        let later = t + Duration::from_secs(60);
        assert_eq!(b.available(&rate, later), 3);
        assert!((0..3).all(|_| b.take(&rate, later)));
        assert!(!b.take(&rate, later));
    }

    #[test]
    fn thousand_per_minute_with_a_burst_of_a_hundred() {
        let rate = Rate::per_minute(1000, 100);
        assert_eq!(rate.interval(), ms(60));
        let t = t0();
        let mut b = TokenBucket::new(t);
        assert_eq!((0..150).filter(|_| b.take(&rate, t)).count(), 100);
        // Exactly one more every 60 ms: 1000 in a minute once the burst is spent.
        let mut allowed = 0;
        for step in 1..=1000u64 {
            if b.take(&rate, t + ms(60 * step)) {
                allowed += 1;
            }
            assert!(!b.take(&rate, t + ms(60 * step)));
        }
        assert_eq!(allowed, 1000);
    }

    #[test]
    fn backwards_time_refills_nothing() {
        let rate = Rate::per_second(1, 1);
        let t = t0() + Duration::from_secs(5);
        let mut b = TokenBucket::new(t);
        assert!(b.take(&rate, t));
        assert!(!b.take(&rate, t - Duration::from_secs(5)));
        assert!(!b.take(&rate, t + ms(999)));
        assert!(b.take(&rate, t + ms(1000)));
    }

    #[test]
    fn degenerate_rates() {
        let t = t0();
        let never = Rate::per_second(5, 0);
        let mut b = TokenBucket::new(t);
        assert!(!b.take(&never, t));
        assert_eq!(b.retry_after(&never, t), Duration::MAX);
        assert_eq!(b.available(&never, t), 0);

        let zero = Rate::new(0, Duration::from_secs(1), 2);
        assert_eq!(zero.burst(), 0);
        let mut b = TokenBucket::new(t);
        assert!(!b.take(&zero, t + Duration::from_secs(3600)));
    }
}

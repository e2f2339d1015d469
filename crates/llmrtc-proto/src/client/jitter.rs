//! The injected random source for reconnect jitter.

/// Random numbers for reconnect jitter, injected so tests are deterministic (no global RNG
/// inside the machine).
pub trait JitterSource: Send {
    /// The next random `u64`.
    fn next_u64(&mut self) -> u64;
}

/// SplitMix64: a small, fast, seedable generator; plenty for jitter.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator starting from `seed` (the same seed gives the same sequence).
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
}

impl JitterSource for SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Always the same value (tests: `Fixed(0)` = no jitter, `Fixed(u64::MAX)` = near the bound).
#[derive(Debug, Clone, Copy)]
pub struct FixedJitter(pub u64);

impl JitterSource for FixedJitter {
    fn next_u64(&mut self) -> u64 {
        self.0
    }
}

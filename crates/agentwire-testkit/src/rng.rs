//! A deterministic pseudo-random generator for test inputs.

/// Marsaglia's xorshift64 (shifts 13, 7, 17): fast, deterministic, and good enough to
/// spread test inputs; not for anything that needs real randomness.
///
/// ```
/// use agentwire_testkit::XorShift64;
///
/// let mut a = XorShift64::default();
/// let mut b = XorShift64::new(XorShift64::DEFAULT_SEED);
/// assert_eq!(a.next_u64(), b.next_u64());
/// assert_eq!(a.bytes(3).len(), 3);
/// ```
#[derive(Debug, Clone)]
pub struct XorShift64 {
    state: u64,
}

impl XorShift64 {
    /// The seed every crate's `pseudo_random_inputs` test starts from.
    pub const DEFAULT_SEED: u64 = 0x9e37_79b9_7f4a_7c15;

    /// A generator starting at `seed` (zero is replaced by [`DEFAULT_SEED`](Self::DEFAULT_SEED):
    /// xorshift stays at zero forever).
    pub fn new(seed: u64) -> Self {
        Self {
            state: if seed == 0 { Self::DEFAULT_SEED } else { seed },
        }
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }

    /// A number below `n` (`n` > 0), as `next_u64() % n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// `len` bytes, each the low byte of one [`next_u64`](Self::next_u64).
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}

impl Default for XorShift64 {
    /// Starts at [`DEFAULT_SEED`](Self::DEFAULT_SEED).
    fn default() -> Self {
        Self::new(Self::DEFAULT_SEED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_inline_generator_it_replaces() {
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut g = XorShift64::default();
        for _ in 0..1000 {
            assert_eq!(g.next_u64(), next());
        }
        assert_ne!(XorShift64::new(0).next_u64(), 0);
        assert!(XorShift64::new(7).below(10) < 10);
    }
}

//! Injected id generators, so that machines stay deterministic.

use std::fmt;

/// A 128-bit identifier, displayed as a lowercase hyphenated UUID.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Id128(pub u128);

impl Id128 {
    /// The hyphenated UUID form, e.g. `00000000-0000-4000-8000-000000000001`.
    pub fn to_uuid_string(self) -> String {
        self.to_string()
    }

    /// Parses the hyphenated (or plain 32-hex-digit) UUID form, any case; `None` otherwise.
    ///
    /// Machines key pending requests by `Id128` and parse the id a reply carries, so a
    /// lookup costs no string allocation.
    pub fn parse(s: &str) -> Option<Self> {
        let bytes = s.as_bytes();
        let hyphenated = bytes.len() == 36;
        if !hyphenated && bytes.len() != 32 {
            return None;
        }
        let mut v: u128 = 0;
        for (i, &b) in bytes.iter().enumerate() {
            if hyphenated && matches!(i, 8 | 13 | 18 | 23) {
                if b != b'-' {
                    return None;
                }
                continue;
            }
            let d = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                b'A'..=b'F' => b - b'A' + 10,
                _ => return None,
            };
            v = (v << 4) | u128::from(d);
        }
        Some(Self(v))
    }

    /// The lowest 32 bits as 8 hex digits (short ids such as `sub_1a2b3c4d`).
    pub fn short_hex(self) -> String {
        format!("{:08x}", self.0 as u32)
    }
}

impl fmt::Display for Id128 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        write!(
            f,
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            (v >> 96) as u32,
            (v >> 80) as u16,
            (v >> 64) as u16,
            (v >> 48) as u16,
            v & 0xffff_ffff_ffff
        )
    }
}

impl fmt::Debug for Id128 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Id128({self})")
    }
}

/// A source of ids for request ids, session ids and the like.
///
/// Machines take one at construction (jsonrpsee's `IdProvider`, quinn's `rng_seed`): tests
/// pass [`SequentialIds`] and get the same outputs for the same inputs; the transport passes
/// [`UuidV4Ids`].
pub trait IdGen: Send {
    /// The next id. Never returns the same id twice for one generator.
    fn next_id(&mut self) -> Id128;
}

impl<G: IdGen + ?Sized> IdGen for Box<G> {
    fn next_id(&mut self) -> Id128 {
        (**self).next_id()
    }
}

/// Deterministic ids: a counter starting at 1, under a 64-bit seed.
///
/// Each id is shaped as a UUID v4 (version and variant bits set) so that peers that check
/// the form accept it: seed 0 gives `00000000-0000-4000-8000-000000000001`, `...-000000000002`, ...
#[derive(Debug, Clone)]
pub struct SequentialIds {
    seed: u64,
    counter: u64,
}

impl SequentialIds {
    /// A generator whose ids carry `seed` in their high bits.
    pub fn new(seed: u64) -> Self {
        Self { seed, counter: 0 }
    }
}

impl Default for SequentialIds {
    fn default() -> Self {
        Self::new(0)
    }
}

impl IdGen for SequentialIds {
    fn next_id(&mut self) -> Id128 {
        self.counter = self.counter.wrapping_add(1) & ((1 << 62) - 1);
        let raw = (u128::from(self.seed) << 64) | u128::from(self.counter);
        Id128(set_v4_bits(raw))
    }
}

fn set_v4_bits(raw: u128) -> u128 {
    let versioned = (raw & !(0xf << 76)) | (0x4 << 76);
    (versioned & !(0b11 << 62)) | (0b10 << 62)
}

/// Random UUID v4 ids from the operating system's generator (via the `uuid` crate).
#[cfg(feature = "uuid")]
#[derive(Debug, Clone, Copy, Default)]
pub struct UuidV4Ids;

#[cfg(feature = "uuid")]
impl IdGen for UuidV4Ids {
    fn next_id(&mut self) -> Id128 {
        Id128(uuid::Uuid::new_v4().as_u128())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_are_uuid_shaped_and_ordered() {
        let mut g = SequentialIds::new(0);
        assert_eq!(
            g.next_id().to_string(),
            "00000000-0000-4000-8000-000000000001"
        );
        assert_eq!(
            g.next_id().to_string(),
            "00000000-0000-4000-8000-000000000002"
        );
        let mut s = SequentialIds::new(0xabcd);
        let id = s.next_id().to_string();
        assert_eq!(id, "00000000-0000-4bcd-8000-000000000001");
    }

    #[test]
    fn same_seed_same_ids() {
        let a: Vec<_> = (0..5)
            .map(|_| 0)
            .scan(SequentialIds::new(9), |g, _| Some(g.next_id()))
            .collect();
        let b: Vec<_> = (0..5)
            .map(|_| 0)
            .scan(SequentialIds::new(9), |g, _| Some(g.next_id()))
            .collect();
        assert_eq!(a, b);
    }

    #[cfg(feature = "uuid")]
    #[test]
    fn uuid_v4_ids_parse_as_v4() {
        let mut g = UuidV4Ids;
        let a = g.next_id();
        let b = g.next_id();
        assert_ne!(a, b);
        let parsed = uuid::Uuid::parse_str(&a.to_string()).expect("uuid");
        assert_eq!(parsed.get_version_num(), 4);
    }

    #[test]
    fn parse_round_trips_display() {
        let mut g = SequentialIds::new(77);
        for _ in 0..3 {
            let id = g.next_id();
            assert_eq!(Id128::parse(&id.to_string()), Some(id));
            assert_eq!(Id128::parse(&id.to_string().to_uppercase()), Some(id));
        }
        assert_eq!(
            Id128::parse("a1b2c3d4-e5f6-7890-abcd-ef1234567890").map(|i| i.to_string()),
            Some("a1b2c3d4-e5f6-7890-abcd-ef1234567890".to_string())
        );
        assert_eq!(
            Id128::parse("a1b2c3d4e5f67890abcdef1234567890").map(|i| i.to_string()),
            Some("a1b2c3d4-e5f6-7890-abcd-ef1234567890".to_string())
        );
        for bad in [
            "",
            "xyz",
            "a1b2c3d4-e5f6-7890-abcd-ef123456789g",
            "a1b2c3d4+e5f6-7890-abcd-ef1234567890",
            "é1b2c3d4-e5f6-7890-abcd-ef123456789",
        ] {
            assert_eq!(Id128::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn short_hex_is_eight_digits() {
        assert_eq!(Id128(0x1234).short_hex(), "00001234");
    }
}

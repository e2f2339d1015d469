//! Injected id generators, so that machines stay deterministic.

use std::fmt;

/// A 128-bit identifier, displayed as a lowercase hyphenated UUID.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Id128(pub u128);

impl Id128 {
    /// The hyphenated UUID form, e.g. `00000000-0000-4000-8000-000000000001`.
    pub fn to_uuid_string(self) -> String {
        self.hyphenated().as_str().to_owned()
    }

    /// The hyphenated UUID form on the stack: formatting an id costs no allocation and no
    /// `core::fmt` machinery (ids are formatted once per request on hot paths).
    pub fn hyphenated(self) -> Hyphenated {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [b'-'; 36];
        let mut pos = 0;
        for i in 0..16 {
            if matches!(i, 4 | 6 | 8 | 10) {
                pos += 1; // keep the hyphen
            }
            let byte = (self.0 >> (120 - 8 * i)) as u8;
            out[pos] = HEX[usize::from(byte >> 4)];
            out[pos + 1] = HEX[usize::from(byte & 0xf)];
            pos += 2;
        }
        Hyphenated(out)
    }

    /// Parses the hyphenated (or plain 32-hex-digit) UUID form, any case; `None` otherwise.
    ///
    /// Machines key pending requests by `Id128` and parse the id a reply carries, so a
    /// lookup costs no string allocation.
    pub fn parse(s: &str) -> Option<Self> {
        /// Hex digit values; 0xff marks a byte that is not a hex digit.
        const HEX: [u8; 256] = {
            let mut t = [0xffu8; 256];
            let mut i = 0;
            while i < 10 {
                t[b'0' as usize + i] = i as u8;
                i += 1;
            }
            let mut i = 0;
            while i < 6 {
                t[b'a' as usize + i] = 10 + i as u8;
                t[b'A' as usize + i] = 10 + i as u8;
                i += 1;
            }
            t
        };
        /// Where the 32 digits sit in the hyphenated form.
        const HYPHENATED: [usize; 32] = [
            0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 14, 15, 16, 17, 19, 20, 21, 22, 24, 25, 26, 27,
            28, 29, 30, 31, 32, 33, 34, 35,
        ];
        let bytes = s.as_bytes();
        let digit_at: fn(usize) -> usize = match bytes.len() {
            36 if bytes[8] == b'-'
                && bytes[13] == b'-'
                && bytes[18] == b'-'
                && bytes[23] == b'-' =>
            {
                |k| HYPHENATED[k]
            }
            32 => |k| k,
            _ => return None,
        };
        // Branch-free: any non-digit sets the high bits of `bad`.
        let (mut hi, mut lo, mut bad) = (0u64, 0u64, 0u8);
        for k in 0..16 {
            let d = HEX[usize::from(bytes[digit_at(k)])];
            bad |= d;
            hi = (hi << 4) | u64::from(d & 0xf);
            let d = HEX[usize::from(bytes[digit_at(k + 16)])];
            bad |= d;
            lo = (lo << 4) | u64::from(d & 0xf);
        }
        (bad & 0xf0 == 0).then_some(Self((u128::from(hi) << 64) | u128::from(lo)))
    }

    /// The lowest 32 bits as 8 hex digits (short ids such as `sub_1a2b3c4d`).
    pub fn short_hex(self) -> String {
        format!("{:08x}", self.0 as u32)
    }
}

impl fmt::Display for Id128 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.hyphenated().as_str())
    }
}

/// The 36-byte hyphenated form of an [`Id128`], on the stack (no allocation).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Hyphenated([u8; 36]);

impl Hyphenated {
    /// The text, e.g. `00000000-0000-4000-8000-000000000001`.
    pub fn as_str(&self) -> &str {
        // Only ASCII hex digits and hyphens are ever written.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl fmt::Debug for Hyphenated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
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

//! Injected id generators, so that machines stay deterministic.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};

/// A 128-bit identifier, displayed as a lowercase hyphenated UUID.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Id128(pub u128);

impl Id128 {
    /// The hyphenated UUID form, e.g. `00000000-0000-4000-8000-000000000001`.
    pub fn to_uuid_string(self) -> String {
        self.hyphenated().as_str().to_owned()
    }

    /// The hyphenated UUID form on the stack: formatting an id costs no allocation and no
    /// `core::fmt` machinery (ids are formatted once per request on hot paths). The digits
    /// are made and stored eight at a time (see `hex8_ascii`).
    pub fn hyphenated(self) -> Hyphenated {
        let words = [
            hex8_ascii((self.0 >> 96) as u32),
            hex8_ascii((self.0 >> 64) as u32),
            hex8_ascii((self.0 >> 32) as u32),
            hex8_ascii(self.0 as u32),
        ];
        let mut out = [b'-'; 36];
        out[..8].copy_from_slice(&words[0]);
        out[9..13].copy_from_slice(&words[1][..4]);
        out[14..18].copy_from_slice(&words[1][4..]);
        out[19..23].copy_from_slice(&words[2][..4]);
        out[24..28].copy_from_slice(&words[2][4..]);
        out[28..].copy_from_slice(&words[3]);
        Hyphenated(out)
    }

    /// Parses the hyphenated (or plain 32-hex-digit) UUID form, any case; `None` otherwise.
    ///
    /// Machines key pending requests by `Id128` and parse the id a reply carries, so a
    /// lookup costs no string allocation. The digits are read eight at a time (see
    /// `hex8`): no table and no branch per digit.
    pub fn parse(s: &str) -> Option<Self> {
        let b = s.as_bytes();
        // Four little-endian words of eight ASCII digits each (first digit in the low byte).
        let words: [u64; 4] = if let Ok(h) = <&[u8; 36]>::try_from(b) {
            if h[8] != b'-' || h[13] != b'-' || h[18] != b'-' || h[23] != b'-' {
                return None;
            }
            let w = |i: usize| u64::from(u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
            [
                w(0) | w(4) << 32,
                w(9) | w(14) << 32,
                w(19) | w(24) << 32,
                w(28) | w(32) << 32,
            ]
        } else if let Ok(p) = <&[u8; 32]>::try_from(b) {
            let w = |i: usize| {
                u64::from_le_bytes([
                    p[i],
                    p[i + 1],
                    p[i + 2],
                    p[i + 3],
                    p[i + 4],
                    p[i + 5],
                    p[i + 6],
                    p[i + 7],
                ])
            };
            [w(0), w(8), w(16), w(24)]
        } else {
            return None;
        };
        let (a, bad_a) = hex8(words[0]);
        let (b, bad_b) = hex8(words[1]);
        let (c, bad_c) = hex8(words[2]);
        let (d, bad_d) = hex8(words[3]);
        (bad_a | bad_b | bad_c | bad_d == 0).then_some(Self(
            (u128::from(a) << 96) | (u128::from(b) << 64) | (u128::from(c) << 32) | u128::from(d),
        ))
    }

    /// The lowest 32 bits as 8 hex digits (short ids such as `sub_1a2b3c4d`).
    pub fn short_hex(self) -> String {
        format!("{:08x}", self.0 as u32)
    }
}

/// `0x01` in every byte.
const ONES: u64 = 0x0101_0101_0101_0101;
/// `0x80` in every byte.
const HIGH: u64 = ONES * 0x80;

/// Per byte of `x` (each below 0x80): `0x80` where `lo <= byte <= hi`, else `0`.
///
/// Adding `0x80 - lo` sets a byte's high bit iff the byte is at least `lo`; adding
/// `0x7f - hi` sets it iff the byte is above `hi`. Neither sum carries into the next byte.
const fn bytes_in(x: u64, lo: u8, hi: u8) -> u64 {
    let at_least_lo = x.wrapping_add(ONES * (0x80 - lo as u64));
    let above_hi = x.wrapping_add(ONES * (0x7f - hi as u64));
    at_least_lo & !above_hi & HIGH
}

/// The eight lowercase hex digits of `v`, most significant first.
///
/// One table load per byte of `v` (its two digits as a little-endian `u16`), assembled
/// into a word: no branch per digit, and the digits are stored a word at a time.
fn hex8_ascii(v: u32) -> [u8; 8] {
    const PAIRS: [u16; 256] = {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut t = [0u16; 256];
        let mut i = 0;
        while i < 256 {
            t[i] = HEX[i >> 4] as u16 | (HEX[i & 0xf] as u16) << 8;
            i += 1;
        }
        t
    };
    let pair = |byte: u8| u64::from(PAIRS[usize::from(byte)]);
    let [a, b, c, d] = v.to_be_bytes();
    (pair(a) | (pair(b) << 16) | (pair(c) << 32) | (pair(d) << 48)).to_le_bytes()
}

/// Eight ASCII hex digits, the first in the lowest byte of `x`, to their value (the first
/// digit most significant), and a mask that is zero iff all eight are hex digits (`0-9`,
/// `a-f`, `A-F`).
///
/// SWAR: the digit and letter ranges are checked for all eight bytes at once, then the
/// nibbles are packed pairwise. A byte at or above 0x80 fails the check (its carries may
/// garble the other lanes, which no longer matters).
fn hex8(x: u64) -> (u32, u64) {
    let digit = bytes_in(x, b'0', b'9');
    let letter = bytes_in(x | (ONES * 0x20), b'a', b'f');
    // Non-ASCII bytes, and bytes that are neither digit nor letter.
    let bad = (x & HIGH) | ((digit | letter) ^ HIGH);
    // '0'..'9' are 0x30..0x39 and 'a'..'f'/'A'..'F' end in 1..6: low nibble, +9 for letters.
    let nibbles = (x & (ONES * 0x0f)) + (letter >> 7) * 9;
    // Byte 2k is the high nibble of result byte k, byte 2k+1 its low nibble.
    let pairs = ((nibbles & 0x000f_000f_000f_000f) << 4) | ((nibbles >> 8) & 0x000f_000f_000f_000f);
    let quads = (pairs & 0x0000_00ff_0000_00ff) | ((pairs >> 8) & 0x0000_ff00_0000_ff00);
    let le = (quads & 0xffff) | ((quads >> 16) & 0xffff_0000);
    ((le as u32).swap_bytes(), bad)
}

impl fmt::Display for Id128 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.hyphenated().as_str())
    }
}

/// The 36-byte hyphenated form of an [`Id128`], on the stack (no allocation).
///
/// Word-aligned, so that the UTF-8 check in [`as_str`](Self::as_str) takes its word-at-a-time
/// ASCII path from the first byte.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(align(8))]
pub struct Hyphenated([u8; 36]);

impl Hyphenated {
    /// The text, e.g. `00000000-0000-4000-8000-000000000001`.
    pub fn as_str(&self) -> &str {
        // Only ASCII hex digits and hyphens are ever written.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }

    /// The text as bytes (ASCII), for writers that take bytes and need no `&str`.
    pub fn as_bytes(&self) -> &[u8; 36] {
        &self.0
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

/// Random UUID v4 ids (via the `uuid` crate with `fast-rng`: a thread-local ChaCha generator
/// seeded from the operating system, about 9 ns per id here against 765 ns for a
/// `getrandom` system call per id, which would cost more than a whole bus hop).
#[cfg(feature = "uuid")]
#[derive(Debug, Clone, Copy, Default)]
pub struct UuidV4Ids;

#[cfg(feature = "uuid")]
impl IdGen for UuidV4Ids {
    fn next_id(&mut self) -> Id128 {
        Id128(uuid::Uuid::new_v4().as_u128())
    }
}

/// A `HashMap` keyed by [`Id128`] with [`Id128Hasher`]: for tables of ids this side minted
/// (pending requests, deliveries), where SipHash's flooding resistance buys nothing.
pub type Id128Map<V> = HashMap<Id128, V, BuildHasherDefault<Id128Hasher>>;

/// Hashes an [`Id128`] by folding its halves and multiplying by an odd constant.
///
/// Meant for maps whose keys this side generated (UUID v4 or sequential): a peer can look a
/// key up but never chooses what is inserted, so there is no chain for it to grow. A `u64`
/// (a [`ConnId`](crate::ConnId), a counter) is multiplied the same way; other byte input
/// falls back to FNV-1a.
#[derive(Debug, Default, Clone, Copy)]
pub struct Id128Hasher(u64);

impl Hasher for Id128Hasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn write_u128(&mut self, v: u128) {
        self.0 = ((v as u64) ^ ((v >> 64) as u64)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn finish(&self) -> u64 {
        self.0
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

    /// The obvious digit-by-digit parse, to check the word-at-a-time one against.
    fn parse_reference(s: &str) -> Option<Id128> {
        let digits: String = match s.len() {
            36 => {
                let b = s.as_bytes();
                if [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
                    return None;
                }
                s.chars().filter(|&c| c != '-').collect()
            }
            32 => s.to_owned(),
            _ => return None,
        };
        if digits.len() != 32 || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        u128::from_str_radix(&digits, 16).ok().map(Id128)
    }

    #[test]
    fn parse_agrees_with_the_reference_for_every_byte_at_every_position() {
        let base = "a1b2c3d4-e5f6-7890-abcd-ef1234567890";
        let plain = "A1B2C3D4E5F67890ABCDEF1234567890";
        for text in [base, plain] {
            for pos in 0..text.len() {
                for byte in 0u8..0x80 {
                    let mut b = text.as_bytes().to_vec();
                    b[pos] = byte;
                    let s = String::from_utf8(b).expect("ascii");
                    assert_eq!(Id128::parse(&s), parse_reference(&s), "{s:?}");
                }
                // Two-byte characters in place of two digits (bytes >= 0x80).
                if pos + 1 < text.len() {
                    for ch in ['é', 'ÿ', 'Ā', '߿'] {
                        let s = format!("{}{ch}{}", &text[..pos], &text[pos + 2..]);
                        assert_eq!(s.len(), text.len());
                        assert_eq!(Id128::parse(&s), None, "{s:?}");
                    }
                }
            }
        }
        let mut g = SequentialIds::new(u64::MAX);
        for v in [
            0u128,
            u128::MAX,
            0x0123_4567_89ab_cdef_fedc_ba98_7654_3210,
            g.next_id().0,
        ] {
            let id = Id128(v);
            assert_eq!(Id128::parse(id.hyphenated().as_str()), Some(id));
            assert_eq!(Id128::parse(&format!("{v:032X}")), Some(id));
        }
    }

    #[test]
    fn hyphenated_matches_fmt_for_many_values() {
        let mut v: u128 = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210;
        for i in 0..2000u32 {
            // Every nibble value in every position, and a spread of mixed values.
            let x = match i {
                0..=15 => u128::from(i) * (u128::MAX / 15),
                16..=47 => 0xf << (4 * (i - 16)),
                _ => {
                    v = v
                        .wrapping_mul(0x2545_f491_4f6c_dd1d_9e37_79b9_7f4a_7c15)
                        .wrapping_add(1);
                    v
                }
            };
            let hex = format!("{x:032x}");
            let want = format!(
                "{}-{}-{}-{}-{}",
                &hex[..8],
                &hex[8..12],
                &hex[12..16],
                &hex[16..20],
                &hex[20..]
            );
            assert_eq!(Id128(x).hyphenated().as_str(), want);
            assert_eq!(Id128::parse(&want), Some(Id128(x)));
        }
    }

    #[test]
    fn short_hex_is_eight_digits() {
        assert_eq!(Id128(0x1234).short_hex(), "00001234");
    }

    #[test]
    fn id128_map_spreads_sequential_and_random_ids() {
        use std::hash::BuildHasher;
        let b = BuildHasherDefault::<Id128Hasher>::default();
        let mut g = SequentialIds::new(7);
        let low: std::collections::HashSet<u64> =
            (0..1024).map(|_| b.hash_one(g.next_id()) & 1023).collect();
        assert!(
            low.len() > 900,
            "sequential ids collide in the low bits: {}",
            low.len()
        );
        let mut m = Id128Map::default();
        let ids: Vec<Id128> = (0..1000u64)
            .map(|i| SequentialIds::new(i.wrapping_mul(0x9E37_79B9)).next_id())
            .collect();
        for (i, id) in ids.iter().enumerate() {
            m.insert(*id, i);
        }
        assert!(ids.iter().enumerate().all(|(i, id)| m.get(id) == Some(&i)));
    }
}

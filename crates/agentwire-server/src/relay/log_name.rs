//! The file name of a relay session's study log, shared by the writer and the validator.

use std::fmt::Write as _;

/// Longest file-name stem kept as is; a longer encoded session id is cut and given a hash of
/// the whole id, so names stay under the usual 255-byte limit.
const MAX_STEM: usize = 160;

/// The file name of `session`'s log: the id with every byte outside `a-z 0-9 - _ .` (and a
/// leading `.`) written `%XX` (upper-case hex), then `.jsonl`.
///
/// Injective: `%` itself is encoded, and since letters are only ever lower-case and hex
/// digits upper-case, two ids never map to names that differ only in case. An encoded id
/// longer than 160 bytes is cut there and ends in `~` and a 64-bit FNV-1a hash of the whole
/// id (`~` never appears otherwise); the writer also checks, when it reopens a file, that its
/// last record is of the same session.
pub fn file_name(session: &str) -> String {
    let mut stem = String::with_capacity(session.len() + 6);
    for (i, b) in session.bytes().enumerate() {
        let keep = b.is_ascii_lowercase()
            || b.is_ascii_digit()
            || b == b'-'
            || b == b'_'
            || (b == b'.' && i > 0);
        if keep {
            stem.push(char::from(b));
        } else {
            let _ = write!(stem, "%{b:02X}");
        }
    }
    if stem.len() > MAX_STEM {
        let mut cut = MAX_STEM;
        // Never split a `%XX` escape (the stem is ASCII, so every index is a boundary).
        if let Some(p) = stem[..cut].rfind('%') {
            if p + 3 > cut {
                cut = p;
            }
        }
        stem.truncate(cut);
        let _ = write!(stem, "~{:016x}", fnv1a64(session.as_bytes()));
    }
    stem.push_str(".jsonl");
    stem
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

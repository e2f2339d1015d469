//! gzip (RFC 1952) members around raw deflate, with reusable state, a size bound on output
//! and typed errors for every way a member can be wrong.
//!
//! The reference compresses payloads with Go's `compress/gzip`. We write the member's header
//! and trailer ourselves (so the CRC-32 and ISIZE checks, truncation, trailing bytes and extra
//! members each have their own [`GzipError`]) and run deflate through [`Backend`].

use crate::config::Backend;
use crate::deflate::{Deflater, Inflater, Step};
pub use crate::error::GzipError;

/// Bytes of a gzip member around the deflate data: a 10-byte header and an 8-byte trailer.
pub const GZIP_OVERHEAD: usize = 18;

/// Compresses payloads into single gzip members, reusing one deflate state.
pub struct GzipEncoder {
    deflater: Deflater,
    xfl: u8,
}

impl GzipEncoder {
    /// A compressor for `backend` at `level` (0-9; above 9 is 9).
    pub fn new(backend: Backend, level: u32) -> Self {
        Self {
            deflater: Deflater::new(backend, level),
            // RFC 1952 XFL, as Go writes it: 2 = best compression, 4 = fastest.
            xfl: match level {
                9.. => 2,
                1 => 4,
                _ => 0,
            },
        }
    }

    /// Appends one gzip member holding `input` to `out` if the member takes at most
    /// `max_len` bytes, and returns whether it did (on `false`, `out` is unchanged).
    ///
    /// With `max_len = input.len() - 1` this is "compress only if smaller", and it gives up
    /// as soon as the output would not be smaller.
    pub fn compress_within(&mut self, input: &[u8], out: &mut Vec<u8>, max_len: usize) -> bool {
        if max_len <= GZIP_OVERHEAD {
            return false;
        }
        let start = out.len();
        out.resize(start + max_len, 0);
        let header = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, self.xfl, 0xff];
        out[start..start + 10].copy_from_slice(&header);
        let body_end = start + max_len - 8;
        let Some(n) = self
            .deflater
            .finish_into(input, &mut out[start + 10..body_end])
        else {
            out.truncate(start);
            return false;
        };
        let mut crc = crc32fast::Hasher::new();
        crc.update(input);
        let end = start + 10 + n;
        out[end..end + 4].copy_from_slice(&crc.finalize().to_le_bytes());
        out[end + 4..end + 8].copy_from_slice(&(input.len() as u32).to_le_bytes());
        out.truncate(end + 8);
        true
    }

    /// Appends one gzip member holding `input` to `out`, however large.
    pub fn compress(&mut self, input: &[u8], out: &mut Vec<u8>) {
        // Level-1 fixed-Huffman output can grow incompressible data by 1/8 (9-bit literals);
        // start there and double in the (never observed) case it is still too small.
        let mut bound = input.len() + input.len() / 8 + 128 + GZIP_OVERHEAD;
        while !self.compress_within(input, out, bound) {
            bound = bound.saturating_mul(2);
        }
    }
}

/// Inflates single gzip members with a hard cap on output, reusing one inflate state.
pub struct GzipDecoder {
    inflater: Inflater,
    /// Gzip bytes inflated so far, and what they inflated to.
    totals: (u64, u64),
}

impl GzipDecoder {
    /// A decompressor for `backend`.
    pub fn new(backend: Backend) -> Self {
        Self {
            inflater: Inflater::new(backend),
            totals: (0, 0),
        }
    }

    /// Gzip bytes inflated by this decoder so far (members that decoded), and the bytes
    /// they inflated to: the incoming side of a compression ratio.
    pub fn totals(&self) -> (u64, u64) {
        self.totals
    }

    /// Inflates the one gzip member that is `input` and appends its data to `out`.
    ///
    /// At most `cap` bytes are accepted: inflating stops as soon as `cap + 1` bytes came out,
    /// and `out` is only ever grown to that size, so a bomb costs at most the cap. On error
    /// `out` is restored to its length before the call.
    pub fn decompress(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        cap: usize,
    ) -> Result<(), GzipError> {
        let start = out.len();
        let r = self.decompress_inner(input, out, start, cap);
        if r.is_err() {
            out.truncate(start);
        } else {
            self.totals.0 = self.totals.0.saturating_add(input.len() as u64);
            self.totals.1 = self.totals.1.saturating_add((out.len() - start) as u64);
        }
        r
    }

    fn decompress_inner(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        start: usize,
        cap: usize,
    ) -> Result<(), GzipError> {
        let mut pos = parse_header(input)?;
        self.inflater.reset();
        let hard = cap.saturating_add(1);
        // First guess: 4x the input (JSON compresses 4-10x), then doubling, never past cap + 1.
        let mut budget = input.len().saturating_mul(4).clamp(4096, 1 << 20).min(hard);
        if let Some(size) = size_hint(input, pos, hard) {
            // The trailer's ISIZE says how much comes out: inflate in one call into exactly
            // that much room. A lying ISIZE only sizes the buffer (never past cap + 1, nor
            // past what deflate can expand the input to); the checks below still decide.
            let limit = start + size;
            reserve_up_to(out, limit);
            let (consumed, step) = self.inflater.step(&input[pos..], out, limit, true);
            match step {
                Step::End => return check_trailer(input, pos + consumed, &out[start..], cap),
                Step::Corrupt => return Err(GzipError::Corrupt),
                _ if out.len() < limit => return Err(GzipError::Truncated),
                _ if size >= hard => return Err(GzipError::TooLarge { cap }),
                _ => {
                    // More than ISIZE says: stream it again from the start to find out how
                    // much more (the trailer check will then report the mismatch).
                    out.truncate(start);
                    self.inflater.reset();
                    budget = size.saturating_mul(2).min(hard);
                }
            }
        }
        loop {
            let produced = out.len() - start;
            if produced == budget {
                if produced >= hard {
                    return Err(GzipError::TooLarge { cap });
                }
                budget = budget.saturating_mul(2).min(hard);
            }
            let limit = start + budget;
            reserve_up_to(out, limit);
            let (consumed, step) = self.inflater.step(&input[pos..], out, limit, false);
            pos += consumed;
            match step {
                Step::End => break,
                Step::More => {}
                Step::Starved => return Err(GzipError::Truncated),
                Step::Corrupt => return Err(GzipError::Corrupt),
            }
        }
        check_trailer(input, pos, &out[start..], cap)
    }
}

/// Makes room in `out` for `limit` bytes in all, exactly (the caller decides every
/// allocation, so a bomb grows `out` no further than the cap + 1).
fn reserve_up_to(out: &mut Vec<u8>, limit: usize) {
    if out.capacity() < limit {
        out.reserve_exact(limit - out.len());
    }
}

/// Where the deflate data of a member whose header is `input[..pos]` ends if the trailer's
/// ISIZE is true, as the output size to allocate: `None` when ISIZE is 0 or the input is too
/// short to hold a trailer, else ISIZE clamped to `hard` and to deflate's maximum expansion
/// (1032:1) of the input.
fn size_hint(input: &[u8], pos: usize, hard: usize) -> Option<usize> {
    let body = input.len().checked_sub(pos + 8)?;
    let isize = input
        .last_chunk::<4>()
        .map(|b| u32::from_le_bytes(*b) as usize)?;
    let most = body.saturating_mul(1032).saturating_add(1024);
    (isize > 0).then(|| isize.min(most).min(hard))
}

/// Checks the trailer at `input[pos..]` against the inflated `data` and that nothing follows.
fn check_trailer(input: &[u8], pos: usize, data: &[u8], cap: usize) -> Result<(), GzipError> {
    if data.len() > cap {
        return Err(GzipError::TooLarge { cap });
    }
    let Some(trailer) = input[pos..].first_chunk::<8>() else {
        return Err(GzipError::Truncated);
    };
    let expected_crc = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
    let expected_len = u32::from_le_bytes([trailer[4], trailer[5], trailer[6], trailer[7]]);
    let mut crc = crc32fast::Hasher::new();
    crc.update(data);
    let actual_crc = crc.finalize();
    if actual_crc != expected_crc {
        return Err(GzipError::Crc {
            expected: expected_crc,
            actual: actual_crc,
        });
    }
    let actual_len = data.len() as u32;
    if actual_len != expected_len {
        return Err(GzipError::Isize {
            expected: expected_len,
            actual: actual_len,
        });
    }
    let rest = &input[pos + 8..];
    match rest {
        [] => Ok(()),
        [0x1f, 0x8b, ..] => Err(GzipError::MultiMember),
        _ => Err(GzipError::TrailingGarbage(rest.len())),
    }
}

/// Checks a gzip member header and returns its length.
fn parse_header(input: &[u8]) -> Result<usize, GzipError> {
    const FHCRC: u8 = 1 << 1;
    const FEXTRA: u8 = 1 << 2;
    const FNAME: u8 = 1 << 3;
    const FCOMMENT: u8 = 1 << 4;
    let Some(fixed) = input.first_chunk::<10>() else {
        return Err(if input.len() >= 2 && input[..2] != [0x1f, 0x8b] {
            GzipError::BadHeader("magic")
        } else {
            GzipError::Truncated
        });
    };
    if fixed[..2] != [0x1f, 0x8b] {
        return Err(GzipError::BadHeader("magic"));
    }
    if fixed[2] != 8 {
        return Err(GzipError::BadHeader("compression method"));
    }
    let flags = fixed[3];
    if flags & 0xe0 != 0 {
        return Err(GzipError::BadHeader("reserved flags"));
    }
    let mut pos = 10;
    if flags & FEXTRA != 0 {
        let xlen = input
            .get(pos..pos + 2)
            .ok_or(GzipError::Truncated)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)?;
        pos += 2 + xlen;
    }
    for flag in [FNAME, FCOMMENT] {
        if flags & flag != 0 {
            let nul = input
                .get(pos..)
                .and_then(|rest| rest.iter().position(|&b| b == 0))
                .ok_or(GzipError::Truncated)?;
            pos += nul + 1;
        }
    }
    if flags & FHCRC != 0 {
        let stored = input.get(pos..pos + 2).ok_or(GzipError::Truncated)?;
        let stored = u16::from_le_bytes([stored[0], stored[1]]);
        let mut crc = crc32fast::Hasher::new();
        crc.update(&input[..pos]);
        if crc.finalize() as u16 != stored {
            return Err(GzipError::HeaderCrc);
        }
        pos += 2;
    }
    if pos > input.len() {
        return Err(GzipError::Truncated);
    }
    Ok(pos)
}

/// Shannon entropy of `sample` in bits per byte (0 for an empty sample, at most 8).
///
/// The spec's `ShouldCompress` skips payloads whose first 1 KiB scores 6.5 or more.
pub fn entropy_bits_per_byte(sample: &[u8]) -> f64 {
    if sample.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for &b in sample {
        counts[b as usize] += 1;
    }
    let n = sample.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backends() -> Vec<Backend> {
        vec![
            Backend::MinizOxide,
            #[cfg(feature = "zlib-rs")]
            Backend::ZlibRs,
        ]
    }

    #[test]
    fn round_trip_every_backend_and_level_reusing_state() {
        for backend in backends() {
            let mut enc = GzipEncoder::new(backend, 1);
            let mut dec = GzipDecoder::new(backend);
            for level in [0, 1, 6, 9] {
                enc = if level == 1 {
                    enc
                } else {
                    GzipEncoder::new(backend, level)
                };
                for len in [0usize, 1, 100, 5000, 200_000] {
                    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8 ^ (i / 7) as u8).collect();
                    let mut z = Vec::new();
                    enc.compress(&data, &mut z);
                    let mut back = vec![9, 9];
                    dec.decompress(&z, &mut back, len).unwrap();
                    assert_eq!(&back[2..], &data[..], "{backend:?} level {level} len {len}");
                }
            }
        }
    }

    #[test]
    fn compress_within_refuses_when_not_smaller() {
        let mut enc = GzipEncoder::new(Backend::default(), 1);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let mut out = vec![1, 2, 3];
        assert!(!enc.compress_within(&noise, &mut out, noise.len() - 1));
        assert_eq!(out, [1, 2, 3]);
        let zeros = vec![0u8; 4096];
        assert!(enc.compress_within(&zeros, &mut out, zeros.len() - 1));
        assert!(out.len() < 3 + 100);
    }

    #[test]
    fn entropy_matches_known_values() {
        assert_eq!(entropy_bits_per_byte(&[]), 0.0);
        assert_eq!(entropy_bits_per_byte(&[7; 100]), 0.0);
        let all: Vec<u8> = (0..=255).collect();
        assert!((entropy_bits_per_byte(&all) - 8.0).abs() < 1e-9);
        assert!((entropy_bits_per_byte(b"abababab") - 1.0).abs() < 1e-9);
    }

    #[test]
    fn header_flags_are_parsed() {
        // FEXTRA + FNAME + FCOMMENT + FHCRC around an empty stored deflate block.
        let mut h = vec![0x1f, 0x8b, 8, 0b11110, 0, 0, 0, 0, 0, 3, 2, 0, b'x', b'y'];
        h.extend_from_slice(b"name\0comment\0");
        let mut crc = crc32fast::Hasher::new();
        crc.update(&h);
        let c = crc.finalize() as u16;
        h.extend_from_slice(&c.to_le_bytes());
        h.extend_from_slice(&[3, 0]); // final fixed-Huffman block, end of block
        h.extend_from_slice(&[0; 8]); // crc 0, isize 0
        for backend in backends() {
            let mut out = Vec::new();
            GzipDecoder::new(backend)
                .decompress(&h, &mut out, 10)
                .unwrap();
            assert!(out.is_empty());
        }
        let mut bad = h.clone();
        bad[12] = b'z';
        assert_eq!(
            GzipDecoder::new(Backend::default()).decompress(&bad, &mut Vec::new(), 10),
            Err(GzipError::HeaderCrc)
        );
    }

    /// The one-call path trusts the trailer's ISIZE only to size the output: an understated,
    /// overstated, zero or absurd ISIZE gives the same typed error (or data) as streaming, on
    /// both backends, whatever the output vector already holds or can hold.
    #[test]
    fn isize_only_sizes_the_output() {
        let data: Vec<u8> = (0..70_000u32)
            .map(|i| (i % 97) as u8 ^ (i / 13) as u8)
            .collect();
        let mut enc = GzipEncoder::new(Backend::default(), 1);
        let mut z = Vec::new();
        enc.compress(&data, &mut z);
        let n = z.len();
        let with_isize = |v: u32| {
            let mut z = z.clone();
            z[n - 4..].copy_from_slice(&v.to_le_bytes());
            z
        };
        let len = data.len() as u32;
        for backend in backends() {
            let mut dec = GzipDecoder::new(backend);
            for prefix in [Vec::new(), vec![7u8; 3], Vec::with_capacity(1 << 20)] {
                let mut out = prefix.clone();
                dec.decompress(&z, &mut out, 1 << 20).unwrap();
                assert_eq!(&out[prefix.len()..], &data[..], "{backend:?}");
                for lie in [len - 1, 1, len + 1, 0, u32::MAX] {
                    let mut out = prefix.clone();
                    assert_eq!(
                        dec.decompress(&with_isize(lie), &mut out, 1 << 20),
                        Err(GzipError::Isize {
                            expected: lie,
                            actual: len
                        }),
                        "{backend:?} isize {lie}"
                    );
                    assert_eq!(out, prefix);
                }
                // Under the cap by ISIZE, over it in fact: still refused at cap + 1.
                let mut out = prefix.clone();
                assert_eq!(
                    dec.decompress(&with_isize(100), &mut out, 50_000),
                    Err(GzipError::TooLarge { cap: 50_000 })
                );
                // Truncated inside the deflate data, with whatever ISIZE the cut leaves.
                let mut out = prefix.clone();
                assert_eq!(
                    dec.decompress(&z[..n / 2], &mut out, 1 << 20),
                    Err(GzipError::Truncated),
                    "{backend:?}"
                );
                // The state is reusable after every failure.
                let mut out = Vec::new();
                dec.decompress(&z, &mut out, 1 << 20).unwrap();
                assert_eq!(out, data);
            }
        }
    }
}

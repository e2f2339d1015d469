//! gzip bombs: a member inflating to 10 MiB + 1 byte of zeros and one inflating to 1 GiB are
//! both refused at the cap + 1, with the heap growing by at most the cap + 64 KiB.
//!
//! This file is its own test binary with a counting global allocator (`stats_alloc`; the
//! workspace forbids `unsafe_code`, so we cannot write one), and holds one `#[test]` so no
//! other test allocates while it measures. "Live heap growth" is bytes allocated minus bytes
//! freed during the decode, with `realloc` counted by its size change; the peak is bounded
//! by the bytes allocated, which is what is asserted. How fast a bomb is refused is a
//! benchmark, not a test: `mcpw/gzip_bomb/refuse` in `benches/mcpw.rs` (the crate README
//! has the figure).

use std::alloc::System;

use miniz_oxide::deflate::core::{create_comp_flags_from_zip_params, CompressorOxide};
use miniz_oxide::MZFlush;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

use mcpw_codec::gzip::{GzipDecoder, GzipEncoder, GzipError};
use mcpw_codec::{Backend, Codec, CodecConfig, DecodeError, Flags, Header, MessageType, Method};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const CAP: usize = 10 << 20;
const SLACK: usize = 64 << 10;

/// A gzip member of `mib` MiB of zeros, built from one sync-flushed deflate chunk of 1 MiB
/// repeated (each chunk only refers back one byte, so it is valid after any zeros), then a
/// final empty block and a correct trailer.
fn zeros_member(mib: usize) -> Vec<u8> {
    let mut c = CompressorOxide::new(create_comp_flags_from_zip_params(9, -15, 0));
    let zeros = vec![0u8; 1 << 20];
    let mut chunk = vec![0u8; 64 << 10];
    let r = miniz_oxide::deflate::stream::deflate(&mut c, &zeros, &mut chunk, MZFlush::Sync);
    assert_eq!(r.bytes_consumed, zeros.len());
    chunk.truncate(r.bytes_written);
    let mut crc = crc32fast::Hasher::new();
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 0xff];
    for _ in 0..mib {
        out.extend_from_slice(&chunk);
        crc.update(&zeros);
    }
    out.extend_from_slice(&[0x03, 0x00]); // final fixed-Huffman block holding only end-of-block
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(&((mib << 20) as u32).to_le_bytes());
    out
}

fn backends() -> Vec<Backend> {
    vec![
        Backend::MinizOxide,
        #[cfg(feature = "zlib-rs")]
        Backend::ZlibRs,
    ]
}

/// Runs `f` and returns (its result, bytes allocated, net live growth).
fn measured<T>(f: impl FnOnce() -> T) -> (T, usize, isize) {
    let region = Region::new(GLOBAL);
    let out = f();
    let change = region.change();
    let live = change.bytes_allocated as isize - change.bytes_deallocated as isize;
    (out, change.bytes_allocated, live)
}

#[test]
fn gzip_bombs_are_refused_at_the_cap_without_allocating_past_it() {
    // 10 MiB + 1 byte of zeros, as a real frame (level 9: about 10 KB on the wire).
    let mut plus_one = Vec::new();
    GzipEncoder::new(Backend::MinizOxide, 9).compress(&vec![0u8; CAP + 1], &mut plus_one);
    let one_gib = zeros_member(1024);
    eprintln!(
        "members: 10 MiB + 1 -> {} bytes, 1 GiB -> {} bytes",
        plus_one.len(),
        one_gib.len()
    );
    for backend in backends() {
        // Through the frame API, on a fresh codec (its inflate window is counted too).
        let mut config = CodecConfig::default();
        config.compression.backend = backend;
        let mut codec = Codec::new(config);
        let mut h = Header::new(MessageType::REQUEST, 1, Method::TOOL_EXECUTE);
        h.flags = Flags::COMPRESSED;
        h.size = plus_one.len() as u32;
        let mut frame = h.to_bytes().to_vec();
        frame.extend_from_slice(&plus_one);
        let (r, allocated, live) = measured(|| codec.decode(&frame).map(drop));
        eprintln!(
            "{backend:?} frame 10 MiB + 1: {:?}, allocated {allocated} B (cap + {} B), live {live} B",
            r.as_ref().err(),
            allocated as isize - CAP as isize
        );
        assert!(matches!(
            r,
            Err(DecodeError::Gzip(GzipError::TooLarge { cap: CAP }))
        ));
        assert!(allocated <= CAP + SLACK, "{allocated} bytes allocated");

        // The 1 GiB member (about 1 MB: over the 1 MiB frame limit, so inflated directly).
        let mut dec = GzipDecoder::new(backend);
        let mut out = Vec::new();
        let (r, allocated, live) = measured(|| dec.decompress(&one_gib, &mut out, CAP));
        eprintln!(
            "{backend:?} member 1 GiB: {r:?}, allocated {allocated} B (cap + {} B), live {live} B",
            allocated as isize - CAP as isize
        );
        assert_eq!(r, Err(GzipError::TooLarge { cap: CAP }));
        assert!(out.is_empty());
        assert!(allocated <= CAP + SLACK, "{allocated} bytes allocated");

        // Exactly the cap is accepted, and the member built above is a valid one.
        let exact = zeros_member(10);
        let mut out = Vec::new();
        dec.decompress(&exact, &mut out, CAP).unwrap();
        assert_eq!(out.len(), CAP);
        assert!(out.iter().all(|&b| b == 0));
    }
}

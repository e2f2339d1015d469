//! Replays every committed seed under `fuzz/seeds/mcpw_*/` through the matching
//! `mcpw_codec::fuzzing` function, so stable CI covers fuzz regressions without nightly or
//! cargo-fuzz. The seeds are written by `tests/make_fuzz_seeds.py`.

use std::fs;
use std::path::{Path, PathBuf};

use mcpw_codec::fuzzing;

fn seeds_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/seeds")
        .join(target)
}

/// Runs `f` on every file of the target's seed directory; returns how many ran.
fn replay(target: &str, f: fn(&[u8])) -> usize {
    let dir = seeds_dir(target);
    let mut paths: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    for path in &paths {
        let data = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let name = path.display().to_string();
        if let Err(panic) = std::panic::catch_unwind(|| f(&data)) {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            panic!("seed {name} failed: {msg}");
        }
    }
    paths.len()
}

#[test]
fn header_seeds() {
    assert!(replay("mcpw_header", fuzzing::header) >= 11);
}

#[test]
fn frame_seeds() {
    assert!(replay("mcpw_frame", fuzzing::frame) >= 61);
}

#[test]
fn stream_seeds() {
    assert!(replay("mcpw_stream", fuzzing::stream) >= 7);
}

/// A fuzz target: its name and its body.
type Target = (&'static str, fn(&[u8]));

/// A cheap stable stand-in for the fuzzer: deterministic pseudo-random inputs through every
/// target, half of them starting with a valid header so the payload paths run too.
#[test]
fn pseudo_random_inputs() {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let targets: [Target; 3] = [
        ("header", fuzzing::header),
        ("frame", fuzzing::frame),
        ("stream", fuzzing::stream),
    ];
    for round in 0..300 {
        let len = (next() % 2048) as usize;
        let mut data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if round % 2 == 1 && data.len() > 25 {
            // mode byte, then a header whose size matches the rest
            let size = (data.len() - 25) as u32;
            data[1..6].copy_from_slice(b"MCPW\x01");
            data[19..21].copy_from_slice(&[0, 0]);
            data[21..25].copy_from_slice(&size.to_be_bytes());
            data[0] &= !1;
        }
        for (name, f) in targets {
            if std::panic::catch_unwind(|| f(&data)).is_err() {
                panic!("{name} failed on round {round}: {data:02x?}");
            }
        }
    }
}

//! Replays every committed seed under `fuzz/seeds/relay_*/` through the matching
//! `agent_relay_proto::fuzzing` function, so stable CI covers fuzz regressions without
//! nightly or cargo-fuzz.

use std::fs;
use std::path::{Path, PathBuf};

use agent_relay_proto::fuzzing;

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
fn envelope_seeds() {
    assert!(replay("relay_envelope", fuzzing::envelope) >= 46);
}

#[test]
fn relay_seeds() {
    assert!(replay("relay_machine", fuzzing::relay) >= 16);
}

/// A fuzz target: its name and its body.
type Target = (&'static str, fn(&[u8]));

/// A cheap stable stand-in for the fuzzer: deterministic pseudo-random inputs through
/// every target, so a broken invariant shows up in `cargo test` too.
#[test]
fn pseudo_random_inputs() {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let targets: [Target; 2] = [("envelope", fuzzing::envelope), ("relay", fuzzing::relay)];
    for round in 0..300 {
        let len = (next() % 4096) as usize;
        let data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        for (name, f) in targets {
            if std::panic::catch_unwind(|| f(&data)).is_err() {
                panic!("{name} failed on round {round}: {data:02x?}");
            }
        }
    }
}

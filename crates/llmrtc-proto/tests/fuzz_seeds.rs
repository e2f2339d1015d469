//! Replays every committed seed under `fuzz/seeds/llmrtc_*/` through the matching
//! `llmrtc_proto::fuzzing` function, so stable CI covers fuzz regressions without nightly or
//! cargo-fuzz.

use std::fs;
use std::path::{Path, PathBuf};

use llmrtc_proto::fuzzing;

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
fn decode_seeds() {
    assert!(replay("llmrtc_decode", fuzzing::decode) >= 30);
}

#[test]
fn wav_seeds() {
    assert!(replay("llmrtc_wav", fuzzing::wav) >= 8);
}

#[test]
fn server_seeds() {
    assert!(replay("llmrtc_server", fuzzing::server) >= 8);
}

/// A fuzz target: its name and its body.
type Target = (&'static str, fn(&[u8]));

/// A cheap stable stand-in for the fuzzer: deterministic pseudo-random inputs through every
/// target, so a broken invariant shows up in `cargo test` too.
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
        ("decode", fuzzing::decode),
        ("wav", fuzzing::wav),
        ("server", fuzzing::server),
    ];
    for round in 0..300 {
        let len = (next() % 2048) as usize;
        let data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        for (name, f) in targets {
            if std::panic::catch_unwind(|| f(&data)).is_err() {
                panic!("{name} failed on round {round}: {data:02x?}");
            }
        }
    }
}

/// Writes server seeds: from many pseudo-random inputs, the ones that reach the most distinct
/// outputs. Run by hand (`cargo test -p llmrtc-proto --test fuzz_seeds -- --ignored`) after
/// changing the fuzz body; the seeds are committed.
#[test]
#[ignore]
fn generate_server_seeds() {
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut seen = std::collections::BTreeSet::new();
    let mut kept = 0;
    let dir = seeds_dir("llmrtc_server");
    fs::create_dir_all(&dir).expect("dir");
    for round in 0..20_000 {
        let len = 16 + (next() % 600) as usize;
        // Small bytes steer the op choices toward the interesting range.
        let data: Vec<u8> = (0..len).map(|_| (next() % 40) as u8).collect();
        let reached = fuzzing::server_outputs(&data);
        let new: Vec<_> = reached.difference(&seen).cloned().collect();
        if !new.is_empty() {
            seen.extend(new);
            fs::write(dir.join(format!("gen_{round:05}.bin")), &data).expect("write");
            kept += 1;
        }
    }
    eprintln!("kept {kept} seeds reaching {seen:?}");
}

//! Fuzz seed replay and pseudo-random inputs for stable `cargo test`.
//!
//! Every protocol crate's `tests/fuzz_seeds.rs` runs each committed seed under
//! `fuzz/seeds/<target>/` through the matching fuzz body, and a few hundred deterministic
//! pseudo-random inputs through every body, so fuzz regressions and broken invariants show up
//! without nightly Rust or cargo-fuzz.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use crate::XorShift64;

/// A fuzz target: its name and its body.
pub type Target = (&'static str, fn(&[u8]));

/// The committed seed directory of `target`: `fuzz/seeds/<target>` in the workspace.
pub fn seeds_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/seeds")
        .join(target)
}

/// The text of a caught panic's payload (empty if it is neither `String` nor `&str`).
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

/// Runs `f` on every file of `target`'s seed directory, in name order; returns how many ran.
///
/// # Panics
///
/// If the directory cannot be read, or `f` panics on a seed (the message names the seed).
pub fn replay(target: &str, f: fn(&[u8])) -> usize {
    let dir = seeds_dir(target);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    for path in &paths {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if let Err(panic) = catch_unwind(|| f(&data)) {
            panic!("seed {} failed: {}", path.display(), panic_text(&*panic));
        }
    }
    paths.len()
}

/// Runs `rounds` pseudo-random inputs through every target: per round, a length below
/// `max_len` and that many bytes from one [`XorShift64`] at its default seed, then `shape`
/// (the round number, the input) may rewrite the input (say, to put a valid header in front
/// so that a body's deeper paths run).
///
/// # Panics
///
/// If a target panics; the message names the target and the round and shows the input.
pub fn pseudo_random_inputs(
    targets: &[Target],
    rounds: usize,
    max_len: u64,
    mut shape: impl FnMut(usize, &mut Vec<u8>),
) {
    let mut rng = XorShift64::default();
    for round in 0..rounds {
        let len = rng.below(max_len) as usize;
        let mut data = rng.bytes(len);
        shape(round, &mut data);
        for &(name, f) in targets {
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| f(&data))) {
                panic!(
                    "{name} failed on round {round}: {}: {data:02x?}",
                    panic_text(&*panic)
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never_panics(_: &[u8]) {}

    fn panics_on_long_input(data: &[u8]) {
        assert!(data.len() < 100, "long input");
    }

    #[test]
    fn replays_a_committed_seed_directory() {
        assert!(seeds_dir("bus_decode").is_dir());
        assert!(replay("bus_decode", never_panics) > 0);
    }

    #[test]
    #[should_panic(expected = "fuzz/seeds/no_such_target")]
    fn a_missing_seed_directory_fails() {
        replay("no_such_target", never_panics);
    }

    #[test]
    #[should_panic(expected = "long failed on round 0: long input")]
    fn a_panicking_target_names_itself_and_the_round() {
        pseudo_random_inputs(&[("long", panics_on_long_input)], 1, 2, |_, data| {
            data.resize(200, 0);
        });
    }

    #[test]
    fn inputs_are_the_generator_sequence_then_shaped() {
        fn record(data: &[u8]) {
            SEEN.with(|s| s.borrow_mut().push(data.to_vec()));
        }
        thread_local! {
            static SEEN: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        pseudo_random_inputs(&[("record", record)], 3, 64, |round, data| {
            if round == 2 {
                data.insert(0, 0xAA);
            }
        });
        let seen = SEEN.with(|s| s.take());
        let mut rng = XorShift64::default();
        let mut expected = Vec::new();
        for _ in 0..3 {
            let len = (rng.next_u64() % 64) as usize;
            expected.push((0..len).map(|_| rng.next_u64() as u8).collect::<Vec<u8>>());
        }
        expected[2].insert(0, 0xAA);
        assert_eq!(seen, expected);
    }
}

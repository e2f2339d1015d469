//! Replays every committed seed under `fuzz/seeds/llmrtc_*/` through the matching
//! `llmrtc_proto::fuzzing` function, so stable CI covers fuzz regressions without nightly or
//! cargo-fuzz.

use agentwire_testkit::seeds::{pseudo_random_inputs, replay, seeds_dir};
use agentwire_testkit::XorShift64;
use llmrtc_proto::fuzzing;

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

#[test]
fn client_seeds() {
    assert!(replay("llmrtc_client", fuzzing::client) >= 8);
}

/// A cheap stable stand-in for the fuzzer: deterministic pseudo-random inputs through every
/// target, so a broken invariant shows up in `cargo test` too.
#[test]
fn pseudo_random_inputs_pass_every_target() {
    let targets = [
        ("decode", fuzzing::decode as fn(&[u8])),
        ("wav", fuzzing::wav),
        ("server", fuzzing::server),
        ("client", fuzzing::client),
    ];
    pseudo_random_inputs(&targets, 300, 2048, |_, _| {});
}

/// Writes server seeds: from many pseudo-random inputs, the ones that reach the most distinct
/// outputs. Run by hand (`cargo test -p llmrtc-proto --test fuzz_seeds -- --ignored`) after
/// changing the fuzz body; the seeds are committed.
#[test]
#[ignore]
fn generate_server_seeds() {
    let mut rng = XorShift64::new(0x2545_f491_4f6c_dd1d);
    let mut seen = std::collections::BTreeSet::new();
    let mut kept = 0;
    let dir = seeds_dir("llmrtc_server");
    std::fs::create_dir_all(&dir).expect("dir");
    for round in 0..20_000 {
        let len = 16 + rng.below(600) as usize;
        // Small bytes steer the op choices toward the interesting range.
        let data: Vec<u8> = (0..len).map(|_| rng.below(40) as u8).collect();
        let reached = fuzzing::server_outputs(&data);
        let new: Vec<_> = reached.difference(&seen).cloned().collect();
        if !new.is_empty() {
            seen.extend(new);
            std::fs::write(dir.join(format!("gen_{round:05}.bin")), &data).expect("write");
            kept += 1;
        }
    }
    eprintln!("kept {kept} seeds reaching {seen:?}");
}

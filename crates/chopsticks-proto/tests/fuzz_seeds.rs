//! Replays every committed fuzz seed (`fuzz/seeds/<target>/*`) through the matching
//! `chopsticks_proto::fuzzing` function, so stable CI covers fuzz regressions without
//! nightly or cargo-fuzz.

use agentwire_testkit::seeds::{pseudo_random_inputs, replay};
use chopsticks_proto::fuzzing;

#[test]
fn decode_agent_seeds() {
    assert!(replay("chopsticks_decode_agent", fuzzing::decode_agent) >= 15);
}

#[test]
fn decode_controller_seeds() {
    assert!(replay("chopsticks_decode_controller", fuzzing::decode_controller) >= 8);
}

#[test]
fn controller_seeds() {
    assert!(replay("chopsticks_controller", fuzzing::controller) >= 9);
}

#[test]
fn agent_seeds() {
    assert!(replay("chopsticks_agent", fuzzing::agent) >= 9);
}

/// A cheap stable stand-in for the fuzzer: deterministic pseudo-random inputs through
/// every target, so a broken invariant shows up in `cargo test` too.
#[test]
fn pseudo_random_inputs_pass_every_target() {
    let targets = [
        ("decode_agent", fuzzing::decode_agent as fn(&[u8])),
        ("decode_controller", fuzzing::decode_controller),
        ("controller", fuzzing::controller),
        ("agent", fuzzing::agent),
    ];
    pseudo_random_inputs(&targets, 300, 4096, |_, _| {});
}

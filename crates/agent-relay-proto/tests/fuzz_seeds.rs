//! Replays every committed seed under `fuzz/seeds/relay_*/` through the matching
//! `agent_relay_proto::fuzzing` function, so stable CI covers fuzz regressions without
//! nightly or cargo-fuzz.

use agent_relay_proto::fuzzing;
use agentwire_testkit::seeds::{pseudo_random_inputs, replay};

#[test]
fn envelope_seeds() {
    assert!(replay("relay_envelope", fuzzing::envelope) >= 46);
}

#[test]
fn relay_seeds() {
    assert!(replay("relay_machine", fuzzing::relay) >= 16);
}

#[test]
fn host_seeds() {
    assert!(replay("relay_host", fuzzing::host) >= 13);
}

/// A cheap stable stand-in for the fuzzer: deterministic pseudo-random inputs through
/// every target, so a broken invariant shows up in `cargo test` too.
#[test]
fn pseudo_random_inputs_pass_every_target() {
    let targets = [
        ("envelope", fuzzing::envelope as fn(&[u8])),
        ("relay", fuzzing::relay),
        ("host", fuzzing::host),
    ];
    pseudo_random_inputs(&targets, 300, 4096, |_, _| {});
}

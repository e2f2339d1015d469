//! Replays every committed seed under `fuzz/seeds/bus_*/` through the matching
//! `jsonrpc_bus_proto::fuzzing` function, so stable CI covers fuzz regressions without
//! nightly or cargo-fuzz.

use agentwire_testkit::seeds::{pseudo_random_inputs, replay};
use jsonrpc_bus_proto::fuzzing;

#[test]
fn decode_seeds() {
    assert!(replay("bus_decode", fuzzing::decode) >= 50);
}

#[test]
fn bus_seeds() {
    assert!(replay("bus_machine", fuzzing::bus) >= 19);
}

#[test]
fn client_seeds() {
    assert!(replay("bus_client_machine", fuzzing::client) >= 19);
}

/// A cheap stable stand-in for the fuzzer: deterministic pseudo-random inputs through
/// every target, so a broken invariant shows up in `cargo test` too.
#[test]
fn pseudo_random_inputs_pass_every_target() {
    let targets = [
        ("decode", fuzzing::decode as fn(&[u8])),
        ("bus", fuzzing::bus),
        ("client", fuzzing::client),
    ];
    pseudo_random_inputs(&targets, 300, 4096, |_, _| {});
}

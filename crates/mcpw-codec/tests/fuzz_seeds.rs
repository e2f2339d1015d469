//! Replays every committed seed under `fuzz/seeds/mcpw_*/` through the matching
//! `mcpw_codec::fuzzing` function, so stable CI covers fuzz regressions without nightly or
//! cargo-fuzz. The seeds are written by `tests/make_fuzz_seeds.py`.

use agentwire_testkit::seeds::{pseudo_random_inputs, replay};
use mcpw_codec::fuzzing;

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

#[test]
fn orchestrator_seeds() {
    assert!(replay("mcpw_orchestrator", fuzzing::orchestrator) >= 26);
}

#[test]
fn agent_seeds() {
    assert!(replay("mcpw_agent", fuzzing::agent) >= 18);
}

/// A cheap stable stand-in for the fuzzer: deterministic pseudo-random inputs through every
/// target, half of them starting with a valid header so the payload paths run too.
#[test]
fn pseudo_random_inputs_pass_every_target() {
    let targets = [
        ("header", fuzzing::header as fn(&[u8])),
        ("frame", fuzzing::frame),
        ("stream", fuzzing::stream),
        ("orchestrator", fuzzing::orchestrator),
        ("agent", fuzzing::agent),
    ];
    pseudo_random_inputs(&targets, 300, 2048, |round, data| {
        if round % 2 == 1 && data.len() > 25 {
            // mode byte, then a header whose size matches the rest
            let size = (data.len() - 25) as u32;
            data[1..6].copy_from_slice(b"MCPW\x01");
            data[19..21].copy_from_slice(&[0, 0]);
            data[21..25].copy_from_slice(&size.to_be_bytes());
            data[0] &= !1;
        }
    });
}

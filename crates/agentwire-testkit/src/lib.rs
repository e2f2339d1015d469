//! What the agentwire crates' tests, fuzz bodies and benches share (`publish = false`).
//!
//! | item | what it is |
//! |---|---|
//! | [`seeds::replay`], [`seeds::pseudo_random_inputs`] | the stable stand-in for cargo-fuzz in every crate's `tests/fuzz_seeds.rs`: committed seeds and deterministic pseudo-random inputs through each fuzz body |
//! | [`XorShift64`] | the deterministic generator behind those inputs (and seed generators) |
//! | [`bench::paired`], [`bench::median`], [`bench::median_ns`], [`bench::family_filter`] | interleaved paired timing and criterion helpers for `benches/*.rs` |
//! | [`timer::timer_inputs`], [`timer::TimerMix`], [`timer::t0`] | inputs and the base time of the timer-contract property tests |
//! | [`props::json_tree`], [`props::json_leaf`] | proptest generators of JSON values for the property tests |
//! | [`FuzzClock`] | the fuzz driver clock, re-exported from `agentwire-core` |
//!
//! The crate is not published: it exists for the workspace's own tests and benches, which
//! are not part of any published crate. Anything a published crate needs at run time (the
//! fuzz clock its `fuzzing` module uses) lives in `agentwire-core` instead, behind the
//! `fuzzing` feature, and is only re-exported here.
//!
//! ```no_run
//! // tests/fuzz_seeds.rs of a protocol crate
//! use agentwire_testkit::seeds::{pseudo_random_inputs, replay};
//!
//! fn decode(_data: &[u8]) {} // the crate's `fuzzing::decode`
//!
//! assert!(replay("bus_decode", decode) >= 50);
//! pseudo_random_inputs(&[("decode", decode)], 300, 4096, |_, _| {});
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod bench;
pub mod props;
mod rng;
pub mod seeds;
pub mod timer;

pub use agentwire_core::fuzzing::FuzzClock;
pub use rng::XorShift64;

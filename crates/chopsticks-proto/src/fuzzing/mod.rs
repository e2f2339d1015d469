//! Entry points of the cargo-fuzz targets in `fuzz/` (feature `fuzzing`), one module per
//! target kind: [`decode_agent`] and [`decode_controller`] (the codec), [`controller`] and
//! [`agent`] (the role machines).
//!
//! Each `fuzz/fuzz_targets/*.rs` only calls one of these functions, so the bodies build and
//! run on stable Rust too: `tests/fuzz_seeds.rs` replays every committed seed through them.
//! Every function panics on a broken invariant; that is how the fuzzer finds bugs.

mod agent;
mod bodies;
mod controller;
mod decode;

pub use agent::agent;
pub use controller::controller;
pub use decode::{decode_agent, decode_controller};

//! Entry points of the cargo-fuzz targets in `fuzz/` (feature `fuzzing`), one module per
//! target.
//!
//! Each `fuzz/fuzz_targets/relay_*.rs` only calls one of these functions, so the bodies build
//! and run on stable Rust too: `tests/fuzz_seeds.rs` replays every committed seed through
//! them. Every function panics on a broken invariant; that is how the fuzzer finds bugs.

mod envelope;
mod host;
mod relay;

pub use envelope::envelope;
pub use host::host;
pub use relay::relay;

/// A body limit well above anything a fuzzer produces, so that parsing always runs.
const FUZZ_MAX: usize = 1 << 20;

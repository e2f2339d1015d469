//! Entry points of the cargo-fuzz targets in `fuzz/` (feature `fuzzing`), one module per
//! target family.
//!
//! Each `fuzz/fuzz_targets/llmrtc_*.rs` only calls one of these functions, so the bodies
//! build and run on stable Rust too: `tests/fuzz_seeds.rs` replays every committed seed
//! through them. Every function panics on a broken invariant; that is how the fuzzer finds
//! bugs. The driver clock is [`agentwire_core::fuzzing::FuzzClock`].

use std::collections::BTreeSet;

use agentwire_core::ConnId;
use arbitrary::Unstructured;

mod client;
mod decode;
mod server;

pub use client::client;
pub use decode::{decode, wav};
pub use server::{server, server_outputs};

/// One connection of `set`, chosen by the input.
fn pick(u: &mut Unstructured<'_>, set: &BTreeSet<ConnId>) -> Option<ConnId> {
    if set.is_empty() {
        return None;
    }
    let i = u.choose_index(set.len()).ok()?;
    set.iter().nth(i).copied()
}

//! JSON pieces the JSON protocol crates share (feature `json`).
//!
//! - [`RawJson`]: a JSON value kept as its text, forwarded without being parsed into a tree.
//! - [`Tagged`], [`probe`] and [`Probe`]: one-pass decoding of `{"type": ..., ...}` objects
//!   into a message enum, with no buffer when `type` is the first key.
//!
//! [`check_json_depth`](crate::check_json_depth) (always available) bounds the nesting of raw
//! JSON a crate forwards or stores.

mod raw;
mod tagged;

pub use raw::RawJson;
pub use tagged::{probe, Probe, Tagged, MAX_TYPE_NAME};

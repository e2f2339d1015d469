//! The bus's one hand-written read path: a subscriber's success reply to a hop, the message
//! a busy bus gets most (one per subscriber per publish), read in one pass.
//!
//! [`read`] accepts only the reply's plain shape (members in any order, any JSON whitespace,
//! no escape in the strings it reads, no extra member) and returns `None` at the first byte
//! that does not fit; the bus then reads the message the general way
//! ([`classify`](crate::codec::classify)), which gives the same answer, only slower.
//! Proptests beside the reader and the `bus_decode` fuzz target hold the two together.
//!
//! It is kept because it pays: on a chain of 10 subscribers (`bus/read_path/10` in
//! `benches/bus.rs`) a publish takes about 30% less time than with the general path alone.
//! A publish's own one-pass reader saved 2-6% there and was dropped.

use agentwire_core::Id128;

use crate::message::Ack;

mod hop_ack;
mod scan;

/// Reads `text` (a message object from its `{`) in one pass if it is a subscriber's success
/// reply to one of the bus's requests: the request id and the answer. `None`: read it the
/// general way.
#[inline]
pub(crate) fn read(text: &str) -> Option<(Id128, Ack)> {
    hop_ack::fast_hop_ack(text)
}

//! [`StateSnapshot`]: a whole replica as a full sync carries it (the result of `state.get`,
//! and the `state` of a `state.sync` result when the sender diverged).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{GCounter, OrSet, VectorClock};

/// Which syncs of one sender a replica has applied: every sequence number at or below
/// `floor`, and those in `seen`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedSyncs {
    /// Everything at or below is applied.
    pub floor: u64,
    /// Applied sequence numbers above `floor`.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub seen: BTreeSet<u64>,
}

/// A replica's whole state: its content, its merged vector clock, which syncs it applied
/// (so the receiver neither applies them again nor misses the rest) and its `merkle_root`.
///
/// JSON: `{"vector_clock": {...}, "merkle_root": "<64 hex>", "counters": {KEY: {ACTOR: N}},
/// "sets": {KEY: {"adds": {ELEMENT: [TAG]}, "removed": [TAG]}}, "applied": {AGENT: {"floor":
/// N, "seen": [N]}}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateSnapshot {
    /// The merged vector clock.
    pub vector_clock: VectorClock,
    /// The content's root hash (see [`CrdtStore::merkle_root`](super::CrdtStore::merkle_root)).
    pub merkle_root: String,
    /// G-Counters by key.
    #[serde(default)]
    pub counters: BTreeMap<String, GCounter>,
    /// OR-Sets by key.
    #[serde(default)]
    pub sets: BTreeMap<String, OrSet>,
    /// Applied syncs by sender.
    #[serde(default)]
    pub applied: BTreeMap<String, AppliedSyncs>,
}

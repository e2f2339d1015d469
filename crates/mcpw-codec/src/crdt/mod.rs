//! Conflict-free replicated data types for `state.sync`: vector clocks, G-Counters, OR-Sets,
//! and the [`CrdtStore`] the orchestrator merges every agent's operations into.
//!
//! Each type is a join-semilattice: [`merge`](VectorClock::merge) is commutative,
//! associative and idempotent, so replicas that have seen the same updates hold the same
//! state whatever order they saw them in (the property tests in `tests/crdt_props.rs`
//! shuffle and repeat operations to check it). Every collection is a `BTreeMap`/`BTreeSet`,
//! so iteration (and therefore any encoding of a state) is deterministic.
//!
//! The [`CrdtStore`] applies operations as `state.sync` carries them (op-based: "actor
//! incremented `key` by 1", "add element with tag"), deduplicated per sync by the sender's own
//! vector-clock entry, so a repeated or reordered sync changes nothing it should not.
//!
//! A replica's content hashes to its `merkle_root` ([`CrdtStore::merkle_root`], defined in
//! the `merkle` module's docs), and travels whole as a [`StateSnapshot`] when a replica
//! must be replaced (a full sync): the snapshot says which syncs it holds, so applying the
//! rest afterwards counts each once.

mod clock;
mod counter;
mod merkle;
mod set;
mod snapshot;
mod store;

pub use clock::{Causality, VectorClock};
pub use counter::GCounter;
pub use set::OrSet;
pub use snapshot::{AppliedSyncs, StateSnapshot};
pub use store::{CrdtLimits, CrdtOp, CrdtStore, StoreError, SyncOutcome};

//! The server-side replicated state that every agent's `state.sync` is merged into.

use std::collections::{BTreeMap, BTreeSet};

use super::{merkle, AppliedSyncs, GCounter, OrSet, StateSnapshot, VectorClock};
pub use crate::error::StoreError;

/// One operation of a `state.sync`, in the store's terms.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CrdtOp {
    /// G-Counter `key`: `actor` counted `by` more.
    Increment {
        /// The counter.
        key: String,
        /// Whose entry grows.
        actor: String,
        /// How much.
        by: u64,
    },
    /// OR-Set `key`: `element` added under the unique `tag`.
    Add {
        /// The set.
        key: String,
        /// The element.
        element: String,
        /// The add's unique id (the spec's `unique_id`).
        tag: String,
    },
    /// OR-Set `key`: `element` removed. With a `tag`, exactly that add is tombstoned (which
    /// commutes with everything); without, every tag of `element` the store has observed
    /// so far (an observed remove, convergent when syncs arrive in causal order).
    Remove {
        /// The set.
        key: String,
        /// The element.
        element: String,
        /// The add being removed, when the sender names it.
        tag: Option<String>,
    },
}

impl CrdtOp {
    fn key(&self) -> &str {
        match self {
            Self::Increment { key, .. } | Self::Add { key, .. } | Self::Remove { key, .. } => key,
        }
    }

    fn is_counter(&self) -> bool {
        matches!(self, Self::Increment { .. })
    }

    /// Every string of the op with the name of its field (for limit errors).
    fn strings(&self) -> Vec<(&'static str, &str)> {
        match self {
            Self::Increment { key, actor, .. } => vec![("key", key), ("actor", actor)],
            Self::Add {
                key, element, tag, ..
            } => vec![("key", key), ("element", element), ("unique_id", tag)],
            Self::Remove {
                key, element, tag, ..
            } => {
                let mut v = vec![("key", key.as_str()), ("element", element.as_str())];
                if let Some(t) = tag {
                    v.push(("unique_id", t));
                }
                v
            }
        }
    }
}

/// Bounds on what syncs can make a [`CrdtStore`] hold.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CrdtLimits {
    /// Keys (counters and sets together). Default 1,024.
    pub max_keys: usize,
    /// Actors in one G-Counter. Default 1,024.
    pub max_counter_actors: usize,
    /// Tags plus tombstones in one OR-Set. Default 65,536.
    pub max_set_tags: usize,
    /// Actors in the merged vector clock. Default 1,024.
    pub max_clock_actors: usize,
    /// Operations in one sync. Default 1,024.
    pub max_ops_per_sync: usize,
    /// Longest key, actor, element or tag, in bytes. Default 256.
    pub max_string_bytes: usize,
    /// Distinct syncing agents remembered for deduplication. Default 4,096.
    pub max_origins: usize,
    /// Sync sequence numbers remembered per agent. Default 4,096: beyond it the oldest is
    /// forgotten and every sync at or below it counts as already applied, so an agent's
    /// syncs may arrive up to this many places out of order.
    pub sync_window: usize,
}

impl Default for CrdtLimits {
    fn default() -> Self {
        Self {
            max_keys: 1024,
            max_counter_actors: 1024,
            max_set_tags: 65_536,
            max_clock_actors: 1024,
            max_ops_per_sync: 1024,
            max_string_bytes: 256,
            max_origins: 4096,
            sync_window: 4096,
        }
    }
}

/// What [`CrdtStore::apply_sync`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncOutcome {
    /// The sync was new; its operations were applied.
    Applied {
        /// How many operations.
        ops: usize,
    },
    /// This sync (sender, sequence) was applied before; nothing changed (the vector clock
    /// was still merged, which is idempotent).
    Duplicate,
}

/// The orchestrator's replicated state: a merged vector clock, G-Counters and OR-Sets by
/// key, and which syncs were applied.
///
/// A sync is identified by its sender and the sender's own vector-clock entry; applying the
/// same sync twice, or a set of syncs in any order, gives the same state (checked by
/// `tests/crdt_props.rs`). A refused sync changes nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrdtStore {
    clock: VectorClock,
    counters: BTreeMap<String, GCounter>,
    sets: BTreeMap<String, OrSet>,
    applied: BTreeMap<String, AppliedSyncs>,
    /// The `merkle_root`'s leaf of every key, kept up to date as keys change, so a root
    /// costs one hash over the leaves, not a hash of the whole state.
    leaves: BTreeMap<String, [u8; 32]>,
    limits: CrdtLimits,
}

impl CrdtStore {
    /// An empty store with `limits`.
    pub fn new(limits: CrdtLimits) -> Self {
        Self {
            limits,
            ..Self::default()
        }
    }

    /// The merged vector clock of every sync seen.
    pub fn clock(&self) -> &VectorClock {
        &self.clock
    }

    /// The G-Counter `key`.
    pub fn counter(&self, key: &str) -> Option<&GCounter> {
        self.counters.get(key)
    }

    /// The OR-Set `key`.
    pub fn set(&self, key: &str) -> Option<&OrSet> {
        self.sets.get(key)
    }

    /// Counters by key.
    pub fn counters(&self) -> impl Iterator<Item = (&str, &GCounter)> {
        self.counters.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Sets by key.
    pub fn sets(&self) -> impl Iterator<Item = (&str, &OrSet)> {
        self.sets.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Whether the sync `seq` of `origin` was applied (or is below the forgotten floor).
    pub fn was_applied(&self, origin: &str, seq: u64) -> bool {
        self.applied
            .get(origin)
            .is_some_and(|a| seq <= a.floor || a.seen.contains(&seq))
    }

    /// The highest sequence number of `origin`'s syncs applied here (0: none).
    pub fn last_applied(&self, origin: &str) -> u64 {
        self.applied
            .get(origin)
            .map_or(0, |a| a.seen.last().copied().unwrap_or(0).max(a.floor))
    }

    /// The content's `merkle_root`: 64 lowercase hex digits of a SHA-256 tree over the keys,
    /// defined exactly in the crate's `crdt` docs (one leaf per key, its canonical JSON).
    /// Replicas holding the same counters, tags and tombstones have the same root, whatever
    /// their clocks.
    pub fn merkle_root(&self) -> String {
        merkle::root_of(self.leaves.values())
    }

    /// Computes the leaf of `key` again (after it changed).
    fn refresh_leaf(&mut self, key: &str) {
        let leaf = match (self.counters.get(key), self.sets.get(key)) {
            (Some(c), _) => merkle::counter_leaf(key, c),
            (None, Some(s)) => merkle::set_leaf(key, s),
            (None, None) => return,
        };
        self.leaves.insert(key.to_owned(), leaf);
    }

    /// The whole replica, for a full sync.
    pub fn snapshot(&self) -> StateSnapshot {
        StateSnapshot {
            vector_clock: self.clock.clone(),
            merkle_root: self.merkle_root(),
            counters: self.counters.clone(),
            sets: self.sets.clone(),
            applied: self.applied.clone(),
        }
    }

    /// A replica holding exactly `snapshot`, within `limits`. Refused when it breaks a limit,
    /// uses a key as both kinds, or its `merkle_root` is not the root of its content.
    pub fn from_snapshot(snapshot: StateSnapshot, limits: CrdtLimits) -> Result<Self, StoreError> {
        let l = &limits;
        let long = |s: &str| s.len() > l.max_string_bytes;
        if snapshot.vector_clock.len() > l.max_clock_actors {
            return Err(StoreError::Limit("max_clock_actors"));
        }
        if snapshot.vector_clock.iter().any(|(a, _)| long(a)) {
            return Err(StoreError::TooLong("vector_clock"));
        }
        if snapshot.counters.len() + snapshot.sets.len() > l.max_keys {
            return Err(StoreError::Limit("max_keys"));
        }
        for (key, c) in &snapshot.counters {
            if snapshot.sets.contains_key(key) {
                return Err(StoreError::KindConflict(key.clone()));
            }
            if long(key) || c.iter().any(|(a, _)| long(a)) {
                return Err(StoreError::TooLong("counters"));
            }
            if c.actors() > l.max_counter_actors {
                return Err(StoreError::Limit("max_counter_actors"));
            }
        }
        for (key, set) in &snapshot.sets {
            if long(key) || set.strings().any(long) {
                return Err(StoreError::TooLong("sets"));
            }
            if set.tag_count() > l.max_set_tags {
                return Err(StoreError::Limit("max_set_tags"));
            }
        }
        if snapshot.applied.len() > l.max_origins {
            return Err(StoreError::Limit("max_origins"));
        }
        for (origin, a) in &snapshot.applied {
            if long(origin) {
                return Err(StoreError::TooLong("applied"));
            }
            if a.seen.len() > l.sync_window.max(1) {
                return Err(StoreError::Limit("sync_window"));
            }
        }
        let mut store = Self {
            clock: snapshot.vector_clock,
            counters: snapshot.counters,
            sets: snapshot.sets,
            applied: snapshot.applied,
            leaves: BTreeMap::new(),
            limits,
        };
        let keys: Vec<String> = store
            .counters
            .keys()
            .chain(store.sets.keys())
            .cloned()
            .collect();
        for key in keys {
            store.refresh_leaf(&key);
        }
        if store.merkle_root() != snapshot.merkle_root {
            return Err(StoreError::RootMismatch);
        }
        Ok(store)
    }

    /// `ops` with every remove that names no tag replaced by one remove per tag of its
    /// element observed here and not removed yet, so the removal means the same on every
    /// replica it is forwarded to.
    pub fn resolve(&self, ops: &[CrdtOp]) -> Vec<CrdtOp> {
        let mut out = Vec::with_capacity(ops.len());
        for op in ops {
            match op {
                CrdtOp::Remove {
                    key,
                    element,
                    tag: None,
                } => {
                    if let Some(set) = self.sets.get(key) {
                        out.extend(set.live_tags(element).map(|t| CrdtOp::Remove {
                            key: key.clone(),
                            element: element.clone(),
                            tag: Some(t.to_owned()),
                        }));
                    }
                }
                op => out.push(op.clone()),
            }
        }
        out
    }

    /// Applies one `state.sync` from `origin` carrying `clock` and `ops`: all of it, or (on
    /// error) none of it.
    pub fn apply_sync(
        &mut self,
        origin: &str,
        clock: &VectorClock,
        ops: &[CrdtOp],
    ) -> Result<SyncOutcome, StoreError> {
        let l = &self.limits;
        if origin.len() > l.max_string_bytes {
            return Err(StoreError::TooLong("agent_id"));
        }
        let seq = clock.get(origin);
        if seq == 0 {
            return Err(StoreError::MissingOwnEntry(origin.to_owned()));
        }
        if clock.iter().any(|(a, _)| a.len() > l.max_string_bytes) {
            return Err(StoreError::TooLong("vector_clock"));
        }
        let new_clock_actors = clock.iter().filter(|(a, _)| self.clock.get(a) == 0).count();
        if self.clock.len() + new_clock_actors > l.max_clock_actors {
            return Err(StoreError::Limit("max_clock_actors"));
        }
        if self.was_applied(origin, seq) {
            self.clock.merge(clock);
            return Ok(SyncOutcome::Duplicate);
        }
        if !self.applied.contains_key(origin) && self.applied.len() >= l.max_origins {
            return Err(StoreError::Limit("max_origins"));
        }
        self.check_ops(ops)?;

        for op in ops {
            match op {
                CrdtOp::Increment { key, actor, by } => self
                    .counters
                    .entry(key.clone())
                    .or_default()
                    .increment(actor, *by),
                CrdtOp::Add { key, element, tag } => {
                    self.sets.entry(key.clone()).or_default().add(element, tag);
                }
                CrdtOp::Remove { key, element, tag } => {
                    let set = self.sets.entry(key.clone()).or_default();
                    match tag {
                        Some(t) => set.remove_tag(t),
                        None => {
                            set.remove_observed(element);
                        }
                    }
                }
            }
        }
        let touched: BTreeSet<&str> = ops.iter().map(CrdtOp::key).collect();
        for key in touched {
            self.refresh_leaf(key);
        }
        self.clock.merge(clock);
        let window = self.limits.sync_window.max(1);
        let applied = self.applied.entry(origin.to_owned()).or_default();
        applied.seen.insert(seq);
        while applied.seen.len() > window {
            if let Some(oldest) = applied.seen.pop_first() {
                applied.floor = applied.floor.max(oldest);
            }
        }
        // Fold the contiguous run above the floor into it.
        while let Some(&next) = applied.seen.first() {
            if next != applied.floor.saturating_add(1) {
                break;
            }
            applied.floor = next;
            applied.seen.pop_first();
        }
        Ok(SyncOutcome::Applied { ops: ops.len() })
    }

    /// Checks every limit the ops could break, before anything is applied.
    fn check_ops(&self, ops: &[CrdtOp]) -> Result<(), StoreError> {
        let l = &self.limits;
        if ops.len() > l.max_ops_per_sync {
            return Err(StoreError::Limit("max_ops_per_sync"));
        }
        let mut kinds: BTreeMap<&str, bool> = BTreeMap::new();
        let mut new_actors: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        let mut new_tags: BTreeMap<&str, usize> = BTreeMap::new();
        for op in ops {
            for (field, s) in op.strings() {
                if s.len() > l.max_string_bytes {
                    return Err(StoreError::TooLong(field));
                }
            }
            let key = op.key();
            let counter = op.is_counter();
            let existing = if self.counters.contains_key(key) {
                Some(true)
            } else if self.sets.contains_key(key) {
                Some(false)
            } else {
                None
            };
            match (existing, kinds.insert(key, counter)) {
                (Some(k), _) | (None, Some(k)) if k != counter => {
                    return Err(StoreError::KindConflict(key.to_owned()));
                }
                _ => {}
            }
            match op {
                CrdtOp::Increment { actor, .. } => {
                    let known = self.counters.get(key).is_some_and(|c| c.has_actor(actor));
                    if !known {
                        new_actors.entry(key).or_default().insert(actor);
                    }
                }
                // Upper bound: a remove without a tag tombstones at most the tags there are.
                CrdtOp::Add { .. } | CrdtOp::Remove { tag: Some(_), .. } => {
                    *new_tags.entry(key).or_default() += 1;
                }
                CrdtOp::Remove { tag: None, .. } => {
                    let here = self.sets.get(key).map_or(0, OrSet::tag_count);
                    *new_tags.entry(key).or_default() += here;
                }
            }
        }
        let new_keys = kinds
            .keys()
            .filter(|k| !self.counters.contains_key(**k) && !self.sets.contains_key(**k))
            .count();
        if self.counters.len() + self.sets.len() + new_keys > l.max_keys {
            return Err(StoreError::Limit("max_keys"));
        }
        for (key, actors) in &new_actors {
            let have = self.counters.get(*key).map_or(0, GCounter::actors);
            if have + actors.len() > l.max_counter_actors {
                return Err(StoreError::Limit("max_counter_actors"));
            }
        }
        for (key, n) in &new_tags {
            let have = self.sets.get(*key).map_or(0, OrSet::tag_count);
            if have.saturating_add(*n) > l.max_set_tags {
                return Err(StoreError::Limit("max_set_tags"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock(pairs: &[(&str, u64)]) -> VectorClock {
        pairs.iter().map(|(a, v)| (*a, *v)).collect()
    }

    fn inc(key: &str, actor: &str) -> CrdtOp {
        CrdtOp::Increment {
            key: key.into(),
            actor: actor.into(),
            by: 1,
        }
    }

    #[test]
    fn a_repeated_sync_is_applied_once() {
        let mut s = CrdtStore::default();
        let c = clock(&[("a", 1)]);
        let ops = [inc("done", "a")];
        assert_eq!(
            s.apply_sync("a", &c, &ops),
            Ok(SyncOutcome::Applied { ops: 1 })
        );
        assert_eq!(s.apply_sync("a", &c, &ops), Ok(SyncOutcome::Duplicate));
        assert_eq!(s.counter("done").map(GCounter::value), Some(1));
        let c2 = clock(&[("a", 2)]);
        assert!(s.apply_sync("a", &c2, &ops).is_ok());
        assert_eq!(s.counter("done").map(GCounter::value), Some(2));
    }

    #[test]
    fn refusals_change_nothing() {
        let mut s = CrdtStore::new(CrdtLimits {
            max_keys: 1,
            ..CrdtLimits::default()
        });
        assert_eq!(
            s.apply_sync("a", &clock(&[("b", 1)]), &[]),
            Err(StoreError::MissingOwnEntry("a".into()))
        );
        s.apply_sync("a", &clock(&[("a", 1)]), &[inc("k", "a")])
            .unwrap();
        let add = CrdtOp::Add {
            key: "k".into(),
            element: "e".into(),
            tag: "t".into(),
        };
        let before = s.clone();
        let err = s
            .apply_sync("a", &clock(&[("a", 2)]), &[inc("k", "a"), add])
            .unwrap_err();
        assert_eq!(err, StoreError::KindConflict("k".into()));
        assert_eq!(err.field(), "operations.type");
        assert_eq!(
            s.apply_sync("a", &clock(&[("a", 2)]), &[inc("k2", "a")]),
            Err(StoreError::Limit("max_keys"))
        );
        assert_eq!(s, before);
        assert!(!s.was_applied("a", 2));
    }

    #[test]
    fn the_window_forgets_the_oldest_sequence_numbers() {
        let mut s = CrdtStore::new(CrdtLimits {
            sync_window: 2,
            ..CrdtLimits::default()
        });
        for seq in [10, 12, 14] {
            s.apply_sync("a", &clock(&[("a", seq)]), &[inc("k", "a")])
                .unwrap();
        }
        // 10 was forgotten: everything up to it counts as applied, a late 9 included.
        assert!(s.was_applied("a", 9) && s.was_applied("a", 10));
        assert!(!s.was_applied("a", 11) && !s.was_applied("a", 13));
        assert_eq!(
            s.apply_sync("a", &clock(&[("a", 9)]), &[inc("k", "a")]),
            Ok(SyncOutcome::Duplicate)
        );
        assert_eq!(s.counter("k").map(GCounter::value), Some(3));
        // 11 fills the gap above the floor, which then moves up to 12.
        s.apply_sync("a", &clock(&[("a", 11)]), &[inc("k", "a")])
            .unwrap();
        assert_eq!(s.counter("k").map(GCounter::value), Some(4));
        assert!(s.was_applied("a", 12) && !s.was_applied("a", 13));
    }
}

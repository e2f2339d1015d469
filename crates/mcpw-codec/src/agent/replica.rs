//! [`Replica`]: the agent's copy of the shared CRDT state, kept in step with the
//! orchestrator's store through `state.sync` (both ways) and full syncs.

use std::collections::BTreeMap;

use crate::crdt::{CrdtLimits, CrdtOp, CrdtStore, StateSnapshot, StoreError, VectorClock};
use crate::crdt_wire;
use crate::params::StateSync;

/// The local replica: the store, this agent's own sync counter, and its syncs the server
/// has not answered yet (re-sent on a new connection unless the server's state shows them
/// applied, and applied again on top of every full sync).
#[derive(Debug)]
pub(super) struct Replica {
    store: CrdtStore,
    limits: CrdtLimits,
    /// The sequence number (own vector-clock entry) of the last local sync.
    seq: u64,
    /// Own syncs awaiting the server's answer, by sequence number.
    pending: BTreeMap<u64, (VectorClock, Vec<CrdtOp>)>,
    /// A full sync arrived on this connection: local syncs may go, notifications apply.
    ready: bool,
    /// A `state.get` is awaiting its answer.
    fetching: bool,
}

impl Replica {
    pub(super) fn new(limits: CrdtLimits) -> Self {
        Self {
            store: CrdtStore::new(limits.clone()),
            limits,
            seq: 0,
            pending: BTreeMap::new(),
            ready: false,
            fetching: false,
        }
    }

    pub(super) fn store(&self) -> &CrdtStore {
        &self.store
    }

    pub(super) fn is_ready(&self) -> bool {
        self.ready
    }

    /// Marks a `state.get` as sent; `false` if one is awaited already.
    pub(super) fn start_fetch(&mut self) -> bool {
        !std::mem::replace(&mut self.fetching, true)
    }

    /// The `state.get` was refused: another may be sent.
    pub(super) fn fetch_failed(&mut self) {
        self.fetching = false;
    }

    /// The connection ended: nothing applies until the next full sync.
    pub(super) fn disconnected(&mut self) {
        self.ready = false;
        self.fetching = false;
    }

    /// A local change: the ops `build` makes for the next sequence number are applied here
    /// and returned as the `state.sync` params to send (with the replica's root after them).
    pub(super) fn local(
        &mut self,
        me: &str,
        max_pending: usize,
        build: impl FnOnce(&CrdtStore, u64) -> Vec<CrdtOp>,
    ) -> Result<(u64, StateSync), StoreError> {
        if self.pending.len() >= max_pending {
            return Err(StoreError::Limit("max_pending_syncs"));
        }
        let seq = self.seq.max(self.store.last_applied(me)) + 1;
        let ops = build(&self.store, seq);
        let mut clock = self.store.clock().clone();
        clock.set(me, seq);
        self.store.apply_sync(me, &clock, &ops)?;
        self.seq = seq;
        let params = crdt_wire::sync_params(me, &clock, &ops, Some(self.store.merkle_root()));
        self.pending.insert(seq, (clock, ops));
        Ok((seq, params))
    }

    /// The server answered own sync `seq`.
    pub(super) fn answered(&mut self, seq: u64) {
        self.pending.remove(&seq);
    }

    /// Replaces the replica with `snapshot` and applies the own syncs it lacks on top.
    /// Returns those syncs as params to send again when `resend` (a new connection).
    pub(super) fn replace(
        &mut self,
        me: &str,
        snapshot: StateSnapshot,
        resend: bool,
    ) -> Result<Vec<StateSync>, StoreError> {
        let mut store = CrdtStore::from_snapshot(snapshot, self.limits.clone())?;
        self.fetching = false;
        self.pending.retain(|seq, _| !store.was_applied(me, *seq));
        let mut again = Vec::new();
        let mut refused = Vec::new();
        for (seq, (clock, ops)) in &self.pending {
            if store.apply_sync(me, clock, ops).is_err() {
                refused.push(*seq);
                continue;
            }
            if resend {
                again.push(crdt_wire::sync_params(me, clock, ops, None));
            }
        }
        for seq in refused {
            self.pending.remove(&seq);
        }
        self.seq = self.seq.max(store.last_applied(me));
        self.store = store;
        self.ready = true;
        Ok(again)
    }

    /// Applies another agent's sync the server forwarded: `Some(true)` applied,
    /// `Some(false)` seen already (or no full sync yet on this connection), `None` it
    /// cannot apply (an add without a tag, a limit): the replica needs a full sync.
    pub(super) fn remote(&mut self, p: &StateSync) -> Option<bool> {
        if !self.ready {
            return Some(false);
        }
        let ops = crdt_wire::from_wire(&p.operations)?;
        let clock = crdt_wire::clock_of(p);
        let outcome = self.store.apply_sync(&p.agent_id, &clock, &ops).ok()?;
        Some(matches!(outcome, crate::crdt::SyncOutcome::Applied { .. }))
    }

    /// Whether the server's `root`, taken when it had everything this replica has (no own
    /// sync unanswered), differs from this replica's: it diverged.
    pub(super) fn diverged(&self, root: Option<&str>) -> bool {
        self.ready && self.pending.is_empty() && root.is_some_and(|r| r != self.store.merkle_root())
    }
}

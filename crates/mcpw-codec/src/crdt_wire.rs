//! `state.sync`'s wire operations ([`CrdtOperation`]) to and from the store's [`CrdtOp`]s,
//! for the messages the orchestrator forwards and the agent's replica reads and writes.

use std::collections::BTreeMap;

use crate::crdt::{CrdtOp, VectorClock};
use crate::params::{CrdtOperation, GCounterOp, OrSetOp, SetOperation, StateSync};

/// The wire form of `ops`: a remove names its tag in `unique_id`.
pub(crate) fn to_wire(ops: &[CrdtOp]) -> Vec<CrdtOperation> {
    ops.iter()
        .map(|op| match op {
            CrdtOp::Increment { key, actor, by } => CrdtOperation::GCounter(GCounterOp {
                key: key.clone(),
                increment: *by,
                actor: actor.clone(),
            }),
            CrdtOp::Add { key, element, tag } => CrdtOperation::OrSet(OrSetOp {
                key: key.clone(),
                operation: SetOperation::Add,
                element: element.clone(),
                unique_id: Some(tag.clone()),
                removed_ids: None,
            }),
            CrdtOp::Remove { key, element, tag } => CrdtOperation::OrSet(OrSetOp {
                key: key.clone(),
                operation: SetOperation::Remove,
                element: element.clone(),
                unique_id: tag.clone(),
                removed_ids: None,
            }),
        })
        .collect()
}

/// The store's form of wire `ops`; `None` when an add names no `unique_id`.
pub(crate) fn from_wire(ops: &[CrdtOperation]) -> Option<Vec<CrdtOp>> {
    ops.iter()
        .map(|op| {
            Some(match op {
                CrdtOperation::GCounter(g) => CrdtOp::Increment {
                    key: g.key.clone(),
                    actor: g.actor.clone(),
                    by: g.increment,
                },
                CrdtOperation::OrSet(s) => match s.operation {
                    SetOperation::Add => CrdtOp::Add {
                        key: s.key.clone(),
                        element: s.element.clone(),
                        tag: s.unique_id.clone()?,
                    },
                    SetOperation::Remove => CrdtOp::Remove {
                        key: s.key.clone(),
                        element: s.element.clone(),
                        tag: s.unique_id.clone(),
                    },
                },
            })
        })
        .collect()
}

/// The vector clock of a `state.sync`'s params.
pub(crate) fn clock_of(p: &StateSync) -> VectorClock {
    p.vector_clock
        .iter()
        .map(|(a, n)| (a.as_str(), *n))
        .collect()
}

/// `state.sync` params for `origin`'s sync with `clock` and `ops`.
pub(crate) fn sync_params(
    origin: &str,
    clock: &VectorClock,
    ops: &[CrdtOp],
    merkle_root: Option<String>,
) -> StateSync {
    StateSync {
        agent_id: origin.to_owned(),
        vector_clock: clock
            .iter()
            .map(|(a, n)| (a.to_owned(), n))
            .collect::<BTreeMap<_, _>>(),
        operations: to_wire(ops),
        merkle_root,
    }
}

//! Property tests: every CRDT merge is commutative, associative and idempotent, and the
//! orchestrator's store reaches the same state whatever the order (and repetition) of the
//! syncs it is given.

use mcpw_codec::crdt::{CrdtLimits, CrdtOp, CrdtStore, GCounter, OrSet, SyncOutcome, VectorClock};
use proptest::prelude::*;

fn actor() -> impl Strategy<Value = String> {
    proptest::sample::select(vec!["a", "b", "c", "d"]).prop_map(str::to_owned)
}

fn clock() -> impl Strategy<Value = VectorClock> {
    proptest::collection::vec((actor(), 0u64..6), 0..6).prop_map(|v| v.into_iter().collect())
}

fn counter() -> impl Strategy<Value = GCounter> {
    proptest::collection::vec((actor(), 0u64..5), 0..8).prop_map(|v| {
        let mut c = GCounter::new();
        for (a, n) in v {
            c.increment(&a, n);
        }
        c
    })
}

fn orset() -> impl Strategy<Value = OrSet> {
    let elem = proptest::sample::select(vec!["x", "y", "z"]);
    let tag = 0u8..12;
    proptest::collection::vec((elem, tag, any::<bool>()), 0..10).prop_map(|v| {
        let mut s = OrSet::new();
        for (e, t, add) in v {
            let t = format!("t{t}");
            if add {
                s.add(e, &t);
            } else {
                s.remove_tag(&t);
            }
        }
        s
    })
}

macro_rules! lattice_laws {
    ($name:ident, $strategy:expr) => {
        proptest! {
            #[test]
            fn $name(a in $strategy, b in $strategy, c in $strategy) {
                // commutative
                let mut ab = a.clone(); ab.merge(&b);
                let mut ba = b.clone(); ba.merge(&a);
                prop_assert_eq!(&ab, &ba);
                // associative
                let mut ab_c = ab.clone(); ab_c.merge(&c);
                let mut bc = b.clone(); bc.merge(&c);
                let mut a_bc = a.clone(); a_bc.merge(&bc);
                prop_assert_eq!(&ab_c, &a_bc);
                // idempotent
                let mut aa = a.clone(); aa.merge(&a);
                prop_assert_eq!(&aa, &a);
                let mut abb = ab.clone(); abb.merge(&b);
                prop_assert_eq!(&abb, &ab);
            }
        }
    };
}

lattice_laws!(vector_clock_merge_is_a_join, clock());
lattice_laws!(g_counter_merge_is_a_join, counter());
lattice_laws!(or_set_merge_is_a_join, orset());

proptest! {
    #[test]
    fn merged_clock_dominates_both(a in clock(), b in clock()) {
        let mut m = a.clone();
        m.merge(&b);
        prop_assert!(m.dominates(&a) && m.dominates(&b));
    }

    #[test]
    fn g_counter_merge_keeps_the_larger_value(a in counter(), b in counter()) {
        let mut m = a.clone();
        m.merge(&b);
        prop_assert!(m.value() >= a.value().max(b.value()));
    }
}

/// One sync: its sender, its vector clock and its operations.
#[derive(Debug, Clone)]
struct Sync {
    origin: String,
    clock: VectorClock,
    ops: Vec<CrdtOp>,
}

/// A history of syncs: each origin numbers its syncs 1, 2, 3...; every add has a unique
/// tag; removes name tags (possibly of adds in other syncs, possibly unknown ones).
fn history() -> impl Strategy<Value = Vec<Sync>> {
    #[derive(Debug, Clone)]
    enum Gen {
        Inc(String, u8, u64),
        Add(u8, u8),
        Remove(u8, u8, u16),
    }
    let gen_op = prop_oneof![
        (actor(), 0u8..3, 1u64..4).prop_map(|(a, k, n)| Gen::Inc(a, k, n)),
        (0u8..3, 0u8..4).prop_map(|(k, e)| Gen::Add(k, e)),
        (0u8..3, 0u8..4, 0u16..64).prop_map(|(k, e, t)| Gen::Remove(k, e, t)),
    ];
    let sync = (actor(), clock(), proptest::collection::vec(gen_op, 0..6));
    proptest::collection::vec(sync, 1..14).prop_map(|syncs| {
        let mut seqs = std::collections::BTreeMap::<String, u64>::new();
        let mut tags: Vec<String> = Vec::new();
        let mut out = Vec::new();
        for (origin, mut clock, gens) in syncs {
            let seq = seqs.entry(origin.clone()).or_insert(0);
            *seq += 1;
            clock.set(origin.clone(), *seq);
            let ops = gens
                .into_iter()
                .enumerate()
                .map(|(i, g)| match g {
                    // Counter keys and set keys never overlap.
                    Gen::Inc(actor, k, by) => CrdtOp::Increment {
                        key: format!("count-{k}"),
                        actor,
                        by,
                    },
                    Gen::Add(k, e) => {
                        let tag = format!("{origin}-{seq}-{i}");
                        tags.push(tag.clone());
                        CrdtOp::Add {
                            key: format!("set-{k}"),
                            element: format!("e{e}"),
                            tag,
                        }
                    }
                    Gen::Remove(k, e, t) => CrdtOp::Remove {
                        key: format!("set-{k}"),
                        element: format!("e{e}"),
                        tag: Some(
                            tags.get(usize::from(t))
                                .cloned()
                                .unwrap_or_else(|| format!("unknown-{t}")),
                        ),
                    },
                })
                .collect();
            out.push(Sync { origin, clock, ops });
        }
        out
    })
}

fn apply_all<'a>(syncs: impl IntoIterator<Item = &'a Sync>) -> CrdtStore {
    let mut store = CrdtStore::default();
    for s in syncs {
        store
            .apply_sync(&s.origin, &s.clock, &s.ops)
            .expect("within the default limits");
    }
    store
}

proptest! {
    #[test]
    fn store_converges_whatever_the_order_and_repetition(
        syncs in history(),
        order in proptest::collection::vec(any::<proptest::sample::Index>(), 0..40),
    ) {
        let in_order = apply_all(&syncs);
        // Every sync at least once, in a shuffled order, plus repeats anywhere.
        let mut shuffled: Vec<&Sync> = syncs.iter().collect();
        for (i, idx) in order.iter().enumerate() {
            let n = shuffled.len();
            shuffled.swap(i % n, idx.index(n));
        }
        for idx in &order {
            shuffled.insert(idx.index(shuffled.len() + 1), &syncs[idx.index(syncs.len())]);
        }
        let mixed = apply_all(shuffled.iter().copied());
        prop_assert_eq!(mixed.clock(), in_order.clock());
        prop_assert_eq!(
            mixed.counters().collect::<Vec<_>>(),
            in_order.counters().collect::<Vec<_>>()
        );
        let live = |s: &CrdtStore| {
            s.sets()
                .map(|(k, set)| (k.to_owned(), set.elements().map(str::to_owned).collect::<Vec<_>>()))
                .collect::<Vec<_>>()
        };
        prop_assert_eq!(live(&mixed), live(&in_order));
        prop_assert_eq!(
            mixed.sets().collect::<Vec<_>>(),
            in_order.sets().collect::<Vec<_>>()
        );
        // The same content has the same root, and a replica rebuilt from a snapshot (whose
        // leaves are all computed afresh) is the same replica, root included.
        prop_assert_eq!(mixed.merkle_root(), in_order.merkle_root());
        prop_assert_eq!(
            CrdtStore::from_snapshot(mixed.snapshot(), CrdtLimits::default()),
            Ok(mixed.clone())
        );
        // And a sync seen already is reported as such.
        let mut again = mixed.clone();
        let s = &syncs[0];
        prop_assert_eq!(again.apply_sync(&s.origin, &s.clock, &s.ops), Ok(SyncOutcome::Duplicate));
    }
}

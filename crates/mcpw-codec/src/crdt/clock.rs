//! Vector clocks.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How two vector clocks are ordered causally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Causality {
    /// Both clocks hold the same counters.
    Equal,
    /// The first clock happened before the second (every counter `<=`, one `<`).
    Before,
    /// The first clock happened after the second.
    After,
    /// Neither is before the other.
    Concurrent,
}

/// A vector clock: one counter per actor; a missing actor counts as 0.
///
/// Serializes as the spec's `{"agent-123": 42, ...}` object. Zero entries are never stored,
/// so two clocks that mean the same compare (and serialize) equal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct VectorClock(BTreeMap<String, u64>);

impl VectorClock {
    /// An empty clock (every counter 0).
    pub fn new() -> Self {
        Self::default()
    }

    /// The counter of `actor`.
    pub fn get(&self, actor: &str) -> u64 {
        self.0.get(actor).copied().unwrap_or(0)
    }

    /// Sets the counter of `actor` (0 removes it).
    pub fn set(&mut self, actor: impl Into<String>, value: u64) {
        let actor = actor.into();
        if value == 0 {
            self.0.remove(&actor);
        } else {
            self.0.insert(actor, value);
        }
    }

    /// Adds one to the counter of `actor` (saturating) and returns the new value.
    pub fn increment(&mut self, actor: &str) -> u64 {
        let v = self.get(actor).saturating_add(1);
        self.0.insert(actor.to_owned(), v);
        v
    }

    /// Pointwise maximum with `other`: commutative, associative, idempotent.
    pub fn merge(&mut self, other: &Self) {
        for (actor, &v) in &other.0 {
            if v > self.get(actor) {
                self.0.insert(actor.clone(), v);
            }
        }
    }

    /// The causal order of `self` relative to `other`.
    pub fn compare(&self, other: &Self) -> Causality {
        let mut less = false;
        let mut greater = false;
        for actor in self.0.keys().chain(other.0.keys()) {
            let (a, b) = (self.get(actor), other.get(actor));
            less |= a < b;
            greater |= a > b;
        }
        match (less, greater) {
            (false, false) => Causality::Equal,
            (true, false) => Causality::Before,
            (false, true) => Causality::After,
            (true, true) => Causality::Concurrent,
        }
    }

    /// Whether every counter of `other` is at most the one here.
    pub fn dominates(&self, other: &Self) -> bool {
        matches!(self.compare(other), Causality::Equal | Causality::After)
    }

    /// Number of actors with a non-zero counter.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether every counter is 0.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The non-zero counters, by actor.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.0.iter().map(|(a, v)| (a.as_str(), *v))
    }
}

impl<S: Into<String>> FromIterator<(S, u64)> for VectorClock {
    fn from_iter<I: IntoIterator<Item = (S, u64)>>(iter: I) -> Self {
        let mut c = Self::new();
        for (a, v) in iter {
            let a = a.into();
            let cur = c.get(&a);
            c.set(a, cur.max(v));
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causal_order() {
        let a: VectorClock = [("x", 1), ("y", 2)].into_iter().collect();
        let b: VectorClock = [("x", 1), ("y", 3)].into_iter().collect();
        let c: VectorClock = [("x", 2), ("y", 1)].into_iter().collect();
        assert_eq!(a.compare(&a), Causality::Equal);
        assert_eq!(a.compare(&b), Causality::Before);
        assert_eq!(b.compare(&a), Causality::After);
        assert_eq!(b.compare(&c), Causality::Concurrent);
        let mut m = b.clone();
        m.merge(&c);
        assert!(m.dominates(&b) && m.dominates(&c));
        assert_eq!(m.get("x"), 2);
        assert_eq!(m.get("y"), 3);
    }

    #[test]
    fn zero_entries_are_not_stored() {
        let a: VectorClock = [("x", 0), ("y", 1)].into_iter().collect();
        assert_eq!(a.len(), 1);
        assert_eq!(a, [("y", 1)].into_iter().collect());
        assert_eq!(serde_json::to_string(&a).unwrap(), r#"{"y":1}"#);
    }
}

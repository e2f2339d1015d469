//! Grow-only counters.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A G-Counter: one non-decreasing count per actor; the value is their sum.
///
/// State-based: [`merge`](Self::merge) takes the pointwise maximum, so it is commutative,
/// associative and idempotent, provided each actor's entry only ever grows (every actor
/// counts its own increments).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct GCounter(BTreeMap<String, u64>);

impl GCounter {
    /// A counter at 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `by` to `actor`'s entry (saturating).
    pub fn increment(&mut self, actor: &str, by: u64) {
        if by == 0 {
            return;
        }
        match self.0.get_mut(actor) {
            Some(v) => *v = v.saturating_add(by),
            None => {
                self.0.insert(actor.to_owned(), by);
            }
        }
    }

    /// The counter's value: the sum of every actor's entry (saturating).
    pub fn value(&self) -> u64 {
        self.0.values().fold(0u64, |s, v| s.saturating_add(*v))
    }

    /// `actor`'s entry.
    pub fn get(&self, actor: &str) -> u64 {
        self.0.get(actor).copied().unwrap_or(0)
    }

    /// Whether `actor` has an entry.
    pub fn has_actor(&self, actor: &str) -> bool {
        self.0.contains_key(actor)
    }

    /// Number of actors with an entry.
    pub fn actors(&self) -> usize {
        self.0.len()
    }

    /// Pointwise maximum with `other`.
    pub fn merge(&mut self, other: &Self) {
        for (actor, &v) in &other.0 {
            let e = self.0.entry(actor.clone()).or_insert(0);
            *e = (*e).max(v);
        }
    }

    /// The entries, by actor.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.0.iter().map(|(a, v)| (a.as_str(), *v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_is_the_sum_and_merge_takes_the_max() {
        let mut a = GCounter::new();
        a.increment("x", 2);
        a.increment("y", 1);
        let mut b = GCounter::new();
        b.increment("x", 1);
        b.increment("z", 5);
        a.merge(&b);
        assert_eq!(a.value(), 2 + 1 + 5);
        let before = a.clone();
        a.merge(&b);
        assert_eq!(a, before);
        a.increment("x", 0);
        assert_eq!(a.actors(), 3);
    }
}

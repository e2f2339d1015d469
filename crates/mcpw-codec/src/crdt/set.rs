//! Observed-remove sets.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// An OR-Set of strings: each add carries a unique tag; a remove tombstones tags.
///
/// An element is present while it has a tag that is not tombstoned, so a concurrent add
/// (with a tag the remover had not observed) wins. State-based: [`merge`](Self::merge) is
/// the union of both tag sets and both tombstone sets. A tombstone may arrive before its add
/// (operations delivered out of order); the add then stays removed, as it should.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrSet {
    /// Tags added, per element.
    adds: BTreeMap<String, BTreeSet<String>>,
    /// Tags removed (any element).
    removed: BTreeSet<String>,
}

impl OrSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `element` under the unique `tag`.
    pub fn add(&mut self, element: &str, tag: &str) {
        self.adds
            .entry(element.to_owned())
            .or_default()
            .insert(tag.to_owned());
    }

    /// Tombstones `tag` (whichever element it belongs to, now or once its add arrives).
    pub fn remove_tag(&mut self, tag: &str) {
        self.removed.insert(tag.to_owned());
    }

    /// Tombstones every tag of `element` observed so far (an observed remove); returns how
    /// many were live.
    pub fn remove_observed(&mut self, element: &str) -> usize {
        let Some(tags) = self.adds.get(element) else {
            return 0;
        };
        let live: Vec<String> = tags
            .iter()
            .filter(|t| !self.removed.contains(*t))
            .cloned()
            .collect();
        let n = live.len();
        self.removed.extend(live);
        n
    }

    /// The tags of `element` added and not removed, in order.
    pub fn live_tags<'a>(&'a self, element: &str) -> impl Iterator<Item = &'a str> + 'a {
        self.adds
            .get(element)
            .into_iter()
            .flatten()
            .filter(|t| !self.removed.contains(*t))
            .map(String::as_str)
    }

    /// Every element, tag and tombstone held (to check their lengths).
    pub fn strings(&self) -> impl Iterator<Item = &str> {
        self.adds
            .iter()
            .flat_map(|(e, tags)| std::iter::once(e).chain(tags))
            .chain(&self.removed)
            .map(String::as_str)
    }

    /// Whether `element` is present.
    pub fn contains(&self, element: &str) -> bool {
        self.adds
            .get(element)
            .is_some_and(|tags| tags.iter().any(|t| !self.removed.contains(t)))
    }

    /// The present elements, in order.
    pub fn elements(&self) -> impl Iterator<Item = &str> {
        self.adds
            .iter()
            .filter(|(_, tags)| tags.iter().any(|t| !self.removed.contains(t)))
            .map(|(e, _)| e.as_str())
    }

    /// Number of present elements.
    pub fn len(&self) -> usize {
        self.elements().count()
    }

    /// Whether no element is present.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Tags and tombstones held (what bounds the set's memory).
    pub fn tag_count(&self) -> usize {
        self.adds.values().map(BTreeSet::len).sum::<usize>() + self.removed.len()
    }

    /// Whether `tag` was added (to any element) or removed.
    pub fn knows_tag(&self, tag: &str) -> bool {
        self.removed.contains(tag) || self.adds.values().any(|t| t.contains(tag))
    }

    /// Union of tags and tombstones.
    pub fn merge(&mut self, other: &Self) {
        for (e, tags) in &other.adds {
            self.adds
                .entry(e.clone())
                .or_default()
                .extend(tags.iter().cloned());
        }
        self.removed.extend(other.removed.iter().cloned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_wins_over_a_concurrent_remove() {
        let mut a = OrSet::new();
        a.add("e", "t1");
        let mut b = a.clone();
        assert_eq!(b.remove_observed("e"), 1);
        a.add("e", "t2"); // concurrent with b's remove
        a.merge(&b);
        assert!(a.contains("e"));
        b.merge(&a);
        assert_eq!(a, b);
    }

    #[test]
    fn a_tombstone_before_its_add_keeps_the_element_out() {
        let mut s = OrSet::new();
        s.remove_tag("t1");
        s.add("e", "t1");
        assert!(!s.contains("e"));
        assert!(s.is_empty());
        s.add("e", "t2");
        assert_eq!(s.elements().collect::<Vec<_>>(), ["e"]);
        assert!(s.knows_tag("t1") && !s.knows_tag("t3"));
        assert_eq!(s.tag_count(), 3);
    }
}

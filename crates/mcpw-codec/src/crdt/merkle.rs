//! The `merkle_root` of a replica: a hash of its content that two replicas agree on exactly
//! when they hold the same counters, tags and tombstones.
//!
//! The tree has one level of leaves, one per key in byte order of the key (counters and
//! sets together: a key is one kind). A leaf is the SHA-256 of the compact JSON text
//! `{"key":K,"type":"g-counter","value":{ACTOR:N,...}}` (actors in byte order, zero entries
//! left out) or `{"key":K,"type":"or-set","value":{"adds":{ELEMENT:[TAG,...],...},"removed":[TAG,...]}}`
//! (elements and tags in byte order), with serde_json's escaping. The root is the SHA-256 of
//! the leaves' 32-byte digests concatenated in that order, written as 64 lowercase hex
//! digits; an empty replica's root is the SHA-256 of no bytes. The vector clock and the
//! record of applied syncs are not content and are not hashed.

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::{GCounter, OrSet};

/// One leaf's hashed text.
#[derive(Serialize)]
struct Leaf<'a, V: Serialize> {
    key: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    value: V,
}

fn leaf_digest<V: Serialize>(key: &str, kind: &'static str, value: V) -> [u8; 32] {
    let text = serde_json::to_vec(&Leaf { key, kind, value }).unwrap_or_default();
    Sha256::digest(text).into()
}

/// The leaf of the G-Counter `key`.
pub(super) fn counter_leaf(key: &str, c: &GCounter) -> [u8; 32] {
    let value: std::collections::BTreeMap<&str, u64> = c.iter().filter(|(_, n)| *n > 0).collect();
    leaf_digest(key, "g-counter", value)
}

/// The leaf of the OR-Set `key`.
pub(super) fn set_leaf(key: &str, s: &OrSet) -> [u8; 32] {
    leaf_digest(key, "or-set", s)
}

/// The root over `leaves`, given in key order, in hex.
pub(super) fn root_of<'a>(leaves: impl Iterator<Item = &'a [u8; 32]>) -> String {
    let mut h = Sha256::new();
    for d in leaves {
        h.update(d);
    }
    hex(&h.finalize())
}

/// The root over `counters` and `sets` (each given in key order), in hex.
#[cfg(test)]
fn root<'a>(
    counters: impl Iterator<Item = (&'a str, &'a GCounter)>,
    sets: impl Iterator<Item = (&'a str, &'a OrSet)>,
) -> String {
    let mut leaves: Vec<(&str, [u8; 32])> = counters
        .map(|(k, c)| (k, counter_leaf(k, c)))
        .chain(sets.map(|(k, s)| (k, set_leaf(k, s))))
        .collect();
    leaves.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    root_of(leaves.iter().map(|(_, d)| d))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_of_nothing_is_the_hash_of_no_bytes() {
        assert_eq!(
            root(std::iter::empty(), std::iter::empty()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn the_root_is_a_hash_of_the_canonical_leaves() {
        let mut c = GCounter::new();
        c.increment("agent-123", 1);
        let mut s = OrSet::new();
        s.add("collab-xyz", "u1");
        s.remove_tag("u0");
        let leaf_c = Sha256::digest(
            br#"{"key":"tasks_completed","type":"g-counter","value":{"agent-123":1}}"#,
        );
        let leaf_s = Sha256::digest(
            br#"{"key":"active","type":"or-set","value":{"adds":{"collab-xyz":["u1"]},"removed":["u0"]}}"#,
        );
        let mut h = Sha256::new();
        h.update(leaf_s); // "active" < "tasks_completed"
        h.update(leaf_c);
        let want = hex(&h.finalize());
        let got = root(
            [("tasks_completed", &c)].into_iter(),
            [("active", &s)].into_iter(),
        );
        assert_eq!(got, want);
        assert_eq!(got.len(), 64);
    }
}

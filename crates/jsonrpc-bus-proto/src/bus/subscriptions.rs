//! Every connection's subscriptions and the index that matches a topic to them.

use agentwire_core::{ConnId, ConnMap};

use crate::message::{ErrorCode, ErrorObject};
use crate::texts;
use crate::topic::{MatchMode, TopicIndex};

#[derive(Debug)]
struct Subscription {
    pattern: String,
    /// The bus's own counter: subscription order across connections.
    seq: u64,
}

/// Every subscription, by connection in subscription order and in the topic index.
#[derive(Debug)]
pub(super) struct Subscriptions {
    by_conn: ConnMap<Vec<Subscription>>,
    /// Keyed by subscription (its `seq`, then its connection): a match names its connection
    /// without another lookup.
    index: TopicIndex<(u64, ConnId)>,
    next_seq: u64,
    scratch_matches: Vec<(u64, ConnId)>,
    scratch_hops: Vec<(ConnId, u64)>,
}

impl Subscriptions {
    pub(super) fn new(mode: MatchMode) -> Self {
        Self {
            by_conn: ConnMap::default(),
            index: TopicIndex::new(mode),
            next_seq: 0,
            scratch_matches: Vec::new(),
            scratch_hops: Vec::new(),
        }
    }

    /// A new connection, with no subscriptions yet.
    pub(super) fn open(&mut self, conn: ConnId) {
        self.by_conn.insert(conn, Vec::new());
    }

    /// The patterns `conn` is subscribed to, in subscription order.
    pub(super) fn patterns(&self, conn: ConnId) -> Vec<&str> {
        self.by_conn
            .get(&conn)
            .map(|subs| subs.iter().map(|s| s.pattern.as_str()).collect())
            .unwrap_or_default()
    }

    /// Subscribes `conn` to `pattern`: -32003 for a pattern it already has, -32005 over
    /// `max` subscriptions.
    pub(super) fn subscribe(
        &mut self,
        conn: ConnId,
        pattern: &str,
        max: usize,
    ) -> Result<(), ErrorObject> {
        let Some(subs) = self.by_conn.get_mut(&conn) else {
            return Err(ErrorObject::new(ErrorCode::INTERNAL_ERROR));
        };
        if subs.iter().any(|s| s.pattern == pattern) {
            return Err(ErrorObject::new(ErrorCode::ALREADY_SUBSCRIBED));
        }
        if subs.len() >= max {
            return Err(ErrorObject::with_data(
                ErrorCode::LIMIT_EXCEEDED,
                texts::MAX_SUBSCRIPTIONS_PER_CONN,
            ));
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        subs.push(Subscription {
            pattern: pattern.to_owned(),
            seq,
        });
        self.index.insert(pattern, (seq, conn));
        Ok(())
    }

    /// Unsubscribes `conn` from `pattern` (-32004 if it never subscribed to it); returns the
    /// pattern as stored.
    pub(super) fn unsubscribe(
        &mut self,
        conn: ConnId,
        pattern: &str,
    ) -> Result<String, ErrorObject> {
        let Some(subs) = self.by_conn.get_mut(&conn) else {
            return Err(ErrorObject::new(ErrorCode::INTERNAL_ERROR));
        };
        let Some(i) = subs.iter().position(|s| s.pattern == pattern) else {
            return Err(ErrorObject::new(ErrorCode::SUBSCRIPTION_NOT_FOUND));
        };
        let sub = subs.remove(i);
        self.index.remove(&sub.pattern, (sub.seq, conn));
        Ok(sub.pattern)
    }

    /// Drops every subscription of `conn`; returns how many it had.
    pub(super) fn remove_conn(&mut self, conn: ConnId) -> usize {
        let subs = self.by_conn.remove(&conn).unwrap_or_default();
        for sub in &subs {
            self.index.remove(&sub.pattern, (sub.seq, conn));
        }
        subs.len()
    }

    /// The chain of a publish on `topic` into `chain`: the matching connections, one per
    /// connection, ordered by their first matching subscription; `publisher` is left out
    /// unless `deliver_to_publisher`.
    pub(super) fn chain(
        &mut self,
        topic: &str,
        publisher: Option<ConnId>,
        deliver_to_publisher: bool,
        chain: &mut Vec<ConnId>,
    ) {
        let mut matches = std::mem::take(&mut self.scratch_matches);
        let mut hops = std::mem::take(&mut self.scratch_hops);
        self.index.matches_into(topic, &mut matches);
        hops.clear();
        for &(seq, conn) in &matches {
            if deliver_to_publisher || Some(conn) != publisher {
                hops.push((conn, seq));
            }
        }
        if hops.len() > 1 {
            in_subscription_order(&mut hops);
        }
        chain.clear();
        chain.extend(hops.iter().map(|(conn, _)| *conn));
        self.scratch_matches = matches;
        self.scratch_hops = hops;
    }
}

/// One hop per connection (its first matching subscription), in subscription order.
/// Out of line: a publish with one subscriber needs none of it.
#[inline(never)]
fn in_subscription_order(hops: &mut Vec<(ConnId, u64)>) {
    hops.sort_unstable();
    hops.dedup_by_key(|(conn, _)| *conn);
    hops.sort_unstable_by_key(|(_, seq)| *seq);
}

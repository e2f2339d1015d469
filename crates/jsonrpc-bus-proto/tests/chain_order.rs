//! Many publishers, many subscribers, answers in any order: every delivery reaches exactly
//! the subscribers its topic matches, in subscription order along its chain, each
//! subscriber sees each publisher's messages in publish order, the in-flight window is never
//! exceeded, and every publisher gets every result.

mod common;

use std::collections::BTreeMap;

use common::Harness;
use jsonrpc_bus_proto::BusConfig;
use proptest::prelude::*;
use serde_json::{json, Value};

/// Topics a message may go to, and patterns a subscriber may hold.
const TOPICS: [&str; 3] = ["a:1", "a:2", "b:1"];
const PATTERNS: [&str; 3] = ["*", "a:*", "b:*"];

fn matches(pattern: &str, topic: &str) -> bool {
    pattern == "*" || topic.starts_with(pattern.trim_end_matches('*'))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    #[test]
    fn chains_keep_each_publishers_order_under_any_answer_order(
        window in 1usize..4,
        patterns in proptest::collection::vec(0usize..3, 1..5),
        messages in proptest::collection::vec((0usize..3, 0usize..3), 1..40),
        picks in proptest::collection::vec(any::<u16>(), 200),
        interleave in any::<bool>(),
    ) {
        let mut config = BusConfig::default();
        config.max_in_flight_per_subscriber = window;
        let mut h = Harness::new(config);
        let subs: Vec<_> = patterns.iter().map(|&p| {
            let c = h.client();
            h.subscribe(c, PATTERNS[p]);
            (c, PATTERNS[p])
        }).collect();
        let pubs: Vec<_> = (0..3).map(|_| h.client()).collect();
        // What each subscriber saw, as (publisher, sequence) in arrival order.
        let mut seen: BTreeMap<usize, Vec<(usize, usize)>> = BTreeMap::new();
        let mut pending: Vec<(usize, Value)> = Vec::new();
        let mut results: BTreeMap<usize, usize> = BTreeMap::new();
        let mut next_pick = picks.iter().cycle();
        let mut published = 0usize;
        let mut seq = [0usize; 3];
        loop {
            // Publish the next message (all up front, or one per step).
            while published < messages.len() && (!interleave || pending.is_empty() || published % 2 == 0) {
                let (p, t) = messages[published];
                h.publish(pubs[p], published as u64 + 1, TOPICS[t], json!({"p": p, "s": seq[p]}));
                seq[p] += 1;
                published += 1;
                if interleave { break; }
            }
            for (i, (conn, _)) in subs.iter().enumerate() {
                let got = h.take(*conn);
                for req in got {
                    let payload = &req["params"]["payload"];
                    let pair = (payload["p"].as_u64().unwrap() as usize, payload["s"].as_u64().unwrap() as usize);
                    seen.entry(i).or_default().push(pair);
                    pending.push((i, req));
                }
                let in_flight = pending.iter().filter(|(s, _)| *s == i).count();
                prop_assert!(in_flight <= window, "subscriber {} has {} in flight, window {}", i, in_flight, window);
            }
            for (p, conn) in pubs.iter().enumerate() {
                *results.entry(p).or_default() += h.take(*conn).len();
            }
            if pending.is_empty() {
                if published == messages.len() { break; }
                continue;
            }
            let at = usize::from(*next_pick.next().unwrap()) % pending.len();
            let (i, req) = pending.swap_remove(at);
            h.answer(subs[i].0, &req, false);
        }
        for (p, conn) in pubs.iter().enumerate() {
            *results.entry(p).or_default() += h.take(*conn).len();
        }
        // Every publish got its result.
        let mut sent = [0usize; 3];
        for &(p, _) in &messages { sent[p] += 1; }
        for (p, n) in sent.iter().enumerate() {
            prop_assert_eq!(results.get(&p).copied().unwrap_or(0), *n);
        }
        // Each subscriber saw exactly the matching messages, each publisher's in order.
        for (i, (_, pattern)) in subs.iter().enumerate() {
            let got = seen.get(&i).cloned().unwrap_or_default();
            let mut expected: Vec<(usize, usize)> = Vec::new();
            let mut s = [0usize; 3];
            for &(p, t) in &messages {
                if matches(pattern, TOPICS[t]) { expected.push((p, s[p])); }
                s[p] += 1;
            }
            for p in 0..3 {
                let mine: Vec<usize> = got.iter().filter(|x| x.0 == p).map(|x| x.1).collect();
                let want: Vec<usize> = expected.iter().filter(|x| x.0 == p).map(|x| x.1).collect();
                prop_assert_eq!(mine, want, "subscriber {} publisher {}", i, p);
            }
        }
    }
}

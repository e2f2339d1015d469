//! Reconnection backoff: doubling delays with jitter and a cap, the try limit, seeded
//! schedules, and no reconnection when it is disabled.
//!
//! `LlmrtcClient` driven directly in simulated time; the server is scripted JSON (harness in
//! `common::client`).

mod common;

use common::client::*;

use std::time::Duration;

use agentwire_core::{Dial, Dialer, Machine, Output};
use llmrtc_proto::{
    ClientConfig, ClientEvent, ConnectionState, LlmrtcClient, Reconnection, SplitMix64,
};

#[test]
fn backoff_doubles_from_one_second_and_gives_up_after_five_tries() {
    let mut h = H::default_started();
    // The first attempt and five retries all fail.
    let mut dial_times = Vec::new();
    for _ in 0..6 {
        let due = h.c.poll_timeout();
        if let Some(t) = due {
            h.advance(t - h.now);
        }
        assert_eq!(h.c.poll_dial(), Dial::Now);
        dial_times.push(h.now);
        h.c.handle_dial_failed("refused", h.now);
        h.drain();
    }
    assert_eq!(h.delays(), [S, S * 2, S * 4, S * 8, S * 16]);
    let gaps: Vec<Duration> = dial_times.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(gaps, [S, S * 2, S * 4, S * 8, S * 16]);
    assert_eq!(h.c.state(), ConnectionState::Failed);
    assert_eq!(h.c.poll_dial(), Dial::Wait);
    assert_eq!(h.c.poll_timeout(), None, "no more tries");
    let attempts: Vec<(u32, u32)> = h
        .events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Reconnecting {
                attempt,
                max_attempts,
                ..
            } => Some((*attempt, *max_attempts)),
            _ => None,
        })
        .collect();
    assert_eq!(attempts, [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]);
    // `start` from failed tries again, with a fresh count.
    h.c.start(h.now).expect("restart");
    assert_eq!(h.c.poll_dial(), Dial::Now);
    assert_eq!(h.c.reconnect_tries(), 0);
}

#[test]
fn backoff_caps_at_thirty_seconds_and_jitter_adds_at_most_thirty_percent() {
    let mut r = Reconnection::default();
    r.max_retries = 10;
    let plain: Vec<u64> = (0..8).map(|n| r.delay(n, 0).as_secs()).collect();
    assert_eq!(plain, [1, 2, 4, 8, 16, 30, 30, 30]);
    let mut rng = SplitMix64::new(7);
    let mut seen = std::collections::BTreeSet::new();
    for n in 0..8 {
        let base = r.delay(n, 0);
        for _ in 0..200 {
            let d = r.delay(n, llmrtc_proto::JitterSource::next_u64(&mut rng));
            assert!(d >= base && d <= base + base * 3 / 10, "{n}: {d:?}");
            seen.insert(d);
        }
    }
    assert!(seen.len() > 1000, "jitter varies: {} distinct", seen.len());
    assert_eq!(r.delay(5, u64::MAX), r.delay(5, u64::MAX), "deterministic");
    assert_eq!(r.delay(u32::MAX, 0), S * 30);
}

#[test]
fn the_same_seed_gives_the_same_schedule_and_another_seed_another() {
    let schedule = |seed| {
        let mut c = LlmrtcClient::new(ClientConfig::default(), SplitMix64::new(seed));
        let now = t0();
        c.start(now).expect("start");
        let mut delays = Vec::new();
        let mut t = now;
        for _ in 0..6 {
            if let Some(due) = c.poll_timeout() {
                t = due;
                c.handle_timeout(t);
            }
            c.handle_dial_failed("x", t);
            while let Some(o) = c.poll_output() {
                if let Output::Event(ClientEvent::Reconnecting { delay, .. }) = o {
                    delays.push(delay);
                }
            }
        }
        delays
    };
    assert_eq!(schedule(1), schedule(1));
    assert_ne!(schedule(1), schedule(2));
    assert_eq!(schedule(3).len(), 5);
}

#[test]
fn without_reconnection_a_loss_ends_in_failed() {
    let mut h = H::new(ClientConfig::default().with_reconnection(Reconnection::disabled()));
    h.c.start(h.now).expect("start");
    let c = h.connected("s");
    h.c.handle_disconnect(c, h.now);
    h.drain();
    assert_eq!(h.c.state(), ConnectionState::Failed);
    assert_eq!(h.c.poll_dial(), Dial::Wait);
}

#[test]
fn tries_restart_from_one_second_after_a_successful_ready() {
    let mut h = H::default_started();
    h.c.handle_dial_failed("refused", h.now);
    h.drain();
    h.advance(S);
    h.c.handle_dial_failed("refused", h.now);
    h.drain();
    h.advance(S * 2);
    let c = h.connected("s");
    assert_eq!(h.c.reconnect_tries(), 0);
    h.c.handle_disconnect(c, h.now);
    h.drain();
    assert_eq!(h.delays(), [S]);
}

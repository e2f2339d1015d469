//! No silent loss: flow control first (the bus stops reading a publisher whose publishes wait
//! beyond `max_backlog_per_publisher`), and where a delivery or a publish must still be
//! dropped, it is counted per reason, reported (rate-limited) as `BusEvent::Dropped`, and
//! answered where the protocol can.

mod common;

use std::time::Duration;

use agentwire_core::sim::{Sim, SimConfig};
use agentwire_core::{ConnId, Flow, FrameBuf, Machine, PeerInfo, SequentialIds};
use common::{error_code, t0, Harness, UNIX_MS};
use jsonrpc_bus_proto::{
    Bus, BusClient, BusConfig, BusEvent, ClientConfig, ClientEvent, DropReason, Limits,
};
use serde_json::json;

fn flows(h: &mut Harness) -> Vec<Flow> {
    std::iter::from_fn(|| h.bus.poll_flow()).collect()
}

fn dropped(events: &[BusEvent]) -> Vec<(DropReason, u64, u64)> {
    events
        .iter()
        .filter_map(|e| match e {
            BusEvent::Dropped {
                reason,
                count,
                total,
            } => Some((*reason, *count, *total)),
            _ => None,
        })
        .collect()
}

/// The issue's burst: one publisher sends 8,000 notifications at once, unpaced, to ten
/// subscribers. Before flow control each subscriber got 1,568 of them and nobody was told.
#[test]
fn an_unpaced_burst_of_8000_notifications_reaches_each_of_10_subscribers_in_full() {
    const MESSAGES: usize = 8_000;
    const SUBSCRIBERS: usize = 10;
    let start = t0();
    let bus = Bus::new(BusConfig::default(), SequentialIds::new(1), start, UNIX_MS);
    let cfg = SimConfig::default()
        .with_latency(Duration::from_millis(1))
        .with_max_steps(10_000_000);
    let mut sim: Sim<Bus, BusClient> = Sim::new(bus, start, cfg);
    let subscribers: Vec<usize> = (0..SUBSCRIBERS)
        .map(|i| {
            let idx = sim.add_client(BusClient::new(
                ClientConfig::new(format!("sub-{i}")),
                SequentialIds::new(100 * (i as u64 + 1)),
            ));
            sim.connect(idx);
            sim.call_client(idx, |c, now| c.subscribe("inbound:*", now))
                .expect("subscribe");
            idx
        })
        .collect();
    sim.settle();
    let publisher = sim.connect_raw(PeerInfo::new(None));
    sim.raw_send(
        publisher,
        FrameBuf::text(
            r#"{"jsonrpc":"2.0","method":"initialize","params":{"clientId":"burst"},"id":0}"#,
        ),
    );
    for n in 0..MESSAGES {
        sim.raw_send(
            publisher,
            FrameBuf::text(format!(
                r#"{{"jsonrpc":"2.0","method":"sendMessage","params":{{"topic":"inbound:burst","payload":{{"n":{n}}}}}}}"#
            )),
        );
    }
    sim.settle();

    for idx in subscribers {
        let got: Vec<u64> = sim
            .take_client_events(idx)
            .into_iter()
            .filter_map(|e| match e {
                ClientEvent::Delivery { payload, .. } => {
                    let v: serde_json::Value = serde_json::from_str(payload.get()).ok()?;
                    v["n"].as_u64()
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            got.len(),
            MESSAGES,
            "subscriber {idx} got {} of {MESSAGES}",
            got.len()
        );
        assert!(
            got.iter().enumerate().all(|(i, n)| *n == i as u64),
            "in order"
        );
    }
    let stats = sim.server().stats();
    assert_eq!(stats.completed, MESSAGES as u64);
    assert_eq!(stats.dropped_subscriber_overloaded, 0);
    assert_eq!(stats.dropped_publisher_overloaded, 0);
    assert!(stats.pauses > 0, "the publisher was paused");
    // Memory stayed bounded by the backlog, not by the burst.
    let backlog = Limits::default().max_backlog_per_publisher;
    assert!(
        stats.peak_deliveries <= backlog,
        "{} deliveries in flight at once",
        stats.peak_deliveries
    );
    let params = r#"{"topic":"inbound:burst","payload":{"n":7999}}"#.len();
    assert!(stats.peak_queued_bytes <= backlog * params, "{stats:?}");
    assert_eq!(stats.queued_bytes, 0);
    assert_eq!(sim.held(), 0);
    assert!(!dropped_any(sim.take_server_events()));
}

fn dropped_any(events: Vec<BusEvent>) -> bool {
    !dropped(&events).is_empty()
}

#[test]
fn a_publisher_is_paused_at_its_backlog_and_resumed_at_half() {
    let mut cfg = BusConfig::default();
    cfg.limits.max_backlog_per_publisher = 4;
    let mut h = Harness::new(cfg);
    let s = h.client();
    h.subscribe(s, "t");
    let p = h.client();
    for i in 0..3 {
        h.publish(p, i, "t", json!({"i": i}));
    }
    assert!(flows(&mut h).is_empty(), "below the backlog");
    h.publish(p, 3, "t", json!({"i": 3}));
    assert_eq!(flows(&mut h), [Flow::PauseReading(p)]);
    assert_eq!(h.bus.stats().pauses, 1);
    // The subscriber answers one at a time: reading resumes once half the backlog ended.
    let mut requests = h.take(s);
    assert_eq!(requests.len(), 4, "window 8: all four in flight");
    let first = requests.remove(0);
    h.answer(s, &first, false);
    assert!(flows(&mut h).is_empty(), "3 of 4 still waiting");
    let second = requests.remove(0);
    h.answer(s, &second, false);
    assert_eq!(flows(&mut h), [Flow::ResumeReading(p)]);
    assert_eq!(h.take(p).len(), 2, "both answered");
}

#[test]
fn a_connection_awaited_as_a_subscriber_is_never_left_paused() {
    let mut cfg = BusConfig::default();
    cfg.limits.max_backlog_per_publisher = 2;
    let mut h = Harness::new(cfg);
    let silent = h.client();
    h.subscribe(silent, "slow");
    let p = h.client();
    h.subscribe(p, "to-p");
    h.publish(p, 1, "slow", json!({}));
    h.publish(p, 2, "slow", json!({}));
    assert_eq!(flows(&mut h), [Flow::PauseReading(p)]);
    // Another publisher's message for p: p must be read again to get its answer.
    let q = h.client();
    h.publish(q, 3, "to-p", json!({}));
    assert_eq!(flows(&mut h), [Flow::ResumeReading(p)]);
    let req = h.one(p);
    h.answer(p, &req, false);
    assert_eq!(h.one(q)["id"], 3);
    // Nothing awaited from p any more, and its backlog is still full: paused again.
    assert_eq!(flows(&mut h), [Flow::PauseReading(p)]);
}

#[test]
fn drops_are_counted_reported_rate_limited_and_answered() {
    let mut cfg = BusConfig::default();
    cfg.limits.max_pending_per_subscriber = 1;
    let mut h = Harness::new(cfg);
    let silent = h.client();
    h.subscribe(silent, "t");
    let publishers: Vec<ConnId> = (0..4).map(|_| h.client()).collect();
    h.take_events();
    for (i, p) in publishers.iter().enumerate() {
        h.publish(*p, i as u64, "t", json!({}));
    }
    // The first fills the silent subscriber's queue; the next three skip it, and each
    // publisher's result says so.
    for p in &publishers[1..] {
        let r = h.one(*p);
        assert_eq!(r["result"]["overloaded"], 1, "{r}");
        assert_eq!(r["result"]["delivered"], 0, "{r}");
    }
    // The first drop is reported at once, the next two summed at the interval's end.
    let events = h.take_events();
    assert_eq!(dropped(&events), [(DropReason::SubscriberOverloaded, 1, 1)]);
    assert!(h.bus.poll_timeout().is_some());
    h.advance(Duration::from_millis(999));
    assert!(dropped(&h.take_events()).is_empty());
    h.advance(Duration::from_millis(1));
    assert_eq!(
        dropped(&h.take_events()),
        [(DropReason::SubscriberOverloaded, 2, 3)]
    );
    assert_eq!(h.bus.stats().dropped_subscriber_overloaded, 3);
    // After a quiet interval, the next drop is reported at once again.
    h.advance(Duration::from_secs(5));
    h.publish(publishers[1], 9, "t", json!({}));
    assert_eq!(
        dropped(&h.take_events()),
        [(DropReason::SubscriberOverloaded, 1, 4)]
    );
}

#[test]
fn a_publish_over_the_publisher_limit_is_refused_counted_and_reported() {
    // A driver that ignores flow control (this harness does) reaches the hard limit.
    let mut cfg = BusConfig::default();
    cfg.limits.max_pending_per_publisher = 2;
    let mut h = Harness::new(cfg);
    let silent = h.client();
    h.subscribe(silent, "t");
    let p = h.client();
    h.take_events();
    h.publish(p, 1, "t", json!({}));
    h.publish(p, 2, "t", json!({}));
    h.publish(p, 3, "t", json!({}));
    let r = h.one(p);
    assert_eq!(error_code(&r), -32005, "a request is answered: {r}");
    assert_eq!(r["error"]["data"], "max_pending_per_publisher");
    // A notification cannot be answered: it is counted and reported.
    h.send(
        p,
        json!({"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t","payload":{}}}),
    );
    assert!(h.take(p).is_empty());
    assert_eq!(h.bus.stats().dropped_publisher_overloaded, 2);
    h.advance(Duration::from_secs(1));
    assert_eq!(
        dropped(&h.take_events()),
        [
            (DropReason::PublisherOverloaded, 1, 1),
            (DropReason::PublisherOverloaded, 1, 2)
        ]
    );
}

//! Property test: the Host keeps the Machine timer contract (idempotent handle_timeout,
//! poll_timeout moves forward, early calls and backwards time are no-ops) under arbitrary
//! joins, refusals, requests, garbage, disconnects and clock moves.

mod common;

use std::time::Duration;

use agent_relay_proto::{Host, HostConfig};
use agentwire_core::sim::{check_timer_contract, TimerInput};
use agentwire_core::{FrameBuf, Machine};
use agentwire_testkit::timer::{timer_inputs, TimerMix};
use proptest::prelude::*;

use common::host::*;
use common::{t0, UNIX_MS};

fn frames() -> impl Strategy<Value = FrameBuf> {
    let join = (1u32..4).prop_map(|n| {
        format!(r#"{{"v":"mvp-0.2","type":"relay.joined","replyTo":"host-join-{n}","payload":{{"role":"host","sessionId":"default"}}}}"#)
    });
    let refuse = (1u32..4).prop_map(|n| {
        format!(r#"{{"v":"mvp-0.2","type":"error","replyTo":"host-join-{n}","payload":{{"code":"LIMIT_EXCEEDED","message":"no"}}}}"#)
    });
    prop_oneof![
        3 => join,
        1 => refuse,
        2 => Just(r#"{"v":"mvp-0.2","type":"session.start","id":"s","payload":{"studyId":"a","participantId":"b"}}"#.to_owned()),
        2 => Just(r#"{"v":"mvp-0.2","type":"session.end","id":"e","payload":{}}"#.to_owned()),
        2 => Just(r#"{"v":"mvp-0.2","type":"tool.call","id":"t","payload":{"toolName":"next","params":{},"reason":"r"}}"#.to_owned()),
        1 => Just(r#"{"v":"mvp-0.2","type":"tool.call","id":"t","payload":{"toolName":"select","params":{"itemId":1},"reason":"r"}}"#.to_owned()),
        1 => Just(r#"{"v":"mvp-0.2","type":"snapshot.get","id":"g","payload":{}}"#.to_owned()),
        1 => Just(r#"{"v":"mvp-0.2","type":"agent.message","payload":{"text":"hi"}}"#.to_owned()),
        1 => ".{0,40}",
    ]
    .prop_map(FrameBuf::text)
}

fn inputs() -> impl Strategy<Value = Vec<TimerInput>> {
    let mix = TimerMix {
        frame_weight: 8,
        conns: 5,
        max_advance: Duration::from_secs(15),
        max_rewind: Duration::from_secs(15),
    };
    timer_inputs(frames(), mix)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn host_keeps_the_timer_contract(inputs in inputs(), short in any::<bool>()) {
        let start = t0();
        let config = if short {
            HostConfig::default()
                .with_join_timeout(Some(Duration::from_secs(2)))
                .with_flush_timeout(Some(Duration::from_secs(3)))
        } else {
            HostConfig::default()
        };
        let mut host = Host::new(config, Booking::new(), start, UNIX_MS);
        let r = check_timer_contract(&mut host, start, &inputs);
        prop_assert!(r.is_ok(), "{:?}", r);
    }
}

#[test]
fn time_going_backwards_is_clamped() {
    let mut h = H::with(HostConfig::default(), Booking::new());
    h.connect();
    let deadline = h.host.poll_timeout().unwrap();
    let earlier = h.now.checked_sub(Duration::from_secs(60)).unwrap_or(h.now);
    h.host.handle_timeout(earlier);
    h.host.handle_timeout(deadline - Duration::from_millis(1));
    h.drain();
    assert_eq!(h.types(), ["relay.join"]);
    assert_eq!(h.host.poll_timeout(), Some(deadline));
    h.host.handle_timeout(deadline);
    h.drain();
    assert_eq!(h.closes().len(), 1);
}

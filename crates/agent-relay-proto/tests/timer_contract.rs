//! Property test: the Relay keeps the Machine timer contract (idempotent handle_timeout,
//! poll_timeout moves forward, early calls and backwards time are no-ops) under arbitrary
//! joins, requests, replies, garbage and disconnects.

use std::time::Duration;

use agent_relay_proto::{Relay, RelayConfig};
use agentwire_core::sim::{check_timer_contract, TimerInput};
use agentwire_core::{FrameBuf, SequentialIds};
use agentwire_testkit::timer::{t0, timer_inputs, TimerMix};
use proptest::prelude::*;

fn frames() -> impl Strategy<Value = FrameBuf> {
    let id = proptest::sample::select(vec!["a", "b", "c"]);
    prop_oneof![
        Just(
            r#"{"v":"mvp-0.2","type":"relay.join","id":"j","payload":{"role":"host"}}"#.to_string()
        ),
        Just(
            r#"{"v":"mvp-0.2","type":"relay.join","id":"j","payload":{"role":"agent"}}"#
                .to_string()
        ),
        Just(
            r#"{"v":"mvp-0.2","type":"relay.join","payload":{"role":"agent","sessionId":"s2"}}"#
                .to_string()
        ),
        id.clone().prop_map(|i| format!(
            r#"{{"v":"mvp-0.2","type":"snapshot.get","id":"{i}","payload":{{}}}}"#
        )),
        id.prop_map(|i| format!(
            r#"{{"v":"mvp-0.2","type":"snapshot.state","replyTo":"{i}","payload":{{}}}}"#
        )),
        Just(r#"{"v":"mvp-0.2","type":"state.updated","payload":{"source":"user"}}"#.to_string()),
        Just(r#"{"v":"mvp-0.2","type":"agent.message","payload":{"text":"hi"}}"#.to_string()),
        ".{0,40}",
    ]
    .prop_map(FrameBuf::text)
}

fn inputs() -> impl Strategy<Value = Vec<TimerInput>> {
    let mix = TimerMix {
        frame_weight: 8,
        conns: 5,
        max_advance: Duration::from_secs(20),
        max_rewind: Duration::from_secs(20),
    };
    timer_inputs(frames(), mix)
}

/// `check_timer_contract` connects on path `/`, so the path check is off here.
fn config(short: bool) -> RelayConfig {
    let c = RelayConfig::default().with_path(None);
    if short {
        c.with_join_timeout(Some(Duration::from_secs(5)))
            .with_pending_timeout(Some(Duration::from_secs(8)))
    } else {
        c
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn relay_keeps_the_timer_contract(inputs in inputs(), short in any::<bool>()) {
        let start = t0();
        let mut relay = Relay::new(config(short), SequentialIds::new(0), start, 0);
        let r = check_timer_contract(&mut relay, start, &inputs);
        prop_assert!(r.is_ok(), "{:?}", r);
    }
}

#[test]
fn a_wrong_path_leaves_no_timer() {
    let start = t0();
    let mut relay = Relay::new(RelayConfig::default(), SequentialIds::new(0), start, 0);
    // Every connection of the checker comes in on `/`: refused, so nothing is ever due.
    let inputs = [
        TimerInput::Connect,
        TimerInput::FireDue,
        TimerInput::Connect,
    ];
    check_timer_contract(&mut relay, start, &inputs).unwrap();
    assert_eq!(agentwire_core::Machine::poll_timeout(&relay), None);
}

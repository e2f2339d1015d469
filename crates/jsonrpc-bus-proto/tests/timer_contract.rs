//! Property test: the Bus and the BusClient keep the Machine timer contract (idempotent
//! handle_timeout, poll_timeout moves forward, early calls and backwards time are no-ops).

use std::time::{Duration, Instant};

use agentwire_core::sim::{check_timer_contract, TimerInput};
use agentwire_core::{FrameBuf, SequentialIds};
use jsonrpc_bus_proto::{Bus, BusClient, BusConfig, ClientConfig};
use proptest::prelude::*;

/// Replies carrying the ids a `SequentialIds::new(0)` generator hands out first.
fn reply(n: u8, stop: bool) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","result":{{"success":true,"stopPropagation":{stop}}},"id":"00000000-0000-4000-8000-0000000000{n:02x}"}}"#
    )
}

fn frames() -> impl Strategy<Value = FrameBuf> {
    prop_oneof![
        Just(r#"{"jsonrpc":"2.0","method":"initialize","params":{"clientId":"a"},"id":1}"#.to_string()),
        Just(r#"{"jsonrpc":"2.0","method":"subscribe","params":{"topic":"t*"},"id":2}"#.to_string()),
        Just(r#"{"jsonrpc":"2.0","method":"subscribe","params":{"topic":"*"},"id":3}"#.to_string()),
        Just(r#"{"jsonrpc":"2.0","method":"unsubscribe","params":{"topic":"t*"},"id":4}"#.to_string()),
        Just(r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t1","payload":{}},"id":5}"#.to_string()),
        Just(r#"[{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t2","payload":1},"id":6},{"jsonrpc":"2.0","method":"ping","id":7}]"#.to_string()),
        Just(r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t3","payload":null},"id":"x"}"#.to_string()),
        Just(r#"{"jsonrpc":"2.0","method":"ping","params":{},"id":8}"#.to_string()),
        Just(r#"{"jsonrpc":"2.0","result":{"serverId":"bus-1","serverInfo":{"name":"bub-bus","version":"0.2.0"},"capabilities":{"subscribe":true,"publish":true,"topics":[]}},"id":"00000000-0000-4000-8000-000000000001"}"#.to_string()),
        (1u8..12, any::<bool>()).prop_map(|(n, stop)| reply(n, stop)),
        Just(r#"{"jsonrpc":"2.0","error":{"code":-1,"message":"no"},"id":"00000000-0000-4000-8000-000000000003"}"#.to_string()),
        Just(r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t","payload":1},"id":"q"}"#.to_string()),
        ".{0,40}",
    ]
    .prop_map(FrameBuf::text)
}

fn inputs() -> impl Strategy<Value = Vec<TimerInput>> {
    let one = prop_oneof![
        2 => Just(TimerInput::Connect),
        8 => (0usize..4, frames()).prop_map(|(n, f)| TimerInput::Frame(n, f)),
        1 => (0usize..4).prop_map(TimerInput::Disconnect),
        3 => (0u64..40_000).prop_map(|ms| TimerInput::Advance(Duration::from_millis(ms))),
        1 => (0u64..20_000).prop_map(|ms| TimerInput::Rewind(Duration::from_millis(ms))),
        2 => Just(TimerInput::Timeout),
        3 => Just(TimerInput::FireDue),
    ];
    proptest::collection::vec(one, 1..80)
}

#[allow(clippy::disallowed_methods)] // the one base time of a test
fn t0() -> Instant {
    Instant::now()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn bus_keeps_the_timer_contract(inputs in inputs()) {
        let start = t0();
        let mut bus = Bus::new(BusConfig::default(), SequentialIds::new(0), start, 0);
        let r = check_timer_contract(&mut bus, start, &inputs);
        prop_assert!(r.is_ok(), "{:?}", r);
    }

    #[test]
    fn client_keeps_the_timer_contract(inputs in inputs()) {
        let mut c = BusClient::new(ClientConfig::new("c"), SequentialIds::new(0));
        let r = check_timer_contract(&mut c, t0(), &inputs);
        prop_assert!(r.is_ok(), "{:?}", r);
    }
}

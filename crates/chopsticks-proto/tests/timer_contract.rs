//! Property test: the Controller and the Agent keep the Machine timer contract
//! (idempotent handle_timeout, poll_timeout moves forward, early calls and backwards time are no-ops).

use std::time::{Duration, Instant};

use agentwire_core::sim::{check_timer_contract, TimerInput};
use agentwire_core::{FrameBuf, SequentialIds};
use chopsticks_proto::{Agent, AgentConfig, Controller, ControllerConfig};
use proptest::prelude::*;

fn frames() -> impl Strategy<Value = FrameBuf> {
    prop_oneof![
        Just(r#"{"type":"hello","protocolVersion":"1.0.0","agentId":"a1","botUserId":null,"tag":null,"ready":true,"guildIds":["g1"],"poolId":"p"}"#.to_string()),
        Just(r#"{"type":"hello","protocolVersion":"1.0.0","agentId":"a2","ready":true,"guildIds":["g1"],"poolId":"p"}"#.to_string()),
        Just(r#"{"type":"hello","protocolVersion":"0.9.0","agentId":"a1"}"#.to_string()),
        Just(r#"{"type":"hello","agentId":"a1"}"#.to_string()),
        Just(r#"{"type":"guilds","guildIds":["g1","g2"]}"#.to_string()),
        Just(r#"{"type":"event","event":"add","agentId":"a1","guildId":"g1","voiceChannelId":"v","channelId":"v","kind":"music","ok":true}"#.to_string()),
        Just(r#"{"type":"event","event":"released","agentId":"a1","guildId":"g1","voiceChannelId":"v","reason":"x","kind":"music"}"#.to_string()),
        Just(r#"{"type":"resp","id":"00000000-0000-4000-8000-000000000001","ok":true}"#.to_string()),
        Just(r#"{"type":"req","id":"00000000-0000-4000-8000-000000000001","op":"play","data":{},"agentId":"a1"}"#.to_string()),
        Just(r#"{"type":"error","error":"nope"}"#.to_string()),
        Just(r#"{"type":"dance"}"#.to_string()),
        ".{0,40}",
    ]
    .prop_map(FrameBuf::text)
}

fn inputs() -> impl Strategy<Value = Vec<TimerInput>> {
    let one = prop_oneof![
        2 => Just(TimerInput::Connect),
        6 => (0usize..4, frames()).prop_map(|(n, f)| TimerInput::Frame(n, f)),
        1 => (0usize..4).prop_map(TimerInput::Disconnect),
        1 => (0usize..4).prop_map(TimerInput::Pong),
        3 => (0u64..50_000).prop_map(|ms| TimerInput::Advance(Duration::from_millis(ms))),
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
    fn controller_keeps_the_timer_contract(inputs in inputs()) {
        let mut c = Controller::new(ControllerConfig::default(), SequentialIds::new(0));
        let r = check_timer_contract(&mut c, t0(), &inputs);
        prop_assert!(r.is_ok(), "{:?}", r);
    }

    #[test]
    fn agent_keeps_the_timer_contract(inputs in inputs()) {
        let mut a = Agent::new(AgentConfig::new("a1").with_guilds(["g1"]));
        let r = check_timer_contract(&mut a, t0(), &inputs);
        prop_assert!(r.is_ok(), "{:?}", r);
    }
}

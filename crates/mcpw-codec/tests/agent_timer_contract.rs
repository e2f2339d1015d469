//! The `Agent` keeps the timer rules of the `Machine` contract under arbitrary input:
//! heartbeats, reconnect waits and the shutdown deadline move forward, and
//! `handle_timeout` is idempotent.

use std::time::{Duration, Instant};

use agentwire_core::sim::{check_timer_contract, TimerInput};
use agentwire_core::{ConnId, Dialer, FrameBuf, Machine, PeerInfo};
use mcpw_codec::{Agent, AgentConfig, AgentRegister, Capability, Reconnect};
use proptest::prelude::*;

#[allow(clippy::disallowed_methods)] // the one base time of a test
fn t0() -> Instant {
    Instant::now()
}

fn frames() -> Vec<FrameBuf> {
    vec![
        FrameBuf::text(
            r#"{"id":"agent-1-1","type":1,"method":"registration.confirmed","params":{"agent_id":"agent-1","heartbeat_interval_ms":2000}}"#,
        ),
        FrameBuf::text(
            r#"{"type":1,"method":"registration.confirmed","params":{"agent_id":"agent-1","heartbeat_interval_ms":0}}"#,
        ),
        FrameBuf::text(r#"{"type":2,"method":"task.assigned","params":{"task_id":"t-1"}}"#),
        FrameBuf::text(r#"{"id":"p","type":4}"#),
        FrameBuf::text(r#"{"id":"agent-1-2","type":1,"params":{"binary_enabled":true}}"#),
        FrameBuf::text(r#"{"id":"agent-1-3","type":3,"error":{"code":4008,"message":"no"}}"#),
        FrameBuf::text("garbage"),
    ]
}

fn input() -> impl Strategy<Value = TimerInput> {
    let f = frames();
    prop_oneof![
        Just(TimerInput::Connect),
        (any::<usize>(), 0..f.len()).prop_map(move |(n, i)| TimerInput::Frame(n, f[i].clone())),
        any::<usize>().prop_map(TimerInput::Disconnect),
        (0u64..40_000).prop_map(|ms| TimerInput::Advance(Duration::from_millis(ms))),
        (0u64..5_000).prop_map(|ms| TimerInput::Rewind(Duration::from_millis(ms))),
        Just(TimerInput::Timeout),
        Just(TimerInput::FireDue),
    ]
}

fn agent(initial_ms: u64) -> Agent {
    let cfg = AgentConfig::new(AgentRegister {
        agent_id: "agent-1".into(),
        agent_type: None,
        capabilities: vec![Capability::new("code_review", 0.9)],
        model: None,
        resources: None,
        metadata: None,
    })
    .with_heartbeat_interval(Duration::from_millis(1500))
    .with_reconnect(Reconnect::new(
        Duration::from_millis(initial_ms),
        Duration::from_secs(4),
    ));
    Agent::new(cfg)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    /// Each run starts from a state a command left (a failed attempt waiting, a pending
    /// `protocol.set_binary`, a shutdown under way), set up at the start time.
    #[test]
    fn timers_move_forward_and_handle_timeout_is_idempotent(
        inputs in prop::collection::vec(input(), 0..80),
        initial_ms in 0u64..2_000,
        dial_failed: bool,
        set_binary: bool,
        shutdown: bool,
    ) {
        let start = t0();
        let mut m = agent(initial_ms);
        if dial_failed {
            m.handle_dial_failed("refused", start);
        }
        if set_binary || shutdown {
            m.handle_connect(ConnId::new(1000), &PeerInfo::new(None), start);
            if set_binary {
                let _ = m.set_binary(true, Some(64));
            }
            if shutdown {
                let _ = m.shutdown("bye", false, start);
            }
        }
        while m.poll_output().is_some() {}
        if let Err(e) = check_timer_contract(&mut m, start, &inputs) {
            panic!("{e}");
        }
    }
}

#[test]
fn once_stopped_nothing_is_left_to_wait_for() {
    let now = t0();
    let mut m = agent(500);
    m.handle_dial_failed("refused", now);
    assert!(m.poll_timeout().is_some());
    m.close(now);
    assert_eq!(m.poll_timeout(), None);
}

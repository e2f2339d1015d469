//! The `Agent` keeps the timer rules of the `Machine` contract under arbitrary input:
//! heartbeats, reconnect waits and the shutdown deadline move forward, and
//! `handle_timeout` is idempotent.

use std::time::Duration;

use agentwire_core::sim::{check_timer_contract, TimerInput};
use agentwire_core::{ConnId, Dialer, FrameBuf, Machine, PeerInfo};
use agentwire_testkit::timer::{t0, timer_inputs, TimerMix};
use mcpw_codec::{Agent, AgentConfig, AgentRegister, Capability, Reconnect};
use proptest::prelude::*;

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

/// One connection at a time (a client role); clock moves up to 40 s forward and 5 s back.
fn inputs() -> impl Strategy<Value = Vec<TimerInput>> {
    let f = frames();
    let frame = (0..f.len()).prop_map(move |i| f[i].clone());
    timer_inputs(
        frame,
        TimerMix {
            conns: 1,
            max_rewind: Duration::from_secs(5),
            ..TimerMix::default()
        },
    )
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
        inputs in inputs(),
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

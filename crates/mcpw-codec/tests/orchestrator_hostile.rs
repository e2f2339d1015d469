//! Hostile input through the public API: garbage, truncated, wrong-type and oversize frames
//! in both forms never panic, get the spec's error reply, and leave other connections
//! working; arbitrary input sequences keep the timer contract.

use std::time::{Duration, Instant};

use agentwire_core::sim::{check_timer_contract, TimerInput};
use agentwire_core::{ConnId, Frame, FrameBuf, Machine, Output, PeerInfo, SequentialIds};
use mcpw_codec::orchestrator::{Orchestrator, OrchestratorConfig, TaskSpec};
use proptest::prelude::*;

mod common;

use common::{json_of, t0};

fn orch(now: Instant) -> Orchestrator {
    let mut cfg = OrchestratorConfig::default().with_heartbeat_interval(Duration::from_secs(2));
    cfg.limits.max_message_bytes = 4096;
    Orchestrator::new(cfg, SequentialIds::new(7), now, 0)
}

/// Error codes (or `None` for non-error replies) sent to `conn`.
fn replies(o: &mut Orchestrator, conn: ConnId) -> Vec<Option<u64>> {
    let mut v = Vec::new();
    while let Some(out) = o.poll_output() {
        if let Output::Send { conn: c, frame } = out {
            if c == conn {
                let json = json_of(&frame);
                v.push(json["error"]["code"].as_u64());
            }
        }
    }
    v
}

fn header(msg_type: u8, seq: u64, size: u32) -> Vec<u8> {
    let mut h = b"MCPW\x01".to_vec();
    h.push(msg_type);
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(&seq.to_be_bytes());
    h.extend_from_slice(&[0, 0, 0, 0]);
    h.extend_from_slice(&size.to_be_bytes());
    h
}

#[test]
fn bad_frames_get_their_error_and_the_other_connection_keeps_working() {
    let now = t0();
    let mut o = orch(now);
    let (bad, good) = (ConnId::new(1), ConnId::new(2));
    o.handle_connect(bad, &PeerInfo::new(None), now);
    o.handle_connect(good, &PeerInfo::new(None), now);
    let _ = replies(&mut o, bad);
    let big = "x".repeat(5000);
    let mut bad_magic = header(0, 1, 0);
    bad_magic[0] = b'X';
    let mut v99 = header(0, 1, 0);
    v99[4] = 99;
    let cases: Vec<(FrameBuf, u64)> = vec![
        (FrameBuf::text("{"), 4000),
        (FrameBuf::text("[]"), 4000),
        (FrameBuf::text(r#"{"id":{},"method":"x"}"#), 4000),
        (
            FrameBuf::text(r#"{"id":"1","type":"zero","method":"agent.register"}"#),
            4000,
        ),
        (
            FrameBuf::text(r#"{"id":"1","method":"agent.register","params":"nope"}"#),
            4005,
        ),
        (
            FrameBuf::text(r#"{"id":"1","method":"agent.register","params":{"agent_id":7}}"#),
            4005,
        ),
        (
            FrameBuf::text(r#"{"id":"1","method":"no.such.method"}"#),
            4004,
        ),
        (
            FrameBuf::text(r#"{"id":"1","type":9,"method":"ping"}"#),
            4000,
        ),
        (FrameBuf::text(big), 4007),
        (FrameBuf::binary(b"MCPW".to_vec()), 4000),
        (FrameBuf::binary(bad_magic), 4000),
        (FrameBuf::binary(v99), 4000),
        (FrameBuf::binary(header(0, 3, 2 << 20)), 4007),
        (
            FrameBuf::binary([header(0, 3, 10), b"{}".to_vec()].concat()),
            4000,
        ),
        (
            FrameBuf::binary([header(0, 3, 2), b"{x".to_vec()].concat()),
            4000,
        ),
    ];
    for (frame, code) in cases {
        let f = match &frame {
            FrameBuf::Text(t) => Frame::Text(t.as_str()),
            FrameBuf::Binary(b) => Frame::Binary(b),
        };
        o.handle_frame(bad, f, now);
        assert_eq!(replies(&mut o, bad), [Some(code)], "{frame:?}");
    }
    o.handle_frame(
        good,
        Frame::Text(r#"{"id":"r","method":"agent.register","params":{"agent_id":"g"}}"#),
        now,
    );
    assert_eq!(replies(&mut o, good), [None]);
    assert!(o.agent("g").is_some());
}

fn frames() -> impl Strategy<Value = FrameBuf> {
    let task = proptest::sample::select(vec!["t1", "t2"]);
    prop_oneof![
        Just(r#"{"id":"r","method":"agent.register","params":{"agent_id":"a","capabilities":[{"name":"review","confidence":0.9}]}}"#.to_owned()),
        Just(r#"{"id":"r","method":"agent.register","params":{"agent_id":"b","capabilities":[{"name":"review","confidence":0.5}]}}"#.to_owned()),
        Just(r#"{"method":"agent.heartbeat","type":2,"params":{"agent_id":"a"}}"#.to_owned()),
        Just(r#"{"id":"s","method":"agent.shutdown","params":{"agent_id":"a","graceful_timeout_ms":1500,"transfer_tasks":true}}"#.to_owned()),
        Just(r#"{"id":"c","method":"collaboration.request","params":{"task_id":"x","requesting_agent":"a","collaboration_type":"vote","required_agents":["b"],"timeout_ms":900}}"#.to_owned()),
        task.clone().prop_map(|t| format!(r#"{{"id":"p","type":7,"method":"task.progress","params":{{"task_id":"{t}","agent_id":"a","progress":0.5}}}}"#)),
        task.prop_map(|t| format!(r#"{{"id":"d","method":"task.complete","params":{{"task_id":"{t}","agent_id":"b","status":"completed"}}}}"#)),
        Just(r#"{"id":"1","type":1,"result":{}}"#.to_owned()),
        ".{0,40}",
    ]
    .prop_map(FrameBuf::text)
}

fn inputs() -> impl Strategy<Value = Vec<TimerInput>> {
    let one = prop_oneof![
        2 => Just(TimerInput::Connect),
        8 => (0usize..4, frames()).prop_map(|(n, f)| TimerInput::Frame(n, f)),
        1 => (0usize..4).prop_map(TimerInput::Disconnect),
        3 => (0u64..5_000).prop_map(|ms| TimerInput::Advance(Duration::from_millis(ms))),
        1 => (0u64..5_000).prop_map(|ms| TimerInput::Rewind(Duration::from_millis(ms))),
        2 => Just(TimerInput::Timeout),
        3 => Just(TimerInput::FireDue),
    ];
    proptest::collection::vec(one, 1..60)
}

proptest! {
    #[test]
    fn the_orchestrator_keeps_the_timer_contract(inputs in inputs(), tasks in 0usize..3) {
        let now = t0();
        let mut o = orch(now);
        for i in 0..tasks {
            let spec = TaskSpec::new("review").with_id(format!("t{}", i + 1)).with_deadline(Duration::from_secs(4));
            o.submit_task(spec, now).unwrap();
        }
        check_timer_contract(&mut o, now, &inputs).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), text in ".{0,200}") {
        let now = t0();
        let mut o = orch(now);
        let c = ConnId::new(1);
        o.handle_connect(c, &PeerInfo::new(None), now);
        let mut framed = header(0, 1, u32::try_from(bytes.len()).unwrap());
        framed.extend_from_slice(&bytes);
        o.handle_frame(c, Frame::Binary(&bytes), now);
        o.handle_frame(c, Frame::Binary(&framed), now);
        o.handle_frame(c, Frame::Text(&text), now);
        prop_assert_eq!(replies(&mut o, c).len(), 3);
    }
}

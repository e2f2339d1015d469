//! Streamed messages (decision 50): the agent streams what is too large for one frame, the
//! orchestrator reassembles it within its limits, and hostile streams get typed errors.

mod common;

use agentwire_core::{ConnId, Machine, Output, PeerInfo, SequentialIds};
use common::{t0, Env};
use mcpw_codec::orchestrator::{
    Orchestrator, OrchestratorConfig, OrchestratorEvent, OrchestratorLimits, TaskSpec,
};
use mcpw_codec::{Agent, AgentConfig, AgentEvent, AgentRegister, Codec, Flags, TaskComplete};
use serde_json::{json, Value};

/// A result of `bytes` pseudo-random letters and digits: gzip cannot fit it in 1 MiB.
fn big_result(bytes: usize) -> Value {
    let mut x: u32 = 7;
    let blob: String = (0..bytes)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            char::from(
                b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                    [(x >> 16) as usize % 62],
            )
        })
        .collect();
    json!({ "summary": blob })
}

struct Pair {
    o: Orchestrator,
    a: Agent,
    now: std::time::Instant,
    server: Vec<OrchestratorEvent>,
    agent: Vec<AgentEvent>,
    /// Frames the agent sent, with the flags of those in the 24-byte form.
    sent: Vec<(usize, Option<Flags>)>,
}

impl Pair {
    fn new(binary: bool) -> Self {
        let now = t0();
        let register: AgentRegister = serde_json::from_value(json!({
            "agent_id": "a", "capabilities": [{"name": "code_review", "confidence": 0.9}]
        }))
        .unwrap();
        let cfg = OrchestratorConfig::default().with_rate(None);
        let mut p = Self {
            o: Orchestrator::new(cfg, SequentialIds::new(1), now, 0),
            a: Agent::new(AgentConfig::new(register).with_binary(binary)),
            now,
            server: Vec::new(),
            agent: Vec::new(),
            sent: Vec::new(),
        };
        let c = ConnId::new(1);
        p.o.handle_connect(c, &PeerInfo::new(None), now);
        p.a.handle_connect(c, &PeerInfo::new(None), now);
        p.pump();
        p
    }

    /// Moves frames both ways until neither side has any.
    fn pump(&mut self) {
        let c = ConnId::new(1);
        loop {
            let mut moved = false;
            while let Some(out) = self.a.poll_output() {
                match out {
                    Output::Send { frame, .. } => {
                        let flags = Codec::default()
                            .decode_ws(frame.as_frame())
                            .ok()
                            .filter(|_| frame.as_text().is_none())
                            .map(|(m, _)| m.flags);
                        self.sent.push((frame.len(), flags));
                        self.o.handle_frame(c, frame.as_frame(), self.now);
                        moved = true;
                    }
                    Output::Event(e) => self.agent.push(e),
                    Output::Close { .. } => {}
                }
            }
            while let Some(out) = self.o.poll_output() {
                match out {
                    Output::Send { frame, .. } => {
                        self.a.handle_frame(c, frame.as_frame(), self.now);
                        moved = true;
                    }
                    Output::Event(e) => self.server.push(e),
                    Output::Close { .. } => {}
                }
            }
            if !moved {
                return;
            }
        }
    }
}

#[test]
fn a_task_result_too_large_for_one_frame_is_streamed_and_completes() {
    for binary in [false, true] {
        let mut p = Pair::new(binary);
        assert!(p.a.is_registered());
        let spec = TaskSpec::new("code_review").with_id("t1");
        p.o.submit_task(spec, p.now).unwrap();
        p.pump();
        assert_eq!(p.a.tasks().collect::<Vec<_>>(), ["t1"]);
        p.sent.clear();
        let done: TaskComplete = serde_json::from_value(json!({
            "task_id": "t1", "agent_id": "a", "status": "completed",
            "result": big_result(3 << 20)
        }))
        .unwrap();
        p.a.complete_task(done).expect("streamed, not refused");
        p.pump();
        let parts = p.sent.len();
        assert!(parts >= 12, "3 MiB in 256 KiB parts: {parts}");
        assert!(p.sent.iter().all(|(len, _)| *len < 300 << 10));
        if binary {
            assert!(p
                .sent
                .iter()
                .all(|(_, f)| f.unwrap().contains(Flags::STREAMING)));
        }
        assert!(
            p.server
                .iter()
                .any(|e| matches!(e, OrchestratorEvent::TaskCompleted { .. })),
            "binary {binary}: {:?}",
            p.server
        );
        assert!(
            p.agent
                .iter()
                .any(|e| matches!(e, AgentEvent::CompletionAccepted { .. })),
            "the answer names the whole message: {:?}",
            p.agent
        );
    }
}

fn part(id: &str, index: u32, last: bool, data: &str) -> Value {
    json!({"type": 2, "method": "stream.part",
           "params": {"stream_id": id, "index": index, "final": last, "data": data}})
}

fn error_code(v: &Value) -> i64 {
    v["error"]["code"].as_i64().unwrap_or(0)
}

#[test]
fn hostile_streams_get_typed_errors_and_the_connection_keeps_working() {
    let mut limits = OrchestratorLimits::default();
    limits.max_stream_bytes = 1000;
    limits.max_streams = 2;
    let mut e = Env::new(OrchestratorConfig::default().with_limits(limits));
    let stranger = e.connect(9);
    e.send(stranger, part("s", 0, true, "{}"));
    assert_eq!(error_code(&e.take(stranger)[0]), 4001, "register first");

    let c = e.register(1, "a", common::review(0.9));
    let expect = |e: &mut Env, v: Value, code: i64| {
        e.send(c, v);
        let got = e.take(c);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(error_code(&got[0]), code, "{got:?}");
    };
    // Params that are not a part: 4005.
    expect(
        &mut e,
        json!({"type": 2, "method": "stream.part", "params": {"index": "x"}}),
        4005,
    );
    // Out of order: 4000, and the stream is gone.
    e.send(c, part("s1", 0, false, "{\"type\":"));
    expect(&mut e, part("s1", 2, false, "2"), 4000);
    expect(&mut e, part("s1", 1, true, "2}"), 4000);
    // Too many at once: 4003.
    e.send(c, part("s2", 0, false, "{"));
    e.send(c, part("s3", 0, false, "{"));
    expect(&mut e, part("s4", 0, false, "{"), 4003);
    // Too large: 4007; its bytes are freed, so a small stream still fits.
    expect(&mut e, part("s2", 1, false, &"x".repeat(1000)), 4007);
    // What the parts join to: a batch or a part is refused (4000), garbage is 4000.
    expect(
        &mut e,
        part(
            "s5",
            0,
            true,
            r#"{"type":6,"params":{"messages":[],"count":0}}"#,
        ),
        4000,
    );
    expect(
        &mut e,
        part("s6", 0, true, &part("x", 0, true, "{}").to_string()),
        4000,
    );
    expect(&mut e, part("s7", 0, true, "not json"), 4000);
    // The connection still works, and a good stream is handled: a ping in two parts.
    e.send(c, part("ok", 0, false, r#"{"id":"p1","type":4,"#));
    e.send(
        c,
        json!({"id": "p-last", "type": 2, "method": "stream.part",
        "params": {"stream_id": "ok", "index": 1, "final": true, "data": "\"method\":\"ping\"}"}}),
    );
    let got = e.take(c);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        got[0]["id"], "p-last",
        "answered with the last part's id: {got:?}"
    );
    assert_eq!(got[0]["params"]["pong"], true, "{got:?}");
}

//! The Orchestrator's refusals, in simulated time: register first (4001), invalid params
//! (4005), unknown methods (4004), malformed frames (4000), oversize messages (4007) and the
//! rate limit (4002) with its refill.

mod common;

use std::time::Duration;

use agentwire_core::{Frame, Machine};
use common::*;
use mcpw_codec::orchestrator::OrchestratorConfig;
use serde_json::json;

#[test]
fn errors_4004_4005_4000_and_register_first() {
    let mut e = Env::new(OrchestratorConfig::default());
    let c = e.connect(1);
    e.send(
        c,
        json!({"id": "1", "method": "task.complete", "params": {}}),
    );
    assert_eq!(e.take(c)[0]["error"]["code"], 4001, "register first");
    e.send(
        c,
        json!({"id": "2", "method": "agent.register", "params": {"capabilities": []}}),
    );
    let r = e.take(c);
    assert_eq!(r[0]["type"], 3);
    assert_eq!(r[0]["id"], "2");
    assert_eq!(r[0]["error"]["code"], 4005);
    assert_eq!(r[0]["error"]["data"]["field"], "agent_id");
    e.send(
        c,
        json!({"id": "3", "method": "tool.teleport", "params": {}}),
    );
    assert_eq!(e.take(c)[0]["error"]["code"], 4004);
    e.o.handle_frame(c, Frame::Text("{nope"), e.now);
    e.drain();
    assert_eq!(e.take(c)[0]["error"]["code"], 4000);
    e.o.handle_frame(c, Frame::Binary(b"not a header"), e.now);
    e.drain();
    assert_eq!(e.take(c)[0]["error"]["code"], 4000);
    // The connection still works.
    e.send(
        c,
        json!({"id": "4", "method": "agent.register", "params": {"agent_id": "a"}}),
    );
    assert_eq!(e.take(c)[0]["method"], "registration.confirmed");
    assert_eq!(e.o.metrics().messages_with_status("invalid_params"), 1);
}

#[test]
fn oversize_is_4007() {
    let mut cfg = OrchestratorConfig::default();
    cfg.limits.max_message_bytes = 64;
    let mut e = Env::new(cfg);
    let c = e.connect(1);
    let big = format!(
        r#"{{"id":"1","method":"agent.register","params":{{"agent_id":"{}"}}}}"#,
        "x".repeat(100)
    );
    e.o.handle_frame(c, Frame::Text(&big), e.now);
    e.drain();
    assert_eq!(e.take(c)[0]["error"]["code"], 4007);
}

#[test]
fn rate_limit_is_4002_after_the_burst_and_refills() {
    let mut e = Env::new(OrchestratorConfig::default());
    let c = e.register(1, "a", review(0.9));
    let ping = json!({"id": "p", "type": 0, "method": "ping"});
    for _ in 0..99 {
        e.send(c, ping.clone());
    }
    assert!(
        e.take(c).iter().all(|r| r["type"] == 1),
        "the burst of 100 (register included) passes"
    );
    e.send(c, ping.clone());
    let r = e.take(c);
    assert_eq!(r[0]["error"]["code"], 4002);
    assert_eq!(r[0]["error"]["data"]["retry_after_ms"], 60);
    e.advance(Duration::from_millis(60));
    e.send(c, ping);
    assert_eq!(e.take(c)[0]["type"], 1, "1000/min: one more every 60 ms");
}

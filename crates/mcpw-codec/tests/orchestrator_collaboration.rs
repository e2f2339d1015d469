//! Collaboration requests at the Orchestrator, in simulated time: fanned out to the required
//! agents and answered once all reply or the timeout passes.

mod common;

use std::time::Duration;

use common::*;
use mcpw_codec::orchestrator::OrchestratorConfig;
use serde_json::json;

#[test]
fn collaboration_is_fanned_out_and_answered_after_all_reply_or_the_timeout() {
    let mut e = Env::new(OrchestratorConfig::default());
    let a = e.register(1, "a", json!([]));
    let b = e.register(2, "b", json!([]));
    let c = e.register(3, "c", json!([]));
    let req = json!({"id": "col", "method": "collaboration.request", "params": {"task_id": "task-789", "requesting_agent": "a",
        "collaboration_type": "consensus", "required_agents": ["b", "c", "ghost"], "timeout_ms": 30000}});
    e.send(a, req);
    assert!(e.take(a).is_empty(), "answered later");
    let to_b = e.take(b);
    assert_eq!(to_b[0]["method"], "collaboration.request");
    assert_eq!(to_b[0]["params"]["task_id"], "task-789");
    let to_c = e.take(c);
    e.send(
        b,
        json!({"id": to_b[0]["id"], "type": 1, "result": {"vote": "approve"}}),
    );
    assert!(e.take(a).is_empty(), "c has not answered yet");
    e.advance(Duration::from_secs(30));
    let r = e.take(a);
    assert_eq!(r[0]["id"], "col");
    assert_eq!(
        r[0]["params"]["responses"],
        json!({"b": {"vote": "approve"}})
    );
    assert_eq!(r[0]["params"]["missing"], json!(["c", "ghost"]));
    // c's late answer is dropped.
    e.send(
        c,
        json!({"id": to_c[0]["id"], "type": 1, "result": {"vote": "reject"}}),
    );
    assert!(e.take(a).is_empty() && e.take(c).is_empty());
}

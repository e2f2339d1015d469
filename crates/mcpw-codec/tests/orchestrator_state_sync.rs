//! `state.sync` at the Orchestrator: operations merge into the CRDT store once, and a key used
//! as another kind is a conflict.

mod common;

use common::*;
use mcpw_codec::orchestrator::OrchestratorConfig;
use serde_json::json;

#[test]
fn state_sync_merges_into_the_crdt_store_once() {
    let mut e = Env::new(OrchestratorConfig::default());
    let a = e.register(1, "agent-123", json!([]));
    let sync = json!({"id": "s", "type": 0, "method": "state.sync", "params": {
        "agent_id": "agent-123", "vector_clock": {"agent-123": 42, "agent-456": 38},
        "operations": [
            {"type": "g-counter", "key": "tasks_completed", "increment": 1, "actor": "agent-123"},
            {"type": "or-set", "key": "active_collaborations", "operation": "add", "element": "collab-xyz", "unique_id": "u-1"}],
        "merkle_root": "a1b2c3"}});
    e.send(a, sync.clone());
    assert_eq!(e.take(a)[0]["params"]["applied"], true);
    e.send(a, sync);
    let r = e.take(a);
    assert_eq!(r[0]["params"]["applied"], false);
    assert_eq!(
        r[0]["params"]["vector_clock"],
        json!({"agent-123": 42, "agent-456": 38})
    );
    let st = e.o.state();
    assert_eq!(st.counter("tasks_completed").unwrap().value(), 1);
    assert!(st
        .set("active_collaborations")
        .unwrap()
        .contains("collab-xyz"));
    // The same key as another kind is a conflict (4008).
    e.send(a, json!({"id": "k", "method": "state.sync", "params": {"agent_id": "agent-123", "vector_clock": {"agent-123": 43},
        "operations": [{"type": "or-set", "key": "tasks_completed", "operation": "add", "element": "x", "unique_id": "u"}]}}));
    assert_eq!(e.take(a)[0]["error"]["code"], 4008);
}

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

#[test]
fn a_merged_sync_reaches_the_agents_sharing_the_state_and_state_get_reads_it_back() {
    let mut e = Env::new(OrchestratorConfig::default());
    let a = e.register(1, "a", json!([]));
    let b = e.register(2, "b", json!([]));
    let c = e.register(3, "c", json!([]));
    // b shares the state (state.get); c never asked, so it is not sent syncs.
    e.send(b, json!({"id": "g", "method": "state.get"}));
    let snap = e.take(b);
    assert_eq!(snap[0]["id"], "g");
    let empty_root = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    assert_eq!(snap[0]["params"]["merkle_root"], empty_root);
    e.send(a, json!({"id": "s1", "method": "state.sync", "params": {"agent_id": "a", "vector_clock": {"a": 1},
        "operations": [{"type": "or-set", "key": "active", "operation": "add", "element": "x", "unique_id": "a-1"},
                       {"type": "g-counter", "key": "done", "increment": 2, "actor": "a"}]}}));
    let r = e.take(a);
    let root = e.o.state().merkle_root();
    assert_eq!(r[0]["params"]["merkle_root"], root.as_str());
    assert_eq!(r[0]["params"].get("state"), None);
    let n = e.take(b);
    assert_eq!(n.len(), 1);
    assert_eq!(n[0]["type"], 2);
    assert_eq!(n[0]["method"], "state.sync");
    assert_eq!(n[0]["params"]["agent_id"], "a");
    assert_eq!(n[0]["params"]["vector_clock"], json!({"a": 1}));
    assert_eq!(n[0]["params"]["merkle_root"], root.as_str());
    assert_eq!(n[0]["params"]["operations"].as_array().unwrap().len(), 2);
    assert!(e.take(c).is_empty(), "c does not share the state");
    // A repeat is not passed on; a remove that names no tag is passed on with the tags
    // the server observed, so every replica removes the same adds.
    e.send(a, json!({"id": "s1b", "method": "state.sync", "params": {"agent_id": "a", "vector_clock": {"a": 1}, "operations": []}}));
    assert_eq!(e.take(a)[0]["params"]["applied"], false);
    assert!(e.take(b).is_empty());
    e.send(a, json!({"id": "s2", "method": "state.sync", "params": {"agent_id": "a", "vector_clock": {"a": 2},
        "operations": [{"type": "or-set", "key": "active", "operation": "remove", "element": "x"}]}}));
    e.take(a);
    let n = e.take(b);
    assert_eq!(
        n[0]["params"]["operations"],
        json!([{"type": "or-set", "key": "active", "operation": "remove", "element": "x", "unique_id": "a-1"}])
    );
    // state.get reads the whole state back: content, clock, applied syncs, root.
    e.send(c, json!({"id": "g2", "method": "state.get", "params": {}}));
    let s = &e.take(c)[0]["params"];
    assert_eq!(s["counters"], json!({"done": {"a": 2}}));
    assert_eq!(
        s["sets"],
        json!({"active": {"adds": {"x": ["a-1"]}, "removed": ["a-1"]}})
    );
    assert_eq!(s["vector_clock"], json!({"a": 2}));
    assert_eq!(s["applied"], json!({"a": {"floor": 2}}));
    assert_eq!(s["merkle_root"], e.o.state().merkle_root().as_str());
    // Before registering, state.get is refused like any other method.
    let d = e.connect(9);
    e.send(d, json!({"id": "g3", "method": "state.get"}));
    assert_eq!(e.take(d)[0]["error"]["code"], 4001);
}

#[test]
fn a_sender_whose_root_shows_it_diverged_gets_a_full_sync() {
    let mut e = Env::new(OrchestratorConfig::default());
    let a = e.register(1, "a", json!([]));
    let b = e.register(2, "b", json!([]));
    e.send(b, json!({"id": "b1", "method": "state.sync", "params": {"agent_id": "b", "vector_clock": {"b": 1},
        "operations": [{"type": "g-counter", "key": "done", "increment": 1, "actor": "b"}]}}));
    e.take(b);
    // a claims to have seen b's sync (same clock after the merge) but its root differs:
    // it missed the content, so the answer carries the whole state.
    e.send(a, json!({"id": "a1", "method": "state.sync", "params": {"agent_id": "a", "vector_clock": {"a": 1, "b": 1},
        "operations": [], "merkle_root": "00"}}));
    let r = e.take(a);
    let state = &r[0]["params"]["state"];
    assert_eq!(state["counters"], json!({"done": {"b": 1}}));
    assert_eq!(state["merkle_root"], e.o.state().merkle_root().as_str());
    // The right root, or a clock that is behind the store's (syncs in flight to it): no
    // full sync.
    let root = e.o.state().merkle_root();
    e.send(a, json!({"id": "a2", "method": "state.sync", "params": {"agent_id": "a", "vector_clock": {"a": 2, "b": 1},
        "operations": [], "merkle_root": root}}));
    assert_eq!(e.take(a)[0]["params"].get("state"), None);
    e.send(a, json!({"id": "a3", "method": "state.sync", "params": {"agent_id": "a", "vector_clock": {"a": 3},
        "operations": [], "merkle_root": "00"}}));
    assert_eq!(e.take(a)[0]["params"].get("state"), None);
}

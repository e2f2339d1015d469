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

#[test]
fn a_vote_is_tallied_against_its_criteria_and_the_requester_gets_the_outcome() {
    let mut e = Env::new(OrchestratorConfig::default());
    let a = e.register(1, "a", json!([]));
    let b = e.register(2, "b", json!([]));
    let c = e.register(3, "c", json!([]));
    let d = e.register(4, "d", json!([]));
    // voting, quorum 2 of 3: two approvals decide it, the third voter is not waited for.
    e.send(a, json!({"id": "v1", "method": "collaboration.request", "params": {"task_id": "t", "requesting_agent": "a",
        "collaboration_type": "consensus", "required_agents": ["b", "c", "d"], "coordination_pattern": "voting",
        "timeout_ms": 30000, "context": {"criteria": {"quorum": 2, "security_score": ">= 0.9"}}}}));
    let (to_b, to_c) = (e.take(b), e.take(c));
    assert_eq!(
        to_b[0]["params"]["context"]["criteria"]["security_score"],
        ">= 0.9"
    );
    e.take(d);
    e.send(
        b,
        json!({"id": to_b[0]["id"], "type": 1, "result": {"agent_id": "b", "vote": "approve"}}),
    );
    assert!(e.take(a).is_empty(), "one vote decides nothing yet");
    e.send(
        c,
        json!({"id": to_c[0]["id"], "type": 1, "result": {"agent_id": "c", "vote": "approve"}}),
    );
    let r = &e.take(a)[0];
    assert_eq!(r["id"], "v1");
    let p = &r["params"];
    assert_eq!(p["coordination_pattern"], "voting");
    assert_eq!(
        p["responses"],
        json!({}),
        "the outcome, not the raw replies"
    );
    assert_eq!(p["outcome"]["decision"], "approved");
    assert_eq!(p["outcome"]["approve"], 2);
    assert_eq!(p["outcome"]["quorum"], 2);
    assert_eq!(
        p["outcome"]["votes"],
        json!({"b": "approve", "c": "approve"})
    );
    assert_eq!(p["missing"], json!(["d"]));

    // consensus: one rejection decides it at once.
    e.send(a, json!({"id": "v2", "method": "collaboration.request", "params": {"task_id": "t", "requesting_agent": "a",
        "collaboration_type": "approval", "required_agents": ["b", "c"], "coordination_pattern": "consensus"}}));
    let to_b = e.take(b);
    e.take(c);
    e.send(
        b,
        json!({"id": to_b[0]["id"], "type": 1, "result": {"vote": "reject"}}),
    );
    assert_eq!(e.take(a)[0]["params"]["outcome"]["decision"], "rejected");

    // voting whose voters stay silent past timeout_ms: no quorum.
    e.send(a, json!({"id": "v3", "method": "collaboration.request", "params": {"task_id": "t", "requesting_agent": "a",
        "collaboration_type": "approval", "required_agents": ["b", "c", "d"], "coordination_pattern": "voting", "timeout_ms": 1000}}));
    e.take(b);
    e.take(c);
    e.take(d);
    e.advance(Duration::from_secs(1));
    let p = &e.take(a)[0]["params"];
    assert_eq!(p["outcome"]["decision"], "no_quorum");
    assert_eq!(p["outcome"]["quorum"], 2, "a majority of the three asked");
    assert_eq!(p["complete"], false);
}

#[test]
fn an_unknown_coordination_pattern_or_a_bad_quorum_is_refused() {
    let mut e = Env::new(OrchestratorConfig::default());
    let a = e.register(1, "a", json!([]));
    let b = e.register(2, "b", json!([]));
    e.send(a, json!({"id": "x", "method": "collaboration.request", "params": {"task_id": "t", "requesting_agent": "a",
        "collaboration_type": "review", "required_agents": ["b"], "coordination_pattern": "lottery"}}));
    let r = &e.take(a)[0];
    assert_eq!(r["error"]["code"], 4000);
    assert_eq!(
        r["error"]["data"],
        json!({"field": "coordination_pattern", "reason": "Unknown value",
               "expected": "voting, consensus, parallel or broadcast", "received": "lottery"})
    );
    assert!(e.take(b).is_empty(), "nothing was forwarded");
    e.send(a, json!({"id": "y", "method": "collaboration.request", "params": {"task_id": "t", "requesting_agent": "a",
        "collaboration_type": "review", "required_agents": ["b"], "coordination_pattern": "voting",
        "context": {"criteria": {"quorum": 2}}}}));
    let r = &e.take(a)[0];
    assert_eq!(r["error"]["code"], 4005);
    assert_eq!(r["error"]["data"]["field"], "context.criteria.quorum");
    // parallel keeps gathering every raw answer.
    e.send(a, json!({"id": "z", "method": "collaboration.request", "params": {"task_id": "t", "requesting_agent": "a",
        "collaboration_type": "review", "required_agents": ["b"], "coordination_pattern": "parallel"}}));
    let to_b = e.take(b);
    e.send(
        b,
        json!({"id": to_b[0]["id"], "type": 1, "result": {"notes": "fine"}}),
    );
    let p = &e.take(a)[0]["params"];
    assert_eq!(p["responses"], json!({"b": {"notes": "fine"}}));
    assert_eq!(p.get("outcome"), None);
}

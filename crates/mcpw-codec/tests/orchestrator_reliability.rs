//! The Orchestrator's reliability rules, in simulated time with raw frames: idempotency
//! keys answered from memory (bounded), the cancel grace for messages already in flight, a
//! shutdown's `pending_transfers`, the `X-Agent-ID` check, and the `data` of its errors.

mod common;

use std::time::Duration;

use agentwire_core::{ConnId, Machine, PeerInfo};
use common::*;
use mcpw_codec::orchestrator::{
    CommandError, OrchestratorConfig, OrchestratorEvent, OrchestratorLimits, TaskSpec, TaskState,
};
use serde_json::{json, Value};

fn complete(id: &str, task: &str, key: Option<&str>, status: &str) -> Value {
    let mut p = json!({"task_id": task, "agent_id": "a", "status": status});
    if let Some(k) = key {
        p["idempotency_key"] = json!(k);
    }
    json!({"id": id, "type": 0, "method": "task.complete", "params": p})
}

fn completed(e: &Env) -> usize {
    e.events
        .iter()
        .filter(|ev| matches!(ev, OrchestratorEvent::TaskCompleted { .. }))
        .count()
}

#[test]
fn a_retried_message_with_the_same_key_gets_the_same_answer_once_applied() {
    let mut e = Env::new(OrchestratorConfig::default());
    let a = e.register(1, "a", review(0.9));
    e.o.submit_task(TaskSpec::new("code_review").with_id("t"), e.now)
        .unwrap();
    e.drain();
    e.take(a);
    e.send(a, complete("c1", "t", Some("k-1"), "completed"));
    let first = e.take(a);
    assert_eq!(first[0]["params"]["status"], "accepted");
    // The retry (new message id, same key): the same answer, applied once.
    e.send(a, complete("c2", "t", Some("k-1"), "completed"));
    let again = e.take(a);
    assert_eq!(again[0]["id"], "c2");
    assert_eq!(again[0]["params"], first[0]["params"], "{again:?}");
    assert_eq!(completed(&e), 1);
    // Without a key, the same message is a conflict: the task is gone.
    e.send(a, complete("c3", "t", None, "completed"));
    assert_eq!(e.take(a)[0]["error"]["code"], 4008);
    // The same key with other params is a conflict too.
    e.send(a, complete("c4", "t", Some("k-1"), "failed"));
    let r = e.take(a);
    assert_eq!(r[0]["error"]["code"], 4008);
    assert_eq!(r[0]["error"]["data"]["field"], "idempotency_key");
    // Keys are the sender's own: another agent's same key is not a replay.
    let b = e.register(2, "b", review(0.9));
    e.send(
        b,
        json!({"id": "x", "method": "task.complete",
               "params": {"task_id": "t", "agent_id": "b", "status": "completed", "idempotency_key": "k-1"}}),
    );
    assert_eq!(e.take(b)[0]["error"]["code"], 4008);
}

#[test]
fn capability_updates_and_progress_are_applied_once_per_key() {
    let mut e = Env::new(OrchestratorConfig::default());
    let a = e.register(1, "a", review(0.9));
    let remove = json!({"id": "u1", "method": "agent.capability.update",
        "params": {"agent_id": "a", "operation": "remove", "capability": {"name": "code_review"},
                   "idempotency_key": "cap-1"}});
    e.send(a, remove.clone());
    let first = e.take(a);
    assert_eq!(first[0]["params"]["capabilities"], json!([]));
    e.send(a, remove);
    assert_eq!(
        e.take(a),
        first,
        "not 4008 (no such capability): the same answer"
    );
    let changes = e
        .events
        .iter()
        .filter(|ev| matches!(ev, OrchestratorEvent::CapabilityChanged { .. }))
        .count();
    assert_eq!(changes, 1);
}

#[test]
fn a_retried_collaboration_request_is_absorbed_while_it_runs_and_answered_after() {
    let mut e = Env::new(OrchestratorConfig::default());
    let a = e.register(1, "a", review(0.9));
    let b = e.register(2, "b", review(0.9));
    let request = |id: &str| {
        json!({"id": id, "method": "collaboration.request",
            "params": {"task_id": "t", "requesting_agent": "a", "collaboration_type": "review",
                       "required_agents": ["b"], "timeout_ms": 1000, "idempotency_key": "col-1"}})
    };
    e.send(a, request("q1"));
    let forwarded = e.take(b);
    assert_eq!(forwarded.len(), 1);
    e.send(a, request("q1"));
    assert!(e.take(b).is_empty(), "not forwarded twice");
    assert!(e.take(a).is_empty(), "answered when it ends");
    let fid = forwarded[0]["id"].clone();
    e.send(
        b,
        json!({"id": fid, "type": 1, "result": {"agent_id": "b", "vote": "approve"}}),
    );
    let answer = e.take(a);
    assert_eq!(answer.len(), 1, "{answer:?}");
    assert_eq!(answer[0]["params"]["responses"]["b"]["vote"], "approve");
    e.send(a, request("q2"));
    let again = e.take(a);
    assert_eq!(again[0]["id"], "q2");
    assert_eq!(again[0]["params"], answer[0]["params"]);
    assert!(e.take(b).is_empty());
}

#[test]
fn idempotency_keys_are_bounded_and_expire() {
    let mut limits = OrchestratorLimits::default();
    limits.max_idempotency_keys = 2;
    let cfg = OrchestratorConfig::default()
        .with_limits(limits)
        .with_idempotency_ttl(Duration::from_secs(60));
    let mut e = Env::new(cfg);
    let a = e.register(1, "a", review(0.9));
    let progress = |id: &str, key: &str| {
        json!({"id": id, "method": "task.progress",
            "params": {"task_id": "t", "agent_id": "a", "progress": 0.5, "idempotency_key": key}})
    };
    e.o.submit_task(TaskSpec::new("code_review").with_id("t"), e.now)
        .unwrap();
    e.drain();
    e.take(a);
    for (i, key) in ["k1", "k2", "k3"].iter().enumerate() {
        e.send(a, progress(&format!("p{i}"), key));
    }
    let reported = |e: &Env| {
        e.events
            .iter()
            .filter(|ev| matches!(ev, OrchestratorEvent::TaskProgress { .. }))
            .count()
    };
    assert_eq!(reported(&e), 3);
    // k3 and k2 are remembered; k1 was forgotten to make room: handled again.
    e.send(a, progress("r3", "k3"));
    e.send(a, progress("r1", "k1"));
    assert_eq!(reported(&e), 4);
    // After the TTL every key is new again.
    e.advance(Duration::from_secs(61));
    e.send(a, progress("r3b", "k3"));
    assert_eq!(reported(&e), 5);
}

#[test]
fn messages_in_flight_about_a_cancelled_task_get_4006_within_the_grace_then_4008() {
    let cfg = OrchestratorConfig::default().with_cancel_grace(Duration::from_secs(10));
    let mut e = Env::new(cfg);
    let a = e.register(1, "a", review(0.9));
    e.o.submit_task(TaskSpec::new("code_review").with_id("t"), e.now)
        .unwrap();
    e.drain();
    e.take(a);
    assert_eq!(
        e.o.cancel_task("nope", e.now),
        Err(CommandError::UnknownTask("nope".into()))
    );
    e.o.cancel_task("t", e.now).unwrap();
    e.drain();
    let told = e.take(a);
    assert_eq!(told[0]["error"]["code"], 4006);
    assert_eq!(told[0]["error"]["data"]["task_id"], "t");
    // The agent's report, sent before it learnt of it, arrives now.
    e.send(
        a,
        json!({"id": "p", "type": 7, "method": "task.progress", "params": {"task_id": "t", "agent_id": "a", "progress": 0.9}}),
    );
    e.send(a, complete("c", "t", None, "completed"));
    let r = e.take(a);
    assert_eq!(r.len(), 2);
    for reply in &r {
        assert_eq!(reply["error"]["code"], 4006, "{reply}");
        assert_eq!(reply["error"]["data"]["task_id"], "t");
    }
    assert_eq!(
        (r[0]["id"].as_str(), r[1]["id"].as_str()),
        (Some("p"), Some("c"))
    );
    // After the grace: an unknown task.
    e.advance(Duration::from_secs(10));
    e.send(a, complete("late", "t", None, "completed"));
    assert_eq!(e.take(a)[0]["error"]["code"], 4008);
}

#[test]
fn a_shutdown_hands_over_only_its_pending_transfers() {
    let mut e = Env::new(OrchestratorConfig::default());
    let a = e.register(1, "a", review(0.95));
    for t in ["t1", "t2"] {
        e.o.submit_task(TaskSpec::new("code_review").with_id(t), e.now)
            .unwrap();
    }
    e.drain();
    let b = e.register(2, "b", review(0.5));
    e.take(a);
    e.send(
        a,
        json!({"id": "s", "method": "agent.shutdown", "params": {"agent_id": "a", "reason": "maintenance",
            "graceful_timeout_ms": 5000, "transfer_tasks": true,
            "final_state": {"completed_tasks": 0, "active_tasks": ["t1", "t2"], "pending_transfers": ["t2"]}}}),
    );
    let r = e.take(a);
    assert_eq!(
        r[0]["params"]["transferred_tasks"],
        json!([{"task_id": "t2", "agent_id": "b"}])
    );
    assert_eq!(
        e.o.task("t1").unwrap().state,
        TaskState::Assigned("a".into())
    );
    assert_eq!(e.take(b)[0]["params"]["task_id"], "t2");
    // a finishes t1 in its grace; a late report on t2 is not a conflict.
    e.send(a, complete("c1", "t1", None, "completed"));
    assert_eq!(e.take(a)[0]["params"]["status"], "accepted");
    e.send(a, complete("c2", "t2", None, "completed"));
    assert_eq!(e.take(a)[0]["error"]["code"], 4006);
}

#[test]
fn register_must_match_the_x_agent_id_header() {
    let mut e = Env::new(OrchestratorConfig::default());
    let c = ConnId::new(1);
    let peer = PeerInfo::new(None)
        .with_subprotocol("mcp.v1")
        .with_header("X-Agent-ID", "agent-1");
    e.o.handle_connect(c, &peer, e.now);
    e.drain();
    e.send(
        c,
        json!({"id": "r", "method": "agent.register", "params": {"agent_id": "agent-2"}}),
    );
    let r = e.take(c);
    assert_eq!(r[0]["error"]["code"], 4001);
    assert_eq!(
        r[0]["error"]["data"],
        json!({"field": "agent_id", "reason": "Does not match the X-Agent-ID header",
               "expected": "agent-1", "received": "agent-2"})
    );
    assert!(e.o.agent("agent-2").is_none());
    e.send(
        c,
        json!({"id": "r2", "method": "agent.register", "params": {"agent_id": "agent-1"}}),
    );
    assert_eq!(e.take(c)[0]["method"], "registration.confirmed");
}

#[test]
fn every_error_names_field_reason_expected_and_received_where_they_apply() {
    let mut e = Env::new(OrchestratorConfig::default());
    let a = e.register(1, "a", review(0.9));
    let cases = [
        (json!({"id": "1", "method": "no.such"}), 4004, "method"),
        (json!({"id": "2", "type": 0}), 4000, "method"),
        (
            json!({"id": "3", "method": "task.complete", "params": {"task_id": "zz", "agent_id": "a", "status": "completed"}}),
            4008,
            "task_id",
        ),
        (
            json!({"id": "4", "method": "agent.capability.update", "params": {"agent_id": "a", "operation": "remove", "capability": {"name": "zz"}}}),
            4008,
            "capability.name",
        ),
        (
            json!({"id": "5", "method": "task.progress", "params": {"task_id": "t", "agent_id": "a", "progress": 7}}),
            4005,
            "progress",
        ),
        (
            json!({"id": "6", "method": "task.progress", "params": {"task_id": 5, "agent_id": "a"}}),
            4005,
            "task_id",
        ),
        (
            json!({"id": "7", "method": "agent.register", "params": {"agent_id": "other"}}),
            4008,
            "agent_id",
        ),
    ];
    // A size limit names what it expected and what came.
    let big = "x".repeat((1 << 20) + 1);
    e.send(
        a,
        json!({"id": "8", "method": "ping", "params": {"pad": big}}),
    );
    let r = e.take(a);
    assert_eq!(r[0]["error"]["code"], 4007);
    assert_eq!(r[0]["error"]["data"]["field"], "message");
    assert_eq!(r[0]["error"]["data"]["expected"], "at most 1048576 bytes");
    for (msg, code, field) in cases {
        e.send(a, msg.clone());
        let r = e.take(a);
        let err = &r[0]["error"];
        assert_eq!(err["code"], code, "{msg}: {err}");
        let data = &err["data"];
        assert_eq!(data["field"], field, "{msg}: {err}");
        for key in ["reason", "expected", "received"] {
            assert!(data[key].is_string(), "{msg}: {key} in {err}");
        }
    }
}

//! Task routing at the Orchestrator, in simulated time: by capability and confidence to
//! completion, reassignment when an agent vanishes, deadlines, and capability updates.

mod common;

use std::time::Duration;

use agentwire_core::Machine;
use common::*;
use mcpw_codec::orchestrator::{
    OrchestratorConfig, OrchestratorEvent, TaskFailure, TaskSpec, TaskState,
};
use serde_json::json;

#[test]
fn tasks_route_by_capability_and_flow_to_completion() {
    let mut e = Env::new(OrchestratorConfig::default());
    let strong = e.register(1, "strong", review(0.95));
    let weak = e.register(2, "weak", review(0.5));
    let other = e.register(
        3,
        "other",
        json!([{"name": "translation", "confidence": 1.0}]),
    );
    let id =
        e.o.submit_task(
            TaskSpec::new("code_review")
                .with_id("task-456")
                .with_deadline(Duration::from_secs(600))
                .with_requirements(json!({"focus_areas": ["security"]})),
            e.now,
        )
        .unwrap();
    e.drain();
    let assigned = e.take(strong);
    assert_eq!(assigned[0]["method"], "task.assigned");
    assert_eq!(assigned[0]["type"], 2);
    let p = &assigned[0]["params"];
    assert_eq!(p["task_id"], "task-456");
    assert_eq!(p["deadline"], "2024-12-25T15:40:00Z");
    assert_eq!(p["routing_metadata"]["assigned_by"], "capability-router");
    assert_eq!(p["routing_metadata"]["alternative_agents"], json!(["weak"]));
    assert!(e.take(weak).is_empty() && e.take(other).is_empty());

    e.send(strong, json!({"type": 7, "method": "task.progress", "params": {"task_id": id, "agent_id": "strong", "progress": 0.65, "status": "analyzing"}}));
    assert!(
        e.take(strong).is_empty(),
        "progress notifications get no reply"
    );
    assert_eq!(e.o.task(&id).unwrap().progress, 0.65);
    // Only the assigned agent may complete it.
    e.send(weak, json!({"id": "x", "method": "task.complete", "params": {"task_id": id, "agent_id": "weak", "status": "completed"}}));
    assert_eq!(e.take(weak)[0]["error"]["code"], 4008);
    e.send(strong, json!({"id": "c", "method": "task.complete", "params": {"task_id": id, "agent_id": "strong", "status": "completed", "result": {"summary": "ok"}}}));
    let r = e.take(strong);
    assert_eq!(
        r[0]["params"],
        json!({"task_id": "task-456", "status": "accepted"})
    );
    assert!(e.o.task(&id).is_none());
    assert!(e.events.iter().any(|ev| matches!(ev, OrchestratorEvent::TaskCompleted { result, .. } if result["summary"] == "ok")));
}

#[test]
fn a_vanished_agents_task_is_reassigned_and_a_missed_deadline_fails_it() {
    let mut e = Env::new(OrchestratorConfig::default());
    let a = e.register(1, "a", review(0.95));
    let b = e.register(2, "b", review(0.5));
    e.o.submit_task(
        TaskSpec::new("code_review")
            .with_id("t")
            .with_deadline(Duration::from_secs(100)),
        e.now,
    )
    .unwrap();
    e.drain();
    assert_eq!(e.take(a)[0]["method"], "task.assigned");
    e.o.handle_disconnect(a, e.now);
    e.drain();
    assert_eq!(e.take(b)[0]["params"]["task_id"], "t");
    assert_eq!(e.o.task("t").unwrap().attempts, 2);
    e.advance(Duration::from_secs(50));
    e.send(
        b,
        json!({"method": "agent.heartbeat", "type": 2, "params": {"agent_id": "b"}}),
    );
    e.advance(Duration::from_secs(50));
    assert!(e.o.task("t").is_none());
    assert!(e.events.iter().any(|ev| matches!(
        ev,
        OrchestratorEvent::TaskFailed {
            reason: TaskFailure::DeadlineExceeded,
            ..
        }
    )));
    assert_eq!(
        e.take(b)[0]["error"]["code"],
        4006,
        "the agent is told the task is cancelled"
    );
}

#[test]
fn capability_update_changes_routing() {
    let mut e = Env::new(OrchestratorConfig::default());
    let a = e.register(1, "a", json!([]));
    e.o.submit_task(TaskSpec::new("rust_analysis").with_id("t"), e.now)
        .unwrap();
    e.drain();
    assert_eq!(e.o.task("t").unwrap().state, TaskState::Queued);
    e.send(a, json!({"id": "u", "method": "agent.capability.update", "params": {"agent_id": "a", "operation": "add",
        "capability": {"name": "rust_analysis", "confidence": 0.75, "languages": ["rust"]}, "reason": "fine-tuned"}}));
    let r = e.take(a);
    assert_eq!(r[0]["params"]["capabilities"], json!(["rust_analysis"]));
    assert_eq!(r[1]["method"], "task.assigned");
    e.send(a, json!({"id": "v", "method": "agent.capability.update", "params": {"agent_id": "a", "operation": "explode", "capability": {"name": "x"}}}));
    assert_eq!(e.take(a)[0]["error"]["data"]["field"], "operation");
}

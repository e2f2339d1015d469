//! An agent's life at the Orchestrator, in simulated time: registration confirmed in the
//! form of the request, a connection that never registers closed, missed heartbeats making an
//! agent unhealthy and then removing it, and a graceful shutdown that transfers its tasks.

mod common;

use std::time::Duration;

use agentwire_core::CloseCode;
use common::*;
use mcpw_codec::orchestrator::{
    Health, OrchestratorConfig, OrchestratorEvent, RemovalReason, TaskSpec, TaskState,
};
use serde_json::json;

#[test]
fn register_is_confirmed_in_the_form_of_the_request() {
    let mut e = Env::new(OrchestratorConfig::default());
    let c = e.connect(1);
    e.send(
        c,
        json!({"id": "550e8400", "type": 0, "method": "agent.register",
        "params": {"agent_id": "agent-123", "capabilities": review(0.9)}}),
    );
    let r = e.take(c);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0]["id"], "550e8400");
    assert_eq!(r[0]["type"], 1);
    assert_eq!(r[0]["method"], "registration.confirmed");
    assert_eq!(r[0]["params"]["agent_id"], "agent-123");
    assert_eq!(r[0]["params"]["heartbeat_interval_ms"], 30_000);
    assert!(e.o.agent("agent-123").is_some());
    assert!(e.events.iter().any(
        |ev| matches!(ev, OrchestratorEvent::Registered { agent_id, .. } if agent_id == "agent-123")
    ));
    assert!(e
        .o
        .metrics()
        .render()
        .contains("websocket_connections_active{agent_type=\"tester\",protocol=\"json\"} 1"));
}

#[test]
fn unregistered_connections_are_closed_after_the_register_timeout() {
    let mut e = Env::new(OrchestratorConfig::default());
    let c = e.connect(1);
    e.advance(Duration::from_secs(30));
    assert_eq!(
        e.closed,
        [(c, CloseCode::POLICY, "register-required".to_owned())]
    );
}

#[test]
fn missed_heartbeats_make_an_agent_unhealthy_then_remove_it() {
    let mut e = Env::new(OrchestratorConfig::default());
    let c = e.register(1, "a", review(0.9));
    e.advance(Duration::from_secs(59));
    assert_eq!(e.o.agent("a").unwrap().health, Health::Healthy);
    e.advance(Duration::from_secs(1));
    assert_eq!(e.o.agent("a").unwrap().health, Health::Unhealthy);
    // An unhealthy agent gets no task.
    e.o.submit_task(TaskSpec::new("code_review").with_id("t1"), e.now)
        .unwrap();
    e.drain();
    assert_eq!(e.o.task("t1").unwrap().state, TaskState::Queued);
    // A heartbeat brings it back, and the queued task follows.
    e.send(c, json!({"id": "h", "method": "agent.heartbeat", "params": {"agent_id": "a", "status": "healthy"}}));
    assert!(e
        .events
        .iter()
        .any(|ev| matches!(ev, OrchestratorEvent::Recovered { .. })));
    assert_eq!(
        e.o.task("t1").unwrap().state,
        TaskState::Assigned("a".into())
    );
    e.advance(Duration::from_secs(89));
    assert!(e.o.agent("a").is_some());
    e.advance(Duration::from_secs(1));
    assert!(e.o.agent("a").is_none(), "removed after 3 missed periods");
    assert!(e
        .closed
        .iter()
        .any(|(k, code, r)| *k == c && *code == CloseCode::POLICY && r == "heartbeat-timeout"));
    assert!(e.events.iter().any(|ev| matches!(
        ev,
        OrchestratorEvent::AgentRemoved {
            reason: RemovalReason::HeartbeatTimeout,
            ..
        }
    )));
}

#[test]
fn shutdown_transfers_tasks_and_ends_after_the_grace_period() {
    let mut e = Env::new(OrchestratorConfig::default());
    let a = e.register(1, "a", review(0.95));
    let b = e.register(2, "b", review(0.5));
    e.o.submit_task(TaskSpec::new("code_review").with_id("t"), e.now)
        .unwrap();
    e.drain();
    e.take(a);
    e.send(a, json!({"id": "s", "method": "agent.shutdown", "params": {"agent_id": "a", "reason": "scheduled_maintenance", "graceful_timeout_ms": 5000, "transfer_tasks": true}}));
    let r = e.take(a);
    assert_eq!(
        r[0]["params"]["transferred_tasks"],
        json!([{"task_id": "t", "agent_id": "b"}])
    );
    assert_eq!(e.take(b)[0]["method"], "task.assigned");
    assert_eq!(
        e.o.task("t").unwrap().attempts,
        1,
        "a transfer is not a failed attempt"
    );
    e.advance(Duration::from_secs(5));
    assert!(e.o.agent("a").is_none());
    assert!(e
        .closed
        .iter()
        .any(|(k, code, _)| *k == a && *code == CloseCode::NORMAL));
}

//! Every example message of the spec (`tests/fixtures/*.json`, verbatim) decodes to its typed
//! body, re-encodes to the same JSON value, and survives the binary form too.

use mcpw_codec::{json, Body, Codec, Limits, Message, MessageType};
use serde_json::Value;

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Decodes, checks the typed body, re-encodes and compares as JSON values; then the binary
/// round trip (seq and flags set, id not carried).
fn check(name: &str, is_expected: fn(&Body) -> bool) -> Message {
    let text = fixture(name);
    let msg = json::decode(text.as_bytes(), &Limits::default()).unwrap();
    assert!(is_expected(&msg.body), "{name}: {:?}", msg.body);
    let mut out = Vec::new();
    json::encode(&msg, &mut out).unwrap();
    let back: Value = serde_json::from_slice(&out).unwrap();
    let orig: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(back, orig, "{name}: re-encoded JSON differs");

    let mut codec = Codec::default();
    let mut frame = Vec::new();
    let bin = Message {
        id: None,
        seq: 77,
        ..msg.clone()
    };
    codec.encode(&bin, &mut frame).unwrap();
    assert_eq!(
        codec.decode(&frame).unwrap(),
        bin,
        "{name}: binary round trip"
    );
    msg
}

#[test]
fn agent_register() {
    let m = check("agent_register", |b| matches!(b, Body::AgentRegister(_)));
    let Body::AgentRegister(p) = &m.body else {
        unreachable!()
    };
    assert_eq!(p.capabilities.len(), 2);
    assert_eq!(p.capabilities[0].confidence, Some(0.95));
    assert_eq!(p.resources.as_ref().unwrap().max_concurrent_tasks, Some(10));
    assert_eq!(
        m.id.as_deref(),
        Some("550e8400-e29b-41d4-a716-446655440000")
    );
    assert_eq!(m.kind, MessageType::REQUEST);
}

#[test]
fn agent_heartbeat() {
    let m = check("agent_heartbeat", |b| matches!(b, Body::AgentHeartbeat(_)));
    let Body::AgentHeartbeat(p) = &m.body else {
        unreachable!()
    };
    assert_eq!(p.workload.as_ref().unwrap().current_load, Some(0.6));
}

#[test]
fn task_assigned() {
    let m = check("task_assigned", |b| matches!(b, Body::TaskAssigned(_)));
    assert_eq!(m.kind, MessageType::NOTIFICATION);
    let Body::TaskAssigned(p) = &m.body else {
        unreachable!()
    };
    assert_eq!(p.task_type.as_deref(), Some("code_review"));
    let r = p.routing_metadata.as_ref().unwrap();
    assert_eq!(r.alternative_agents.as_ref().unwrap().len(), 2);
}

#[test]
fn task_progress() {
    let m = check("task_progress", |b| matches!(b, Body::TaskProgress(_)));
    assert_eq!(m.kind, MessageType::PROGRESS);
}

#[test]
fn task_complete() {
    let m = check("task_complete", |b| matches!(b, Body::TaskComplete(_)));
    let Body::TaskComplete(p) = &m.body else {
        unreachable!()
    };
    let findings = p.result.as_ref().unwrap().findings.as_ref().unwrap();
    assert_eq!(findings[0].line, Some(45));
}

#[test]
fn agent_capability_update() {
    check("agent_capability_update", |b| {
        matches!(b, Body::CapabilityUpdate(_))
    });
}

#[test]
fn collaboration_request() {
    check("collaboration_request", |b| {
        matches!(b, Body::CollaborationRequest(_))
    });
}

#[test]
fn state_sync() {
    let m = check("state_sync", |b| matches!(b, Body::StateSync(_)));
    let Body::StateSync(p) = &m.body else {
        unreachable!()
    };
    assert_eq!(p.vector_clock["agent-456"], 38);
    assert_eq!(p.operations.len(), 2);
}

#[test]
fn agent_shutdown() {
    check("agent_shutdown", |b| matches!(b, Body::AgentShutdown(_)));
}

#[test]
fn error_invalid_params() {
    let m = check("error_invalid_params", |b| matches!(b, Body::Error(_)));
    let Body::Error(e) = &m.body else {
        unreachable!()
    };
    assert_eq!(e.code, mcpw_codec::ErrorCode::INVALID_PARAMS);
}

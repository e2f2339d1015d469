//! The server's bounds on typed params, checked field by field so a 4005 names the field
//! (`capabilities[1].confidence`), as the spec's error example does.
//!
//! The codec has already refused params of the wrong shape (with serde's path); what is
//! checked here is what a shape cannot say: ids that are empty or too long, numbers out of
//! range, lists over a limit, and fields the server needs that the spec leaves optional.
//! Fields are checked in the order they appear in their struct, so the first bad one is
//! the one named.

use serde_json::Value;

use super::routing::CapabilityProfile;
use crate::config::OrchestratorLimits;
use crate::crdt::{CrdtLimits, CrdtOp, VectorClock};
use crate::error::ParamError;
use crate::params::{
    AgentHeartbeat, AgentRegister, AgentShutdown, Capability, CapabilityUpdate,
    CollaborationRequest, CrdtOperation, SetBinary, SetBinaryCompression, SetOperation, StateSync,
    TaskComplete, TaskProgress,
};

/// The gzip threshold of the 12-byte form when `protocol.set_binary` enables compression
/// without naming one: the reference's 1024 bytes.
pub(crate) const DEFAULT_COMPACT_THRESHOLD: usize = 1024;

/// Most `specialties` (and `languages`) one capability may list.
const MAX_SPECIALTIES: usize = 64;

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}.{name}")
    }
}

fn missing(path: impl Into<String>, expected: &'static str) -> ParamError {
    ParamError::new(path, "Required field missing", expected, "null")
}

/// A required id-like string: present, non-empty, at most `max` bytes.
fn id(path: &str, s: Option<&str>, max: usize) -> Result<(), ParamError> {
    match s {
        None => Err(missing(path, "string")),
        Some("") => Err(ParamError::new(
            path,
            "Required field missing",
            "non-empty string",
            "empty string",
        )),
        Some(s) if s.len() > max => Err(ParamError::new(
            path,
            "Too long",
            "shorter string",
            "string",
        )),
        Some(_) => Ok(()),
    }
}

/// An optional number within `lo..=hi`.
fn range(path: &str, x: Option<f64>, lo: f64, hi: f64) -> Result<(), ParamError> {
    match x {
        Some(x) if !(lo..=hi).contains(&x) => Err(ParamError::new(
            path,
            "Out of range",
            "number in range",
            "number",
        )),
        _ => Ok(()),
    }
}

/// An optional `idempotency_key`: non-empty, at most `max` bytes.
fn key(k: Option<&str>, max: usize) -> Result<(), ParamError> {
    match k {
        None => Ok(()),
        Some(k) => id("idempotency_key", Some(k), max),
    }
}

/// A list of at most `max` items.
fn count(path: &str, len: usize, max: usize) -> Result<(), ParamError> {
    if len > max {
        return Err(ParamError::new(path, "Too many", "shorter array", "array"));
    }
    Ok(())
}

/// An optional list of at most `max` strings, each at most `max_id` bytes.
fn strings(
    path: &str,
    items: Option<&[String]>,
    max: usize,
    max_id: usize,
) -> Result<(), ParamError> {
    let items = items.unwrap_or_default();
    count(path, items.len(), max)?;
    match items.iter().position(|s| s.len() > max_id) {
        Some(i) => Err(ParamError::new(
            format!("{path}[{i}]"),
            "Too long",
            "shorter string",
            "string",
        )),
        None => Ok(()),
    }
}

/// One capability under `path`.
fn capability(path: &str, c: &Capability, max_id: usize) -> Result<(), ParamError> {
    id(&join(path, "name"), Some(&c.name), max_id)?;
    range(&join(path, "confidence"), c.confidence, 0.0, 1.0)?;
    strings(
        &join(path, "specialties"),
        c.specialties.as_deref(),
        MAX_SPECIALTIES,
        max_id,
    )?;
    strings(
        &join(path, "languages"),
        c.languages.as_deref(),
        MAX_SPECIALTIES,
        max_id,
    )
}

/// What routing reads of a capability: confidence 1 when not given; specialties, then
/// languages.
pub(crate) fn profile(c: &Capability) -> CapabilityProfile {
    let mut specialties = c.specialties.clone().unwrap_or_default();
    specialties.extend(c.languages.iter().flatten().cloned());
    CapabilityProfile {
        name: c.name.clone(),
        confidence: c.confidence.unwrap_or(1.0),
        specialties,
    }
}

/// `agent.register`.
pub(crate) fn register(p: &AgentRegister, l: &OrchestratorLimits) -> Result<(), ParamError> {
    id("agent_id", Some(&p.agent_id), l.max_id_bytes)?;
    count("capabilities", p.capabilities.len(), l.max_capabilities)?;
    for (i, c) in p.capabilities.iter().enumerate() {
        capability(&format!("capabilities[{i}]"), c, l.max_id_bytes)?;
    }
    Ok(())
}

/// `agent.heartbeat`.
pub(crate) fn heartbeat(p: &AgentHeartbeat, l: &OrchestratorLimits) -> Result<(), ParamError> {
    id("agent_id", Some(&p.agent_id), l.max_id_bytes)?;
    let load = p.workload.as_ref().and_then(|w| w.current_load);
    range("workload.current_load", load, 0.0, f64::MAX)
}

/// `agent.capability.update`.
pub(crate) fn capability_update(
    p: &CapabilityUpdate,
    l: &OrchestratorLimits,
) -> Result<(), ParamError> {
    id("agent_id", Some(&p.agent_id), l.max_id_bytes)?;
    capability("capability", &p.capability, l.max_id_bytes)?;
    key(p.idempotency_key.as_deref(), l.max_id_bytes)
}

/// `task.progress`: `progress` is required here (the server records it).
pub(crate) fn progress(p: &TaskProgress, l: &OrchestratorLimits) -> Result<f64, ParamError> {
    id("task_id", Some(&p.task_id), l.max_id_bytes)?;
    id("agent_id", Some(&p.agent_id), l.max_id_bytes)?;
    range("progress", p.progress, 0.0, 1.0)?;
    key(p.idempotency_key.as_deref(), l.max_id_bytes)?;
    p.progress.ok_or_else(|| missing("progress", "number"))
}

/// `task.complete`: `status` is required here (it says how the task ended).
pub(crate) fn complete<'a>(
    p: &'a TaskComplete,
    l: &OrchestratorLimits,
) -> Result<&'a str, ParamError> {
    id("task_id", Some(&p.task_id), l.max_id_bytes)?;
    id("agent_id", Some(&p.agent_id), l.max_id_bytes)?;
    id("status", p.status.as_deref(), l.max_id_bytes)?;
    key(p.idempotency_key.as_deref(), l.max_id_bytes)?;
    Ok(p.status.as_deref().unwrap_or_default())
}

/// The `result` of `task.complete` as the event carries it (`null` when absent).
pub(crate) fn result_value(p: &TaskComplete) -> Value {
    p.result
        .as_ref()
        .and_then(|r| serde_json::to_value(r).ok())
        .unwrap_or(Value::Null)
}

/// `collaboration.request`: `collaboration_type` is required here, and at least one agent.
pub(crate) fn collaboration<'a>(
    p: &'a CollaborationRequest,
    l: &OrchestratorLimits,
) -> Result<&'a str, ParamError> {
    id("task_id", Some(&p.task_id), l.max_id_bytes)?;
    id(
        "requesting_agent",
        Some(&p.requesting_agent),
        l.max_id_bytes,
    )?;
    id(
        "collaboration_type",
        p.collaboration_type.as_deref(),
        l.max_id_bytes,
    )?;
    strings(
        "required_agents",
        Some(&p.required_agents),
        l.max_collaborators,
        l.max_id_bytes,
    )?;
    key(p.idempotency_key.as_deref(), l.max_id_bytes)?;
    if p.required_agents.is_empty() {
        return Err(ParamError::new(
            "required_agents",
            "Required field missing",
            "non-empty array",
            "empty array",
        ));
    }
    Ok(p.collaboration_type.as_deref().unwrap_or_default())
}

/// `state.sync`, checked and turned into the store's vector clock and operations.
pub(crate) fn state_sync(
    p: &StateSync,
    l: &OrchestratorLimits,
    crdt: &CrdtLimits,
) -> Result<(VectorClock, Vec<CrdtOp>), ParamError> {
    id("agent_id", Some(&p.agent_id), l.max_id_bytes)?;
    if p.vector_clock.len() > crdt.max_clock_actors {
        return Err(ParamError::new(
            "vector_clock",
            "Too many",
            "fewer entries",
            "object",
        ));
    }
    let mut clock = VectorClock::new();
    for (actor, n) in &p.vector_clock {
        clock.set(actor.clone(), *n);
    }
    count("operations", p.operations.len(), crdt.max_ops_per_sync)?;
    let mut ops = Vec::with_capacity(p.operations.len());
    for (i, op) in p.operations.iter().enumerate() {
        let at = |name: &str| format!("operations[{i}].{name}");
        ops.push(match op {
            CrdtOperation::GCounter(g) => {
                id(&at("key"), Some(&g.key), l.max_id_bytes)?;
                CrdtOp::Increment {
                    key: g.key.clone(),
                    actor: g.actor.clone(),
                    by: g.increment,
                }
            }
            CrdtOperation::OrSet(s) => {
                id(&at("key"), Some(&s.key), l.max_id_bytes)?;
                id(&at("element"), Some(&s.element), l.max_id_bytes)?;
                let (key, element) = (s.key.clone(), s.element.clone());
                match s.operation {
                    SetOperation::Add => CrdtOp::Add {
                        key,
                        element,
                        tag: s
                            .unique_id
                            .clone()
                            .ok_or_else(|| missing(at("unique_id"), "string"))?,
                    },
                    SetOperation::Remove => CrdtOp::Remove {
                        key,
                        element,
                        tag: s.unique_id.clone(),
                    },
                }
            }
        });
    }
    Ok((clock, ops))
}

/// `agent.shutdown`.
pub(crate) fn shutdown(p: &AgentShutdown, l: &OrchestratorLimits) -> Result<(), ParamError> {
    id("agent_id", Some(&p.agent_id), l.max_id_bytes)
}

/// `protocol.set_binary` (raw params: the codec has no type for this method):
/// `(enabled, Some(threshold) if compression is enabled)`. Empty, `null` or `{}` params
/// switch binary mode off; a missing `enabled` is `false`, a missing threshold the default.
pub(crate) fn set_binary(params: &Value) -> Result<(bool, Option<usize>), ParamError> {
    fn kind(v: &Value) -> &'static str {
        match v {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
    }
    /// Field `name` of `obj` (`null` counts as absent), of the type `expected`.
    fn field<'a, T>(
        obj: &'a serde_json::Map<String, Value>,
        path: &str,
        expected: &'static str,
        read: fn(&'a Value) -> Option<T>,
    ) -> Result<Option<T>, ParamError> {
        let name = path.rsplit('.').next().unwrap_or(path);
        match obj.get(name).filter(|v| !v.is_null()) {
            None => Ok(None),
            Some(v) => read(v)
                .map(Some)
                .ok_or_else(|| ParamError::new(path, "Wrong type", expected, kind(v))),
        }
    }
    let obj = match params {
        Value::Null => return Ok((false, None)),
        Value::Object(obj) if obj.is_empty() => return Ok((false, None)),
        Value::Object(obj) => obj,
        other => {
            return Err(ParamError::new(
                "params",
                "Wrong type",
                "object",
                kind(other),
            ))
        }
    };
    let parsed = SetBinary {
        enabled: field(obj, "enabled", "boolean", Value::as_bool)?,
        compression: match field(obj, "compression", "object", Value::as_object)? {
            None => None,
            Some(c) => Some(SetBinaryCompression {
                enabled: field(c, "compression.enabled", "boolean", Value::as_bool)?,
                threshold: if field(c, "compression.enabled", "boolean", Value::as_bool)?
                    .unwrap_or(false)
                {
                    field(
                        c,
                        "compression.threshold",
                        "non-negative integer",
                        Value::as_u64,
                    )?
                } else {
                    None
                },
            }),
        },
    };
    let compression = parsed
        .compression
        .filter(|c| c.enabled.unwrap_or(false))
        .map(|c| {
            c.threshold.map_or(DEFAULT_COMPACT_THRESHOLD, |t| {
                usize::try_from(t).unwrap_or(usize::MAX)
            })
        });
    Ok((parsed.enabled.unwrap_or(false), compression))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn typed<T: serde::de::DeserializeOwned>(v: Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn errors_name_the_field() {
        let l = OrchestratorLimits::default();
        let e = register(&typed(json!({"agent_id": ""})), &l).unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.reason),
            ("agent_id", "Required field missing")
        );
        let e = register(
            &typed(json!({"agent_id": "a", "capabilities": [{"name": "x"}, {"name": "y", "confidence": 1.5}]})),
            &l,
        )
        .unwrap_err();
        assert_eq!(e.field, "capabilities[1].confidence");
        assert_eq!(
            (e.reason, e.expected, e.received),
            ("Out of range", "number in range", "number")
        );
        let long = "s".repeat(l.max_id_bytes + 1);
        let e = register(
            &typed(json!({"agent_id": "a", "capabilities": [{"name": "x", "languages": ["go", long]}]})),
            &l,
        )
        .unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.reason),
            ("capabilities[0].languages[1]", "Too long")
        );
        let e = progress(&typed(json!({"task_id": "t", "agent_id": "a"})), &l).unwrap_err();
        assert_eq!(
            e.to_data(),
            json!({"field": "progress", "reason": "Required field missing", "expected": "number", "received": "null"})
        );
        let e = complete(&typed(json!({"task_id": "t", "agent_id": "a"})), &l).unwrap_err();
        assert_eq!(e.field, "status");
        let e = collaboration(
            &typed(json!({"task_id": "t", "requesting_agent": "a", "collaboration_type": "vote", "required_agents": []})),
            &l,
        )
        .unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.expected),
            ("required_agents", "non-empty array")
        );
        let sync = typed(json!({
            "agent_id": "a", "vector_clock": {"a": 1},
            "operations": [{"type": "or-set", "key": "k", "operation": "add", "element": "e"}]
        }));
        let e = state_sync(&sync, &l, &CrdtLimits::default()).unwrap_err();
        assert_eq!(e.field, "operations[0].unique_id");
        let e = heartbeat(
            &typed(json!({"agent_id": "a", "workload": {"current_load": -0.5}})),
            &l,
        )
        .unwrap_err();
        assert_eq!(e.field, "workload.current_load");
        let e = set_binary(
            &json!({"enabled": true, "compression": {"enabled": true, "threshold": "big"}}),
        )
        .unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.received),
            ("compression.threshold", "string")
        );
        assert_eq!(set_binary(&json!([1])).unwrap_err().field, "params");
    }

    #[test]
    fn the_spec_examples_parse() {
        let l = OrchestratorLimits::default();
        let r: AgentRegister = typed(json!({
            "agent_id": "agent-123", "agent_type": "code-analyzer",
            "capabilities": [
                {"name": "code_review", "confidence": 0.95, "languages": ["go"], "specialties": ["security"]},
                {"name": "bug_detection", "confidence": 0.88, "patterns": ["memory-leak"]}
            ],
            "resources": {"max_concurrent_tasks": 10, "max_memory_mb": 4096, "gpu_required": false}
        }));
        register(&r, &l).unwrap();
        assert_eq!(profile(&r.capabilities[0]).specialties, ["security", "go"]);
        assert_eq!(profile(&r.capabilities[1]).confidence, 0.88);
        let s: StateSync = typed(json!({
            "agent_id": "agent-123",
            "vector_clock": {"agent-123": 42, "agent-456": 38},
            "operations": [
                {"type": "g-counter", "key": "tasks_completed", "increment": 1, "actor": "agent-123"},
                {"type": "or-set", "key": "active_collaborations", "operation": "add", "element": "collab-xyz", "unique_id": "u1"}
            ],
            "merkle_root": "a1b2"
        }));
        let (clock, ops) = state_sync(&s, &l, &CrdtLimits::default()).unwrap();
        assert_eq!(clock.get("agent-123"), 42);
        assert_eq!(ops.len(), 2);
        let sd: AgentShutdown =
            typed(json!({"agent_id": "a", "graceful_timeout_ms": 30000, "transfer_tasks": true}));
        shutdown(&sd, &l).unwrap();
        assert_eq!(set_binary(&json!({})).unwrap(), (false, None));
        assert_eq!(
            set_binary(&json!({"enabled": true, "compression": {"enabled": true}})).unwrap(),
            (true, Some(DEFAULT_COMPACT_THRESHOLD))
        );
    }
}

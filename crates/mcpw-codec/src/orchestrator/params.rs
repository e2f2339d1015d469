//! The server's view of each agent message's params, checked field by field so a 4005
//! names the field (`capabilities[1].confidence`), as the spec's error example does.
//!
//! Only what the orchestrator acts on is extracted; everything else in the params is
//! accepted and ignored (unknown fields are not errors).

use serde_json::{Map, Value};

use super::routing::CapabilityProfile;
use crate::crdt::{CrdtOp, VectorClock};

/// A params field that is missing or has the wrong shape (error 4005).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamError {
    /// The field's path, e.g. `result.findings` or `capabilities[0].name`.
    pub field: String,
    /// What is wrong: `Required field missing`, `Wrong type`, `Out of range`, `Too long`,
    /// `Too many`, `Unknown value`.
    pub reason: &'static str,
    /// What was expected (`string`, `number`, `array`, ...).
    pub expected: &'static str,
    /// What was received (the JSON type, or `null`).
    pub received: String,
}

impl ParamError {
    fn new(
        field: impl Into<String>,
        reason: &'static str,
        expected: &'static str,
        got: &str,
    ) -> Self {
        Self {
            field: field.into(),
            reason,
            expected,
            received: got.to_owned(),
        }
    }

    /// The spec's `error.data` object: `{field, reason, expected, received}`.
    pub fn to_data(&self) -> Value {
        serde_json::json!({
            "field": self.field,
            "reason": self.reason,
            "expected": self.expected,
            "received": self.received,
        })
    }
}

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

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}.{name}")
    }
}

/// Reads fields of one JSON object, naming them under `prefix`.
pub(crate) struct Fields<'a> {
    obj: &'a Map<String, Value>,
    prefix: String,
    max_id: usize,
}

impl<'a> Fields<'a> {
    /// The params object (`params` must be an object).
    pub(crate) fn root(params: &'a Value, max_id: usize) -> Result<Self, ParamError> {
        match params {
            Value::Object(obj) => Ok(Self {
                obj,
                prefix: String::new(),
                max_id,
            }),
            other => Err(ParamError::new(
                "params",
                "Wrong type",
                "object",
                kind(other),
            )),
        }
    }

    fn path(&self, name: &str) -> String {
        join(&self.prefix, name)
    }

    fn get(&self, name: &str) -> Option<&'a Value> {
        self.obj.get(name).filter(|v| !v.is_null())
    }

    fn missing(&self, name: &str, expected: &'static str) -> ParamError {
        ParamError::new(self.path(name), "Required field missing", expected, "null")
    }

    fn wrong(&self, name: &str, expected: &'static str, v: &Value) -> ParamError {
        ParamError::new(self.path(name), "Wrong type", expected, kind(v))
    }

    /// A required id-like string (non-empty, at most `max_id` bytes).
    pub(crate) fn id(&self, name: &str) -> Result<&'a str, ParamError> {
        let v = self.get(name).ok_or_else(|| self.missing(name, "string"))?;
        let s = v.as_str().ok_or_else(|| self.wrong(name, "string", v))?;
        if s.is_empty() {
            return Err(ParamError::new(
                self.path(name),
                "Required field missing",
                "non-empty string",
                "empty string",
            ));
        }
        if s.len() > self.max_id {
            return Err(ParamError::new(
                self.path(name),
                "Too long",
                "shorter string",
                "string",
            ));
        }
        Ok(s)
    }

    /// An optional string.
    pub(crate) fn opt_str(&self, name: &str) -> Result<Option<&'a str>, ParamError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(self.wrong(name, "string", v)),
        }
    }

    /// A required string.
    pub(crate) fn str(&self, name: &str) -> Result<&'a str, ParamError> {
        self.opt_str(name)?
            .ok_or_else(|| self.missing(name, "string"))
    }

    /// An optional number in `lo..=hi`.
    pub(crate) fn opt_f64(&self, name: &str, lo: f64, hi: f64) -> Result<Option<f64>, ParamError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => {
                let x = v.as_f64().ok_or_else(|| self.wrong(name, "number", v))?;
                if (lo..=hi).contains(&x) {
                    Ok(Some(x))
                } else {
                    Err(ParamError::new(
                        self.path(name),
                        "Out of range",
                        "number in range",
                        "number",
                    ))
                }
            }
        }
    }

    /// An optional non-negative integer.
    pub(crate) fn opt_u64(&self, name: &str) -> Result<Option<u64>, ParamError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.wrong(name, "non-negative integer", v)),
        }
    }

    /// An optional boolean.
    pub(crate) fn opt_bool(&self, name: &str) -> Result<Option<bool>, ParamError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.wrong(name, "boolean", v)),
        }
    }

    /// An optional object, as `Fields`.
    pub(crate) fn opt_obj(&self, name: &str) -> Result<Option<Self>, ParamError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Object(obj)) => Ok(Some(Fields {
                obj,
                prefix: self.path(name),
                max_id: self.max_id,
            })),
            Some(v) => Err(self.wrong(name, "object", v)),
        }
    }

    /// A required object.
    pub(crate) fn obj(&self, name: &str) -> Result<Self, ParamError> {
        self.opt_obj(name)?
            .ok_or_else(|| self.missing(name, "object"))
    }

    /// An optional array of at most `max` items.
    pub(crate) fn opt_array(
        &self,
        name: &str,
        max: usize,
    ) -> Result<Option<&'a [Value]>, ParamError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Array(a)) if a.len() <= max => Ok(Some(a)),
            Some(Value::Array(_)) => Err(ParamError::new(
                self.path(name),
                "Too many",
                "shorter array",
                "array",
            )),
            Some(v) => Err(self.wrong(name, "array", v)),
        }
    }

    /// Item `i` of array `name` as an object.
    fn item(&self, name: &str, i: usize, v: &'a Value) -> Result<Self, ParamError> {
        let path = format!("{}[{i}]", self.path(name));
        match v {
            Value::Object(obj) => Ok(Fields {
                obj,
                prefix: path,
                max_id: self.max_id,
            }),
            other => Err(ParamError::new(path, "Wrong type", "object", kind(other))),
        }
    }

    /// An optional array of strings (at most `max`, each at most `max_id` bytes).
    pub(crate) fn opt_strings(&self, name: &str, max: usize) -> Result<Vec<String>, ParamError> {
        let Some(items) = self.opt_array(name, max)? else {
            return Ok(Vec::new());
        };
        items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) if s.len() <= self.max_id => Ok(s.clone()),
                Value::String(_) => Err(ParamError::new(
                    format!("{}[{i}]", self.path(name)),
                    "Too long",
                    "shorter string",
                    "string",
                )),
                other => Err(ParamError::new(
                    format!("{}[{i}]", self.path(name)),
                    "Wrong type",
                    "string",
                    kind(other),
                )),
            })
            .collect()
    }
}

/// `agent.register`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Register {
    pub(crate) agent_id: String,
    pub(crate) agent_type: Option<String>,
    pub(crate) capabilities: Vec<CapabilityProfile>,
    pub(crate) max_concurrent: usize,
}

fn capability(f: &Fields<'_>) -> Result<CapabilityProfile, ParamError> {
    let name = f.id("name")?.to_owned();
    let confidence = f.opt_f64("confidence", 0.0, 1.0)?.unwrap_or(1.0);
    let mut specialties = f.opt_strings("specialties", 64)?;
    specialties.extend(f.opt_strings("languages", 64)?);
    Ok(CapabilityProfile {
        name,
        confidence,
        specialties,
    })
}

pub(crate) fn register(
    params: &Value,
    max_id: usize,
    max_caps: usize,
) -> Result<Register, ParamError> {
    let f = Fields::root(params, max_id)?;
    let agent_id = f.id("agent_id")?.to_owned();
    let agent_type = f.opt_str("agent_type")?.map(str::to_owned);
    let caps = f.opt_array("capabilities", max_caps)?.unwrap_or(&[]);
    let capabilities = caps
        .iter()
        .enumerate()
        .map(|(i, v)| capability(&f.item("capabilities", i, v)?))
        .collect::<Result<Vec<_>, _>>()?;
    let max_concurrent = match f.opt_obj("resources")? {
        Some(r) => r.opt_u64("max_concurrent_tasks")?.unwrap_or(0),
        None => 0,
    };
    Ok(Register {
        agent_id,
        agent_type,
        capabilities,
        max_concurrent: usize::try_from(max_concurrent).unwrap_or(usize::MAX),
    })
}

/// `agent.heartbeat`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Heartbeat {
    pub(crate) agent_id: String,
    pub(crate) status: Option<String>,
    pub(crate) load: Option<f64>,
}

pub(crate) fn heartbeat(params: &Value, max_id: usize) -> Result<Heartbeat, ParamError> {
    let f = Fields::root(params, max_id)?;
    let agent_id = f.id("agent_id")?.to_owned();
    let status = f.opt_str("status")?.map(str::to_owned);
    let load = match f.opt_obj("workload")? {
        Some(w) => w.opt_f64("current_load", 0.0, f64::MAX)?,
        None => None,
    };
    Ok(Heartbeat {
        agent_id,
        status,
        load,
    })
}

/// What `agent.capability.update` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapabilityOp {
    /// Adds the capability (replacing one of the same name).
    Add,
    /// Replaces the capability of the same name (adds it if missing).
    Update,
    /// Removes the capability of that name.
    Remove,
}

impl CapabilityOp {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Add => "add",
            Self::Update => "update",
            Self::Remove => "remove",
        }
    }
}

/// `agent.capability.update`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CapabilityUpdate {
    pub(crate) agent_id: String,
    pub(crate) op: CapabilityOp,
    pub(crate) capability: CapabilityProfile,
}

pub(crate) fn capability_update(
    params: &Value,
    max_id: usize,
) -> Result<CapabilityUpdate, ParamError> {
    let f = Fields::root(params, max_id)?;
    let agent_id = f.id("agent_id")?.to_owned();
    let op = match f.str("operation")? {
        "add" => CapabilityOp::Add,
        "update" => CapabilityOp::Update,
        "remove" => CapabilityOp::Remove,
        _ => {
            return Err(ParamError::new(
                "operation",
                "Unknown value",
                "add, update or remove",
                "string",
            ));
        }
    };
    let capability = capability(&f.obj("capability")?)?;
    Ok(CapabilityUpdate {
        agent_id,
        op,
        capability,
    })
}

/// `task.progress`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Progress {
    pub(crate) task_id: String,
    pub(crate) agent_id: String,
    pub(crate) progress: f64,
    pub(crate) status: Option<String>,
}

pub(crate) fn progress(params: &Value, max_id: usize) -> Result<Progress, ParamError> {
    let f = Fields::root(params, max_id)?;
    Ok(Progress {
        task_id: f.id("task_id")?.to_owned(),
        agent_id: f.id("agent_id")?.to_owned(),
        progress: f
            .opt_f64("progress", 0.0, 1.0)?
            .ok_or_else(|| f.missing("progress", "number"))?,
        status: f.opt_str("status")?.map(str::to_owned),
    })
}

/// `task.complete`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Complete {
    pub(crate) task_id: String,
    pub(crate) agent_id: String,
    pub(crate) status: String,
    pub(crate) result: Value,
}

pub(crate) fn complete(params: &Value, max_id: usize) -> Result<Complete, ParamError> {
    let f = Fields::root(params, max_id)?;
    let task_id = f.id("task_id")?.to_owned();
    let agent_id = f.id("agent_id")?.to_owned();
    let status = f.id("status")?.to_owned();
    let result = match f.get("result") {
        None => Value::Null,
        Some(v @ Value::Object(_)) => v.clone(),
        Some(v) => return Err(f.wrong("result", "object", v)),
    };
    if let Some(r) = f.opt_obj("result")? {
        // The spec's error example: findings, when present, is an array.
        r.opt_array("findings", usize::MAX)?;
    }
    Ok(Complete {
        task_id,
        agent_id,
        status,
        result,
    })
}

/// `collaboration.request`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Collaboration {
    pub(crate) task_id: String,
    pub(crate) requesting_agent: String,
    pub(crate) collaboration_type: String,
    pub(crate) required_agents: Vec<String>,
    pub(crate) timeout_ms: Option<u64>,
}

pub(crate) fn collaboration(
    params: &Value,
    max_id: usize,
    max_agents: usize,
) -> Result<Collaboration, ParamError> {
    let f = Fields::root(params, max_id)?;
    let task_id = f.id("task_id")?.to_owned();
    let requesting_agent = f.id("requesting_agent")?.to_owned();
    let collaboration_type = f.id("collaboration_type")?.to_owned();
    if f.get("required_agents").is_none() {
        return Err(f.missing("required_agents", "array"));
    }
    let required_agents = f.opt_strings("required_agents", max_agents)?;
    if required_agents.is_empty() {
        return Err(ParamError::new(
            "required_agents",
            "Required field missing",
            "non-empty array",
            "empty array",
        ));
    }
    Ok(Collaboration {
        task_id,
        requesting_agent,
        collaboration_type,
        required_agents,
        timeout_ms: f.opt_u64("timeout_ms")?,
    })
}

/// `state.sync`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StateSync {
    pub(crate) agent_id: String,
    pub(crate) clock: VectorClock,
    pub(crate) ops: Vec<CrdtOp>,
    pub(crate) merkle_root: Option<String>,
}

pub(crate) fn state_sync(
    params: &Value,
    max_id: usize,
    max_ops: usize,
    max_clock: usize,
) -> Result<StateSync, ParamError> {
    let f = Fields::root(params, max_id)?;
    let agent_id = f.id("agent_id")?.to_owned();
    let clock_obj = f.obj("vector_clock")?;
    if clock_obj.obj.len() > max_clock {
        return Err(ParamError::new(
            "vector_clock",
            "Too many",
            "fewer entries",
            "object",
        ));
    }
    let mut clock = VectorClock::new();
    for (actor, v) in clock_obj.obj {
        let n = v
            .as_u64()
            .ok_or_else(|| clock_obj.wrong(actor, "non-negative integer", v))?;
        clock.set(actor.clone(), n);
    }
    let items = f.opt_array("operations", max_ops)?.unwrap_or(&[]);
    let mut ops = Vec::with_capacity(items.len());
    for (i, v) in items.iter().enumerate() {
        let o = f.item("operations", i, v)?;
        let key = o.id("key")?.to_owned();
        let op = match o.str("type")? {
            "g-counter" => CrdtOp::Increment {
                key,
                actor: o.opt_str("actor")?.unwrap_or(&agent_id).to_owned(),
                by: o.opt_u64("increment")?.unwrap_or(1),
            },
            "or-set" => {
                let element = o.id("element")?.to_owned();
                let tag = o.opt_str("unique_id")?.map(str::to_owned);
                match o.str("operation")? {
                    "add" => CrdtOp::Add {
                        key,
                        element,
                        tag: tag.ok_or_else(|| o.missing("unique_id", "string"))?,
                    },
                    "remove" => CrdtOp::Remove { key, element, tag },
                    _ => {
                        return Err(ParamError::new(
                            o.path("operation"),
                            "Unknown value",
                            "add or remove",
                            "string",
                        ));
                    }
                }
            }
            _ => {
                return Err(ParamError::new(
                    o.path("type"),
                    "Unknown value",
                    "g-counter or or-set",
                    "string",
                ));
            }
        };
        ops.push(op);
    }
    Ok(StateSync {
        agent_id,
        clock,
        ops,
        merkle_root: f.opt_str("merkle_root")?.map(str::to_owned),
    })
}

/// `agent.shutdown`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Shutdown {
    pub(crate) agent_id: String,
    pub(crate) reason: Option<String>,
    pub(crate) graceful_timeout_ms: Option<u64>,
    pub(crate) transfer_tasks: bool,
}

pub(crate) fn shutdown(params: &Value, max_id: usize) -> Result<Shutdown, ParamError> {
    let f = Fields::root(params, max_id)?;
    Ok(Shutdown {
        agent_id: f.id("agent_id")?.to_owned(),
        reason: f.opt_str("reason")?.map(str::to_owned),
        graceful_timeout_ms: f.opt_u64("graceful_timeout_ms")?,
        transfer_tasks: f.opt_bool("transfer_tasks")?.unwrap_or(false),
    })
}

/// The gzip threshold of the 12-byte form when `protocol.set_binary` enables compression
/// without naming one: the reference's 1024 bytes.
pub(crate) const DEFAULT_COMPACT_THRESHOLD: usize = 1024;

/// `protocol.set_binary`: `(enabled, Some(threshold) if compression is enabled)`. Empty,
/// `null` or `{}` params switch binary mode off (as the reference does); a missing
/// `enabled` is `false`, a missing threshold the default.
pub(crate) fn set_binary(params: &Value) -> Result<(bool, Option<usize>), ParamError> {
    if params.is_null() || params.as_object().is_some_and(Map::is_empty) {
        return Ok((false, None));
    }
    let f = Fields::root(params, 0)?;
    let enabled = f.opt_bool("enabled")?.unwrap_or(false);
    let compression = match f.opt_obj("compression")? {
        Some(c) if c.opt_bool("enabled")?.unwrap_or(false) => Some(
            c.opt_u64("threshold")?
                .map_or(DEFAULT_COMPACT_THRESHOLD, |t| {
                    usize::try_from(t).unwrap_or(usize::MAX)
                }),
        ),
        _ => None,
    };
    Ok((enabled, compression))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn errors_name_the_field() {
        let e = register(&json!({"capabilities": []}), 256, 8).unwrap_err();
        assert_eq!(e.field, "agent_id");
        assert_eq!(e.reason, "Required field missing");
        let e = register(
            &json!({"agent_id": "a", "capabilities": [{"name": "x"}, {"name": "y", "confidence": "high"}]}),
            256,
            8,
        )
        .unwrap_err();
        assert_eq!(e.field, "capabilities[1].confidence");
        assert_eq!((e.expected, e.received.as_str()), ("number", "string"));
        let e = complete(
            &json!({"task_id": "t", "agent_id": "a", "status": "completed", "result": {"findings": null, "x": 1}}),
            256,
        );
        assert!(e.is_ok(), "null counts as absent");
        let e = complete(
            &json!({"task_id": "t", "agent_id": "a", "status": "completed", "result": {"findings": 3}}),
            256,
        )
        .unwrap_err();
        assert_eq!(e.field, "result.findings");
        assert_eq!(
            e.to_data(),
            json!({"field": "result.findings", "reason": "Wrong type", "expected": "array", "received": "number"})
        );
        let e = state_sync(
            &json!({"agent_id": "a", "vector_clock": {"a": -1}}),
            256,
            8,
            8,
        )
        .unwrap_err();
        assert_eq!(e.field, "vector_clock.a");
        let e = heartbeat(&json!([1]), 256).unwrap_err();
        assert_eq!(e.field, "params");
    }

    #[test]
    fn the_spec_examples_parse() {
        let r = register(
            &json!({
                "agent_id": "agent-123", "agent_type": "code-analyzer",
                "capabilities": [
                    {"name": "code_review", "confidence": 0.95, "languages": ["go"], "specialties": ["security"]},
                    {"name": "bug_detection", "confidence": 0.88, "patterns": ["memory-leak"]}
                ],
                "resources": {"max_concurrent_tasks": 10, "max_memory_mb": 4096, "gpu_required": false}
            }),
            256,
            8,
        )
        .unwrap();
        assert_eq!(r.capabilities.len(), 2);
        assert_eq!(r.capabilities[0].specialties, ["security", "go"]);
        assert_eq!(r.max_concurrent, 10);
        let s = state_sync(
            &json!({
                "agent_id": "agent-123",
                "vector_clock": {"agent-123": 42, "agent-456": 38},
                "operations": [
                    {"type": "g-counter", "key": "tasks_completed", "increment": 1, "actor": "agent-123"},
                    {"type": "or-set", "key": "active_collaborations", "operation": "add", "element": "collab-xyz", "unique_id": "u1"}
                ],
                "merkle_root": "a1b2"
            }),
            256,
            8,
            8,
        )
        .unwrap();
        assert_eq!(s.clock.get("agent-123"), 42);
        assert_eq!(s.ops.len(), 2);
        let sd = shutdown(
            &json!({"agent_id": "a", "graceful_timeout_ms": 30000, "transfer_tasks": true}),
            256,
        )
        .unwrap();
        assert!(sd.transfer_tasks);
    }
}

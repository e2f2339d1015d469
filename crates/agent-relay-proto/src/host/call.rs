//! Checking a `tool.call` before the tool runs, in the spec's order: `toolName`, `reason`,
//! a loaded spec, a known tool, params that fit its schema.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::params::validate_params;
use super::tools::Tools;
use crate::codec::{raw_str, truncate};
use crate::error::ParamError;
use crate::message::ErrorCode;
use crate::texts::host as host_texts;

/// Longest piece of a peer's string (tool name, type) echoed in an error or an event.
pub(super) const MAX_ECHOED: usize = 128;

/// `tool.call` payload as the host reads it: every field raw, checked by hand, so that each
/// problem gets its own code and text.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CallFields<'a> {
    #[serde(borrow, default)]
    tool_name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
    #[serde(borrow, default)]
    reason: Option<&'a RawValue>,
}

/// A call of a known tool, with params that fit its schema.
#[derive(Debug)]
pub(super) struct Checked {
    /// The tool.
    pub(super) name: String,
    /// The agent's reason (not blank).
    pub(super) reason: String,
    /// The params, a JSON object.
    pub(super) params: Value,
}

/// Checks the payload of a `tool.call` against the current stage's tools: the call, or the
/// code and text of the `error` that answers it.
pub(super) fn check_call<T: Tools>(
    payload: &RawValue,
    tools: &T,
) -> Result<Checked, (ErrorCode, String)> {
    let fields: CallFields<'_> = serde_json::from_str(payload.get()).map_err(|e| {
        let text = format!("Invalid tool.call payload: {e}");
        (ErrorCode::INVALID_MESSAGE, text)
    })?;
    let Some(name) = fields.tool_name.and_then(raw_str) else {
        let text = host_texts::TOOL_NAME_REQUIRED.to_owned();
        return Err((ErrorCode::INVALID_MESSAGE, text));
    };
    let Some(reason) = fields
        .reason
        .and_then(raw_str)
        .filter(|r| !r.trim().is_empty())
    else {
        let text = host_texts::REASON_REQUIRED.to_owned();
        return Err((ErrorCode::INVALID_PARAMS, text));
    };
    let schema = find_tool(tools, &name)?;
    let shown = truncate(&name, MAX_ECHOED);
    let params: Value = match fields.params {
        None => Value::Object(Map::new()),
        Some(raw) => serde_json::from_str(raw.get()).map_err(|e| {
            let text = format!("{shown} params could not be read: {e}");
            (ErrorCode::INVALID_PARAMS, text)
        })?,
    };
    check_params(&schema, shown, &params)?;
    Ok(Checked {
        name: name.into_owned(),
        reason: reason.into_owned(),
        params,
    })
}

/// The parameter schema of tool `name` of the current stage: NO_ACTIVE_SPEC without a loaded
/// spec (no stage, no tools), UNKNOWN_TOOL if the stage has no such tool. A schema that does
/// not parse constrains nothing (it is the application's).
pub(super) fn find_tool<T: Tools>(tools: &T, name: &str) -> Result<Value, (ErrorCode, String)> {
    if !tools.has_active_spec() {
        let text = host_texts::NO_ACTIVE_SPEC.to_owned();
        return Err((ErrorCode::NO_ACTIVE_SPEC, text));
    }
    let Some(tool) = tools.tool_schema().iter().find(|t| t.name == name) else {
        let shown = truncate(name, MAX_ECHOED);
        return Err((ErrorCode::UNKNOWN_TOOL, format!("Unknown tool: {shown}")));
    };
    Ok(tool.parameters.parse().unwrap_or(Value::Bool(true)))
}

/// INVALID_PARAMS unless `params` is an object fitting `schema` (`shown` names the tool).
pub(super) fn check_params(
    schema: &Value,
    shown: &str,
    params: &Value,
) -> Result<(), (ErrorCode, String)> {
    let checked = if params.is_object() {
        validate_params(schema, params)
    } else {
        Err(ParamError::WrongType {
            param: "params".to_owned(),
            expected: "an object".to_owned(),
        })
    };
    checked.map_err(|e| (ErrorCode::INVALID_PARAMS, format!("{shown} {e}")))
}

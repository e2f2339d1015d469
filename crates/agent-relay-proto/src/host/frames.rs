//! The frames the host sends, encoded from borrowed payloads, and the visible UI state as
//! agents may see it.

use agentwire_core::FrameBuf;
use serde::Serialize;
use serde_json::Value;

use crate::codec::{write_envelope, write_request, ErrorRef};
use crate::message::{types, ErrorCode, RawJson, Role, ToolSchema};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JoinRef<'a> {
    role: Role,
    session_id: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StartedRef<'a> {
    session_id: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SnapshotRef<'a> {
    session_id: &'a str,
    ui_spec: &'a RawJson,
    message_history: &'a RawJson,
    tool_schema: &'a [ToolSchema],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolResultRef<'a> {
    ok: bool,
    tool_name: &'a str,
    ui_spec: &'a RawJson,
    message_history: &'a RawJson,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StateRef<'a> {
    source: &'a str,
    ui_spec: &'a RawJson,
    message_history: &'a RawJson,
}

#[derive(Serialize)]
struct UserRef<'a> {
    text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    stage: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EndedRef<'a> {
    session_id: &'a str,
    log_file: &'a str,
    state_reset: bool,
}

fn encode<P: Serialize + ?Sized>(msg_type: &str, reply_to: Option<&str>, payload: &P) -> FrameBuf {
    let mut buf = Vec::with_capacity(128);
    write_envelope(&mut buf, msg_type, reply_to, payload);
    FrameBuf::json_from_vec(buf)
}

/// `relay.join` as `host` to `relay_session`, with id `join_id`.
pub(super) fn join(join_id: &str, relay_session: &str) -> FrameBuf {
    let payload = JoinRef {
        role: Role::Host,
        session_id: relay_session,
    };
    let mut buf = Vec::with_capacity(96);
    write_request(&mut buf, types::RELAY_JOIN, join_id, &payload);
    FrameBuf::json_from_vec(buf)
}

/// `session.started`.
pub(super) fn started(reply_to: Option<&str>, session_id: &str) -> FrameBuf {
    encode(types::SESSION_STARTED, reply_to, &StartedRef { session_id })
}

/// `snapshot.state`.
pub(super) fn snapshot(
    reply_to: Option<&str>,
    session_id: &str,
    ui_spec: &RawJson,
    message_history: &RawJson,
    tool_schema: &[ToolSchema],
) -> FrameBuf {
    let payload = SnapshotRef {
        session_id,
        ui_spec,
        message_history,
        tool_schema,
    };
    encode(types::SNAPSHOT_STATE, reply_to, &payload)
}

/// `tool.result` (always `ok: true`: failures are `error`s).
pub(super) fn tool_result(
    reply_to: Option<&str>,
    tool_name: &str,
    ui_spec: &RawJson,
    message_history: &RawJson,
) -> FrameBuf {
    let payload = ToolResultRef {
        ok: true,
        tool_name,
        ui_spec,
        message_history,
    };
    encode(types::TOOL_RESULT, reply_to, &payload)
}

/// `state.updated`.
pub(super) fn state(source: &str, ui_spec: &RawJson, message_history: &RawJson) -> FrameBuf {
    let payload = StateRef {
        source,
        ui_spec,
        message_history,
    };
    encode(types::STATE_UPDATED, None, &payload)
}

/// `user.message`.
pub(super) fn user(text: &str, stage: Option<&str>) -> FrameBuf {
    encode(types::USER_MESSAGE, None, &UserRef { text, stage })
}

/// `session.ended` with `stateReset: true`.
pub(super) fn ended(reply_to: Option<&str>, session_id: &str, log_file: &str) -> FrameBuf {
    let payload = EndedRef {
        session_id,
        log_file,
        state_reset: true,
    };
    encode(types::SESSION_ENDED, reply_to, &payload)
}

/// `error`.
pub(super) fn error(reply_to: Option<&str>, code: &ErrorCode, message: &str) -> FrameBuf {
    encode(types::ERROR, reply_to, &ErrorRef { code, message })
}

/// The visible state as agents may see it: `null` without a UI spec, and never a
/// `backendData` key, at any depth (spec §7).
pub(super) fn visible_ui(spec: Option<RawJson>) -> RawJson {
    spec.map_or_else(RawJson::null, without_backend_data)
}

/// `uiSpec` without any `backendData` key in any of its objects, however deep; parsed only
/// when the text could hold one (it names it, or has escapes that could spell it).
fn without_backend_data(spec: RawJson) -> RawJson {
    let text = spec.get();
    if !text.contains(BACKEND_DATA) && !text.contains('\\') {
        return spec;
    }
    match serde_json::from_str::<Value>(text) {
        Ok(mut v) => {
            if strip(&mut v) {
                RawJson::from_value(&v)
            } else {
                spec
            }
        }
        // Not JSON the host can read: nothing of it can be shown.
        Err(_) => RawJson::null(),
    }
}

/// The key spec §7 keeps from agents.
const BACKEND_DATA: &str = "backendData";

/// Removes every `backendData` key under `v`; whether one was found. Recursion is bounded
/// by serde_json's nesting limit (128) on the parsed value.
fn strip(v: &mut Value) -> bool {
    match v {
        Value::Object(m) => {
            let mut found = m.remove(BACKEND_DATA).is_some();
            for child in m.values_mut() {
                found |= strip(child);
            }
            found
        }
        Value::Array(a) => a
            .iter_mut()
            .fold(false, |found, child| strip(child) | found),
        _ => false,
    }
}

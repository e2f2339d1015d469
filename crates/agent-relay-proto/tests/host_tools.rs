//! What agents see and do through the Host: `snapshot.get` (only the allowed read
//! surfaces, never `backendData`) and `tool.call` (checked in the spec's order, then run).

mod common;

use agent_relay_proto::{host_texts, sources, ErrorCode, HostEvent, ToolError, Tools};
use serde_json::{json, Value};

use common::error_of;
use common::host::*;

// ---- snapshots -----------------------------------------------------------------------------

#[test]
fn snapshot_state_carries_only_ui_spec_message_history_and_tool_schema() {
    let mut h = H::in_session();
    h.req("snapshot.get", "req-002", json!({}));
    let snap = h.one();
    assert_eq!(snap["type"], "snapshot.state");
    assert_eq!(snap["replyTo"], "req-002");
    let keys: Vec<&str> = snap["payload"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["messageHistory", "sessionId", "toolSchema", "uiSpec"]
    );
    assert_eq!(snap["payload"]["sessionId"], "s-20260213-001");
    assert_eq!(snap["payload"]["uiSpec"]["stage"], "movie");
    assert_eq!(snap["payload"]["messageHistory"], json!([]));
    let names: Vec<&str> = snap["payload"]["toolSchema"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["select", "sort", "postMessage", "next", "prev", "refresh"]
    );
    assert_eq!(
        snap["payload"]["toolSchema"][0],
        json!({"name":"select","description":"The select tool.","parameters":
            {"type":"object","properties":{"itemId":{"type":"string"}},"required":["itemId"]}})
    );
    // No UI spec loaded: the snapshot still answers, with `uiSpec: null`.
    h.host.tools_mut().loaded = false;
    h.req("snapshot.get", "req-003", json!({}));
    assert_eq!(h.one()["payload"]["uiSpec"], Value::Null);
}

#[test]
fn backend_data_never_reaches_an_agent() {
    let mut h = H::in_session();
    h.host.tools_mut().backend_data = true;
    assert!(h
        .host
        .tools()
        .ui_spec()
        .unwrap()
        .get()
        .contains("backendData"));
    h.req("snapshot.get", "s", json!({}));
    h.call("c", "select", json!({"itemId":"m1"}));
    h.host.publish_state(sources::USER, h.now);
    h.drain();
    let sent = h.sent();
    assert_eq!(sent.len(), 4, "{sent:#?}"); // snapshot, tool.result, state.updated ×2
    for v in &sent {
        assert!(!v.to_string().contains("backendData"), "{v}");
        assert!(!v.to_string().contains("secret"), "{v}");
        let ui = &v["payload"]["uiSpec"];
        assert_eq!(ui["stage"], "movie", "the rest is kept: {v}");
        assert_eq!(
            ui["items"],
            json!(["m1", {"id": "m2", "poster": {}}]),
            "{v}"
        );
        assert_eq!(ui["panel"], json!({"title": "Movies"}), "{v}");
    }
}

// ---- tool calls ----------------------------------------------------------------------------

#[test]
fn a_tool_call_is_answered_with_tool_result_then_state_updated() {
    let mut h = H::in_session();
    h.call("req-003", "select", json!({"itemId":"m1"}));
    let sent = h.sent();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0]["type"], "tool.result");
    assert_eq!(sent[0]["replyTo"], "req-003");
    assert_eq!(sent[0]["payload"]["ok"], true);
    assert_eq!(sent[0]["payload"]["toolName"], "select");
    assert_eq!(sent[0]["payload"]["uiSpec"]["selected"], "m1");
    assert_eq!(sent[0]["payload"]["messageHistory"], json!([]));
    assert_eq!(sent[1]["type"], "state.updated");
    assert_eq!(sent[1].get("replyTo"), None, "a push");
    assert_eq!(sent[1]["payload"]["source"], "tool");
    assert_eq!(sent[1]["payload"]["uiSpec"], sent[0]["payload"]["uiSpec"]);
    assert_eq!(
        h.events(),
        [
            HostEvent::ToolApplied {
                tool_name: "select".into(),
                reason: "Because the test says so.".into()
            },
            HostEvent::StateChanged {
                source: "tool".into()
            }
        ]
    );
}

#[test]
fn a_tool_that_changes_nothing_sends_no_state_updated() {
    let mut h = H::in_session();
    h.call("a", "select", json!({"itemId":"m1"}));
    h.outs.clear();
    h.call("b", "select", json!({"itemId":"m1"}));
    assert_eq!(h.types(), ["tool.result"]);
}

#[test]
fn reason_is_required_and_must_not_be_blank() {
    let mut h = H::in_session();
    for reason in [
        None,
        Some(json!("")),
        Some(json!("  \n")),
        Some(json!(5)),
        Some(Value::Null),
    ] {
        let mut payload = json!({"toolName":"select","params":{"itemId":"m1"}});
        if let Some(r) = reason.clone() {
            payload["reason"] = r;
        }
        h.req("tool.call", "r", payload);
        assert_eq!(
            error_of(&h.one()),
            err("INVALID_PARAMS", host_texts::REASON_REQUIRED, "r"),
            "{reason:?}"
        );
    }
    h.req("tool.call", "n", json!({"params":{},"reason":"x"}));
    assert_eq!(
        error_of(&h.one()),
        err("INVALID_MESSAGE", host_texts::TOOL_NAME_REQUIRED, "n")
    );
    assert_eq!(h.host.tools().calls, 0);
}

#[test]
fn an_unknown_tool_is_unknown_tool_and_each_stage_has_its_own_tools() {
    let mut h = H::in_session();
    h.call("u", "teleport", json!({}));
    assert_eq!(
        error_of(&h.one()),
        err("UNKNOWN_TOOL", "Unknown tool: teleport", "u")
    );
    // setQuantity exists on the ticket stage only.
    h.call("q", "setQuantity", json!({"typeId":"adult","quantity":2}));
    assert_eq!(error_of(&h.one()).0, "UNKNOWN_TOOL");
    for _ in 0..5 {
        h.call("n", "next", json!({}));
    }
    h.outs.clear();
    assert_eq!(h.host.tools().stage(), Some("ticket"));
    h.call("q", "setQuantity", json!({"typeId":"adult","quantity":2}));
    assert_eq!(h.types(), ["tool.result", "state.updated"]);
    assert_eq!(h.host.tools().quantity, 2);
    // A very long unknown name is cut in the reply.
    h.call("l", &"x".repeat(5000), json!({}));
    assert!(error_of(&h.one()).1.len() < 200);
}

#[test]
fn bad_params_are_invalid_params_naming_the_parameter() {
    let mut h = H::in_session();
    for _ in 0..5 {
        h.call("n", "next", json!({}));
    }
    h.outs.clear();
    let cases = [
        (
            "setQuantity",
            json!({"typeId":"adult","quantity":-1}),
            "setQuantity requires quantity >= 0",
        ),
        (
            "setQuantity",
            json!({"typeId":"adult","quantity":11}),
            "setQuantity requires quantity <= 10",
        ),
        (
            "setQuantity",
            json!({"typeId":"adult","quantity":"2"}),
            "setQuantity requires quantity to be an integer",
        ),
        (
            "setQuantity",
            json!({"quantity":1}),
            "setQuantity requires typeId",
        ),
        ("select", json!({}), "select requires itemId"),
        (
            "select",
            json!({"itemId":7}),
            "select requires itemId to be a string",
        ),
        (
            "select",
            json!(["m1"]),
            "select requires params to be an object",
        ),
        (
            "select",
            json!("m1"),
            "select requires params to be an object",
        ),
        (
            "sort",
            json!({"field":"title","order":"up"}),
            r#"sort requires order to be one of "asc", "desc""#,
        ),
    ];
    for (tool, params, message) in cases {
        h.call("p", tool, params.clone());
        assert_eq!(
            error_of(&h.one()),
            err("INVALID_PARAMS", message, "p"),
            "{tool} {params}"
        );
    }
    assert_eq!(h.host.tools().calls, 5, "only the five `next` calls ran");
    // Absent or null params are `{}`.
    h.req("tool.call", "a", json!({"toolName":"prev","reason":"back"}));
    h.req(
        "tool.call",
        "b",
        json!({"toolName":"prev","params":null,"reason":"back"}),
    );
    assert_eq!(
        h.types(),
        [
            "tool.result",
            "state.updated",
            "tool.result",
            "state.updated"
        ]
    );
}

#[test]
fn the_tools_own_failures_are_tool_execution_failed_or_invalid_params() {
    let mut h = H::in_session();
    h.call("f", "refresh", json!({}));
    assert_eq!(
        error_of(&h.one()),
        err(
            "TOOL_EXECUTION_FAILED",
            "The showtimes service is down.",
            "f"
        )
    );
    h.call("i", "select", json!({"itemId":"zz"}));
    assert_eq!(
        error_of(&h.one()),
        err(
            "INVALID_PARAMS",
            "select: no item \"zz\" on this stage",
            "i"
        )
    );
    let events = h.events();
    assert!(
        events.iter().all(|e| matches!(
            e,
            HostEvent::Refused {
                msg_type: "tool.call",
                ..
            }
        )),
        "{events:?}"
    );
    assert_eq!(
        ToolError::failed("x").code(),
        ErrorCode::TOOL_EXECUTION_FAILED
    );
}

#[test]
fn no_loaded_spec_is_no_active_spec() {
    let mut h = H::in_session();
    h.host.tools_mut().loaded = false;
    h.call("s", "select", json!({"itemId":"m1"}));
    assert_eq!(
        error_of(&h.one()),
        err("NO_ACTIVE_SPEC", host_texts::NO_ACTIVE_SPEC, "s")
    );
    // It comes before the tool lookup: with no spec, no tool is "unknown".
    h.call("t", "teleport", json!({}));
    assert_eq!(error_of(&h.one()).0, "NO_ACTIVE_SPEC");
}

#[test]
fn a_participant_action_runs_the_stages_tool_and_pushes_state_updated_from_user() {
    use agent_relay_proto::{HostCommandError, ToolOutcome};
    // Outside a study session too: the participant may click before an agent starts one.
    let mut h = H::new();
    let now = h.now;
    assert_eq!(
        h.host.user_action("select", &json!({"itemId": "m2"}), now),
        Ok(ToolOutcome::Applied)
    );
    h.drain();
    let sent = h.sent();
    assert_eq!(sent.len(), 1, "{sent:#?}");
    assert_eq!(sent[0]["type"], "state.updated");
    assert!(sent[0].get("replyTo").is_none());
    assert_eq!(sent[0]["payload"]["source"], sources::USER);
    assert_eq!(sent[0]["payload"]["uiSpec"]["selected"], "m2");
    assert!(h.events().contains(&HostEvent::UserAction {
        tool_name: "select".into(),
        applied: true
    }));

    // Refused as an agent's call would be, and nothing is pushed.
    let refused = |code: &'static str, message: &str| HostCommandError::ActionRefused {
        code: ErrorCode::new(code),
        message: message.to_owned(),
    };
    for (tool, params, want) in [
        (
            "fly",
            json!({}),
            refused("UNKNOWN_TOOL", "Unknown tool: fly"),
        ),
        (
            "select",
            json!({"itemId": 7}),
            refused("INVALID_PARAMS", "select requires itemId to be a string"),
        ),
        (
            "refresh",
            json!({}),
            refused("TOOL_EXECUTION_FAILED", "The showtimes service is down."),
        ),
    ] {
        assert_eq!(h.host.user_action(tool, &params, now), Err(want), "{tool}");
        h.drain();
        assert!(h.sent().is_empty(), "{tool}");
    }
    // Choosing what is already chosen changes nothing: no push.
    assert_eq!(
        h.host.user_action("select", &json!({"itemId": "m2"}), now),
        Ok(ToolOutcome::Unchanged)
    );
    h.drain();
    assert!(h.sent().is_empty());
    // Going on a stage: the agents see it.
    h.host.user_action("next", &json!({}), now).unwrap();
    h.drain();
    assert_eq!(h.one()["payload"]["uiSpec"]["stage"], "theater");
    // No loaded spec: NO_ACTIVE_SPEC.
    h.host.tools_mut().loaded = false;
    assert!(matches!(
        h.host.user_action("next", &json!({}), now),
        Err(HostCommandError::ActionRefused { code, .. }) if code == ErrorCode::NO_ACTIVE_SPEC
    ));
}

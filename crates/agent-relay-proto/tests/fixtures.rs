//! Every example message of the spec (tests/fixtures/*.json, copied verbatim from
//! `specs/agent-relay.md`, plus the reference relay's `relay.hello`) decodes with the crate's
//! types and re-encodes to the same JSON value, and the relay forwards each one unchanged.

mod common;

use agent_relay_proto::{
    AgentMessage, Body, DecodeError, Direction, Envelope, ErrorCode, HostMessage, LogRecord,
    RelayMessage, Route, SessionId, SnapshotState, StateUpdated, ToolResult, VersionRule,
};
use agentwire_core::{Frame, Utf8Bytes};
use common::Harness;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn value(name: &str) -> Value {
    serde_json::from_str(&fixture(name)).unwrap()
}

const AGENT: [&str; 6] = [
    "relay_join",
    "session_start",
    "snapshot_get",
    "tool_call",
    "agent_message",
    "session_end",
];
const HOST: [&str; 8] = [
    "relay_join",
    "session_started",
    "snapshot_state",
    "tool_result",
    "state_updated",
    "user_message",
    "session_ended",
    "error",
];
const RELAY: [&str; 2] = ["relay_hello", "relay_joined"];

/// Decodes `name` with sender `B` both through serde and through `Envelope::decode`, and
/// checks that both re-encode to the fixture's JSON value.
fn round_trip<B: Body + std::fmt::Debug + PartialEq>(name: &str) -> Envelope<B>
where
    Envelope<B>: DeserializeOwned + Serialize,
{
    let text = fixture(name);
    let orig = value(name);
    let via_serde: Envelope<B> =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(
        serde_json::to_value(&via_serde).unwrap(),
        orig,
        "{name} (serde)"
    );
    let decoded = Envelope::<B>::decode(Frame::Text(&text), 1 << 20)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(decoded, via_serde, "{name}: decode and serde agree");
    let mut out = Vec::new();
    decoded.encode(&mut out);
    let back: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(back, orig, "{name} (encode)");
    assert_eq!(decoded.msg_type(), orig["type"]);
    decoded
}

#[test]
fn every_agent_example_round_trips() {
    for name in AGENT {
        round_trip::<AgentMessage>(name);
    }
    let call = round_trip::<AgentMessage>("tool_call");
    let AgentMessage::ToolCall(tc) = &call.body else {
        panic!("{call:?}")
    };
    assert_eq!(tc.tool_name, "select");
    assert_eq!(tc.params.parse::<Value>().unwrap(), json!({"itemId": "m1"}));
    assert_eq!(call.id.as_deref(), Some("req-003"));
}

#[test]
fn every_host_example_round_trips() {
    for name in HOST {
        round_trip::<HostMessage>(name);
    }
    let err = round_trip::<HostMessage>("error");
    assert!(matches!(&err.body, HostMessage::Error(e) if e.code == ErrorCode::INVALID_PARAMS));
    assert_eq!(err.reply_to.as_deref(), Some("req-003"));
}

#[test]
fn every_relay_example_round_trips() {
    for name in RELAY {
        round_trip::<RelayMessage>(name);
    }
}

#[test]
fn the_route_of_every_example_names_its_type_ids_and_payload() {
    for name in AGENT.iter().chain(&HOST).chain(&RELAY) {
        let text = fixture(name);
        let orig = value(name);
        let r = Route::decode(Frame::Text(&text), 1 << 20, VersionRule::Required).unwrap();
        assert_eq!(r.msg_type, orig["type"].as_str().unwrap(), "{name}");
        assert_eq!(r.id.as_deref(), orig["id"].as_str(), "{name}");
        assert_eq!(r.reply_to.as_deref(), orig["replyTo"].as_str(), "{name}");
        let payload: Value = serde_json::from_str(&text[r.payload_range()]).unwrap();
        assert_eq!(payload, orig["payload"], "{name}");
    }
}

#[test]
fn the_envelope_example_routes_but_its_placeholder_payload_is_no_tool_call() {
    let text = fixture("envelope");
    let r = Route::decode(Frame::Text(&text), 1 << 20, VersionRule::Required).unwrap();
    assert_eq!(
        (r.msg_type.as_ref(), r.id.as_deref()),
        ("tool.call", Some("req-003"))
    );
    // `tool.call` needs toolName, params and reason: the §3 example's `{}` is a placeholder.
    let err = Envelope::<AgentMessage>::decode(Frame::Text(&text), 1 << 20).unwrap_err();
    assert!(
        matches!(&err, DecodeError::InvalidPayload { msg_type: "tool.call", id: Some(id), .. } if id == "req-003"),
        "{err:?}"
    );
}

#[test]
fn the_relay_forwards_every_agent_example_to_the_host_unchanged() {
    let mut h = Harness::quiet();
    let host = h.host();
    let agent = h.agent();
    for name in &AGENT[1..] {
        let text = fixture(name);
        h.send_text(agent, &text);
        assert_eq!(h.one(host), value(name), "{name}");
        h.clear();
    }
}

#[test]
fn the_relay_forwards_every_host_example_to_the_agent_unchanged() {
    let mut h = Harness::quiet();
    let host = h.host();
    let agent = h.agent();
    for name in &HOST[1..] {
        let orig = value(name);
        // Replies reach the agent that asked, so ask first with the id they answer.
        if let Some(id) = orig["replyTo"].as_str() {
            h.msg(agent, "snapshot.get", Some(id), json!({}));
            h.clear();
        }
        h.send_text(host, &fixture(name));
        assert_eq!(h.one(agent), orig, "{name}");
        h.clear();
    }
}

#[test]
fn the_join_example_is_answered_with_the_joined_example() {
    let mut h = Harness::quiet();
    let c = h.connect();
    h.send_text(c, &fixture("relay_join"));
    let mut joined = h.one(c);
    // The reference relay adds the agent's display name; the rest is the spec's example.
    assert!(joined["payload"]["clientName"]
        .as_str()
        .unwrap()
        .starts_with("agent-"));
    joined["payload"]
        .as_object_mut()
        .unwrap()
        .remove("clientName");
    assert_eq!(joined, value("relay_joined"));
}

#[test]
fn the_hello_example_is_what_the_relay_sends_on_connect() {
    let mut h = Harness::new(agent_relay_proto::RelayConfig::default());
    let c = h.connect();
    assert_eq!(h.one(c), value("relay_hello"));
}

#[test]
fn the_log_line_example_is_what_a_record_writes() {
    let orig = value("log_line");
    let rec = LogRecord {
        session_id: SessionId::new("s-20260213-001"),
        relay_session: SessionId::default_session(),
        direction: Direction::In,
        msg_type: "tool.call",
        payload: Utf8Bytes::copy_from_str(&orig["payload"].to_string()),
        at_unix_ms: common::UNIX_MS,
    };
    let mut out = Vec::new();
    rec.write_jsonl(12, &mut out);
    assert_eq!(serde_json::from_slice::<Value>(&out).unwrap(), orig);
}

#[test]
fn backend_data_cannot_be_carried_through_a_snapshot_type() {
    let with_backend = json!({
        "sessionId": "s-20260213-001",
        "uiSpec": {},
        "messageHistory": [],
        "toolSchema": [{"name":"select","description":"Select an item","parameters":{"type":"object"}}],
        "backendData": {"secret": "raw backend payload"}
    });
    let snap: SnapshotState = serde_json::from_value(with_backend).unwrap();
    let out = serde_json::to_value(&snap).unwrap();
    assert!(out.get("backendData").is_none(), "{out}");
    assert_eq!(out["toolSchema"][0]["name"], "select");
    for (json, name) in [
        (
            json!({"ok":true,"toolName":"select","uiSpec":{},"backendData":1}),
            "tool.result",
        ),
        (
            json!({"source":"user","uiSpec":{},"messageHistory":[],"backendData":1}),
            "state.updated",
        ),
    ] {
        let out = match name {
            "tool.result" => {
                serde_json::to_value(serde_json::from_value::<ToolResult>(json).unwrap())
            }
            _ => serde_json::to_value(serde_json::from_value::<StateUpdated>(json).unwrap()),
        }
        .unwrap();
        assert!(out.get("backendData").is_none(), "{name}: {out}");
    }
}

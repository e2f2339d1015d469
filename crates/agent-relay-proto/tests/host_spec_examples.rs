//! The Host answers the spec's examples word for word (the fixtures in `tests/fixtures/`).

mod common;

use agent_relay_proto::{
    sources, study_log_path, Envelope, ErrorCode, ErrorPayload, HostEvent, HostMessage,
};
use agentwire_core::{Frame, Machine};
use serde_json::json;

use common::host::*;

#[test]
fn the_host_answers_the_spec_examples_word_for_word() {
    let spec_tools = SpecTools(vec![
        tool(
            "select",
            object(json!({"itemId":{"type":"string"}}), &["itemId"]),
        ),
        tool(
            "setQuantity",
            object(
                json!({"quantity":{"type":"integer","minimum":0}}),
                &["quantity"],
            ),
        ),
    ]);
    let bad_quantity = json!({"v":"mvp-0.2","type":"tool.call","id":"req-003","payload":
        {"toolName":"setQuantity","params":{"quantity":-1},"reason":"Two tickets."}});
    let (mut host, conn, now) = joined_host(spec_tools);
    let sent = exchange(
        &mut host,
        conn,
        now,
        &[
            fixture("session_start"),
            fixture("tool_call"),
            bad_quantity,
            fixture("session_end"),
        ],
    );
    assert_eq!(sent[0], fixture("session_started"));
    assert_eq!(sent[1], fixture("tool_result"));
    assert_eq!(sent[2]["type"], "state.updated");
    assert_eq!(sent[3], fixture("error"));
    assert_eq!(sent.len(), 4, "session.end waits for the flush");

    let (mut host, conn, now) = joined_host(Blank);
    let sent = exchange(
        &mut host,
        conn,
        now,
        &[fixture("session_start"), fixture("snapshot_get")],
    );
    assert_eq!(sent[1], fixture("snapshot_state"));
    host.publish_state(sources::USER, now);
    assert_eq!(drain(&mut host).0, [fixture("state_updated")]);

    let (mut host, conn, now) = joined_host(Blank);
    host.handle_frame(
        conn,
        Frame::Text(&fixture("session_start").to_string()),
        now,
    );
    host.handle_frame(conn, Frame::Text(&fixture("session_end").to_string()), now);
    let ticket = drain(&mut host)
        .1
        .into_iter()
        .find_map(|e| match e {
            HostEvent::SessionEnding { ticket, .. } => Some(ticket),
            _ => None,
        })
        .unwrap();
    host.confirm_flush(ticket, &study_log_path("s-20260213-001"), now)
        .unwrap();
    let sent = drain(&mut host).0;
    assert_eq!(sent[0], fixture("session_ended"));
    assert_eq!(sent[1]["type"], "state.updated");
    let e: Envelope<HostMessage> = serde_json::from_value(fixture("error")).unwrap();
    assert!(
        matches!(e.body, HostMessage::Error(ErrorPayload { ref code, .. }) if *code == ErrorCode::INVALID_PARAMS)
    );
}

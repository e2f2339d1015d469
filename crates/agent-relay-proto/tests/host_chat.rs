//! The Host's chat timeline: `agent.message`, tools that write to the chat, the
//! participant's `user.message`, and the history bound.

mod common;

use agent_relay_proto::{host_texts, HostCommandError, HostConfig, HostEvent, HostLimits};
use serde_json::json;

use common::error_of;
use common::host::*;

// ---- the chat ------------------------------------------------------------------------------

#[test]
fn agent_message_is_appended_to_the_history_and_pushed() {
    let mut h = H::in_session();
    h.req(
        "agent.message",
        "req-004",
        json!({"text":"I will choose a date next to narrow available showtimes."}),
    );
    let sent = h.sent();
    assert_eq!(sent.len(), 1, "no reply, one push: {sent:#?}");
    assert_eq!(sent[0]["type"], "state.updated");
    assert_eq!(sent[0]["payload"]["source"], "agent");
    assert_eq!(
        sent[0]["payload"]["messageHistory"],
        json!([{"role":"agent","text":"I will choose a date next to narrow available showtimes."}])
    );
    assert!(h.events().contains(&HostEvent::AgentMessage {
        text: "I will choose a date next to narrow available showtimes.".into()
    }));
    h.req("snapshot.get", "s", json!({}));
    assert_eq!(h.one()["payload"]["messageHistory"][0]["role"], "agent");
    h.req("agent.message", "bad", json!({"text": 5}));
    assert_eq!(error_of(&h.one()).0, "INVALID_MESSAGE");
}

#[test]
fn a_tool_may_write_to_the_chat() {
    let mut h = H::in_session();
    h.call("p", "postMessage", json!({"text":"Showing evening times."}));
    let sent = h.sent();
    assert_eq!(sent[0]["type"], "tool.result");
    assert_eq!(
        sent[0]["payload"]["messageHistory"],
        json!([{"role":"agent","text":"Showing evening times."}])
    );
    assert_eq!(sent[1]["type"], "state.updated", "the chat changed");
    assert_eq!(h.host.history().len(), 1);
}

#[test]
fn a_full_history_answers_limit_exceeded() {
    let mut limits = HostLimits::default();
    limits.max_history_entries = 2;
    let mut h = H::with(HostConfig::default().with_limits(limits), Booking::new());
    h.join();
    h.start();
    h.req("agent.message", "1", json!({"text":"a"}));
    h.host.user_message("b", h.now).unwrap();
    h.drain();
    h.outs.clear();
    h.req("agent.message", "3", json!({"text":"c"}));
    assert_eq!(
        error_of(&h.one()),
        err("LIMIT_EXCEEDED", host_texts::HISTORY_FULL, "3")
    );
    assert_eq!(
        h.host.user_message("d", h.now),
        Err(HostCommandError::HistoryFull)
    );
    h.call("p", "postMessage", json!({"text":"e"}));
    assert_eq!(
        error_of(&h.one()),
        err("TOOL_EXECUTION_FAILED", "the chat history is full", "p")
    );
}

#[test]
fn user_message_is_pushed_with_the_stage_and_recorded() {
    let mut h = H::in_session();
    for _ in 0..3 {
        h.call("n", "next", json!({}));
    }
    h.outs.clear();
    h.host
        .user_message("I prefer evening showtimes.", h.now)
        .unwrap();
    h.drain();
    let sent = h.sent();
    assert_eq!(sent[0], fixture("user_message"));
    assert_eq!(sent[1]["type"], "state.updated");
    assert_eq!(sent[1]["payload"]["source"], "user");
    assert_eq!(
        sent[1]["payload"]["messageHistory"],
        json!([{"role":"user","text":"I prefer evening showtimes."}])
    );
    // The participant can chat before an agent starts a session.
    let mut h = H::new();
    h.host.user_message("hello?", h.now).unwrap();
    h.drain();
    assert_eq!(h.types(), ["user.message", "state.updated"]);
}

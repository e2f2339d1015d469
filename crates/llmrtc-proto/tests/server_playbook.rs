//! Playbooks: tool calls announced with start and end, stage changes by tool result, keyword
//! and command, and tool failures, unknown tools and runaway tool rounds as errors.
//!
//! The server driven directly with simulated time (harness in `common`).

mod common;

use common::*;

use std::time::Duration;

use llmrtc_proto::{Limits, Playbook, ProviderKind, ServerConfig, ServerEvent};
use serde_json::json;

fn playbook() -> Playbook {
    serde_json::from_value(json!({
        "initialStage": "greeting",
        "stages": [
            {"name": "greeting", "instructions": "Greet and book.",
             "tools": [{"name": "bookTable", "parameters": {"type": "object"}}],
             "transitions": [
                {"to": "confirmation", "trigger": {"type": "tool_result", "tool": "bookTable"}},
                {"to": "farewell", "trigger": {"type": "keyword", "keywords": ["goodbye"]}}
             ]},
            {"name": "confirmation", "instructions": "Confirm."},
            {"name": "farewell"}
        ]
    }))
    .expect("playbook")
}

#[test]
fn playbook_tool_calls_announce_start_end_and_move_the_stage() {
    let mut h = Harness::new(ServerConfig::default().with_playbook(playbook()));
    let (c, sid) = h.client();
    let llm = to_llm(&mut h, c, "Book a table for 2");
    h.take(c);
    let now = h.now;
    h.server.llm_chunk(llm, "I'll book", now).expect("chunk");
    let mut args = serde_json::Map::new();
    args.insert("people".into(), json!(2));
    let call_id = h
        .server
        .llm_tool_call(llm, "bookTable", args.clone(), now)
        .expect("call");
    h.server.llm_done(llm, now).expect("round done");
    h.drain();
    let tool = h
        .take_events()
        .into_iter()
        .find_map(|e| match e {
            ServerEvent::ToolCall(t) => Some(t),
            _ => None,
        })
        .expect("tool call");
    assert_eq!((tool.name.as_str(), &tool.arguments), ("bookTable", &args));
    h.advance(Duration::from_millis(120));
    let now = h.now;
    h.server
        .tool_result(tool.request, Ok(json!({"booked": true})), now)
        .expect("result");
    h.drain();
    let llm2 = h
        .take_events()
        .into_iter()
        .find_map(|e| match e {
            ServerEvent::Llm(r) => Some(r),
            _ => None,
        })
        .expect("second round");
    assert_eq!(
        llm2.stage.as_ref().map(|s| s.name.as_str()),
        Some("confirmation")
    );
    assert_eq!(llm2.tool_results.len(), 1);
    h.server
        .llm_chunk(llm2.request, "Done!", now)
        .expect("chunk");
    h.server.llm_done(llm2.request, now).expect("done");
    h.drain();
    let sent = h.take(c);
    let types: Vec<_> = sent
        .iter()
        .map(|v| v["type"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        types,
        [
            "llm-chunk",
            "tool-call-start",
            "tool-call-end",
            "stage-change",
            "llm-chunk",
            "llm",
            "tts-start"
        ]
    );
    assert_eq!(
        sent[0],
        json!({"type":"llm-chunk","content":"I'll book","done":false})
    );
    assert_eq!(
        sent[1],
        json!({"type":"tool-call-start","name":"bookTable","callId":call_id,"arguments":{"people":2}})
    );
    assert_eq!(
        sent[2],
        json!({"type":"tool-call-end","callId":call_id,"result":{"booked":true},"durationMs":120})
    );
    assert_eq!(
        sent[3],
        json!({"type":"stage-change","from":"greeting","to":"confirmation","reason":"tool_result"})
    );
    assert_eq!(
        sent[4],
        json!({"type":"llm-chunk","content":"Done!","done":true})
    );
    assert_eq!(sent[5], json!({"type":"llm","text":"I'll bookDone!"}));
    assert_eq!(h.server.stage(&sid), Some("confirmation"));
}

#[test]
fn playbook_keywords_move_the_stage_before_the_llm_is_asked() {
    let mut h = Harness::new(ServerConfig::default().with_playbook(playbook()));
    let (c, sid) = h.client();
    h.audio(c, 16000, &utterance(16000, 400));
    let stt = h.stt_requests().pop().expect("stt");
    let now = h.now;
    h.server
        .stt_result(stt.request, Ok("OK, Goodbye then".into()), now)
        .expect("stt");
    h.drain();
    let sent = h.take(c);
    assert_eq!(
        sent.last(),
        Some(
            &json!({"type":"stage-change","from":"greeting","to":"farewell","reason":"keyword_match"})
        )
    );
    assert_eq!(h.server.stage(&sid), Some("farewell"));
    h.server
        .change_stage(&sid, "greeting", "manual")
        .expect("stage");
    h.drain();
    assert_eq!(
        h.take(c),
        [json!({"type":"stage-change","from":"farewell","to":"greeting","reason":"manual"})]
    );
    assert_eq!(
        h.server.change_stage(&sid, "nowhere", "x"),
        Err(llmrtc_proto::CommandError::UnknownStage)
    );
}

#[test]
fn tool_failures_and_unknown_tools_are_tool_error_and_runaway_rounds_playbook_error() {
    let mut limits = Limits::default();
    limits.max_tool_rounds = 1;
    let config = ServerConfig::default()
        .with_playbook(playbook())
        .with_limits(limits)
        .with_heartbeat_timeout(None);
    let mut h = Harness::new(config);
    let (c, _) = h.client();
    let llm = to_llm(&mut h, c, "book");
    h.take(c);
    let now = h.now;
    h.server
        .llm_tool_call(llm, "launchRocket", serde_json::Map::new(), now)
        .expect("call");
    h.drain();
    let sent = h.take(c);
    assert_eq!(sent[1]["type"], "tool-call-end");
    assert_eq!(sent[1]["durationMs"], 0);
    assert!(sent[1]["error"]
        .as_str()
        .is_some_and(|e| e.contains("launchRocket")));
    assert_eq!(codes(&sent), ["TOOL_ERROR"]);
    h.server
        .llm_tool_call(llm, "bookTable", serde_json::Map::new(), now)
        .expect("call");
    h.server.llm_done(llm, now).expect("done");
    h.drain();
    let tool = h
        .take_events()
        .into_iter()
        .find_map(|e| match e {
            ServerEvent::ToolCall(t) => Some(t),
            _ => None,
        })
        .expect("tool");
    h.server
        .tool_result(tool.request, Err("fully booked".into()), now)
        .expect("result");
    h.drain();
    let sent = h.take(c);
    assert_eq!(sent[0]["type"], "tool-call-start");
    assert_eq!(sent[1]["error"], "fully booked");
    assert_eq!(codes(&sent), ["TOOL_ERROR"]);
    // Round 2 (allowed) calls a tool again; round 3 would exceed the limit.
    let llm2 = h.llm_request().expect("round 2");
    h.server
        .llm_tool_call(llm2, "bookTable", serde_json::Map::new(), now)
        .expect("call");
    h.server.llm_done(llm2, now).expect("done");
    h.drain();
    let tool = h
        .take_events()
        .into_iter()
        .find_map(|e| match e {
            ServerEvent::ToolCall(t) => Some(t),
            _ => None,
        })
        .expect("tool");
    // The tool times out (30 s): TOOL_ERROR, then the round limit: PLAYBOOK_ERROR.
    h.advance(Duration::from_secs(30));
    let sent = h.take(c);
    assert_eq!(codes(&sent), ["TOOL_ERROR", "PLAYBOOK_ERROR"]);
    assert!(h.take_events().contains(&ServerEvent::Cancel {
        request: tool.request,
        kind: ProviderKind::Tool
    }));
    assert!(!h.server.in_turn(h.server.session_of(c).expect("sid")));
}

//! A ticket booked end to end over 127.0.0.1 with the examples' code: the reference relay,
//! the movie host (the `Host` machine over agentwire-tokio) and an agent, by the Rust agent of
//! `relay_agent` (through `relay_demo`'s code) and by a Python `websockets` agent.

#[path = "support/interop.rs"]
mod interop;
#[path = "support/temp_dir.rs"]
mod temp_dir;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentwire::agent_relay::{HostConfig, RelayConfig};
use agentwire_server::relay;
use relay::agent_app::{Agent, AgentError, Plan};
use relay::demo;
use relay::host_app::MovieHost;
use relay::log_check;
use relay::log_writer::SyncPolicy;
use serde_json::{json, Value};
use temp_dir::temp_dir;

fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("record"))
        .collect()
}

async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

#[tokio::test]
async fn the_demo_books_a_ticket_and_the_log_records_every_call_with_its_reason() {
    let dir = temp_dir("demo");
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = Arc::clone(&lines);
    let print: demo::Printer = Arc::new(move |l| sink.lock().expect("lines").push(l.to_owned()));
    let plan = Plan {
        tickets: 3,
        ..Plan::default()
    };
    let outcome = within("demo", demo::run(&dir.0, &plan, print))
        .await
        .expect("the demo books");

    let b = &outcome.booked;
    assert_eq!(b.reference, "BK-0001");
    assert_eq!(b.booking["status"], "confirmed");
    assert_eq!(b.booking["ticketCount"], 3);
    assert_eq!(b.booking["seats"].as_array().map(Vec::len), Some(3));
    assert_eq!(b.booking["totalCents"], 3 * 1250);
    assert_eq!(b.ended["sessionId"], b.session_id.as_str());
    assert_eq!(b.ended["stateReset"], true);
    assert_eq!(
        b.ended["logFile"],
        outcome.log_path.display().to_string(),
        "session.ended names the relay's file"
    );
    assert!(
        outcome.report.is_consistent(),
        "{}",
        outcome.report.render()
    );

    // Every tool call is in the log, in and out, each with its reason, and every one was
    // answered tool.result (the agent made no mistake the host refused).
    let log = records(&outcome.log_path);
    let calls: Vec<&Value> = log
        .iter()
        .filter(|r| r["type"] == "tool.call" && r["direction"] == "in")
        .collect();
    assert_eq!(calls.len(), b.tool_calls);
    assert!(calls.iter().all(|r| !r["payload"]["reason"]
        .as_str()
        .unwrap_or("")
        .trim()
        .is_empty()));
    let results = log
        .iter()
        .filter(|r| r["type"] == "tool.result" && r["direction"] == "out")
        .count();
    assert_eq!(results, b.tool_calls);
    assert!(!log.iter().any(|r| r["type"] == "error"), "no refusals");
    let ended: Vec<&Value> = log
        .iter()
        .filter(|r| r["type"] == "session.ended")
        .collect();
    assert_eq!(ended.len(), 2, "in and out");
    assert_eq!(ended[1]["payload"], b.ended);

    // The transcript shows both sides.
    let lines = lines.lock().expect("lines");
    assert!(lines
        .iter()
        .any(|l| l.starts_with("agent -> tool.call") && l.contains("because")));
    assert!(lines
        .iter()
        .any(|l| l.starts_with("host  -> session.ended")));
    assert!(lines.iter().any(|l| l.starts_with("[host] session s-")));
}

/// A relay and a movie host on 127.0.0.1 writing into `dir`; the host has joined.
async fn relay_and_host(dir: &Path) -> (relay::server_app::RelayApp, MovieHost) {
    let app = relay::server_app::start(
        "127.0.0.1:0",
        RelayConfig::default(),
        dir,
        SyncPolicy::SessionEnd,
        |_| {},
    )
    .await
    .expect("bind");
    let config = HostConfig::default();
    let dir = dir.to_owned();
    let log_file = move |study: &str| demo::log_path(&dir, study).display().to_string();
    let mut host = MovieHost::start(&app.url(), config, log_file, |_| {}).expect("host");
    assert!(
        host.wait_joined(Duration::from_secs(10)).await,
        "host joined"
    );
    (app, host)
}

#[tokio::test]
async fn the_host_refuses_bad_calls_over_the_wire_and_the_session_goes_on() {
    let dir = temp_dir("refusals");
    let (app, host) = relay_and_host(&dir.0).await;
    let mut agent = Agent::connect(&app.url(), |_, _| {}).await.expect("agent");
    agent.join("default", "tester").await.expect("join");

    // Before session.start a snapshot is answered (the reference agent polls from its
    // join), without backendData; every other request gets SESSION_NOT_ACTIVE.
    let snap = agent
        .snapshot()
        .await
        .expect("a snapshot before session.start");
    assert_eq!(snap["sessionId"], "default");
    assert_eq!(snap["uiSpec"]["stage"], "movie");
    assert!(snap["toolSchema"].as_array().is_some_and(|t| !t.is_empty()));
    assert!(!snap.to_string().contains("backendData"));
    match agent
        .tool("select", json!({"itemId": "m1"}), "too early")
        .await
    {
        Err(AgentError::Refused { code, .. }) => assert_eq!(code, "SESSION_NOT_ACTIVE"),
        other => panic!("{other:?}"),
    }
    agent.start_session("pilot-01", "P07").await.expect("start");
    let refused = |r: Result<Value, AgentError>| match r {
        Err(AgentError::Refused { code, message, .. }) => (code, message),
        other => panic!("expected a refusal, got {other:?}"),
    };
    let no_reason = agent
        .request(
            "tool.call",
            json!({"toolName": "select", "params": {"itemId": "m1"}}),
        )
        .await;
    assert_eq!(refused(no_reason).0, "INVALID_PARAMS");
    let (code, message) = refused(agent.tool("prev", json!({}), "back").await);
    assert_eq!(
        (code.as_str(), message.as_str()),
        ("UNKNOWN_TOOL", "Unknown tool: prev")
    );
    let (code, _) = refused(agent.tool("next", json!({}), "skip ahead").await);
    assert_eq!(code, "TOOL_EXECUTION_FAILED");
    let ui = agent
        .tool("select", json!({"itemId": "m2"}), "A movie.")
        .await
        .expect("select")["uiSpec"]
        .clone();
    assert_eq!(ui["booking"]["movie"]["id"], "m2");
    let ended = agent.end_session("done").await.expect("end");
    assert_eq!(ended["stateReset"], true);
    let study = ended["sessionId"].as_str().expect("id").to_owned();
    assert!(study.starts_with("s-"), "{study}");
    agent.close().await;
    host.shutdown().await;
    app.shutdown().await;

    // The study session's records are in the file session.ended names, under its id, from
    // session.started to session.ended (spec §6); the refusals in it are logged.
    let path = demo::log_path(&dir.0, &study);
    assert_eq!(ended["logFile"], path.display().to_string());
    let report = log_check::check_file(&path).expect("study log");
    assert!(report.is_consistent(), "{}", report.render());
    assert_eq!(report.session_id.as_deref(), Some(study.as_str()));
    assert!(
        report.by_type.get("error").copied().unwrap_or(0) >= 2 * 3,
        "refusals are logged"
    );
    let log = records(&path);
    assert_eq!(log[0]["type"], "session.started");
    assert_eq!(log.last().unwrap()["type"], "session.ended");
    // What came before it (the join, the early snapshot and refusal, session.start) is in
    // the relay session's file.
    let before = records(&demo::log_path(&dir.0, "default"));
    assert!(before.iter().all(|r| r["sessionId"] == "default"));
    let types: Vec<&str> = before.iter().filter_map(|r| r["type"].as_str()).collect();
    for t in [
        "relay.join",
        "snapshot.get",
        "snapshot.state",
        "error",
        "session.start",
    ] {
        assert!(types.contains(&t), "{t} in {types:?}");
    }
    assert!(!types.contains(&"session.started"), "{types:?}");
}

#[tokio::test]
async fn python_agent_interop() {
    let Some(python) = interop::peer_from_env("AGENTWIRE_PYTHON", "python_agent_interop") else {
        return;
    };
    let dir = temp_dir("python");
    let (app, host) = relay_and_host(&dir.0).await;
    let url = app.url();
    interop::run_peer(
        "python agent",
        python,
        "relay_agent.py",
        url,
        Vec::new(),
        "python interop ok: BK-0001",
    )
    .await;
    host.shutdown().await;
    app.shutdown().await;

    // The relay logged the Python agent's join in the relay session's file and its study
    // session in the study session's own, consistently.
    let path = demo::log_path(&dir.0, "default");
    let report = log_check::check_file(&path).expect("log");
    assert!(report.is_consistent(), "{}", report.render());
    let log = records(&path);
    assert!(log
        .iter()
        .any(|r| r["type"] == "relay.join" && r["payload"]["agentName"] == "py-agent"));
    let started = log
        .iter()
        .find(|r| r["type"] == "session.start")
        .expect("session.start");
    assert_eq!(started["direction"], "in");
    let study = relay::host_app::newest_study_session(&dir.0).expect("a study log");
    let path = demo::log_path(&dir.0, &study);
    let report = log_check::check_file(&path).expect("study log");
    assert!(report.is_consistent(), "{}", report.render());
    let log = records(&path);
    assert!(log
        .iter()
        .any(|r| r["type"] == "session.ended" && r["direction"] == "out"));
}

#[tokio::test]
async fn a_participants_actions_reach_the_agent_as_state_updated_from_user() {
    let dir = temp_dir("participant");
    let (app, host) = relay_and_host(&dir.0).await;
    let seen = Arc::new(Mutex::new(Vec::<Value>::new()));
    let sink = Arc::clone(&seen);
    let mut agent = Agent::connect(&app.url(), move |d, v| {
        if matches!(d, relay::agent_app::Dir::Received) {
            sink.lock().expect("seen").push(v.clone());
        }
    })
    .await
    .expect("agent");
    agent.join("default", "watcher").await.expect("join");

    // The participant picks a movie and goes on, as a click in the UI would.
    let outcome = host.act("select", json!({"itemId": "m2"})).await;
    assert_eq!(outcome, Ok(agentwire::agent_relay::ToolOutcome::Applied));
    host.act("next", json!({})).await.expect("next");
    // A refused action is the agent's refusal text, and nothing is pushed for it.
    let refused = host.act("select", json!({"itemId": 7})).await.unwrap_err();
    assert!(refused.contains("INVALID_PARAMS"), "{refused}");
    // The agent's next request is answered after the pushes that came before it.
    let snap = agent.snapshot().await.expect("snapshot");
    assert_eq!(snap["uiSpec"]["stage"], "theater");
    let pushes: Vec<Value> = seen
        .lock()
        .expect("seen")
        .iter()
        .filter(|v| v["type"] == "state.updated")
        .cloned()
        .collect();
    assert_eq!(pushes.len(), 2, "{pushes:#?}");
    for p in &pushes {
        assert_eq!(p["payload"]["source"], "user");
        assert!(p.get("replyTo").is_none());
    }
    assert_eq!(
        pushes[0]["payload"]["uiSpec"]["booking"]["movie"]["id"],
        "m2"
    );
    assert_eq!(pushes[1]["payload"]["uiSpec"]["stage"], "theater");
    agent.close().await;
    host.shutdown().await;
    app.shutdown().await;
}

//! The `Agent`'s reliability against this crate's `Orchestrator`, in simulated time: the
//! server's heartbeat period wins, cancelled tasks are let go of, retryable refusals are
//! sent again after their wait, a graceful shutdown hands tasks over (or finishes them),
//! an `X-Agent-ID` header that disagrees with `agent.register` is refused, and the agent's
//! own requests (capability update, collaboration request) carry idempotency keys.

mod common;

use std::time::Duration;

use agentwire_core::sim::{Sim, SimConfig};
use agentwire_core::{ConnId, Dial, Dialer, Frame, Machine, Output, PeerInfo, Rate, SequentialIds};
use common::agent::{completion, config, progress};
use common::t0;
use mcpw_codec::agent::{AgentEvent, Request};
use mcpw_codec::orchestrator::{
    Orchestrator, OrchestratorConfig, OrchestratorEvent, RemovalReason, TaskFailure, TaskSpec,
};
use mcpw_codec::{
    Agent, AgentCommandError, AgentConfig, Capability, CapabilityOperation, CollaborationRequest,
    RetryPolicy,
};

fn sim_with(server: OrchestratorConfig, agents: &[AgentConfig]) -> Sim<Orchestrator, Agent> {
    let start = t0();
    let server = Orchestrator::new(server, SequentialIds::new(1), start, 1_735_140_600_000);
    let mut sim = Sim::new(server, start, SimConfig::default());
    for a in agents {
        sim.add_client(Agent::new(a.clone()));
    }
    sim.run_dialing_for(Duration::from_millis(10), |_| true);
    for i in 0..agents.len() {
        assert!(sim.client(i).is_registered(), "agent {i} registered");
    }
    sim
}

fn submit(sim: &mut Sim<Orchestrator, Agent>, spec: TaskSpec) {
    sim.call_server(|o, now| o.submit_task(spec, now))
        .expect("submitted");
    sim.run_dialing_for(Duration::from_millis(10), |_| true);
}

#[test]
fn the_servers_heartbeat_interval_wins_over_the_agents_setting() {
    // The server wants a heartbeat every 5 s (unhealthy after 10 s, removed after 15 s);
    // the agent's own setting says 30 s.
    let server = OrchestratorConfig::default().with_heartbeat_interval(Duration::from_secs(5));
    let agent = config("agent-1", false).with_heartbeat_interval(Duration::from_secs(30));
    let mut sim = sim_with(server, &[agent]);
    sim.take_server_events();
    sim.run_dialing_for(Duration::from_secs(120), |_| true);
    let events = sim.take_server_events();
    assert!(
        !events.iter().any(|e| matches!(
            e,
            OrchestratorEvent::Unhealthy { .. } | OrchestratorEvent::AgentRemoved { .. }
        )),
        "{events:?}"
    );
    assert!(sim.client(0).is_registered());

    // A server that asks for less gets less: every 60 s, not the agent's 10 s.
    let server = OrchestratorConfig::default().with_heartbeat_interval(Duration::from_secs(60));
    let mut sim = sim_with(server, &[config("agent-1", false)]);
    sim.run_dialing_for(Duration::from_secs(125), |_| true);
    assert_eq!(heartbeats(&sim), 2);
}

/// `agent.heartbeat` messages the server counted.
fn heartbeats(sim: &Sim<Orchestrator, Agent>) -> u64 {
    let text = sim.server().metrics().render();
    text.lines()
        .filter(|l| l.starts_with("websocket_messages_total") && l.contains("agent.heartbeat"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn a_cancelled_task_is_dropped_and_nothing_more_is_sent_about_it() {
    let mut sim = sim_with(OrchestratorConfig::default(), &[config("agent-1", false)]);
    // By deadline, and by the application's cancel.
    let late = TaskSpec::new("code_review")
        .with_id("t-late")
        .with_deadline(Duration::from_secs(1));
    submit(&mut sim, late);
    submit(&mut sim, TaskSpec::new("code_review").with_id("t-cancel"));
    assert_eq!(sim.client(0).tasks().count(), 2);
    sim.take_client_events(0);
    sim.call_server(|o, now| o.cancel_task("t-cancel", now))
        .expect("held");
    sim.run_dialing_for(Duration::from_secs(2), |_| true);
    let events = sim.take_client_events(0);
    for task in ["t-late", "t-cancel"] {
        assert!(
            events.iter().any(|e| matches!(
                e,
                AgentEvent::TaskCancelled { task_id, error } if task_id == task && error.code.0 == 4006
            )),
            "{task}: {events:?}"
        );
        assert_eq!(
            sim.call_client(0, |a, _| a.report_progress(progress(task, 0.5))),
            Err(AgentCommandError::Cancelled(task.into()))
        );
        assert_eq!(
            sim.call_client(0, |a, _| a.complete_task(completion(task))),
            Err(AgentCommandError::Cancelled(task.into()))
        );
    }
    assert_eq!(sim.client(0).tasks().count(), 0);
    let server = sim.take_server_events();
    assert!(server.iter().any(|e| matches!(
        e,
        OrchestratorEvent::TaskFailed { task_id, reason: TaskFailure::Cancelled } if task_id == "t-cancel"
    )));
    assert!(
        !server
            .iter()
            .any(|e| matches!(e, OrchestratorEvent::ProtocolViolation { .. })),
        "the agent sent nothing more about them: {server:?}"
    );
}

#[test]
fn refusals_for_the_rate_limit_are_sent_again_after_retry_after_ms() {
    // 60 messages a minute, a burst of 3: register, then the task's progress, completion.
    let server = OrchestratorConfig::default().with_rate(Some(Rate::per_minute(60, 3)));
    let agent = config("agent-1", false).with_retry(RetryPolicy::new(
        5,
        Duration::from_millis(100),
        Duration::from_secs(1),
    ));
    let mut sim = sim_with(server, &[agent]);
    submit(&mut sim, TaskSpec::new("code_review").with_id("t-1"));
    sim.take_client_events(0);
    for _ in 0..3 {
        sim.call_client(0, |a, _| a.report_progress(progress("t-1", 0.5)))
            .expect("progress");
    }
    sim.call_client(0, |a, _| a.complete_task(completion("t-1")))
        .expect("complete");
    sim.run_dialing_for(Duration::from_millis(10), |_| true);
    let events = sim.take_client_events(0);
    let retry = events.iter().find_map(|e| match e {
        AgentEvent::Retrying {
            about: Request::Complete { task_id },
            error,
            retry_in,
            attempts: 1,
        } if task_id == "t-1" => Some((error.clone(), *retry_in)),
        _ => None,
    });
    let (error, retry_in) = retry.unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(error.code.0, 4002);
    let after = error.data.as_ref().unwrap()["retry_after_ms"]
        .as_u64()
        .unwrap();
    assert!(after > 100, "the server's wait is longer than the backoff");
    assert_eq!(
        retry_in,
        Duration::from_millis(after),
        "the server's wait wins"
    );
    // Nothing is sent before the wait ends; then the completion goes through once.
    sim.run_dialing_for(retry_in - Duration::from_millis(20), |_| true);
    assert!(!sim
        .take_client_events(0)
        .iter()
        .any(|e| matches!(e, AgentEvent::CompletionAccepted { .. })));
    sim.run_dialing_for(Duration::from_secs(5), |_| true);
    let events = sim.take_client_events(0);
    assert_eq!(
        events
            .iter()
            .filter(
                |e| matches!(e, AgentEvent::CompletionAccepted { task_id, .. } if task_id == "t-1")
            )
            .count(),
        1,
        "{events:?}"
    );
    let server = sim.take_server_events();
    assert_eq!(
        server
            .iter()
            .filter(|e| matches!(e, OrchestratorEvent::TaskCompleted { .. }))
            .count(),
        1
    );
}

#[test]
fn shutdown_with_transfer_hands_the_tasks_over_and_stops() {
    let grace = Duration::from_secs(3);
    let first = config("agent-1", false).with_shutdown_timeout(grace);
    let mut sim = sim_with(OrchestratorConfig::default(), &[first]);
    submit(&mut sim, TaskSpec::new("code_review").with_id("t-1"));
    assert_eq!(sim.client(0).tasks().collect::<Vec<_>>(), ["t-1"]);
    // A second agent that can take it joins.
    sim.add_client(Agent::new(config("agent-2", false)));
    sim.run_dialing_for(Duration::from_millis(10), |_| true);
    sim.take_server_events();
    sim.take_client_events(0);
    sim.call_client(0, |a, now| a.shutdown("sigterm", true, now))
        .expect("shutdown");
    // Handed over at once: no more reports on it.
    assert_eq!(
        sim.call_client(0, |a, _| a.report_progress(progress("t-1", 0.5))),
        Err(AgentCommandError::Cancelled("t-1".into()))
    );
    sim.run_dialing_for(Duration::from_millis(10), |_| true);
    assert_eq!(
        sim.take_client_events(0),
        [AgentEvent::ShutdownAccepted, AgentEvent::Stopped]
    );
    assert_eq!(sim.client(0).poll_dial(), Dial::Stop);
    assert!(sim
        .take_client_events(1)
        .iter()
        .any(|e| matches!(e, AgentEvent::TaskAssigned(t) if t.task_id == "t-1")));
    let server = sim.take_server_events();
    assert!(
        server.iter().any(|e| matches!(
            e,
            OrchestratorEvent::ShutdownRequested { agent_id, transferred: 1 } if agent_id == "agent-1"
        )),
        "{server:?}"
    );
    assert!(server.iter().any(|e| matches!(
        e,
        OrchestratorEvent::AgentRemoved { agent_id, reason: RemovalReason::Shutdown } if agent_id == "agent-1"
    )));
    assert_eq!(
        sim.server().task("t-1").map(|t| t.attempts),
        Some(1),
        "a hand-over is not a failed attempt"
    );
}

#[test]
fn shutdown_without_transfer_waits_for_the_held_tasks_then_stops() {
    let first = config("agent-1", false).with_shutdown_timeout(Duration::from_secs(30));
    let mut sim = sim_with(OrchestratorConfig::default(), &[first]);
    submit(&mut sim, TaskSpec::new("code_review").with_id("t-1"));
    sim.take_client_events(0);
    sim.call_client(0, |a, now| a.shutdown("maintenance", false, now))
        .expect("shutdown");
    sim.run_dialing_for(Duration::from_secs(1), |_| true);
    assert_eq!(
        sim.take_client_events(0),
        [AgentEvent::ShutdownAccepted],
        "answered, still connected: a task is held"
    );
    assert!(sim.is_connected(0));
    assert_eq!(
        sim.call_server(|o, _| o.agent("agent-1").map(|a| a.health)),
        Some(mcpw_codec::orchestrator::Health::ShuttingDown),
        "no new task goes to it"
    );
    sim.call_client(0, |a, _| a.complete_task(completion("t-1")))
        .expect("it finishes its task");
    sim.run_dialing_for(Duration::from_secs(1), |_| true);
    let events = sim.take_client_events(0);
    assert!(
        matches!(
            &events[..],
            [AgentEvent::CompletionAccepted { .. }, AgentEvent::Stopped]
        ),
        "{events:?}"
    );
    assert!(!sim.is_connected(0));
    assert!(sim.take_server_events().iter().any(|e| matches!(
        e,
        OrchestratorEvent::TaskCompleted { agent_id, .. } if agent_id == "agent-1"
    )));
}

#[test]
fn shutdown_ends_at_graceful_timeout_ms_when_the_tasks_are_not_done() {
    let first = config("agent-1", false).with_shutdown_timeout(Duration::from_secs(2));
    let mut sim = sim_with(OrchestratorConfig::default(), &[first]);
    submit(&mut sim, TaskSpec::new("code_review").with_id("t-1"));
    sim.call_client(0, |a, now| a.shutdown("maintenance", false, now))
        .expect("shutdown");
    sim.run_dialing_for(Duration::from_millis(1990), |_| true);
    assert!(sim.is_connected(0));
    sim.run_dialing_for(Duration::from_millis(20), |_| true);
    assert!(!sim.is_connected(0));
    assert!(sim.client(0).is_stopped());
}

#[test]
fn an_x_agent_id_header_that_disagrees_with_register_is_refused() {
    let start = t0();
    let server = Orchestrator::new(
        OrchestratorConfig::default(),
        SequentialIds::new(1),
        start,
        0,
    );
    let mut sim = Sim::new(server, start, SimConfig::default());
    sim.add_client(Agent::new(config("agent-1", false)));
    sim.connect_with(
        0,
        PeerInfo::new(None)
            .with_subprotocol("mcp.v1")
            .with_header("X-Agent-ID", "agent-9"),
    );
    sim.settle();
    let events = sim.take_client_events(0);
    let refused = events.iter().find_map(|e| match e {
        AgentEvent::ErrorReceived {
            error,
            about: Some(Request::Register),
        } => Some(error.clone()),
        _ => None,
    });
    let error = refused.unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(error.code.0, 4001);
    let data = error.data.unwrap();
    assert_eq!(
        (&data["field"], &data["expected"], &data["received"]),
        (&"agent_id".into(), &"agent-9".into(), &"agent-1".into())
    );
    assert!(!sim.client(0).is_registered());
    assert!(sim.server().agent("agent-1").is_none());
}

#[test]
fn capability_updates_and_collaboration_requests_carry_idempotency_keys() {
    let mut sim = sim_with(
        OrchestratorConfig::default(),
        &[config("agent-1", false), config("agent-2", false)],
    );
    sim.take_client_events(0);
    sim.call_client(0, |a, _| {
        a.update_capability(
            CapabilityOperation::Add,
            Capability::new("bug_detection", 0.8),
            Some("trained".into()),
        )
    })
    .expect("update");
    sim.run_dialing_for(Duration::from_millis(10), |_| true);
    let events = sim.take_client_events(0);
    assert!(
        events.iter().any(|e| matches!(
            e,
            AgentEvent::CapabilitiesUpdated(c) if c.capabilities == ["code_review", "bug_detection"]
        )),
        "{events:?}"
    );
    let request = CollaborationRequest {
        task_id: "t-9".into(),
        requesting_agent: String::new(),
        collaboration_type: Some("review".into()),
        required_agents: vec!["agent-2".into()],
        coordination_pattern: None,
        timeout_ms: Some(5000),
        context: None,
        idempotency_key: None,
    };
    sim.call_client(0, |a, _| a.request_collaboration(request))
        .expect("request");
    sim.run_dialing_for(Duration::from_millis(10), |_| true);
    // agent-2's application answers.
    let asked = sim.take_client_events(1);
    let id = asked
        .iter()
        .find_map(|e| match e {
            AgentEvent::CollaborationRequested { id, request } => {
                assert!(request.idempotency_key.is_some(), "the key travels");
                Some(*id)
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("{asked:?}"));
    sim.call_client(1, |a, _| a.answer_collaboration(id, "approve"))
        .expect("answer");
    sim.run_dialing_for(Duration::from_millis(10), |_| true);
    let events = sim.take_client_events(0);
    assert!(
        events.iter().any(|e| matches!(
            e,
            AgentEvent::CollaborationAnswered { task_id, result }
                if task_id == "t-9" && result["responses"]["agent-2"]["vote"] == "approve"
        )),
        "{events:?}"
    );
}

#[test]
fn the_agents_own_errors_name_field_reason_expected_and_received() {
    let mut agent = Agent::new(config("agent-1", false));
    let now = t0();
    agent.handle_connect(ConnId::new(1), &PeerInfo::new(None), now);
    while agent.poll_output().is_some() {}
    let request = r#"{"id":"q-1","type":0,"method":"tool.execute","params":{}}"#;
    agent.handle_frame(ConnId::new(1), Frame::Text(request), now);
    let mut replies = Vec::new();
    while let Some(out) = agent.poll_output() {
        if let Output::Send { frame, .. } = out {
            let text = frame.as_text().expect("JSON form").to_owned();
            replies.push(serde_json::from_str::<serde_json::Value>(&text).expect("json"));
        }
    }
    assert_eq!(replies.len(), 1, "{replies:?}");
    let error = &replies[0]["error"];
    assert_eq!(error["code"], 4004);
    assert_eq!(
        error["data"],
        serde_json::json!({"field": "method", "reason": "Method not found",
                           "expected": "a method this agent serves", "received": "tool.execute"})
    );
}

/// Every frame the agent sent, as JSON (it speaks the JSON form here).
fn sent_json(agent: &mut Agent) -> Vec<serde_json::Value> {
    let mut sent = Vec::new();
    while let Some(out) = agent.poll_output() {
        if let Output::Send { frame, .. } = out {
            let text = frame.as_text().expect("JSON form");
            sent.push(serde_json::from_str(text).expect("json"));
        }
    }
    sent
}

#[test]
fn a_retry_is_a_new_message_with_the_same_idempotency_key() {
    let conn = ConnId::new(1);
    let mut agent = Agent::new(config("agent-1", false));
    let now = t0();
    agent.handle_connect(conn, &PeerInfo::new(None), now);
    let register = sent_json(&mut agent);
    let confirmed = serde_json::json!({"id": register[0]["id"], "type": 1,
        "method": "registration.confirmed", "params": {"agent_id": "agent-1"}});
    agent.handle_frame(conn, Frame::Text(&confirmed.to_string()), now);
    let assigned = serde_json::json!({"id": "n-1", "type": 2, "method": "task.assigned",
        "params": {"task_id": "t-1", "type": "code_review"}});
    agent.handle_frame(conn, Frame::Text(&assigned.to_string()), now);
    sent_json(&mut agent);
    agent.complete_task(completion("t-1")).expect("held");
    let first = sent_json(&mut agent);
    let key = first[0]["params"]["idempotency_key"].clone();
    assert!(key.is_string(), "{first:?}");
    let refused = serde_json::json!({"id": first[0]["id"], "type": 3,
        "error": {"code": 4003, "message": "busy"}});
    agent.handle_frame(conn, Frame::Text(&refused.to_string()), now);
    assert!(sent_json(&mut agent).is_empty(), "not before the backoff");
    let due = agent.poll_timeout().expect("the retry is due");
    assert_eq!(due, now + Duration::from_millis(500));
    agent.handle_timeout(due);
    let again = sent_json(&mut agent);
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(again[0]["method"], "task.complete");
    assert_ne!(again[0]["id"], first[0]["id"], "a new message");
    assert_eq!(again[0]["params"]["idempotency_key"], key, "the same key");
    // A final refusal (4005) is reported, not retried.
    let final_refusal = serde_json::json!({"id": again[0]["id"], "type": 3,
        "error": {"code": 4005, "message": "bad"}});
    agent.handle_frame(conn, Frame::Text(&final_refusal.to_string()), due);
    let mut reported = false;
    while let Some(out) = agent.poll_output() {
        match out {
            Output::Event(AgentEvent::ErrorReceived {
                about: Some(Request::Complete { task_id }),
                ..
            }) if task_id == "t-1" => reported = true,
            Output::Send { .. } => panic!("a final refusal is not retried"),
            _ => {}
        }
    }
    assert!(reported);
}

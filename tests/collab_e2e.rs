//! End to end over 127.0.0.1: reference agents run as a pool from one process share the
//! CRDT state through the reference server (every accepted completion counted once in the
//! shared `tasks_completed`, every replica converging on the server's `merkle_root`), vote
//! on a collaboration whose requester gets the tally, and `mcpw_agent --count N` runs N
//! agents as a user starts them and stops them (Ctrl-C: every agent leaves gracefully).

#[path = "support/example_bin.rs"]
#[allow(dead_code)] // `lines_of` is for tests that read a program's output; this file does not
mod example_bin;
#[path = "support/mcpw_server.rs"]
mod mcpw_server;
use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use agentwire::mcpw::orchestrator::{
    OrchestratorConfig, OrchestratorEvent, TaskSpec, UpgradeConfig,
};
use agentwire::mcpw::{Capability, CollaborationRequest};
use agentwire_server::mcpw;
use mcpw::agent_app::{AgentEvent, AgentSettings, TASKS_COMPLETED};
use mcpw::pool::{AgentPool, PoolConfig, PoolEvents};
use mcpw::server_app::ServerApp;
use serde_json::json;
use tokio::sync::mpsc;

async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

async fn server() -> (ServerApp, mpsc::UnboundedReceiver<OrchestratorEvent>) {
    mcpw_server::start(
        false,
        OrchestratorConfig::default(),
        UpgradeConfig::default(),
    )
    .await
}

fn settings() -> AgentSettings {
    AgentSettings {
        agent_id: "pooled".into(),
        agent_type: "tester".into(),
        capabilities: vec![Capability::new("code_review", 0.9)],
        binary: false,
        heartbeat: Duration::from_secs(5),
        steps: 1,
        step: Duration::from_millis(10),
        hmac_secret: None,
    }
}

/// Reads pool events until `done` says so.
async fn until(events: &mut PoolEvents, mut done: impl FnMut(usize, &AgentEvent) -> bool) {
    within("pool events", async {
        loop {
            let (i, ev) = events.recv().await.expect("pool running");
            if done(i, &ev) {
                return;
            }
        }
    })
    .await;
}

/// Starts a pool of `n` and waits until every agent has its first full sync.
async fn pool(app: &ServerApp, n: usize, vote: &str) -> (AgentPool, PoolEvents) {
    let mut config = PoolConfig::new(settings(), n);
    config.shared_state = true;
    config.vote = vote.to_owned();
    let (pool, mut events) = AgentPool::connect(&app.url(), &config).expect("pool");
    let mut synced = vec![false; n];
    until(&mut events, |i, ev| {
        if matches!(ev, AgentEvent::StateUpdated { from: None, .. }) {
            synced[i] = true;
        }
        synced.iter().all(|s| *s)
    })
    .await;
    (pool, events)
}

#[tokio::test]
async fn pooled_agents_count_completions_once_in_the_shared_state_and_converge() {
    let (app, _ev) = server().await;
    let (pool, mut events) = pool(&app, 3, "approve").await;
    assert_eq!(pool.agent_ids(), ["pooled-1", "pooled-2", "pooled-3"]);
    for n in 0..4 {
        let spec = TaskSpec::new("code_review").with_id(format!("t-{n}"));
        app.handle
            .call(move |m, now| m.inner.submit_task(spec, now))
            .await
            .expect("call")
            .expect("submitted");
    }
    // Every agent ends up knowing all four completions: its own, and the others' syncs.
    let mut own = [0u64; 3];
    let mut seen = [0u64; 3];
    until(&mut events, |i, ev| {
        match ev {
            AgentEvent::CompletionAccepted(_) => own[i] += 1,
            AgentEvent::StateUpdated { from: Some(_), .. } => seen[i] += 1,
            _ => {}
        }
        (0..3).all(|i| own[i] + seen[i] == 4) && own.iter().sum::<u64>() == 4
    })
    .await;
    let server_root = app
        .handle
        .call(|m, _| {
            let st = m.inner.state();
            (
                st.merkle_root(),
                st.counter(TASKS_COMPLETED).map(|c| c.value()),
            )
        })
        .await
        .expect("call");
    assert_eq!(server_root.1, Some(4), "each completion counted once");
    for i in 0..3 {
        let (root, count) = pool
            .handle(i)
            .expect("agent")
            .call(|m, _| {
                let st = m.agent().state();
                (
                    st.merkle_root(),
                    st.counter(TASKS_COMPLETED).map(|c| c.value()),
                )
            })
            .await
            .expect("call");
        assert_eq!(count, Some(4), "agent {i}'s replica");
        assert_eq!(root, server_root.0, "agent {i} converged");
    }
    pool.shutdown().await;
    app.shutdown().await;
}

#[tokio::test]
async fn a_voting_collaboration_comes_back_as_a_tally() {
    let (app, _ev) = server().await;
    let (pool, mut events) = pool(&app, 3, "reject").await;
    let request = CollaborationRequest {
        task_id: "deploy-1".into(),
        requesting_agent: String::new(),
        collaboration_type: Some("consensus".into()),
        required_agents: vec!["pooled-2".into(), "pooled-3".into()],
        coordination_pattern: Some("voting".into()),
        timeout_ms: Some(5000),
        context: Some(json!({"decision": "deployment-approval",
            "criteria": {"quorum": 2, "security_score": ">= 0.9"}})),
        idempotency_key: None,
    };
    let sent = pool
        .handle(0)
        .expect("requester")
        .call(move |m, _| m.request_collaboration(request))
        .await
        .expect("call");
    assert!(sent);
    let mut result = None;
    let mut voted = BTreeMap::new();
    until(&mut events, |i, ev| {
        match ev {
            AgentEvent::Collaborated(_) => *voted.entry(i).or_insert(0) += 1,
            AgentEvent::CollaborationResult { result: r, .. } if i == 0 => result = Some(r.clone()),
            _ => {}
        }
        result.is_some()
    })
    .await;
    let result = result.expect("result");
    assert_eq!(voted, BTreeMap::from([(1, 1), (2, 1)]));
    assert_eq!(result["coordination_pattern"], "voting");
    assert_eq!(result["outcome"]["decision"], "rejected");
    assert_eq!(result["outcome"]["reject"], 2);
    assert_eq!(
        result["outcome"]["votes"],
        json!({"pooled-2": "reject", "pooled-3": "reject"})
    );
    assert_eq!(result["responses"], json!({}));
    pool.shutdown().await;
    app.shutdown().await;
}

#[cfg(unix)]
#[tokio::test]
async fn mcpw_agent_count_runs_a_pool_of_agents_that_all_leave_gracefully_on_ctrl_c() {
    use std::process::{Command, Stdio};
    let (app, mut ev) = server().await;
    let bin = tokio::task::spawn_blocking(|| example_bin::example("mcpw_agent"))
        .await
        .expect("build");
    let child = Command::new(bin)
        .args([
            "--url",
            &app.url(),
            "--agent-id",
            "w",
            "--count",
            "3",
            "--shared-state",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn mcpw_agent");
    let mut registered = Vec::new();
    within("three registrations", async {
        while registered.len() < 3 {
            if let Some(OrchestratorEvent::Registered { agent_id, .. }) = ev.recv().await {
                registered.push(agent_id.to_string());
            }
        }
    })
    .await;
    registered.sort();
    assert_eq!(registered, ["w-1", "w-2", "w-3"]);
    example_bin::interrupt(child, "mcpw_agent --count 3").await;
    // Each agent announced agent.shutdown before the process exited.
    let mut left = Vec::new();
    while let Ok(e) = ev.try_recv() {
        if let OrchestratorEvent::ShutdownRequested { agent_id, .. } = e {
            left.push(agent_id.to_string());
        }
    }
    left.sort();
    assert_eq!(left, ["w-1", "w-2", "w-3"]);
    app.shutdown().await;
}

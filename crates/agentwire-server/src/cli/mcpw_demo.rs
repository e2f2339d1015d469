//! The `mcpw_demo` command: its flags and its `main`. `examples/mcpw_demo.rs` is the binary, and
//! its documentation says what the command does and how to run it. [`server`] and [`script`]
//! are its two halves, which `agentwire demo` runs on its shared listener.

use std::process::ExitCode;
use std::time::Duration;

use crate::endpoint::Place;
use crate::mcpw;
use agentwire::mcpw::orchestrator::{
    OrchestratorConfig, OrchestratorEvent, TaskSpec, UpgradeConfig,
};
use agentwire::mcpw::Capability;
use mcpw::agent_app::{connect, AgentEvent, AgentSettings};
use mcpw::server_app::ServerApp;
use serde_json::json;
use tokio::sync::mpsc;

use super::script::DemoError;

/// The API key the demo's orchestrator asks for (`Authorization: Bearer demo-key`).
pub const API_KEY: &str = "demo-key";

fn agent(id: &str, binary: bool, caps: Vec<Capability>) -> AgentSettings {
    AgentSettings {
        agent_id: id.to_owned(),
        agent_type: "code-analyzer".to_owned(),
        capabilities: caps,
        binary,
        heartbeat: Duration::from_secs(5),
        steps: 2,
        step: Duration::from_millis(150),
        hmac_secret: None,
    }
}

async fn next<T>(
    rx: &mut mpsc::UnboundedReceiver<T>,
    mut pick: impl FnMut(&T) -> bool,
) -> Result<T, String> {
    let wait = async {
        while let Some(x) = rx.recv().await {
            if pick(&x) {
                return Some(x);
            }
        }
        None
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .ok()
        .flatten()
        .ok_or_else(|| "timed out waiting for the next step".to_owned())
}

/// Runs the `mcpw_demo` command, as `cargo run --example mcpw_demo` does: the demo's
/// orchestrator on 127.0.0.1 (a free port, metrics on another), then [`script`] against it.
pub async fn main() -> ExitCode {
    crate::common::init_tracing("warn");
    let outcome = async {
        let mut demo = server(Place::Bind("127.0.0.1:0")).await?;
        let result = script(&mut demo).await;
        demo.app.shutdown().await;
        result
    };
    super::script::exit_code("mcpw_demo", outcome.await)
}

/// The demo's orchestrator and the events its script follows.
pub struct Orchestrator {
    /// The running orchestrator.
    pub app: ServerApp,
    /// Every event of the orchestrator.
    events: mpsc::UnboundedReceiver<OrchestratorEvent>,
}

/// The demo's orchestrator ([`API_KEY`] required) at `place`; bound on an address of its
/// own, it also serves `/metrics` on another free port.
pub async fn server(place: Place<'_>) -> std::io::Result<Orchestrator> {
    let (tx, events) = mpsc::unbounded_channel();
    let on_event = move |ev: &OrchestratorEvent| {
        let _ = tx.send(ev.clone());
    };
    let config = OrchestratorConfig::default();
    let upgrade = UpgradeConfig::default().with_api_keys([API_KEY]);
    let app = match place {
        Place::Bind(addr) => {
            mcpw::server_app::start(addr, Some("127.0.0.1:0"), config, upgrade, on_event).await?
        }
        Place::Route(at) => mcpw::server_app::mount(at, config, upgrade, on_event).await?,
    };
    Ok(Orchestrator { app, events })
}

/// A JSON and a binary agent register with the demo's orchestrator, and a task is routed
/// to the better one, which reports progress and completes it.
pub async fn script(demo: &mut Orchestrator) -> Result<(), DemoError> {
    println!("== mcpw demo: an orchestrator, a JSON agent and a binary agent ==");
    let app = &demo.app;
    let server_events = &mut demo.events;
    println!(
        "[server] at {} (subprotocol mcp.v1, API key required)",
        app.url()
    );

    let (alpha, mut alpha_ev) = connect(
        &app.url(),
        agent(
            "agent-alpha",
            false,
            vec![Capability {
                specialties: Some(vec!["security".into()]),
                ..Capability::new("code_review", 0.95)
            }],
        ),
        Some(API_KEY),
    )?;
    let (bravo, mut bravo_ev) = connect(
        &app.url(),
        agent(
            "agent-bravo",
            true,
            vec![
                Capability::new("code_review", 0.7),
                Capability::new("translation", 0.9),
            ],
        ),
        Some(API_KEY),
    )?;
    let (a_tx, mut a_rx) = mpsc::unbounded_channel();
    let (b_tx, mut b_rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(e) = alpha_ev.recv().await {
            let _ = a_tx.send(e);
        }
    });
    tokio::spawn(async move {
        while let Some(e) = bravo_ev.recv().await {
            let _ = b_tx.send(e);
        }
    });

    for _ in 0..2 {
        let ev = next(server_events, |e| {
            matches!(e, OrchestratorEvent::Registered { .. })
        })
        .await?;
        if let OrchestratorEvent::Registered {
            agent_id,
            capabilities,
            form,
            ..
        } = ev
        {
            println!(
                "[server] registered {agent_id} ({}, capabilities {capabilities:?})",
                form.label()
            );
        }
    }
    next(&mut a_rx, |e| matches!(e, AgentEvent::Registered(_))).await?;
    next(&mut b_rx, |e| matches!(e, AgentEvent::Registered(_))).await?;
    println!("[agents] both got registration.confirmed");

    let spec = TaskSpec::new("code_review")
        .with_id("task-456")
        .with_deadline(Duration::from_secs(30))
        .with_context(json!({"repository": "github.com/org/repo", "pull_request": 123}))
        .with_requirements(json!({"focus_areas": ["security"]}));
    let id = app
        .handle
        .call(move |m, now| m.inner.submit_task(spec, now))
        .await??;
    println!("[client] submitted {id}: code_review, focus security");

    loop {
        match next(server_events, |_| true).await? {
            OrchestratorEvent::TaskAssigned {
                task_id,
                agent_id,
                score,
                alternatives,
                ..
            } => {
                println!("[server] {task_id} routed to {agent_id} (score {score}, alternatives {alternatives:?})");
            }
            OrchestratorEvent::TaskProgress {
                agent_id,
                progress,
                status,
                ..
            } => {
                println!(
                    "[server] progress from {agent_id}: {:.0}% ({})",
                    progress * 100.0,
                    status.unwrap_or_default()
                );
            }
            OrchestratorEvent::TaskCompleted {
                task_id,
                agent_id,
                status,
                result,
            } => {
                println!(
                    "[server] {task_id} {status} by {agent_id}: {}",
                    result["summary"]
                );
                break;
            }
            OrchestratorEvent::TaskFailed { task_id, reason } => {
                return Err(format!("{task_id} failed: {reason:?}").into());
            }
            _ => {}
        }
    }
    let accepted = next(&mut a_rx, |e| {
        matches!(e, AgentEvent::CompletionAccepted(_))
    })
    .await?;
    println!("[agent-alpha] completion acknowledged: {accepted:?}");

    if let Some(addr) = app.metrics_addr {
        let text = http_get(addr).await?;
        println!("[metrics] GET http://{addr}/metrics:");
        for line in text.lines().filter(|l| {
            l.starts_with("websocket_connections_active") || l.contains("task.complete")
        }) {
            println!("    {line}");
        }
    }

    alpha.shutdown().await;
    bravo.shutdown().await;
    println!("mcpw demo finished");
    Ok(())
}

async fn http_get(addr: std::net::SocketAddr) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await?;
    let mut body = String::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut body))
        .await
        .map_err(|_| std::io::Error::other("metrics timed out"))??;
    Ok(body)
}

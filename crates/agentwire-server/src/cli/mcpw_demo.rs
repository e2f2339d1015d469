//! The `mcpw_demo` command: its flags and its `main`. `examples/mcpw_demo.rs` is the binary, and
//! its documentation says what the command does and how to run it.

use std::time::Duration;

use crate::mcpw;
use agentwire::mcpw::orchestrator::{
    OrchestratorConfig, OrchestratorEvent, TaskSpec, UpgradeConfig,
};
use agentwire::mcpw::Capability;
use mcpw::agent_app::{connect, AgentEvent, AgentSettings};
use serde_json::json;
use tokio::sync::mpsc;

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

/// Runs the `mcpw_demo` command, as `cargo run --example mcpw_demo` does.
pub async fn main() -> Result<(), Box<dyn std::error::Error>> {
    crate::common::init_tracing("warn");
    let (tx, mut server_events) = mpsc::unbounded_channel();
    let app = mcpw::server_app::start(
        "127.0.0.1:0",
        Some("127.0.0.1:0"),
        OrchestratorConfig::default(),
        UpgradeConfig::default().with_api_keys(["demo-key"]),
        move |ev| {
            let _ = tx.send(ev.clone());
        },
    )
    .await?;
    println!(
        "[server] listening on {} (subprotocol mcp.v1, API key required)",
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
        Some("demo-key"),
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
        Some("demo-key"),
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
        let ev = next(&mut server_events, |e| {
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
        match next(&mut server_events, |_| true).await? {
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
    app.shutdown().await;
    println!("demo finished");
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

//! End to end over 127.0.0.1: the reference orchestration server and agents (the examples'
//! library code) with real sockets, JSON and binary agents, and the pre-upgrade refusals.

#[path = "../examples/mcpw/mod.rs"]
mod mcpw;

use std::future::Future;
use std::time::Duration;

use agentwire::mcpw::orchestrator::{
    OrchestratorConfig, OrchestratorEvent, TaskSpec, UpgradeConfig,
};
use mcpw::agent_app::{connect, AgentEvent, AgentSettings};
use mcpw::server_app::ServerApp;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Error as WsError;

async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

async fn server(keys: &[&str]) -> (ServerApp, mpsc::UnboundedReceiver<OrchestratorEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = mcpw::server_app::start(
        "127.0.0.1:0",
        Some("127.0.0.1:0"),
        OrchestratorConfig::default(),
        UpgradeConfig::default().with_api_keys(keys.iter().copied()),
        move |ev| {
            let _ = tx.send(ev.clone());
        },
    )
    .await
    .expect("bind");
    (app, rx)
}

async fn next<T>(rx: &mut mpsc::UnboundedReceiver<T>, mut pick: impl FnMut(&T) -> bool) -> T {
    within("event", async {
        loop {
            let x = rx.recv().await.expect("running");
            if pick(&x) {
                return x;
            }
        }
    })
    .await
}

fn settings(id: &str, binary: bool, confidence: f64) -> AgentSettings {
    AgentSettings {
        agent_id: id.into(),
        agent_type: "tester".into(),
        capabilities: json!([{"name": "code_review", "confidence": confidence}]),
        binary,
        heartbeat: Duration::from_secs(5),
        steps: 1,
        step: Duration::from_millis(20),
    }
}

/// Upgrade status of a raw request (the server refuses before the upgrade).
async fn upgrade_status(url: &str, headers: &[(&'static str, &str)]) -> u16 {
    let mut req = url.into_client_request().expect("request");
    for (n, v) in headers {
        req.headers_mut().insert(*n, v.parse().expect("header"));
    }
    match within("connect", tokio_tungstenite::connect_async(req)).await {
        Ok((_, resp)) => resp.status().as_u16(),
        Err(WsError::Http(resp)) => resp.status().as_u16(),
        Err(e) => panic!("unexpected: {e}"),
    }
}

#[tokio::test]
async fn json_and_binary_agents_register_take_tasks_and_complete_them() {
    let (app, mut ev) = server(&["k"]).await;
    let (json_agent, mut j) =
        connect(&app.url(), settings("json-agent", false, 0.95), Some("k")).expect("agent");
    let (bin_agent, mut b) =
        connect(&app.url(), settings("bin-agent", true, 0.9), Some("k")).expect("agent");
    for _ in 0..2 {
        next(&mut ev, |e| {
            matches!(e, OrchestratorEvent::Registered { .. })
        })
        .await;
    }
    within("json registered", j.recv()).await.expect("event");
    within("bin registered", b.recv()).await.expect("event");

    // The JSON agent scores higher and gets the first task; then it leaves, and the binary
    // agent gets the second.
    let json_agent = Some(json_agent);
    let mut json_agent = json_agent;
    for (task, expect) in [("t-json", "json-agent"), ("t-bin", "bin-agent")] {
        let spec = TaskSpec::new("code_review").with_id(task);
        app.handle
            .call(move |m, now| m.inner.submit_task(spec, now))
            .await
            .expect("call")
            .expect("submitted");
        let assigned = next(&mut ev, |e| {
            matches!(e, OrchestratorEvent::TaskAssigned { .. })
        })
        .await;
        let OrchestratorEvent::TaskAssigned { agent_id, .. } = assigned else {
            unreachable!()
        };
        let done = next(&mut ev, |e| {
            matches!(e, OrchestratorEvent::TaskCompleted { .. })
        })
        .await;
        let OrchestratorEvent::TaskCompleted {
            agent_id: by,
            task_id,
            ..
        } = done
        else {
            unreachable!()
        };
        assert_eq!((task_id.as_str(), by.as_str()), (task, agent_id.as_str()));
        if expect == "json-agent" {
            assert_eq!(agent_id, "json-agent");
            // Now make the binary agent the only candidate: the JSON one leaves.
            if let Some(a) = json_agent.take() {
                a.shutdown().await;
            }
            next(&mut ev, |e| {
                matches!(e, OrchestratorEvent::AgentRemoved { .. })
            })
            .await;
        } else {
            assert_eq!(agent_id, "bin-agent");
        }
    }
    let accepted = within("binary completion ack", async {
        loop {
            if let Some(AgentEvent::CompletionAccepted(v)) = b.recv().await {
                return v;
            }
        }
    })
    .await;
    assert_eq!(accepted["task_id"], "t-bin");

    // The metrics endpoint serves the spec's names.
    let addr = app.metrics_addr.expect("metrics");
    let text = within("metrics", http_get(addr)).await;
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    assert!(
        text.contains("websocket_connections_active{agent_type=\"tester\",protocol=\"binary\"} 1"),
        "{text}"
    );
    assert!(
        text.contains(
            "websocket_messages_total{type=\"request\",method=\"task.complete\",status=\"ok\"} 2"
        ),
        "{text}"
    );
    assert!(text.contains("# TYPE websocket_message_latency_seconds histogram"));
    bin_agent.shutdown().await;
    app.shutdown().await;
}

#[tokio::test]
async fn missing_subprotocol_is_426_and_bad_token_is_401() {
    let (app, _ev) = server(&["right"]).await;
    let url = app.url();
    assert_eq!(
        upgrade_status(&url, &[("authorization", "Bearer right")]).await,
        426
    );
    assert_eq!(
        upgrade_status(
            &url,
            &[
                ("sec-websocket-protocol", "mcp.v1"),
                ("authorization", "Bearer wrong")
            ]
        )
        .await,
        401
    );
    assert_eq!(
        upgrade_status(&url, &[("sec-websocket-protocol", "mcp.v1")]).await,
        401
    );
    assert_eq!(
        upgrade_status(
            &url,
            &[
                ("sec-websocket-protocol", "mcp.v1"),
                ("authorization", "Bearer right")
            ]
        )
        .await,
        101
    );
    app.shutdown().await;
}

async fn http_get(addr: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("read");
    out
}

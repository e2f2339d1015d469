//! End to end over 127.0.0.1, the `mcpw_server` and `mcpw_agent` programs as a user runs
//! them: the protocol versions the agent offers and the one selected (`--protocol-version`),
//! the agent's `--compression` and `--batch-linger-ms`, the server's `--batch-linger-ms`,
//! and the priority of a task typed on the server's stdin.

#[path = "support/example_bin.rs"]
#[allow(dead_code)] // `interrupt` is for the Ctrl-C tests
mod example_bin;
#[path = "support/mcpw_programs.rs"]
mod mcpw_programs;
#[path = "support/mcpw_server.rs"]
mod mcpw_server;

use std::future::Future;
use std::time::Duration;

use agentwire::mcpw::orchestrator::{
    OrchestratorConfig, OrchestratorEvent, TaskSpec, UpgradeConfig,
};
use agentwire::mcpw::{Body, Codec};
use agentwire_server::mcpw;
use mcpw::server_app::ServerApp;
use mcpw_programs::{AgentProcess, ServerProcess};
use tokio::sync::mpsc::UnboundedReceiver;

async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// The next item of `rx` that `pick` accepts.
async fn next<T: std::fmt::Debug>(
    rx: &mut UnboundedReceiver<T>,
    what: &str,
    mut pick: impl FnMut(&T) -> bool,
) -> T {
    within(what, async {
        loop {
            let x = rx.recv().await.unwrap_or_else(|| panic!("ended: {what}"));
            if pick(&x) {
                return x;
            }
        }
    })
    .await
}

/// An in-process reference server (its counters readable) with `config`.
async fn server(config: OrchestratorConfig) -> (ServerApp, UnboundedReceiver<OrchestratorEvent>) {
    mcpw_server::start(false, config, UpgradeConfig::default()).await
}

#[tokio::test]
async fn the_agent_offers_its_versions_and_the_highest_in_common_is_selected_or_426_said_plainly() {
    // A server of versions 1 and 2 (a fake 2), an agent of 1, 2 and 3 (a fake 3): 2.
    let mut server =
        ServerProcess::start(&["--protocol-version", "1", "--protocol-version", "2"]).await;
    let mut agent = AgentProcess::start(
        &server.url,
        &[
            "--agent-id",
            "v-agent",
            "--protocol-version",
            "1",
            "--protocol-version",
            "3",
            "--protocol-version",
            "2",
        ],
    )
    .await;
    let selected = next(&mut agent.out, "connected", |_| true).await;
    assert_eq!(
        selected,
        "connected: the server selected protocol version 2 (mcp.v2) of mcp.v3, mcp.v2 and mcp.v1 offered"
    );
    let registered = next(&mut agent.out, "registered", |_| true).await;
    assert!(
        registered.starts_with("registered as v-agent (session"),
        "{registered}"
    );
    agent.stop().await;

    // By default the agent offers every version it speaks (1), which this server speaks too.
    let mut agent = AgentProcess::start(&server.url, &["--agent-id", "v1-agent"]).await;
    assert_eq!(
        next(&mut agent.out, "connected", |_| true).await,
        "connected: the server selected protocol version 1 (mcp.v1) of mcp.v1 offered"
    );
    agent.stop().await;

    // No version in common: HTTP 426, which the agent names for what it is, and the
    // server logs with its reason.
    let mut agent = AgentProcess::start(
        &server.url,
        &["--agent-id", "v3-agent", "--protocol-version", "3"],
    )
    .await;
    assert_eq!(
        next(&mut agent.out, "refused", |_| true).await,
        "could not connect (HTTP error: 426 Upgrade Required): the server speaks none of the \
         protocol versions offered (mcp.v3); attempt 1 failed, retrying in 500 ms"
    );
    let logged = next(&mut server.err, "refusal logged", |l| {
        l.contains("refused the WebSocket upgrade")
    })
    .await;
    assert!(
        logged.contains("with HTTP 426: no protocol version in common"),
        "{logged}"
    );
    agent.stop().await;
    server.stop().await;
}

/// `--capability` flags enough for an `agent.register` over the 1 KiB compression threshold.
fn many_capabilities() -> Vec<String> {
    (0..40)
        .flat_map(|i| ["--capability".to_owned(), format!("capability_{i:02}:0.9")])
        .collect()
}

#[tokio::test]
async fn the_agents_compression_flag_decides_whether_its_large_messages_go_gzipped() {
    let (app, mut events) = server(OrchestratorConfig::default()).await;
    let compression = |app: &ServerApp| {
        let handle = app.handle.clone();
        async move {
            handle
                .call(|m, _| m.inner.metrics().compression())
                .await
                .expect("running")
        }
    };
    let caps = many_capabilities();
    let mut flags: Vec<&str> = caps.iter().map(String::as_str).collect();
    flags.extend(["--binary", "--agent-id", "plain", "--compression", "never"]);
    let plain = AgentProcess::start(&app.url(), &flags).await;
    next(
        &mut events,
        "plain registered",
        |e| matches!(e, OrchestratorEvent::Registered { agent_id, .. } if agent_id == "plain"),
    )
    .await;
    let stats = compression(&app).await;
    assert_eq!(stats.in_wire, 0, "nothing came gzipped: {stats:?}");

    // The spec's adaptive rule: a capability list is JSON text, far from 6.5 bits per
    // byte, so it goes gzipped.
    flags.truncate(flags.len() - 5);
    flags.extend([
        "--binary",
        "--agent-id",
        "adaptive",
        "--compression",
        "entropy",
    ]);
    let adaptive = AgentProcess::start(&app.url(), &flags).await;
    next(
        &mut events,
        "adaptive registered",
        |e| matches!(e, OrchestratorEvent::Registered { agent_id, .. } if agent_id == "adaptive"),
    )
    .await;
    let stats = compression(&app).await;
    assert!(
        stats.in_wire > 0,
        "the registration came gzipped: {stats:?}"
    );
    assert!(
        stats.ratio_in().is_some_and(|r| r > 2.0),
        "and smaller: {stats:?}"
    );
    plain.stop().await;
    adaptive.stop().await;
    app.shutdown().await;
}

/// The server's `mcpw_frames_total{direction="in"}`.
async fn frames_in(app: &ServerApp) -> u64 {
    let text = app
        .handle
        .call(|m, _| m.inner.metrics().render())
        .await
        .expect("running");
    text.lines()
        .find_map(|l| l.strip_prefix("mcpw_frames_total{direction=\"in\"} "))
        .unwrap_or_else(|| panic!("no inbound frame count in\n{text}"))
        .parse()
        .expect("a number")
}

/// Three tasks wait for an agent on a server whose own linger sends them to it as one
/// batch; `mcpw_agent` with `flags` registers, works on them (one progress report each,
/// then the completion) and the server counts the frames it got.
async fn frames_for_three_tasks(flags: &[&str]) -> u64 {
    let config = OrchestratorConfig::default().with_batch_linger(Some(Duration::from_millis(50)));
    let (app, mut events) = server(config).await;
    for i in 0..3 {
        let spec = TaskSpec::new("code_review").with_id(format!("t-{i}"));
        app.handle
            .call(move |m, now| m.inner.submit_task(spec, now))
            .await
            .expect("running")
            .expect("queued");
    }
    let mut args = vec!["--agent-id", "worker", "--steps", "1", "--step-ms", "50"];
    args.extend(flags);
    let agent = AgentProcess::start(&app.url(), &args).await;
    for _ in 0..3 {
        next(&mut events, "a completion", |e| {
            matches!(e, OrchestratorEvent::TaskCompleted { .. })
        })
        .await;
    }
    let frames = frames_in(&app).await;
    agent.stop().await;
    app.shutdown().await;
    frames
}

#[tokio::test]
async fn the_agents_batch_linger_sends_what_it_starts_together() {
    // Without a linger: the register, then three progress reports and three completions,
    // each in a frame of its own.
    let alone = frames_for_three_tasks(&[]).await;
    // With one: the three tasks arrive together, so their reports (and then their
    // completions) are started together and wait in one batch: the reports' batch still
    // waits when the completions start 50 ms later (one batch of six), unless the agent
    // ran late and sent it first (two batches), or a loaded machine spread the three
    // completions over two wake-ups (three).
    let batched = frames_for_three_tasks(&["--batch-linger-ms", "100"]).await;
    assert_eq!(alone, 7, "register + 3 progress + 3 complete");
    assert!(
        (2..=4).contains(&batched),
        "register + the reports and completions in one to three batches: {batched} frames"
    );
}

/// The next text message of `ws`, decoded.
async fn message<S>(ws: &mut tokio_tungstenite::WebSocketStream<S>) -> agentwire::mcpw::Message
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message as WsMessage;
    loop {
        match within("a message", ws.next()).await {
            Some(Ok(WsMessage::Text(t))) => {
                return Codec::default()
                    .decode_json(t.as_bytes())
                    .expect("an MCPW message");
            }
            Some(Ok(_)) => continue,
            other => panic!("connection ended: {other:?}"),
        }
    }
}

/// Registers `agent_id` over a raw JSON WebSocket (mcp.v1) and returns the socket.
async fn raw_agent(
    url: &str,
    agent_id: &str,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    use tokio_tungstenite::tungstenite::Message as WsMessage;
    let mut req = url.into_client_request().expect("request");
    req.headers_mut()
        .insert("Sec-WebSocket-Protocol", "mcp.v1".parse().expect("header"));
    let (mut ws, _) = within("connect", tokio_tungstenite::connect_async(req))
        .await
        .expect("upgrade");
    let register = serde_json::json!({"id": "r-1", "type": 0, "method": "agent.register",
        "params": {"agent_id": agent_id,
                   "capabilities": [{"name": "code_review", "confidence": 0.9}]}});
    ws.send(WsMessage::text(register.to_string()))
        .await
        .expect("send");
    let confirmed = message(&mut ws).await;
    assert!(
        matches!(confirmed.body, Body::RegistrationConfirmed(_)),
        "{confirmed:?}"
    );
    ws
}

#[tokio::test]
async fn the_servers_batch_linger_sends_waiting_tasks_as_one_batch() {
    let mut server = ServerProcess::start(&["--batch-linger-ms", "100"]).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(server.submit("code_review").await);
    }
    let mut ws = raw_agent(&server.url, "raw").await;
    // The three tasks were assigned at once: they leave together, after the linger.
    let batch = message(&mut ws).await;
    let Body::Batch(entries) = batch.body else {
        panic!("not a batch: {batch:?}");
    };
    let assigned: Vec<String> = entries
        .iter()
        .map(|m| match &m.body {
            Body::TaskAssigned(t) => t.task_id.clone(),
            other => panic!("not a task: {other:?}"),
        })
        .collect();
    assert_eq!(assigned, ids);
    server.stop().await;
}

#[tokio::test]
async fn a_later_high_priority_task_typed_on_stdin_is_assigned_before_an_earlier_low_one() {
    let mut server = ServerProcess::start(&[]).await;
    // No agent yet: both wait, the low one first.
    let low = server
        .submit(r#"code_review priority=1 {"pull_request": 1}"#)
        .await;
    let plain = server.submit("code_review").await;
    let high = server
        .submit(r#"code_review priority=9 {"pull_request": 2}"#)
        .await;
    assert_eq!(
        server.command("code_review priority=high").await,
        "not understood: the priority must be a whole number from 0 to 4294967295, not \"high\""
    );
    let mut agent = AgentProcess::start(
        &server.url,
        &["--agent-id", "prio", "--steps", "5", "--step-ms", "60000"],
    )
    .await;
    let mut order = Vec::new();
    while order.len() < 3 {
        let line = next(&mut agent.out, "assigned", |l| {
            l.ends_with("assigned to me")
        })
        .await;
        let id = line
            .strip_prefix("task ")
            .and_then(|l| l.split_whitespace().next())
            .expect("task id")
            .to_owned();
        order.push(id);
    }
    // The most urgent first; equal priorities (the default is 1) in submission order.
    assert_eq!(order, [high, low, plain]);
    agent.stop().await;
    server.stop().await;
}

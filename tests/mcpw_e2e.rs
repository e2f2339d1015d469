//! End to end over 127.0.0.1: the reference orchestration server and agents (the examples'
//! library code) with real sockets, JSON and binary agents, and the pre-upgrade refusals;
//! and the `mcpw_server` / `mcpw_agent` programs themselves as a user runs them (Ctrl-C,
//! a wrong API key).

#[path = "support/example_bin.rs"]
mod example_bin;
#[path = "support/mcpw_programs.rs"]
#[allow(dead_code)] // this file reads the agent's output, not the server's log
mod mcpw_programs;
#[path = "support/mcpw_server.rs"]
mod mcpw_server;
use std::future::Future;
use std::io::Write;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use agentwire::mcpw::orchestrator::{
    OrchestratorConfig, OrchestratorEvent, TaskSpec, UpgradeConfig,
};
use agentwire::mcpw::{AgentEvent as McpwEvent, Capability};
use agentwire_server::mcpw;
use example_bin::example;
use mcpw::agent_app::{connect, connect_with_backoff, AgentEvent, AgentSettings, Backoff};
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
    mcpw_server::start(
        true,
        OrchestratorConfig::default(),
        UpgradeConfig::default().with_api_keys(keys.iter().copied()),
    )
    .await
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
        capabilities: vec![Capability::new("code_review", confidence)],
        binary,
        heartbeat: Duration::from_secs(5),
        steps: 1,
        step: Duration::from_millis(20),
        hmac_secret: None,
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
    assert_eq!(accepted.task_id, "t-bin");

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

// ---- logs, auth headers, refusals ---------------------------------------------------------

/// Everything logged through `tracing` by this test binary (all tests share it).
static LOGS: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct Capture;

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LOGS.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn capture_logs() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let _ = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(|| Capture)
            .try_init();
    });
}

fn logged(needle: &str) -> bool {
    let logs = LOGS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    String::from_utf8_lossy(&logs).contains(needle)
}

#[tokio::test]
async fn api_keys_are_read_from_all_three_headers_and_refusals_are_logged_with_their_reason() {
    capture_logs();
    let (app, _ev) = server(&["right-key"]).await;
    let url = app.url();
    let sub = ("sec-websocket-protocol", "mcp.v1");
    for good in [
        ("authorization", "Bearer right-key"),
        ("authorization", "right-key"),
        ("x-api-key", "right-key"),
    ] {
        assert_eq!(upgrade_status(&url, &[sub, good]).await, 101, "{good:?}");
    }
    for (bad, why) in [
        (("x-api-key", "wrong-key"), "unknown API key"),
        (
            ("authorization", "Basic cmlnaHQta2V5"),
            "unsupported Authorization scheme",
        ),
        (
            ("x-agent-id", "a-1"),
            "no Authorization or X-API-Key header",
        ),
    ] {
        assert_eq!(upgrade_status(&url, &[sub, bad]).await, 401, "{bad:?}");
        let line = format!("with HTTP 401: unauthorized: {why}");
        assert!(logged(&line), "no log line with {line:?}");
    }
    assert!(logged("refused the WebSocket upgrade from 127.0.0.1:"));
    app.shutdown().await;
}

#[tokio::test]
async fn a_wrong_key_is_reported_with_the_401_and_retried_after_growing_waits() {
    let (app, _ev) = server(&["right-key"]).await;
    let backoff = Backoff {
        initial: Duration::from_millis(20),
        max: Duration::from_millis(50),
    };
    let (agent, mut events) = connect_with_backoff(
        &app.url(),
        settings("locked-out", false, 0.9),
        Some("wrong-key"),
        backoff,
    )
    .expect("agent");
    let mut waits = Vec::new();
    for attempt in 1..=3u32 {
        let ev = within("a refused attempt", events.recv())
            .await
            .expect("events");
        let AgentEvent::Reconnecting(McpwEvent::ConnectFailed {
            reason,
            failures,
            retry_in,
        }) = &ev
        else {
            panic!("expected a failed attempt, got {ev:?}");
        };
        assert!(reason.contains("401"), "{reason}");
        assert_eq!(*failures, attempt);
        let line = mcpw::agent_app::describe(&ev);
        assert!(
            line.contains("401 Unauthorized") && line.contains("retrying in"),
            "{line}"
        );
        waits.push(*retry_in);
    }
    assert_eq!(
        waits,
        [20, 40, 50].map(Duration::from_millis),
        "doubling, capped at max"
    );
    agent.shutdown().await;
    app.shutdown().await;
}

#[tokio::test]
async fn logs_are_sentences_not_debug_dumps() {
    let (app, mut ev) = server(&[]).await;
    let (agent, mut a) = connect(&app.url(), settings("agent-s", false, 0.9), None).expect("agent");
    let mut seen = Vec::new();
    let mut agent_seen = Vec::new();
    let spec = TaskSpec::new("code_review")
        .with_id("t-s")
        .with_context(json!({"files": ["a.rs", "b.rs"], "pull_request": 7}));
    let registered = next(&mut ev, |e| {
        matches!(e, OrchestratorEvent::Registered { .. })
    })
    .await;
    seen.push(registered);
    app.handle
        .call(move |m, now| m.inner.submit_task(spec, now))
        .await
        .expect("call")
        .expect("submitted");
    loop {
        let e = next(&mut ev, |_| true).await;
        let done = matches!(e, OrchestratorEvent::TaskCompleted { .. });
        seen.push(e);
        if done {
            break;
        }
    }
    loop {
        let e = within("agent event", a.recv()).await.expect("agent events");
        let done = matches!(e, AgentEvent::CompletionAccepted(_));
        agent_seen.push(e);
        if done {
            break;
        }
    }
    agent.shutdown().await;
    seen.push(
        next(&mut ev, |e| {
            matches!(e, OrchestratorEvent::Disconnected { .. })
        })
        .await,
    );
    app.shutdown().await;

    let lines: Vec<String> = seen
        .iter()
        .map(mcpw::server_app::describe)
        .chain(agent_seen.iter().map(mcpw::agent_app::describe))
        .collect();
    assert!(lines.len() >= 6, "{lines:#?}");
    for line in &lines {
        for dump in [
            "Some(", "None", "Object {", "Array [", "String(", "Number(", "ConnId(", "Bool(", "{ ",
            "\\\"",
        ] {
            assert!(!line.contains(dump), "a Debug dump ({dump}) in {line:?}");
        }
    }
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("task t-s finished by agent-s as completed:")),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("registered as agent-s (session")),
        "{lines:#?}"
    );
}

// ---- the programs as a user runs them ------------------------------------------------------

#[cfg(unix)]
#[tokio::test]
async fn mcpw_server_stops_at_once_on_ctrl_c_while_stdin_stays_open() {
    use std::process::{Command, Stdio};
    let bin = tokio::task::spawn_blocking(|| example("mcpw_server"))
        .await
        .expect("build");
    let mut child = Command::new(bin)
        .args(["--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .stdin(Stdio::piped()) // kept open: a user's terminal
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mcpw_server");
    let mut err = example_bin::lines_of(child.stderr.take().expect("stderr"));
    next(&mut err, |l| l.contains("listening on ws://127.0.0.1:")).await;
    example_bin::interrupt(child, "mcpw_server").await;
    next(&mut err, |l| l.contains("Ctrl-C: closing every connection")).await;
}

#[tokio::test]
async fn mcpw_agent_prints_the_401_and_backs_off_visibly() {
    let (app, _ev) = server(&["right-key"]).await;
    let mut agent =
        mcpw_programs::AgentProcess::start(&app.url(), &["--api-key", "wrong-key"]).await;
    let first = next(&mut agent.out, |_| true).await;
    let second = next(&mut agent.out, |_| true).await;
    agent.stop().await;
    app.shutdown().await;
    assert_eq!(
        first,
        "could not connect (HTTP error: 401 Unauthorized); attempt 1 failed, retrying in 500 ms"
    );
    assert_eq!(
        second,
        "could not connect (HTTP error: 401 Unauthorized); attempt 2 failed, retrying in 1.0 s"
    );
}

#[test]
fn the_agents_reconnect_waits_double_and_reset_only_after_a_connection_stayed_up() {
    use agentwire::core::{ConnId, Dial, Dialer, Machine, Output, PeerInfo};
    use mcpw::agent_app::{AgentMachine, STABLE_AFTER};

    fn waits(m: &mut AgentMachine) -> Vec<Duration> {
        let mut out = Vec::new();
        while let Some(o) = m.poll_output() {
            if let Output::Event(AgentEvent::Reconnecting(
                McpwEvent::ConnectFailed { retry_in, .. } | McpwEvent::Disconnected { retry_in },
            )) = o
            {
                out.push(retry_in);
            }
        }
        out
    }
    #[allow(clippy::disallowed_methods)] // the one base time of a simulated run
    let mut now = std::time::Instant::now();
    let second = Duration::from_secs(1);
    let mut m = AgentMachine::new(settings("a", false, 0.9)).with_backoff(Backoff {
        initial: second,
        max: Duration::from_secs(30),
    });
    let peer = PeerInfo::new(None);
    assert_eq!(m.poll_dial(), Dial::Now);
    m.handle_dial_failed("HTTP error: 401 Unauthorized", now);
    assert_eq!(waits(&mut m), [second]);
    // Nothing is dialled until the wait is over.
    assert_eq!(m.poll_dial(), Dial::Wait);
    assert_eq!(m.poll_timeout(), Some(now + second));
    now += second;
    m.handle_timeout(now);
    assert_eq!(m.poll_dial(), Dial::Now);
    // A connection refused right after the upgrade does not start the waits over.
    m.handle_connect(ConnId::new(1), &peer, now);
    m.handle_disconnect(ConnId::new(1), now + second);
    assert_eq!(waits(&mut m), [2 * second]);
    now += 3 * second;
    m.handle_timeout(now);
    m.handle_dial_failed("connection refused", now);
    assert_eq!(waits(&mut m), [4 * second]);
    now += 4 * second;
    m.handle_timeout(now);
    // One that stayed up does.
    m.handle_connect(ConnId::new(2), &peer, now);
    assert_eq!(m.poll_dial(), Dial::Wait);
    m.handle_disconnect(ConnId::new(2), now + STABLE_AFTER);
    assert_eq!(waits(&mut m), [second]);
}

/// SIGTERM, as a service manager stops the reference agent: it announces `agent.shutdown`
/// with its task handed over, the server gives the task to the other agent, which finishes
/// it, and the agent process exits cleanly.
#[cfg(unix)]
#[tokio::test]
async fn sigterm_makes_the_reference_agent_hand_its_task_over_and_exit() {
    use std::process::{Command, Stdio};
    let (app, mut ev) = server(&[]).await;
    let (other, _o) = connect(&app.url(), settings("agent-b", false, 0.5), None).expect("agent");
    let bin = tokio::task::spawn_blocking(|| example("mcpw_agent"))
        .await
        .expect("build");
    // A slow worker: one step a minute, so the task is still in its hands.
    let mut child = Command::new(bin)
        .args(["--url", &app.url(), "--agent-id", "agent-a"])
        .args([
            "--capability",
            "code_review:0.95",
            "--steps",
            "5",
            "--step-ms",
            "60000",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn mcpw_agent");
    let mut out = example_bin::lines_of(child.stdout.take().expect("stdout"));
    let mut registered = Vec::new();
    while registered.len() < 2 {
        if let OrchestratorEvent::Registered { agent_id, .. } = next(&mut ev, |e| {
            matches!(e, OrchestratorEvent::Registered { .. })
        })
        .await
        {
            registered.push(agent_id);
        }
    }
    let spec = TaskSpec::new("code_review").with_id("t-1");
    app.handle
        .call(move |m, now| m.inner.submit_task(spec, now))
        .await
        .expect("call")
        .expect("submitted");
    next(&mut out, |l| l == "task t-1 (code_review) assigned to me").await;

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());

    let shutdown = next(&mut ev, |e| {
        matches!(e, OrchestratorEvent::ShutdownRequested { .. })
    })
    .await;
    assert!(
        matches!(&shutdown, OrchestratorEvent::ShutdownRequested { agent_id, transferred: 1 } if agent_id == "agent-a"),
        "{shutdown:?}"
    );
    let done = next(&mut ev, |e| {
        matches!(e, OrchestratorEvent::TaskCompleted { .. })
    })
    .await;
    assert!(
        matches!(&done, OrchestratorEvent::TaskCompleted { task_id, agent_id, .. } if task_id == "t-1" && agent_id == "agent-b"),
        "{done:?}"
    );
    let exit = within(
        "mcpw_agent to exit after SIGTERM",
        tokio::task::spawn_blocking(move || child.wait()),
    )
    .await
    .expect("join")
    .expect("wait");
    assert!(
        exit.success(),
        "a clean exit, not death by the signal: {exit:?}"
    );
    let mut said = Vec::new();
    while let Some(line) = out.recv().await {
        said.push(line);
    }
    assert!(
        said.iter().any(|l| l == "sigterm: shutting down"),
        "{said:?}"
    );
    assert_eq!(said.last().map(String::as_str), Some("stopped"), "{said:?}");
    other.shutdown().await;
    app.shutdown().await;
}

/// The next text message of `ws`, as JSON.
async fn text_reply<S>(ws: &mut tokio_tungstenite::WebSocketStream<S>) -> serde_json::Value
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message as WsMessage;
    loop {
        match within("reply", ws.next()).await {
            Some(Ok(WsMessage::Text(t))) => return serde_json::from_str(&t).expect("json"),
            Some(Ok(_)) => continue,
            other => panic!("connection ended: {other:?}"),
        }
    }
}

/// The next event of a library agent that `pick` accepts.
async fn agent_event(
    events: &mut agentwire::tokio::Events<AgentEvent>,
    mut pick: impl FnMut(&AgentEvent) -> bool,
) -> AgentEvent {
    within("agent event", async {
        loop {
            let e = events.recv().await.expect("running");
            if pick(&e) {
                return e;
            }
        }
    })
    .await
}

/// A user cancels a task from `mcpw_server`'s stdin: the agent working on it is told
/// (4006), stops working on it, and says so.
#[tokio::test]
async fn cancel_on_the_servers_stdin_stops_the_agent_working_on_the_task() {
    let mut server = mcpw_programs::ServerProcess::start(&[]).await;
    let url = server.url.clone();
    // A slow worker: the task stays in its hands.
    let mut slow = settings("agent-a", false, 0.9);
    slow.steps = 5;
    slow.step = Duration::from_secs(60);
    let (agent, mut events) = connect(&url, slow, None).expect("agent");
    agent_event(&mut events, |e| matches!(e, AgentEvent::Registered(_))).await;
    let task_id = server.submit("code_review {}").await;
    agent_event(
        &mut events,
        |e| matches!(e, AgentEvent::TaskAssigned(t) if t.task_id == task_id),
    )
    .await;
    assert_eq!(
        server.command(&format!("cancel {task_id}")).await,
        format!("cancelled {task_id}")
    );
    let cancelled = agent_event(&mut events, |e| matches!(e, AgentEvent::Cancelled { .. })).await;
    assert!(
        matches!(&cancelled, AgentEvent::Cancelled { task_id: t, .. } if *t == task_id),
        "{cancelled:?}"
    );
    assert_eq!(
        mcpw::agent_app::describe(&cancelled),
        format!("task {task_id}: cancelled by the server (task cancelled); stopped working on it")
    );
    agent.shutdown().await;
    server.stop().await;
}

/// A connection upgraded with `X-Agent-ID: agent-1` that registers as another agent gets
/// 4001 naming both ids, and stays unregistered.
#[tokio::test]
async fn an_x_agent_id_header_that_disagrees_with_register_is_refused_over_a_socket() {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message as WsMessage;
    let (app, _ev) = server(&[]).await;
    let mut req = app.url().into_client_request().expect("request");
    req.headers_mut()
        .insert("Sec-WebSocket-Protocol", "mcp.v1".parse().expect("header"));
    req.headers_mut()
        .insert("X-Agent-ID", "agent-1".parse().expect("header"));
    let (mut ws, _) = within("connect", tokio_tungstenite::connect_async(req))
        .await
        .expect("upgrade");
    let register = |id: &str, agent: &str| {
        json!({"id": id, "type": 0, "method": "agent.register",
               "params": {"agent_id": agent, "capabilities": []}})
        .to_string()
    };
    ws.send(WsMessage::text(register("r-1", "agent-2")))
        .await
        .expect("send");
    let refused = text_reply(&mut ws).await;
    assert_eq!(refused["id"], "r-1");
    assert_eq!(refused["error"]["code"], 4001);
    assert_eq!(
        refused["error"]["data"],
        json!({"field": "agent_id", "reason": "Does not match the X-Agent-ID header",
               "expected": "agent-1", "received": "agent-2"})
    );
    ws.send(WsMessage::text(register("r-2", "agent-1")))
        .await
        .expect("send");
    let confirmed = text_reply(&mut ws).await;
    assert_eq!(confirmed["method"], "registration.confirmed", "{confirmed}");
    app.shutdown().await;
}

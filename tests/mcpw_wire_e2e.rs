//! End to end over 127.0.0.1: the reference orchestration server with HMAC message
//! authentication on, an agent that signs and one that does not, and the protocol
//! analytics on the server's `/metrics`.

#[path = "support/mcpw_server.rs"]
mod mcpw_server;

use std::future::Future;
use std::time::Duration;

use agentwire::mcpw::orchestrator::{OrchestratorConfig, OrchestratorEvent, UpgradeConfig};
use agentwire::mcpw::{Agent, AgentConfig, AgentEvent, AgentRegister, Capability, ErrorCode};
use agentwire::tokio::{Client, ClientConfig, Events, Handle};
use agentwire_server::mcpw;
use mcpw::server_app::ServerApp;
use tokio::sync::mpsc;

async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

async fn server(
    config: OrchestratorConfig,
) -> (ServerApp, mpsc::UnboundedReceiver<OrchestratorEvent>) {
    server_with(config, UpgradeConfig::default()).await
}

async fn server_with(
    config: OrchestratorConfig,
    upgrade: UpgradeConfig,
) -> (ServerApp, mpsc::UnboundedReceiver<OrchestratorEvent>) {
    mcpw_server::start(true, config, upgrade).await
}

/// An agent (the crate's `Agent` role) dialing `url`; `secret` turns HMAC on.
fn agent(
    url: &str,
    id: &str,
    binary: bool,
    secret: Option<&[u8]>,
) -> (Handle<Agent>, Events<AgentEvent>) {
    agent_speaking(url, id, binary, secret, &[1])
}

/// [`agent`] speaking the protocol `versions`, offered as subprotocols.
fn agent_speaking(
    url: &str,
    id: &str,
    binary: bool,
    secret: Option<&[u8]>,
    versions: &[u8],
) -> (Handle<Agent>, Events<AgentEvent>) {
    let register = AgentRegister {
        agent_id: id.into(),
        agent_type: Some("tester".into()),
        capabilities: vec![Capability::new("code_review", 0.9)],
        model: None,
        resources: None,
        metadata: Some(serde_json::json!({"notes": vec!["the same words again"; 200]})),
    };
    let mut config = AgentConfig::new(register)
        .with_binary(binary)
        .with_protocol_versions(versions.iter().copied());
    if let Some(s) = secret {
        config = config.with_hmac_secret(s);
    }
    let cfg = config
        .subprotocols()
        .into_iter()
        .fold(ClientConfig::default(), ClientConfig::with_subprotocol);
    Client::connect_dialer(url, Agent::new(config), cfg).expect("dial")
}

async fn first<E>(events: &mut Events<E>, mut pick: impl FnMut(&E) -> bool) -> E {
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

#[tokio::test]
async fn with_hmac_on_signed_agents_register_and_unsigned_ones_get_4001() {
    let config = OrchestratorConfig::default().with_hmac_secret(b"shared secret");
    let (app, mut server_events) = server(config).await;
    for binary in [false, true] {
        let id = if binary { "signed-bin" } else { "signed-json" };
        let (_h, mut events) = agent(&app.url(), id, binary, Some(b"shared secret"));
        first(&mut events, |e| matches!(e, AgentEvent::Registered(_))).await;
    }

    let (_h, mut events) = agent(&app.url(), "unsigned", false, None);
    // The server reports the refusal; the agent reads the (signed) 4001 answer to its
    // register, as a text frame's tag is a member decoders ignore.
    let refused = within("refusal", async {
        loop {
            match server_events.recv().await.expect("running") {
                OrchestratorEvent::ProtocolViolation { error, .. } => return error,
                _ => continue,
            }
        }
    })
    .await;
    assert_eq!(refused.code(), ErrorCode::AUTHENTICATION_FAILED);
    let seen = first(&mut events, |e| {
        matches!(e, AgentEvent::ErrorReceived { .. })
    })
    .await;
    assert!(
        matches!(&seen, AgentEvent::ErrorReceived { error, .. } if error.code == ErrorCode::AUTHENTICATION_FAILED),
        "{seen:?}"
    );

    // Signed with another secret: refused as well, never registered.
    let (_h, mut events) = agent(&app.url(), "forger", true, Some(b"guess"));
    let seen = first(&mut events, |e| {
        matches!(
            e,
            AgentEvent::ProtocolViolation(_) | AgentEvent::Registered(_)
        )
    })
    .await;
    match seen {
        AgentEvent::ProtocolViolation(e) => assert_eq!(e.code, ErrorCode::AUTHENTICATION_FAILED),
        other => panic!("the forger registered: {other:?}"),
    }
    let agents = app
        .handle
        .call(|m, _| {
            m.inner
                .agents()
                .map(|(id, _)| id.to_string())
                .collect::<Vec<_>>()
        })
        .await
        .expect("running");
    assert_eq!(agents, ["signed-bin", "signed-json"]);
    app.shutdown().await;
}

#[tokio::test]
async fn the_reference_agent_signs_with_its_hmac_secret_setting() {
    use mcpw::agent_app::{connect, AgentEvent as AppEvent, AgentSettings};
    let config = OrchestratorConfig::default().with_hmac_secret(b"shared secret");
    let (app, _server_events) = server(config).await;
    let settings = |id: &str, secret: Option<&str>| AgentSettings {
        agent_id: id.into(),
        agent_type: "tester".into(),
        capabilities: vec![Capability::new("code_review", 0.9)],
        binary: true,
        heartbeat: Duration::from_secs(5),
        steps: 1,
        step: Duration::from_millis(20),
        hmac_secret: secret.map(str::to_owned),
    };
    // `mcpw_agent --hmac-secret` fills the setting: the reference agent signs and registers.
    let (_signed, mut events) = connect(
        &app.url(),
        settings("ref-signed", Some("shared secret")),
        None,
    )
    .expect("dial");
    first(&mut events, |e| matches!(e, AppEvent::Registered(_))).await;
    // With another secret it is refused and never registers.
    let (_forger, mut events) =
        connect(&app.url(), settings("ref-forger", Some("guess")), None).expect("dial");
    let seen = first(&mut events, |e| {
        matches!(e, AppEvent::Registered(_) | AppEvent::Failed(_))
    })
    .await;
    assert!(matches!(seen, AppEvent::Failed(_)), "{seen:?}");
    app.shutdown().await;
}

#[tokio::test]
async fn metrics_show_the_protocol_analytics() {
    let (app, _server_events) = server(OrchestratorConfig::default()).await;
    let url = app.url();
    let (_a, mut a) = agent(&url, "a", true, None);
    let (_b, mut b) = agent(&url, "b", false, None);
    first(&mut a, |e| matches!(e, AgentEvent::Registered(_))).await;
    first(&mut b, |e| matches!(e, AgentEvent::Registered(_))).await;
    let text = http_get(app.metrics_addr.expect("metrics")).await;
    for line in [
        "# TYPE websocket_connections_active gauge",
        "# TYPE websocket_messages_total counter",
        "# TYPE mcpw_compression_ratio gauge",
        "# TYPE mcpw_errors_total counter",
        "# TYPE mcpw_error_rate gauge",
        "# TYPE mcpw_message_size_bytes_avg gauge",
        "mcpw_connections_peak 2\n",
        "mcpw_frames_total{direction=\"in\"} 2\n",
        "mcpw_sequence_gaps_total 0\n",
    ] {
        assert!(text.contains(line), "{line:?} missing from\n{text}");
    }
    // The binary agent's registration (its metadata repeats itself) came gzipped.
    let ratio: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("mcpw_compression_ratio{direction=\"in\"} "))
        .expect("inbound ratio")
        .parse()
        .expect("a number");
    assert!(ratio > 5.0, "{text}");
    app.shutdown().await;
}

#[tokio::test]
async fn the_highest_version_both_sides_speak_is_selected_at_the_upgrade() {
    // A fake version 2 on both sides: it is selected.
    let upgrade = UpgradeConfig::default().with_protocol_versions([1, 2]);
    let (app, mut server_events) = server_with(OrchestratorConfig::default(), upgrade).await;
    let (h, mut events) = agent_speaking(&app.url(), "v2", false, None, &[1, 2]);
    first(&mut events, |e| matches!(e, AgentEvent::Registered(_))).await;
    assert_eq!(h.call(|a, _| a.protocol_version()).await.unwrap(), Some(2));
    let conn = within("registered", async {
        loop {
            if let OrchestratorEvent::Registered { conn, .. } = server_events.recv().await.unwrap()
            {
                return conn;
            }
        }
    })
    .await;
    let v = app
        .handle
        .call(move |m, _| m.inner.protocol_version(conn))
        .await;
    assert_eq!(v.unwrap(), Some(2));
    // An agent of version 1 only still gets in, on 1.
    let (h, mut events) = agent_speaking(&app.url(), "v1", true, None, &[1]);
    first(&mut events, |e| matches!(e, AgentEvent::Registered(_))).await;
    assert_eq!(h.call(|a, _| a.protocol_version()).await.unwrap(), Some(1));
    app.shutdown().await;

    // A server of version 1 only: the agent that also speaks 2 gets 1.
    let (app, _server_events) = server(OrchestratorConfig::default()).await;
    let (h, mut events) = agent_speaking(&app.url(), "v2", false, None, &[2, 1]);
    first(&mut events, |e| matches!(e, AgentEvent::Registered(_))).await;
    assert_eq!(h.call(|a, _| a.protocol_version()).await.unwrap(), Some(1));
    app.shutdown().await;
}

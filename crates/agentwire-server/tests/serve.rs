//! The `agentwire serve` runtime ([`Gateway`]) end to end over 127.0.0.1, port 0: the five
//! protocols on one listener by path and on listeners of their own, each driven by our own
//! client and, where one exists, by its real outside client (Python `websockets` for the bus
//! and the relay, the Node `ws` client for llmrtc); plain HTTP on a protocol path gets its
//! 426, an unknown path 404; the study logs a shutdown leaves pass the log checker. And the
//! binary (`agentwire serve --config FILE`) stopped by SIGTERM in the middle of a relay
//! session (every WebSocket gets 1001, the study log is complete and the log checker accepts
//! it, exit 0) and by a second signal during the graceful stop (exit 143 at once); a relay
//! machine dropped mid-session (as a stopping driver drops it) syncs its open study logs.

#[allow(dead_code)]
#[path = "../../../tests/support/interop.rs"]
mod interop;
#[allow(dead_code)]
#[path = "../../../tests/support/temp_dir.rs"]
mod temp_dir;

use std::ffi::OsString;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire::agent_relay::{Relay, RelayConfig};
use agentwire::chopsticks::AgentConfig;
use agentwire::core::{ConnId, Frame, Machine, PeerInfo, SequentialIds};
use agentwire::jsonrpc_bus::ClientConfig as BusClientConfig;
use agentwire::mcpw::Capability;
use agentwire_server::chopsticks::agent_app::AgentLog;
use agentwire_server::config::{Config, Protocol};
use agentwire_server::gateway::Gateway;
use agentwire_server::mcpw::agent_app::{AgentEvent as McpwAgentEvent, AgentSettings};
use agentwire_server::relay::agent_app::Agent;
use agentwire_server::relay::log_check;
use agentwire_server::relay::log_writer::{
    LogFile, OsStorage, Storage, StudyLog, SyncHandle, SyncPolicy,
};
use agentwire_server::relay::logging_relay::LoggingRelay;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use temp_dir::{temp_dir, TempDir};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;

/// How long one step (a connect, an answer) may take before the test fails.
const STEP: Duration = Duration::from_secs(20);

async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(STEP, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// A configuration with the admin listener and every listener on port 0, the relay's study
/// logs in `log_dir`, llmrtc streaming fast over the WebSocket alone and without the
/// example playbook (as the interop scripts expect), and `extra` appended.
fn config_text(log_dir: &Path, separate: bool) -> String {
    let mut text = format!(
        "[admin]\nlisten = \"127.0.0.1:0\"\n\n[relay]\nlog_dir = {:?}\n\n\
         [llmrtc]\nfast = true\nwebrtc = false\n",
        log_dir.display().to_string()
    );
    if !separate {
        text.push_str("\n[[listener]]\nname = \"main\"\nlisten = \"127.0.0.1:0\"\n");
        return text;
    }
    // A listener per protocol, named after it; each section names its listener.
    for p in ["bus", "chopsticks", "mcpw", "llmrtc", "relay"] {
        text = text.replace(&format!("[{p}]\n"), &format!("[{p}]\nlistener = \"{p}\"\n"));
        if !text.contains(&format!("[{p}]\n")) {
            text.push_str(&format!("\n[{p}]\nlistener = \"{p}\"\n"));
        }
        text.push_str(&format!(
            "\n[[listener]]\nname = \"{p}\"\nlisten = \"127.0.0.1:0\"\n"
        ));
    }
    text
}

fn config(log_dir: &Path, separate: bool) -> Config {
    Config::from_toml_str(&config_text(log_dir, separate), "serve-test.toml").expect("config")
}

/// Sends `request` on a fresh TCP connection to `addr` and reads the whole answer.
async fn http(addr: SocketAddr, request: &str) -> String {
    let mut tcp = within("connect", TcpStream::connect(addr))
        .await
        .expect("connect");
    tcp.write_all(request.as_bytes()).await.expect("write");
    let mut answer = String::new();
    within("http answer", tcp.read_to_string(&mut answer))
        .await
        .expect("read");
    answer
}

/// `ws://127.0.0.1:PORT/path` → (`127.0.0.1:PORT`, `/path`).
fn split(url: &str) -> (SocketAddr, String) {
    let rest = url.strip_prefix("ws://").expect("ws url");
    let (addr, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    (addr.parse().expect("addr"), path.to_owned())
}

/// A plain GET on each protocol's path gets its 426 with a line naming the protocol; an
/// upgrade on an unknown path gets 404.
async fn plain_http_answers(url_of: impl Fn(Protocol) -> String) {
    for (protocol, name) in [
        (Protocol::Bus, "jsonrpc-bus"),
        (Protocol::Chopsticks, "chopsticks"),
        (Protocol::Mcpw, "mcpw"),
        (Protocol::Llmrtc, "llmrtc"),
        (Protocol::Relay, "agent-relay"),
    ] {
        let (addr, path) = split(&url_of(protocol));
        let answer = http(
            addr,
            &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 426"), "{protocol}: {answer}");
        assert!(
            answer.contains(name) && answer.contains(&path),
            "{protocol}: {answer}"
        );
        let stray = format!("ws://{addr}/no-such-path");
        match within(
            "stray upgrade",
            tokio_tungstenite::connect_async(stray.as_str()),
        )
        .await
        {
            Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
                assert_eq!(resp.status().as_u16(), 404, "{protocol}");
            }
            other => panic!("{protocol}: expected 404, got {:?}", other.map(|_| ())),
        }
    }
}

/// Bus: a subscriber answers a publish's delivery; the publisher gets the chain's result.
async fn bus_round_trip(bus_url: &str) {
    let (sub, mut deliveries) = agentwire_server::bus::client_app::connect(
        bus_url,
        BusClientConfig::new("sub").intercepting(),
        agentwire_server::bus::client_app::transport_config(),
        |_| {},
    )
    .expect("bus client");
    within("subscribe", sub.subscribe("inbound:*"))
        .await
        .expect("subscribe");
    let (publisher, _) = agentwire_server::bus::client_app::connect(
        bus_url,
        BusClientConfig::new("pub"),
        agentwire_server::bus::client_app::transport_config(),
        |_| {},
    )
    .expect("bus client");
    let answer = tokio::spawn(async move {
        let d = deliveries.recv().await.expect("delivery");
        d.answer(true).await
    });
    let result = within(
        "publish",
        publisher.publish("inbound:x", &json!({"hello": "gateway"})),
    )
    .await
    .expect("publish");
    assert!(within("answer", answer).await.expect("join"));
    assert_eq!(
        serde_json::to_value(&result).expect("json")["stopPropagation"],
        true
    );
    within("ping", publisher.ping()).await.expect("ping");
    sub.shutdown().await;
    publisher.shutdown().await;
}

/// Our own client of each protocol against the gateway's URLs.
async fn own_clients(url_of: impl Fn(Protocol) -> String) {
    bus_round_trip(&url_of(Protocol::Bus)).await;

    // Chopsticks: the mock music agent connects and announces itself.
    let (tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let agent = agentwire_server::chopsticks::agent_app::start(
        &url_of(Protocol::Chopsticks),
        AgentConfig::new("agent-gw").with_guilds(["g1"]),
        false,
        move |_, log| {
            let _ = tx.send(matches!(log, AgentLog::Connected));
        },
    )
    .expect("chopsticks agent");
    within("chopsticks hello", async {
        while let Some(connected) = seen.recv().await {
            if connected {
                return;
            }
        }
        panic!("the chopsticks agent stopped");
    })
    .await;
    agent.stop("test done").await;

    // MCPW: the reference agent registers.
    let settings = AgentSettings {
        agent_id: "agent-gw".into(),
        agent_type: "tester".into(),
        capabilities: vec![Capability::new("code_review", 0.9)],
        binary: false,
        heartbeat: Duration::from_secs(5),
        steps: 1,
        step: Duration::from_millis(20),
        hmac_secret: None,
    };
    let (handle, mut events) =
        agentwire_server::mcpw::agent_app::connect(&url_of(Protocol::Mcpw), settings, None)
            .expect("mcpw agent");
    within("mcpw registered", async {
        while let Some(ev) = events.recv().await {
            if matches!(ev, McpwAgentEvent::Registered(_)) {
                return;
            }
        }
        panic!("the mcpw agent stopped");
    })
    .await;
    handle.shutdown().await;

    // llmrtc: the client gets `ready` and a session.
    let mut client = agentwire_server::llmrtc::client_app::LlmrtcClientApp::start(
        &url_of(Protocol::Llmrtc),
        agentwire::llmrtc::ClientConfig::default(),
        7,
    )
    .await
    .expect("llmrtc client");
    client
        .wait_for(
            "ready",
            STEP,
            |_| {},
            |e| matches!(e, agentwire::llmrtc::ClientEvent::Ready { .. }),
        )
        .await
        .expect("ready");
    assert!(client.session_id().await.expect("session").is_some());
    client.close().await;

    // Relay: an agent joins a session.
    let mut agent = Agent::connect(&url_of(Protocol::Relay), |_, _| {})
        .await
        .expect("relay agent");
    let joined = agent.join("default", "gw-agent").await.expect("join");
    assert_eq!(joined["sessionId"], "default", "{joined}");
}

/// Runs `program tests/interop/<script> <url>` (the workspace's interop scripts) to its
/// end; asserts that it exits 0 printing `ok`.
async fn outside_peer(
    program: OsString,
    script: &str,
    url: String,
    envs: Vec<(&'static str, OsString)>,
    ok: &str,
) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/interop")
        .join(script);
    let run = tokio::task::spawn_blocking(move || {
        Command::new(program)
            .arg(script)
            .arg(url)
            .envs(envs)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .output()
    });
    let out = tokio::time::timeout(Duration::from_secs(90), run)
        .await
        .expect("the outside peer finished")
        .expect("join")
        .expect("the outside peer runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains(ok), "{stdout}");
    eprintln!("{}", stdout.trim());
}

/// The real outside clients: Python `websockets` for the bus and the relay (with our movie
/// host), Node `ws` for llmrtc. Each is skipped when its runtime is not set up (a failure
/// under CI).
async fn outside_clients(url_of: impl Fn(Protocol) -> String, log_dir: &Path, test: &str) {
    if let Some(python) = interop::peer_from_env("AGENTWIRE_PYTHON", test) {
        outside_peer(
            python.clone(),
            "bus_client.py",
            url_of(Protocol::Bus),
            Vec::new(),
            "python interop ok",
        )
        .await;
        let dir = log_dir.to_owned();
        let log_file = move |study: &str| {
            agentwire_server::relay::demo::log_path(&dir, study)
                .display()
                .to_string()
        };
        let mut host = agentwire_server::relay::host_app::MovieHost::start(
            &url_of(Protocol::Relay),
            Default::default(),
            log_file,
            |_| {},
        )
        .expect("movie host");
        assert!(host.wait_joined(STEP).await, "host joined");
        outside_peer(
            python,
            "relay_agent.py",
            url_of(Protocol::Relay),
            Vec::new(),
            "python interop ok",
        )
        .await;
        host.shutdown().await;
    }
    if let Some(dir) = interop::peer_from_env("AGENTWIRE_NODE_WS_DIR", test) {
        let node = std::env::var_os("AGENTWIRE_NODE").unwrap_or_else(|| "node".into());
        outside_peer(
            node,
            "llmrtc_client.js",
            url_of(Protocol::Llmrtc),
            vec![("AGENTWIRE_NODE_WS_DIR", dir)],
            "node interop ok",
        )
        .await;
    }
}

/// Every study log in `dir` is accepted by the checker `relay_log` runs.
fn logs_are_consistent(dir: &Path) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("log dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            let report = log_check::check_file(&path).expect("read log");
            assert!(
                report.is_consistent(),
                "{}: {}",
                path.display(),
                report.render()
            );
            n += 1;
        }
    }
    n
}

/// The URLs of the five protocols, from the binary's `serving` lines.
fn protocol_url(served: &Served) -> impl Fn(Protocol) -> String + Copy + '_ {
    move |p: Protocol| served.url(p.name())
}

#[tokio::test]
async fn all_five_protocols_on_one_listener_by_path() {
    let dir = temp_dir("one-listener");
    let served = serve(&dir, false).await;
    let main = served.listener("main");
    let url_of = protocol_url(&served);
    for (protocol, path) in [
        (Protocol::Bus, "/bus"),
        (Protocol::Chopsticks, "/chopsticks"),
        (Protocol::Mcpw, "/ws"),
        (Protocol::Llmrtc, "/llmrtc"),
        (Protocol::Relay, "/agent/ws"),
    ] {
        assert_eq!(url_of(protocol), format!("ws://{main}{path}"));
    }
    let logs = dir.join("logs");
    plain_http_answers(url_of).await;
    own_clients(url_of).await;
    outside_clients(url_of, &logs, "all_five_protocols_on_one_listener_by_path").await;
    served.signal("TERM");
    assert_eq!(served.exit_code().await, Some(0));
    assert!(logs_are_consistent(&logs) > 0, "no study log written");
}

#[tokio::test]
async fn each_protocol_on_a_listener_of_its_own() {
    let dir = temp_dir("separate");
    let served = serve(&dir, true).await;
    let mut ports: Vec<u16> = Vec::new();
    for protocol in Protocol::ALL {
        let addr = served.listener(protocol.name());
        assert!(served
            .url(protocol.name())
            .starts_with(&format!("ws://{addr}/")));
        ports.push(addr.port());
    }
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), 5, "five listeners, five ports");
    let url_of = protocol_url(&served);
    let logs = dir.join("logs");
    plain_http_answers(url_of).await;
    own_clients(url_of).await;
    outside_clients(url_of, &logs, "each_protocol_on_a_listener_of_its_own").await;
    served.signal("TERM");
    assert_eq!(served.exit_code().await, Some(0));
}

/// The library's view: a [`Gateway`] reports each listener's address and each protocol's
/// URL as the configuration placed them, and its shutdown closes open connections with
/// 1001 and returns.
#[tokio::test]
async fn a_gateway_in_process_reports_where_it_serves_and_stops() {
    let dir = temp_dir("in-process");
    let gw = within("start", Gateway::start(&config(&dir, true)))
        .await
        .expect("start");
    for protocol in Protocol::ALL {
        let addr = gw.local_addr(protocol.name()).expect("listener");
        assert!(gw
            .url(protocol)
            .expect("url")
            .starts_with(&format!("ws://{addr}/")));
    }
    assert!(gw.local_addr("main").is_none());
    assert!(gw.admin_addr().is_some());
    assert_eq!(gw.shutdown_bound(), Duration::from_secs(15));
    let lines = gw.announcement();
    assert_eq!(lines.len(), 5 + 5 + 1, "{lines:?}");
    let (mut ws, _) = within(
        "connect",
        tokio_tungstenite::connect_async(gw.url(Protocol::Relay).expect("url").as_str()),
    )
    .await
    .expect("relay");
    let stop = tokio::spawn(gw.shutdown());
    assert_eq!(close_code(&mut ws).await, Some(1001));
    drop(ws);
    within("shutdown", stop).await.expect("join");
}

/// `agentwire serve --config FILE` with the announcement read from its stdout.
struct Served {
    child: Child,
    listeners: Vec<(String, SocketAddr)>,
    urls: Vec<(String, String)>,
    _lines: tokio::sync::mpsc::UnboundedReceiver<String>,
    /// Its log lines (stderr), each also copied to the test's stderr.
    log: tokio::sync::mpsc::UnboundedReceiver<String>,
}

impl Served {
    /// The address of the listener `name`, from its `listening` line.
    fn listener(&self, name: &str) -> SocketAddr {
        self.listeners
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, a)| *a)
            .unwrap_or_else(|| panic!("no listening line for {name}"))
    }

    fn url(&self, protocol: &str) -> String {
        self.urls
            .iter()
            .find(|(p, _)| p == protocol)
            .map(|(_, u)| u.clone())
            .unwrap_or_else(|| panic!("no serving line for {protocol}"))
    }

    /// Sends `signal` (`TERM`, `INT`) to the process.
    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Waits (bounded) for the process to exit; returns its exit code.
    async fn exit_code(mut self) -> Option<i32> {
        let wait = tokio::task::spawn_blocking(move || self.child.wait());
        tokio::time::timeout(Duration::from_secs(60), wait)
            .await
            .expect("the server exited")
            .expect("join")
            .expect("wait")
            .code()
    }
}

/// Starts the binary on `dir/agentwire.toml` and waits for its `serving` lines.
async fn serve(dir: &TempDir, separate: bool) -> Served {
    serve_with(dir, separate, &[]).await
}

/// [`serve`] with `extra` arguments after `serve --config FILE`.
async fn serve_with(dir: &TempDir, separate: bool, extra: &[&str]) -> Served {
    let path = dir.join("agentwire.toml");
    std::fs::write(&path, config_text(&dir.join("logs"), separate)).expect("config file");
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentwire"))
        .arg("serve")
        .arg("--config")
        .arg(&path)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("agentwire serve");
    let mut lines = lines_of(child.stdout.take().expect("stdout"));
    let log = log_of(child.stderr.take().expect("stderr"));
    let mut urls = Vec::new();
    let mut listeners = Vec::new();
    while urls.len() < 5 {
        let line = within("the serving lines", lines.recv())
            .await
            .expect("agentwire serve exited before serving");
        if let Some(rest) = line.strip_prefix("listening ") {
            let field = |key: &str| {
                rest.split_whitespace()
                    .find_map(|f| f.strip_prefix(key))
                    .map(str::to_owned)
                    .unwrap_or_else(|| panic!("{key} in {line:?}"))
            };
            let addr = field("addr=").parse().expect("addr");
            listeners.push((field("name="), addr));
        }
        if let Some(rest) = line.strip_prefix("serving ") {
            let mut protocol = None;
            let mut url = None;
            for field in rest.split_whitespace() {
                if let Some(p) = field.strip_prefix("protocol=") {
                    protocol = Some(p.to_owned());
                }
                if let Some(u) = field.strip_prefix("url=") {
                    url = Some(u.to_owned());
                }
            }
            urls.push((protocol.expect("protocol="), url.expect("url=")));
        }
    }
    Served {
        child,
        listeners,
        urls,
        _lines: lines,
        log,
    }
}

/// Lines of a child's stderr, each copied to this process's stderr, read to the end on a
/// thread of their own (a server whose log pipe filled up would stop).
fn log_of(pipe: impl io::Read + Send + 'static) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in io::BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            eprintln!("{line}");
            let _ = tx.send(line);
        }
    });
    rx
}

/// Lines of a child's pipe, read on a thread of their own.
fn lines_of(pipe: impl io::Read + Send + 'static) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in io::BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>;

/// The relay envelope of `msg_type` with `payload` and id `id`.
fn envelope(id: &str, msg_type: &str, payload: Value) -> Message {
    Message::text(
        json!({"v": "mvp-0.2", "id": id, "type": msg_type, "payload": payload}).to_string(),
    )
}

/// Reads until a message of `msg_type` arrives.
async fn until(ws: &mut Ws, msg_type: &str) -> Value {
    loop {
        let msg = within(msg_type, ws.next())
            .await
            .expect("open")
            .expect("frame");
        if let Message::Text(t) = msg {
            let v: Value = serde_json::from_str(&t).expect("json");
            if v["type"] == msg_type {
                return v;
            }
        }
    }
}

/// The close code this socket gets (frames before it are skipped).
async fn close_code(ws: &mut Ws) -> Option<u16> {
    loop {
        match within("close", ws.next()).await {
            Some(Ok(Message::Close(frame))) => return frame.map(|f| u16::from(f.code)),
            Some(Ok(_)) => {}
            Some(Err(_)) | None => return None,
        }
    }
}

#[cfg(unix)]
#[tokio::test]
async fn sigterm_mid_relay_session_closes_with_1001_and_leaves_a_complete_study_log() {
    let dir = temp_dir("sigterm");
    let served = serve(&dir, false).await;
    let relay = served.url("relay");
    let (mut host, _) = within(
        "host connect",
        tokio_tungstenite::connect_async(relay.as_str()),
    )
    .await
    .expect("host");
    host.send(envelope(
        "h1",
        "relay.join",
        json!({"role": "host", "sessionId": "default"}),
    ))
    .await
    .expect("send");
    until(&mut host, "relay.joined").await;
    let (mut agent, _) = within(
        "agent connect",
        tokio_tungstenite::connect_async(relay.as_str()),
    )
    .await
    .expect("agent");
    agent
        .send(envelope(
            "a1",
            "relay.join",
            json!({"role": "agent", "sessionId": "default", "agentName": "cut"}),
        ))
        .await
        .expect("send");
    until(&mut agent, "relay.joined").await;
    // A message in flight through the relay: the agent's message reaches the host.
    agent
        .send(envelope(
            "a2",
            "agent.message",
            json!({"text": "before the stop"}),
        ))
        .await
        .expect("send");
    until(&mut host, "agent.message").await;
    // Other protocols' sockets are open too.
    let (mut bus, _) = within(
        "bus connect",
        tokio_tungstenite::connect_async(served.url("bus").as_str()),
    )
    .await
    .expect("bus");

    served.signal("TERM");
    let going_away = Some(1001);
    assert_eq!(close_code(&mut host).await, going_away, "host");
    assert_eq!(close_code(&mut agent).await, going_away, "agent");
    assert_eq!(close_code(&mut bus).await, going_away, "bus");
    drop((host, agent, bus));
    assert_eq!(served.exit_code().await, Some(0));

    let logs = dir.join("logs");
    assert!(logs_are_consistent(&logs) > 0, "no study log");
    let text = std::fs::read_to_string(agentwire_server::relay::demo::log_path(&logs, "default"))
        .expect("the session's log");
    assert!(text.ends_with('\n'), "a torn last line: {text}");
    assert!(text.contains("before the stop"), "{text}");
}

#[cfg(unix)]
#[tokio::test]
async fn a_second_signal_during_the_graceful_stop_exits_at_once_with_143() {
    let dir = temp_dir("second-signal");
    let served = serve(&dir, false).await;
    // A peer that completes the upgrade and then never reads: the graceful stop waits for
    // its close handshake (2 × close_timeout) before giving up on it.
    let (addr, path) = split(&served.url("bus"));
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    let upgrade = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    tcp.write_all(upgrade.as_bytes()).await.expect("upgrade");
    let mut head = [0u8; 12];
    within("101", tcp.read_exact(&mut head))
        .await
        .expect("read");
    assert_eq!(&head, b"HTTP/1.1 101");

    served.signal("TERM");
    // The close frame reaches the silent peer: the graceful stop has begun.
    let mut frame = [0u8; 2];
    loop {
        within("close frame", tcp.read_exact(&mut frame[..1]))
            .await
            .expect("read");
        if frame[0] == 0x88 {
            break;
        }
    }
    served.signal("TERM");
    assert_eq!(served.exit_code().await, Some(143));
}

#[cfg(unix)]
#[tokio::test]
async fn serve_on_a_current_thread_runtime_exchanges_bus_messages() {
    let dir = temp_dir("current-thread");
    let mut served = serve_with(&dir, false, &["--set", "runtime.flavor=current-thread"]).await;
    let runtime = within("the runtime log line", async {
        while let Some(line) = served.log.recv().await {
            if line.contains("runtime") && line.contains("flavor=") {
                return line;
            }
        }
        panic!("agentwire serve logged no runtime line");
    })
    .await;
    assert!(
        runtime.contains("flavor=current-thread") && runtime.contains("workers=1"),
        "{runtime}"
    );
    bus_round_trip(&served.url("bus")).await;
    served.signal("TERM");
    assert_eq!(served.exit_code().await, Some(0));
}

#[test]
fn a_bad_runtime_setting_exits_2_naming_the_key() {
    for (sets, key) in [
        (&["runtime.flavor=fast"][..], "runtime.flavor"),
        (
            &["runtime.flavor=current-thread", "runtime.worker_threads=4"][..],
            "runtime.worker_threads",
        ),
    ] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentwire"));
        cmd.arg("serve");
        for s in sets {
            cmd.args(["--set", s]);
        }
        let out = cmd.stdin(Stdio::null()).output().expect("agentwire serve");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{sets:?}: {stderr}");
        assert!(
            stderr.contains(&format!("key `{key}`")),
            "{sets:?}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "nothing served: {sets:?}");
    }
}

// A relay machine dropped by a stopping driver.

/// Files on disk whose `fsync`s are counted.
struct Counted {
    syncs: Arc<AtomicUsize>,
}

struct CountedFile {
    file: Box<dyn LogFile>,
    syncs: Arc<AtomicUsize>,
}

impl LogFile for CountedFile {
    fn size(&mut self) -> io::Result<u64> {
        self.file.size()
    }
    fn read_exact_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(offset, buf)
    }
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.append(bytes)
    }
    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.file.sync()
    }
    fn syncer(&self) -> io::Result<SyncHandle> {
        self.file.syncer()
    }
}

impl Storage for Counted {
    fn open(&mut self, path: &Path, create_new: bool) -> io::Result<Box<dyn LogFile>> {
        Ok(Box::new(CountedFile {
            file: OsStorage.open(path, create_new)?,
            syncs: Arc::clone(&self.syncs),
        }))
    }
    fn create_with(&mut self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        OsStorage.create_with(path, bytes)
    }
    fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        OsStorage.rename(from, to)
    }
    fn exists(&mut self, path: &Path) -> bool {
        OsStorage.exists(path)
    }
    fn sync_dir(&mut self, dir: &Path) -> io::Result<()> {
        OsStorage.sync_dir(dir)
    }
}

/// A relay stopped in the middle of a session (its members still joined, its file
/// open and not yet synced) syncs the file when it is dropped, as a shutdown drops it.
#[test]
fn a_dropped_relay_syncs_the_study_logs_still_open() {
    let dir = std::env::temp_dir().join(format!(
        "agentwire-logging-relay-drop-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let syncs = Arc::new(AtomicUsize::new(0));
    let storage = Box::new(Counted {
        syncs: Arc::clone(&syncs),
    });
    let log = StudyLog::with_storage(&dir, SyncPolicy::SessionEnd, storage).expect("log");
    #[allow(clippy::disallowed_methods)]
    let now = Instant::now();
    let relay = Relay::new(RelayConfig::default(), SequentialIds::new(0), now, 0);
    let mut m = LoggingRelay::new(relay, log);
    let peer = PeerInfo::new(None).with_path("/agent/ws");
    let (host, agent) = (ConnId::new(1), ConnId::new(2));
    m.handle_connect(host, &peer, now);
    m.handle_connect(agent, &peer, now);
    let join = |role: &str| {
        format!(
            r#"{{"v":"mvp-0.2","type":"relay.join","id":"{role}","payload":{{"role":"{role}","sessionId":"m"}}}}"#
        )
    };
    m.handle_frame(host, Frame::Text(&join("host")), now);
    m.handle_frame(agent, Frame::Text(&join("agent")), now);
    while m.poll_output().is_some() {}
    assert_eq!(
        m.log().open_sessions().count(),
        1,
        "the session's file is open"
    );
    let before = syncs.load(Ordering::Relaxed);
    drop(m);
    assert!(
        syncs.load(Ordering::Relaxed) > before,
        "the open file was synced when the relay was dropped"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

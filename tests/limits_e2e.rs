//! The five reference servers under one abusive address, over real loopback sockets:
//! per-address caps on open connections and pending handshakes (set the way each server's
//! `--max-connections-per-address` / `--max-pending-handshakes-per-address` flags set them),
//! each refusing the excess its protocol's way, and a `426` for plain HTTP. Loopback is not
//! exempt: 127.0.0.1 is the abusive address, 127.0.0.2 (also loopback on Linux) everyone else.

#[path = "support/temp_dir.rs"]
mod temp_dir;

use std::any::Any;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use agentwire::agent_relay::RelayConfig;
use agentwire::chopsticks::ControllerConfig;
use agentwire::jsonrpc_bus::BusConfig;
use agentwire::mcpw::orchestrator::{OrchestratorConfig, UpgradeConfig};
use agentwire_server::{bus, chopsticks, llmrtc, mcpw, relay};
use futures_util::{SinkExt, StreamExt};
use temp_dir::{temp_dir, TempDir};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// Open connections per address in these tests.
const OPEN_CAP: usize = 3;
/// Pending handshakes per address in these tests.
const PENDING_CAP: usize = 4;

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// How a server refuses a connection over the per-address cap.
#[derive(Debug)]
enum Refused {
    /// Upgraded, then (after `frame`, if any, containing this text) closed with this code.
    Close(u16, Option<&'static str>),
    /// HTTP status before the upgrade.
    Http(u16),
}

/// One running reference server and how to reach it.
struct Target {
    name: &'static str,
    addr: SocketAddr,
    path: &'static str,
    /// Request headers and subprotocol its upgrade needs.
    headers: Vec<(&'static str, &'static str)>,
    refused: Refused,
    /// What its 426 body names.
    protocol: &'static str,
    _app: Box<dyn Any + Send>,
}

/// Sets the per-address caps of every reference server, as their flags do.
fn install_caps() {
    agentwire_server::common::AddressLimits {
        max_connections_per_address: OPEN_CAP,
        max_pending_handshakes_per_address: PENDING_CAP,
    }
    .install();
}

/// The five reference servers, started with the caps installed.
async fn start_all() -> (Vec<Target>, TempDir) {
    install_caps();
    let mut targets = Vec::new();

    let app = bus::server_app::start("127.0.0.1:0", BusConfig::default(), |_| {})
        .await
        .expect("bus");
    targets.push(Target {
        name: "bus",
        addr: app.local_addr(),
        path: "/",
        headers: Vec::new(),
        refused: Refused::Close(1013, Some("-32005")),
        protocol: "jsonrpc-bus",
        _app: Box::new(app),
    });

    let app = chopsticks::controller_app::start("127.0.0.1:0", ControllerConfig::default(), |_| {})
        .await
        .expect("chopsticks");
    targets.push(Target {
        name: "chopsticks",
        addr: app.local_addr(),
        path: "/",
        headers: Vec::new(),
        refused: Refused::Close(1008, None),
        protocol: "chopsticks controller",
        _app: Box::new(app),
    });

    let transcript = std::path::PathBuf::from(format!(
        "{}/crates/agentwire-server/src/llmrtc/data/transcript.txt",
        env!("CARGO_MANIFEST_DIR")
    ));
    let stt = llmrtc::providers::ScriptedStt::from_file(&transcript).expect("transcript");
    let app = llmrtc::server_app::start(
        "127.0.0.1:0",
        agentwire::llmrtc::ServerConfig::default(),
        llmrtc::providers::Providers::stand_ins(stt),
        llmrtc::server_app::Pacing::fast(),
        |_| {},
    )
    .await
    .expect("llmrtc");
    targets.push(Target {
        name: "llmrtc",
        addr: app.local_addr(),
        path: "/",
        headers: Vec::new(),
        refused: Refused::Close(1013, Some("RATE_LIMITED")),
        protocol: "llmrtc",
        _app: Box::new(app),
    });

    let app = mcpw::server_app::start(
        "127.0.0.1:0",
        None,
        OrchestratorConfig::default(),
        UpgradeConfig::default().with_api_keys(["k"]),
        |_| {},
    )
    .await
    .expect("mcpw");
    let addr = app
        .url()
        .trim_start_matches("ws://")
        .trim_end_matches('/')
        .parse()
        .expect("mcpw addr");
    targets.push(Target {
        name: "mcpw",
        addr,
        path: "/",
        headers: vec![
            ("Authorization", "Bearer k"),
            ("Sec-WebSocket-Protocol", "mcp.v1"),
        ],
        refused: Refused::Http(503),
        protocol: "mcpw",
        _app: Box::new(app),
    });

    let dir = temp_dir("relay-log");
    let app = relay::server_app::start(
        "127.0.0.1:0",
        RelayConfig::default(),
        dir.0.clone(),
        relay::log_writer::SyncPolicy::SessionEnd,
        |_| {},
    )
    .await
    .expect("relay");
    targets.push(Target {
        name: "relay",
        addr: app.local_addr(),
        path: "/agent/ws",
        headers: Vec::new(),
        refused: Refused::Close(1013, None),
        protocol: "agent-relay",
        _app: Box::new(app),
    });
    (targets, dir)
}

/// A TCP connection to `to` from the loopback address `from`.
async fn tcp_from(from: &str, to: SocketAddr) -> TcpStream {
    let sock = TcpSocket::new_v4().expect("socket");
    sock.bind(format!("{from}:0").parse().expect("addr"))
        .expect("bind source");
    within("tcp connect", sock.connect(to))
        .await
        .expect("connect")
}

/// A WebSocket upgrade to `t` from `from`.
async fn ws_from(from: &str, t: &Target) -> Result<Ws, tungstenite::Error> {
    let tcp = tcp_from(from, t.addr).await;
    let mut req = format!("ws://{}{}", t.addr, t.path)
        .into_client_request()
        .expect("request");
    for (name, value) in &t.headers {
        req.headers_mut()
            .insert(*name, value.parse().expect("header value"));
    }
    within(
        "upgrade",
        tokio_tungstenite::client_async(req, MaybeTlsStream::Plain(tcp)),
    )
    .await
    .map(|(ws, _)| ws)
}

/// Whether the connection is served: a WebSocket ping gets its pong (protocol messages
/// such as a greeting are skipped).
async fn alive(ws: &mut Ws) -> bool {
    if ws
        .send(Message::Ping(b"are you there".to_vec().into()))
        .await
        .is_err()
    {
        return false;
    }
    within("pong", async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Pong(p))) => return &p[..] == b"are you there",
                Some(Ok(Message::Close(_)) | Err(_)) | None => return false,
                Some(Ok(_)) => {}
            }
        }
    })
    .await
}

/// Checks that a connection over the cap is refused the way `t`'s protocol does.
async fn assert_refused(t: &Target, res: Result<Ws, tungstenite::Error>) {
    match (&t.refused, res) {
        (Refused::Http(status), Err(tungstenite::Error::Http(resp))) => {
            assert_eq!(resp.status().as_u16(), *status, "{}", t.name);
            let body = resp.body().as_deref().unwrap_or_default();
            assert!(
                String::from_utf8_lossy(body).contains("too many connections from this address"),
                "{}: {body:?}",
                t.name
            );
        }
        (Refused::Close(code, frame), Ok(mut ws)) => {
            let mut texts = Vec::new();
            let close = within("refusal", async {
                loop {
                    match ws.next().await {
                        Some(Ok(Message::Close(f))) => return f,
                        Some(Ok(Message::Text(t))) => texts.push(t.to_string()),
                        Some(Ok(_)) => {}
                        Some(Err(_)) | None => return None,
                    }
                }
            })
            .await
            .unwrap_or_else(|| panic!("{}: no close frame", t.name));
            assert_eq!(u16::from(close.code), *code, "{}", t.name);
            assert_eq!(close.reason.as_str(), "too-many-connections", "{}", t.name);
            match frame {
                Some(needle) => assert!(
                    texts.len() == 1 && texts[0].contains(needle),
                    "{}: {texts:?}",
                    t.name
                ),
                None => assert!(texts.is_empty(), "{}: {texts:?}", t.name),
            }
        }
        (want, Ok(_)) => panic!("{}: expected {want:?}, got a connection", t.name),
        (want, Err(e)) => panic!("{}: expected {want:?}, got {e}", t.name),
    }
}

#[tokio::test]
async fn one_address_holding_its_cap_locks_no_one_else_out_of_any_server() {
    let (targets, _dir) = start_all().await;
    for t in &targets {
        let mut held = Vec::new();
        for i in 0..OPEN_CAP {
            let ws = ws_from("127.0.0.1", t)
                .await
                .unwrap_or_else(|e| panic!("{}: connection {i} under the cap: {e}", t.name));
            held.push(ws);
        }
        assert_refused(t, ws_from("127.0.0.1", t).await).await;
        let mut other = ws_from("127.0.0.2", t)
            .await
            .unwrap_or_else(|e| panic!("{}: another address: {e}", t.name));
        assert!(
            alive(&mut other).await,
            "{}: another address not served",
            t.name
        );
        for ws in &mut held {
            assert!(alive(ws).await, "{}: a held connection was dropped", t.name);
        }
    }
}

#[tokio::test]
async fn half_open_handshakes_drop_no_established_connection_and_block_no_other_address() {
    let (targets, _dir) = start_all().await;
    for t in &targets {
        let mut established = ws_from("127.0.0.1", t)
            .await
            .unwrap_or_else(|e| panic!("{}: established: {e}", t.name));
        let mut flood = Vec::new();
        for _ in 0..(PENDING_CAP * 10) {
            let mut s = tcp_from("127.0.0.1", t.addr).await;
            // The server may already have refused it: ignore write errors.
            let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").await;
            flood.push(s);
        }
        // The last one is over the cap: answered and dropped at once.
        let mut answer = Vec::new();
        let last = flood.last_mut().expect("flood");
        let _ = within("refused handshake", last.read_to_end(&mut answer)).await;
        assert!(
            answer.is_empty() || answer.starts_with(b"HTTP/1.1 429 "),
            "{}: {:?}",
            t.name,
            String::from_utf8_lossy(&answer)
        );
        assert!(
            alive(&mut established).await,
            "{}: established dropped",
            t.name
        );
        let mut other = ws_from("127.0.0.2", t)
            .await
            .unwrap_or_else(|e| panic!("{}: another address during the flood: {e}", t.name));
        assert!(
            alive(&mut other).await,
            "{}: another address not served",
            t.name
        );
        // The flooding address cannot start one more handshake (loopback is not exempt).
        assert!(
            ws_from("127.0.0.1", t).await.is_err(),
            "{}: pending cap not applied",
            t.name
        );
    }
}

#[tokio::test]
async fn plain_http_gets_426_naming_the_protocol_and_path_from_every_server() {
    let (targets, _dir) = start_all().await;
    for t in &targets {
        let mut s = tcp_from("127.0.0.1", t.addr).await;
        s.write_all(
            format!(
                "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\n\r\n",
                t.path, t.addr
            )
            .as_bytes(),
        )
        .await
        .expect("request");
        let mut answer = Vec::new();
        within("426", s.read_to_end(&mut answer))
            .await
            .expect("read");
        let answer = String::from_utf8(answer).expect("utf-8");
        let (head, body) = answer.split_once("\r\n\r\n").expect("head and body");
        assert!(
            head.starts_with("HTTP/1.1 426 Upgrade Required\r\n"),
            "{}: {head}",
            t.name
        );
        assert_eq!(
            body,
            format!(
                "This is the {} WebSocket endpoint at {}; connect to it with a WebSocket client.\n",
                t.protocol, t.path
            ),
            "{}",
            t.name
        );
    }
}

/// Issue 14, section 1: the mock Chopsticks agent with a wrong runner secret is rejected with
/// 1008 right after its hello, every time. It must not come back once a second forever: each
/// reconnect waits longer (1 s, 2 s, 4 s, 8 s, plus up to 0.5 s jitter). Simulated time.
#[tokio::test(start_paused = true)]
async fn a_rejected_chopsticks_agent_backs_off_instead_of_reconnecting_every_second() {
    let config = ControllerConfig::default().with_runner_secret("right");
    let app = chopsticks::controller_app::start("127.0.0.1:0", config, |_| {})
        .await
        .expect("controller");
    let url = format!("ws://{}", app.local_addr());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let agent = agentwire::chopsticks::AgentConfig::new("agent-rejected")
        .with_guilds(["g1"])
        .with_runner_secret("wrong");
    let running = chopsticks::agent_app::start(&url, agent, true, move |_, log| {
        if matches!(log, chopsticks::agent_app::AgentLog::Connected) {
            let _ = tx.send(tokio::time::Instant::now());
        }
    })
    .expect("agent");
    let mut opens = Vec::new();
    for _ in 0..5 {
        opens.push(
            tokio::time::timeout(Duration::from_secs(120), rx.recv())
                .await
                .expect("a reconnect within 120 s (simulated)")
                .expect("agent running"),
        );
    }
    let gaps: Vec<u128> = opens
        .windows(2)
        .map(|w| (w[1] - w[0]).as_millis())
        .collect();
    for (gap, base) in gaps.iter().zip([1000u128, 2000, 4000, 8000]) {
        assert!(
            *gap >= base && *gap < base + 1000,
            "gaps {gaps:?}: expected about 1 s, 2 s, 4 s, 8 s"
        );
    }
    running.handle.shutdown().await;
}

/// The llmrtc client owns its reconnect policy (a `Dialer` whose tries restart at every
/// `ready`): a server that says `ready` and then closes 1008 at once must still not get it
/// back once a second forever; the transport's backoff is a floor under the machine's
/// delays after such early closes. Simulated time.
#[tokio::test(start_paused = true)]
async fn a_rejected_llmrtc_client_backs_off_instead_of_reconnecting_every_second() {
    use tokio_tungstenite::tungstenite::protocol::frame::{coding, CloseFrame};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("ws://{}/", listener.local_addr().expect("addr"));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        for n in 0..16 {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let _ = tx.send(tokio::time::Instant::now());
            let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
                continue;
            };
            let ready = format!(r#"{{"type":"ready","id":"session-{n}","protocolVersion":1}}"#);
            let _ = ws.send(Message::text(ready)).await;
            let close = CloseFrame {
                code: coding::CloseCode::Policy,
                reason: "rejected".into(),
            };
            let _ = ws.send(Message::Close(Some(close))).await;
            while let Some(Ok(_)) = ws.next().await {}
        }
    });
    let client = llmrtc::client_app::LlmrtcClientApp::start(
        &url,
        agentwire::llmrtc::ClientConfig::default(),
        7,
    )
    .await
    .expect("client");
    let mut opens = Vec::new();
    for _ in 0..5 {
        opens.push(
            tokio::time::timeout(Duration::from_secs(120), rx.recv())
                .await
                .expect("a reconnect within 120 s (simulated)")
                .expect("server running"),
        );
    }
    let gaps: Vec<u128> = opens
        .windows(2)
        .map(|w| (w[1] - w[0]).as_millis())
        .collect();
    for (gap, base) in gaps.iter().zip([1000u128, 2000, 4000, 8000]) {
        assert!(
            *gap >= base && *gap < base + 1000,
            "gaps {gaps:?}: expected about 1 s, 2 s, 4 s, 8 s"
        );
    }
    client.handle.shutdown().await;
}

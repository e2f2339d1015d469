//! Per-address caps and plain HTTP, over real loopback sockets. Loopback is not exempt:
//! 127.0.0.1 plays the abusive address and 127.0.0.2 (also loopback on Linux) everyone else.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use agentwire_core::{CloseCode, FrameBuf};
use agentwire_tokio::{Refusal, Server, ServerConfig};
use common::*;
use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::MaybeTlsStream;

async fn server(mut config: ServerConfig) -> (Server<TestMachine>, agentwire_tokio::Events<Ev>) {
    config.limits.close_timeout = Duration::from_millis(500);
    Server::bind("127.0.0.1:0", TestMachine::echo(), config)
        .await
        .expect("bind")
}

/// A TCP connection to `to` from the loopback address `from` (e.g. "127.0.0.2").
async fn tcp_from(from: &str, to: SocketAddr) -> TcpStream {
    let sock = TcpSocket::new_v4().expect("socket");
    sock.bind(format!("{from}:0").parse().expect("addr"))
        .expect("bind source");
    within(10, "tcp connect", sock.connect(to))
        .await
        .expect("connect")
}

/// A WebSocket client connecting from `from`.
async fn ws_from(from: &str, to: SocketAddr) -> Result<RawWs, tungstenite::Error> {
    let tcp = tcp_from(from, to).await;
    let url = format!("ws://{to}/");
    within(
        10,
        "upgrade",
        tokio_tungstenite::client_async(url, MaybeTlsStream::Plain(tcp)),
    )
    .await
    .map(|(ws, _)| ws)
}

/// The HTTP status of a refused upgrade.
fn status(res: Result<RawWs, tungstenite::Error>) -> u16 {
    match res {
        Err(tungstenite::Error::Http(resp)) => resp.status().as_u16(),
        Err(e) => panic!("expected an HTTP refusal, got {e}"),
        Ok(_) => panic!("expected an HTTP refusal, got a connection"),
    }
}

#[tokio::test]
async fn one_address_at_its_connection_cap_does_not_lock_out_another() {
    let config = ServerConfig::default()
        .with_max_connections(100)
        .with_max_connections_per_address(3);
    let (server, mut events) = server(config).await;
    let addr = server.local_addr();
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(ws_from("127.0.0.1", addr).await.expect("under the cap"));
        next_connected(&mut events).await;
    }
    // The fourth from the same address is refused (default: HTTP 429) ...
    assert_eq!(status(ws_from("127.0.0.1", addr).await), 429);
    // ... another address still gets through and is served ...
    let mut other = ws_from("127.0.0.2", addr).await.expect("other address");
    let (_, peer) = next_connected(&mut events).await;
    assert_eq!(
        peer.remote_addr.map(|a| a.ip().to_string()).as_deref(),
        Some("127.0.0.2")
    );
    assert_eq!(
        round_trip(&mut other, Message::text("hi")).await,
        Message::text("hi")
    );
    // ... and a slot freed by the first address is its own again.
    drop(held.remove(0));
    next_matching(&mut events, "disconnect", |e| {
        matches!(e, Ev::Disconnected(_))
    })
    .await;
    let mut again = ws_from("127.0.0.1", addr).await.expect("slot freed");
    assert_eq!(
        round_trip(&mut again, Message::text("back")).await,
        Message::text("back")
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_close_refusal_sends_the_protocol_frame_and_code_and_the_machine_never_sees_it() {
    let refusal = Refusal::close(CloseCode::TRY_AGAIN_LATER, "too-many-connections")
        .with_frame(FrameBuf::text(r#"{"error":"full"}"#));
    let config = ServerConfig::default()
        .with_max_connections_per_address(1)
        .with_address_refusal(refusal);
    let (server, mut events) = server(config).await;
    let addr = server.local_addr();
    let mut first = ws_from("127.0.0.1", addr).await.expect("first");
    next_connected(&mut events).await;
    let mut second = ws_from("127.0.0.1", addr)
        .await
        .expect("upgraded, then refused");
    assert_eq!(
        next_data(&mut second).await,
        Message::text(r#"{"error":"full"}"#)
    );
    match next_data(&mut second).await {
        Message::Close(Some(f)) => {
            assert_eq!(u16::from(f.code), 1013);
            assert_eq!(f.reason.as_str(), "too-many-connections");
        }
        other => panic!("expected a close frame, got {other:?}"),
    }
    let seen = server
        .handle()
        .call(|m: &mut TestMachine, _| m.conns.len())
        .await
        .expect("call");
    assert_eq!(seen, 1, "the refused connection reached the machine");
    assert_eq!(
        round_trip(&mut first, Message::text("still here")).await,
        Message::text("still here")
    );
    server.shutdown().await;
}

#[tokio::test]
async fn half_open_handshakes_from_one_address_drop_nobody_else() {
    // A small total pending cap, so that without a per-address cap the flood fills it.
    let mut config = ServerConfig::default()
        .with_max_pending_handshakes(64)
        .with_max_pending_handshakes_per_address(16);
    config.limits.handshake_timeout = Duration::from_secs(60);
    let (server, mut events) = server(config).await;
    let addr = server.local_addr();
    let mut established = ws_from("127.0.0.1", addr).await.expect("established");
    next_connected(&mut events).await;
    // 300 half-open handshakes from 127.0.0.1, each holding a partial request.
    let mut flood = Vec::new();
    for _ in 0..300 {
        let mut s = tcp_from("127.0.0.1", addr).await;
        // A refused socket may already be closed by the server: ignore write errors.
        let _ = s.write_all(b"GET / HTTP/1.1\r\n").await;
        flood.push(s);
    }
    // The excess was answered at once with 429 (the last socket is over the cap).
    let mut answer = Vec::new();
    let last = flood.last_mut().expect("flood");
    let _ = within(10, "429", last.read_to_end(&mut answer)).await;
    assert!(
        answer.starts_with(b"HTTP/1.1 429 "),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );
    // The established connection is untouched ...
    assert_eq!(
        round_trip(&mut established, Message::text("alive")).await,
        Message::text("alive")
    );
    // ... another address connects and is served ...
    let mut other = ws_from("127.0.0.2", addr).await.expect("other address");
    assert_eq!(
        round_trip(&mut other, Message::text("hello")).await,
        Message::text("hello")
    );
    // ... while the flooding address itself is refused (loopback is not exempt).
    assert!(ws_from("127.0.0.1", addr).await.is_err());
    drop(flood);
    server.shutdown().await;
}

#[tokio::test]
async fn plain_http_gets_426_naming_the_protocol_and_path() {
    let config = ServerConfig::default().with_endpoint("test-proto", "/ws");
    let (server, mut events) = server(config).await;
    let mut s = tcp_from("127.0.0.1", server.local_addr()).await;
    s.write_all(
        b"GET /ws HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8\r\nAccept: */*\r\n\r\n",
    )
    .await
    .expect("request");
    let mut answer = Vec::new();
    within(10, "answer", s.read_to_end(&mut answer))
        .await
        .expect("read");
    let answer = String::from_utf8(answer).expect("utf-8");
    let (head, body) = answer.split_once("\r\n\r\n").expect("head and body");
    assert!(
        head.starts_with("HTTP/1.1 426 Upgrade Required\r\n"),
        "{head}"
    );
    assert!(head.contains("\r\nUpgrade: websocket\r\n"), "{head}");
    let length = format!("Content-Length: {}", body.len());
    assert!(head.split("\r\n").any(|l| l == length), "{head}");
    assert_eq!(
        body,
        "This is the test-proto WebSocket endpoint at /ws; connect to it with a WebSocket client.\n"
    );
    // A WebSocket client is still served.
    let mut ws = ws_from("127.0.0.1", server.local_addr())
        .await
        .expect("upgrade");
    assert_eq!(
        round_trip(&mut ws, Message::text("x")).await,
        Message::text("x")
    );
    next_connected(&mut events).await;
    let closed = ws.close(None).await;
    assert!(closed.is_ok());
    while let Some(Ok(_)) = ws.next().await {}
    server.shutdown().await;
}

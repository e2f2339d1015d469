//! The address filter (an IP allowlist) of a server and of a router's listener, over real
//! sockets on 127.0.0.1.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use agentwire_tokio::{ListenerConfig, Router, Server, ServerConfig};
use common::{raw_client, round_trip, within, TestMachine};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;

const UPGRADE: &str = "GET /a HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

/// Sends an upgrade request on a fresh TCP connection to `addr` and reads until the server
/// ends the connection or answers: the bytes received.
async fn answer_to_upgrade(addr: SocketAddr) -> Vec<u8> {
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    // The server may already have closed the socket; a failed write is part of the answer.
    let _ = tcp.write_all(UPGRADE.as_bytes()).await;
    let mut answer = vec![0u8; 512];
    let n = within(10, "answer or close", tcp.read(&mut answer))
        .await
        .unwrap_or(0);
    answer.truncate(n);
    answer
}

/// A filter allowing only `allowed`, counting the peers it saw.
fn only(allowed: &'static str, seen: Arc<AtomicUsize>) -> impl Fn(SocketAddr) -> bool {
    move |peer: SocketAddr| {
        seen.fetch_add(1, Ordering::Relaxed);
        peer.ip().to_string() == allowed
    }
}

#[tokio::test]
async fn a_server_closes_a_refused_address_before_any_http() {
    let seen = Arc::new(AtomicUsize::new(0));
    let config = ServerConfig::default().with_address_filter(only("127.0.0.2", seen.clone()));
    let (server, _events) = Server::bind("127.0.0.1:0", TestMachine::echo(), config)
        .await
        .expect("bind");
    let answer = answer_to_upgrade(server.local_addr()).await;
    assert!(
        answer.is_empty(),
        "nothing is answered, got {:?}",
        String::from_utf8_lossy(&answer)
    );
    assert_eq!(seen.load(Ordering::Relaxed), 1);

    let config = ServerConfig::default().with_address_filter(only("127.0.0.1", seen.clone()));
    let (open, _events) = Server::bind("127.0.0.1:0", TestMachine::echo(), config)
        .await
        .expect("bind");
    let mut ws = raw_client(&format!("ws://{}/a", open.local_addr())).await;
    assert_eq!(
        round_trip(&mut ws, Message::text("hi")).await,
        Message::text("hi")
    );
    drop(ws);
    server.shutdown().await;
    open.shutdown().await;
}

#[tokio::test]
async fn a_router_closes_a_refused_address_before_any_http() {
    let seen = Arc::new(AtomicUsize::new(0));
    let refusing = ListenerConfig::default().with_address_filter(only("127.0.0.2", seen.clone()));
    let mut router = Router::new(refusing);
    let _route = router
        .route("/a", TestMachine::echo(), ServerConfig::default())
        .expect("route");
    let listener = router.bind("127.0.0.1:0").await.expect("bind");
    assert!(answer_to_upgrade(listener.local_addr()).await.is_empty());
    assert_eq!(seen.load(Ordering::Relaxed), 1);
    listener.shutdown().await;

    let allowing = ListenerConfig::default().with_address_filter(only("127.0.0.1", seen.clone()));
    let mut router = Router::new(allowing);
    let _route = router
        .route("/a", TestMachine::echo(), ServerConfig::default())
        .expect("route");
    let listener = router.bind("127.0.0.1:0").await.expect("bind");
    let mut ws = raw_client(&format!("ws://{}/a", listener.local_addr())).await;
    assert_eq!(
        round_trip(&mut ws, Message::text("hi")).await,
        Message::text("hi")
    );
    assert_eq!(seen.load(Ordering::Relaxed), 2);
    drop(ws);
    listener.shutdown().await;
}

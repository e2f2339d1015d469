//! Transport counters ([`Handle::stats`], [`Listener::stats`]) over real loopback sockets.

mod common;

use std::time::Duration;

use agentwire_tokio::{ListenerConfig, Router, Server, ServerConfig};
use common::*;
use futures_util::SinkExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

#[tokio::test]
async fn a_servers_counters_follow_its_connections_frames_closes_and_refusals() {
    let mut config = ServerConfig::default().with_max_connections_per_address(2);
    config.limits.close_timeout = Duration::from_millis(500);
    config.limits = config
        .limits
        .with_max_message_size(64)
        .with_max_frame_size(64);
    let (server, mut events) = Server::bind("127.0.0.1:0", TestMachine::echo(), config)
        .await
        .expect("bind");
    let url = format!("ws://{}", server.local_addr());
    let stats = || server.handle().stats();
    assert_eq!(stats(), Default::default());

    let mut ws = raw_client(&url).await;
    next_connected(&mut events).await;
    assert_eq!(
        round_trip(&mut ws, Message::text("hello")).await,
        Message::text("hello")
    );
    let three = Message::binary(vec![1u8, 2, 3]);
    assert_eq!(round_trip(&mut ws, three.clone()).await, three);
    let s = stats();
    assert_eq!((s.connections_open, s.connections_accepted), (1, 1));
    assert_eq!((s.frames_in, s.bytes_in), (2, 8));
    assert_eq!((s.frames_out, s.bytes_out), (2, 8));

    // Too big: the transport closes it with 1009 and counts a bad frame.
    let mut big = raw_client(&url).await;
    let (big_conn, _) = next_connected(&mut events).await;
    big.send(Message::text("x".repeat(100)))
        .await
        .expect("send");
    assert_eq!(close_code(&mut big).await, Some(1009));
    disconnected(&mut events, big_conn).await;
    let s = stats();
    assert_eq!(s.drops.bad_frame, 1);
    assert_eq!(s.closes.get(1009), 1);
    assert_eq!((s.connections_open, s.connections_accepted), (1, 2));

    // Over the per-address cap (2): refused with the default HTTP 429, never a connection.
    let _second = raw_client(&url).await;
    next_connected(&mut events).await;
    let refused = tokio_tungstenite::connect_async(url.as_str()).await;
    assert!(
        refused.is_err(),
        "a third connection from one address got through"
    );
    let s = stats();
    assert_eq!(s.drops.address_cap, 1);
    assert_eq!((s.connections_open, s.connections_accepted), (2, 3));

    // Shutdown: every open connection gets 1001, counted once each.
    let handle = server.handle();
    drop(events);
    server.shutdown().await;
    assert_eq!(close_code(&mut ws).await, Some(1001));
    let s = handle.stats();
    assert_eq!(s.closes.get(1001), 2);
    assert_eq!(s.closes.total(), 3);
    assert_eq!(s.connections_open, 0);
}

#[tokio::test]
async fn a_listener_counts_404s_and_each_route_counts_its_own_traffic() {
    let mut router = Router::new(ListenerConfig::default());
    let mut quick = ServerConfig::default();
    // The client below stops reading before shutdown: do not wait 5 s for its close reply.
    quick.limits.close_timeout = Duration::from_millis(200);
    let (a, mut a_events) = router
        .route("/a", TestMachine::echo(), quick)
        .expect("route a");
    let (b, _b_events) = router
        .route("/b", TestMachine::echo(), ServerConfig::default())
        .expect("route b");
    let listener = router.bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr();

    let mut ws = raw_client(&format!("ws://{addr}/a")).await;
    next_connected(&mut a_events).await;
    assert_eq!(
        round_trip(&mut ws, Message::text("hi")).await,
        Message::text("hi")
    );

    let mut tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    tcp.write_all(b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let mut answer = String::new();
    within(10, "404", tcp.read_to_string(&mut answer))
        .await
        .expect("read");
    assert!(answer.starts_with("HTTP/1.1 404 "), "{answer}");

    assert_eq!(listener.stats().drops.not_found, 1);
    assert_eq!(listener.stats().connections_accepted, 0);
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!(
        (sa.connections_accepted, sa.frames_in, sa.bytes_out),
        (1, 1, 2)
    );
    assert_eq!((sb.connections_accepted, sb.frames_in), (0, 0));
    listener.shutdown().await;
    assert_eq!(a.stats().closes.get(1001), 1);
}

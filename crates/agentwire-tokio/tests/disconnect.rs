//! What the machine learns about its peers over real sockets: how each connection ended
//! (`handle_disconnect_with`), WebSocket pongs (`handle_pong`), the upgrade's path and
//! query; and that its events never wait for a socket write.

mod common;

use std::time::{Duration, Instant};

use agentwire_core::{
    CloseCode, ConnId, Disconnect, Frame, FrameBuf, Machine, Outbox, Output, PeerInfo,
};
use agentwire_tokio::{Client, ClientConfig, Events, Limits, Server, ServerConfig};
use common::{close_code, raw_client, within};
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode as WsCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;

/// What [`Ends`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Connected(ConnId, PeerInfo),
    Text(ConnId, String),
    Pong(ConnId),
    Ended(ConnId, Disconnect),
}

/// Reports connects, texts, pongs and ends; closes a connection that sends "close-me" with
/// 4002 "asked"; while `flood` names a connection, every text from another one first sends
/// `flood_frame` to it.
#[derive(Default)]
struct Ends {
    out: Outbox<Ev>,
    flood: Option<(ConnId, bytes::Bytes)>,
}

impl Machine for Ends {
    type Event = Ev;
    fn handle_connect(&mut self, conn: ConnId, peer: &PeerInfo, _: Instant) {
        self.out.event(Ev::Connected(conn, peer.clone()));
    }
    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, _: Instant) {
        let Frame::Text(t) = frame else { return };
        if t == "close-me" {
            self.out.close(conn, CloseCode(4002), "asked");
            return;
        }
        if let Some((target, frame)) = &self.flood {
            if *target != conn {
                self.out.send(*target, FrameBuf::Binary(frame.clone()));
            }
        }
        self.out.event(Ev::Text(conn, t.to_owned()));
    }
    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        self.handle_disconnect_with(conn, &Disconnect::Ended, now);
    }
    fn handle_disconnect_with(&mut self, conn: ConnId, how: &Disconnect, _: Instant) {
        self.out.event(Ev::Ended(conn, how.clone()));
    }
    fn handle_pong(&mut self, conn: ConnId, _: Instant) {
        self.out.event(Ev::Pong(conn));
    }
    fn handle_timeout(&mut self, _: Instant) {}
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn poll_output(&mut self) -> Option<Output<Ev>> {
        self.out.pop()
    }
}

async fn serve(limits: Limits) -> (Server<Ends>, Events<Ev>, String) {
    let config = ServerConfig::default().with_limits(limits);
    let (server, events) = Server::bind("127.0.0.1:0", Ends::default(), config)
        .await
        .expect("bind");
    let url = format!("ws://{}", server.local_addr());
    (server, events, url)
}

/// Short close waits (peers here often stop reading) and no pings unless a test wants them.
fn quiet() -> Limits {
    Limits::default()
        .with_ping_interval(None)
        .with_close_timeout(Duration::from_millis(300))
}

async fn next(events: &mut Events<Ev>, what: &str) -> Ev {
    within(20, what, events.recv())
        .await
        .unwrap_or_else(|| panic!("events ended before {what}"))
}

async fn connected(events: &mut Events<Ev>) -> (ConnId, PeerInfo) {
    match next(events, "a connect").await {
        Ev::Connected(c, p) => (c, p),
        other => panic!("expected a connect, got {other:?}"),
    }
}

/// How `conn` ended (other events are skipped).
async fn ended(events: &mut Events<Ev>, conn: ConnId) -> Disconnect {
    within(20, "the end", async {
        loop {
            match events.recv().await {
                Some(Ev::Ended(c, how)) if c == conn => return how,
                Some(_) => {}
                None => panic!("events ended"),
            }
        }
    })
    .await
}

#[tokio::test]
async fn the_peers_close_frame_reaches_the_machine_with_its_code_and_reason() {
    let (server, mut events, url) = serve(quiet()).await;
    let mut ws = raw_client(&format!("{url}/ws?token=abc&x=1")).await;
    let (conn, peer) = connected(&mut events).await;
    assert_eq!(peer.path, "/ws");
    assert_eq!(peer.query.as_deref(), Some("token=abc&x=1"));
    ws.close(Some(CloseFrame {
        code: WsCode::from(4001),
        reason: "bye now".into(),
    }))
    .await
    .expect("close");
    assert_eq!(
        ended(&mut events, conn).await,
        Disconnect::peer(CloseCode(4001), "bye now")
    );

    // A close frame without a payload: 1005, no reason.
    let mut ws = raw_client(&format!("{url}/plain")).await;
    let (conn, peer) = connected(&mut events).await;
    assert_eq!((peer.path.as_str(), peer.query), ("/plain", None));
    ws.close(None).await.expect("close");
    assert_eq!(
        ended(&mut events, conn).await,
        Disconnect::peer(CloseCode::NO_STATUS, "")
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_socket_that_just_ends_is_reported_as_ended() {
    let (server, mut events, url) = serve(quiet()).await;
    let ws = raw_client(&url).await;
    let (conn, _) = connected(&mut events).await;
    drop(ws); // the TCP socket closes without a close frame
    assert_eq!(ended(&mut events, conn).await, Disconnect::Ended);
    server.shutdown().await;
}

#[tokio::test]
async fn closes_from_this_side_are_reported_as_local_with_what_was_sent() {
    let (server, mut events, url) = serve(quiet()).await;
    let mut ws = raw_client(&url).await;
    let (conn, _) = connected(&mut events).await;
    ws.send(Message::text("close-me")).await.expect("send");
    assert_eq!(close_code(&mut ws).await, Some(4002));
    assert_eq!(
        ended(&mut events, conn).await,
        Disconnect::local(CloseCode(4002), "asked")
    );

    // The server's shutdown closes the rest with 1001 "going away".
    let mut ws = raw_client(&url).await;
    let (conn, _) = connected(&mut events).await;
    let peer = tokio::spawn(async move { close_code(&mut ws).await });
    server.shutdown().await;
    assert_eq!(peer.await.expect("join"), Some(1001));
    assert_eq!(
        ended(&mut events, conn).await,
        Disconnect::local(CloseCode::GOING_AWAY, "going away")
    );
}

#[tokio::test]
async fn a_peer_that_does_not_read_is_reported_as_a_slow_reader() {
    let limits = quiet()
        .with_send_queue_bytes(256 << 10)
        .with_send_queue_frames(1024);
    let (server, mut events, url) = serve(limits).await;
    let _stalled = raw_client(&url).await; // never reads
    let (conn, _) = connected(&mut events).await;
    let chunk = bytes::Bytes::from(vec![1u8; 64 << 10]);
    let handle = server.handle();
    let mut how = None;
    // Loopback buffers hold a few MiB; 4,000 × 64 KiB is far more than they can.
    for _ in 0..4000 {
        let c = chunk.clone();
        handle
            .call(move |m: &mut Ends, _| m.out.send(conn, FrameBuf::Binary(c)))
            .await
            .expect("call");
        if let Some(Ev::Ended(c, h)) = events.try_recv() {
            assert_eq!(c, conn);
            how = Some(h);
            break;
        }
    }
    let code = CloseCode::TRY_AGAIN_LATER;
    assert_eq!(how, Some(Disconnect::SlowReader { code }));
    server.shutdown().await;
}

#[tokio::test]
async fn a_silent_peer_is_reported_as_a_pong_timeout() {
    let limits = quiet()
        .with_ping_interval(Some(Duration::from_millis(100)))
        .with_pong_timeout(Duration::from_millis(400));
    let (server, mut events, url) = serve(limits).await;
    let _silent = raw_client(&url).await; // never reads, so never answers a ping
    let (conn, _) = connected(&mut events).await;
    assert_eq!(ended(&mut events, conn).await, Disconnect::PongTimeout);
    server.shutdown().await;
}

#[tokio::test]
async fn a_refused_frame_is_reported_with_the_code_sent() {
    let (server, mut events, url) = serve(quiet().with_max_message_size(1024)).await;
    let mut ws = raw_client(&url).await;
    let (conn, _) = connected(&mut events).await;
    ws.send(Message::text("x".repeat(4096)))
        .await
        .expect("send");
    assert_eq!(close_code(&mut ws).await, Some(1009));
    assert_eq!(
        ended(&mut events, conn).await,
        Disconnect::BadFrame {
            code: CloseCode::TOO_BIG
        }
    );
    server.shutdown().await;
}

#[tokio::test]
async fn pongs_reach_the_machine_in_order_with_the_frames() {
    let (server, mut events, url) = serve(quiet()).await;
    let mut ws = raw_client(&url).await;
    let (conn, _) = connected(&mut events).await;
    // An unsolicited pong between two frames comes between them.
    ws.send(Message::text("a")).await.expect("send");
    ws.send(Message::Pong(b"x".to_vec().into()))
        .await
        .expect("send");
    ws.send(Message::text("b")).await.expect("send");
    assert_eq!(next(&mut events, "a").await, Ev::Text(conn, "a".into()));
    assert_eq!(next(&mut events, "the pong").await, Ev::Pong(conn));
    assert_eq!(next(&mut events, "b").await, Ev::Text(conn, "b".into()));
    server.shutdown().await;

    // Answers to the driver's own pings arrive too, while the peer reads.
    let limits = quiet().with_ping_interval(Some(Duration::from_millis(50)));
    let (server, mut events, url) = serve(limits).await;
    let mut ws = raw_client(&url).await;
    let (conn, _) = connected(&mut events).await;
    let reading = tokio::spawn(async move { while let Some(Ok(_)) = ws.next().await {} });
    assert_eq!(next(&mut events, "a ping's pong").await, Ev::Pong(conn));
    assert_eq!(next(&mut events, "another").await, Ev::Pong(conn));
    server.shutdown().await;
    reading.abort();
}

#[tokio::test]
async fn the_client_driver_reports_pongs_the_servers_close_and_the_urls_query() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let peer = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.expect("accept");
        let mut ws = tokio_tungstenite::accept_async(tcp).await.expect("upgrade");
        ws.send(Message::Pong(Vec::new().into()))
            .await
            .expect("pong");
        ws.send(Message::text("hi")).await.expect("text");
        ws.close(Some(CloseFrame {
            code: WsCode::from(4003),
            reason: "go".into(),
        }))
        .await
        .expect("close");
        while let Some(Ok(_)) = ws.next().await {}
    });
    let url = format!("ws://{addr}/agent?room=7");
    let config = ClientConfig::default()
        .with_reconnect(false)
        .with_limits(quiet());
    let (handle, mut events) = Client::connect(&url, Ends::default(), config).expect("connect");
    let (conn, info) = connected(&mut events).await;
    assert_eq!(info.path, "/agent");
    assert_eq!(info.query.as_deref(), Some("room=7"));
    assert_eq!(next(&mut events, "the pong").await, Ev::Pong(conn));
    assert_eq!(next(&mut events, "hi").await, Ev::Text(conn, "hi".into()));
    assert_eq!(
        next(&mut events, "the end").await,
        Ev::Ended(conn, Disconnect::peer(CloseCode(4003), "go"))
    );
    within(10, "peer", peer).await.expect("join");
    handle.shutdown().await;
}

/// Each text from the reading peer makes the machine queue 64 KiB to a peer that never
/// reads, then emit an event. The non-reading peer's writer is stuck on a full socket long
/// before the last text, and every event still reaches `Events`, in order.
#[tokio::test]
async fn events_do_not_wait_behind_a_peer_that_does_not_read() {
    const TEXTS: usize = 500;
    const CHUNK: usize = 64 << 10;
    let limits = quiet()
        .with_send_queue_bytes(TEXTS * CHUNK + 1)
        .with_send_queue_frames(TEXTS + 1);
    let (server, mut events, url) = serve(limits).await;
    let mut stalled_ws = raw_client(&url).await; // reads nothing until the end
    let (stalled, _) = connected(&mut events).await;
    let chunk = bytes::Bytes::from(vec![2u8; CHUNK]);
    server
        .handle()
        .call(move |m: &mut Ends, _| m.flood = Some((stalled, chunk)))
        .await
        .expect("call");
    let mut ws = raw_client(&url).await;
    let (talker, _) = connected(&mut events).await;
    let sender = tokio::spawn(async move {
        for i in 0..TEXTS {
            ws.feed(Message::text(i.to_string())).await.expect("send");
        }
        ws.flush().await.expect("flush");
        ws
    });
    for i in 0..TEXTS {
        assert_eq!(
            next(&mut events, "the next event").await,
            Ev::Text(talker, i.to_string())
        );
    }
    // The stalled peer's writer had not finished writing when the last event arrived (it
    // counts a batch once written; loopback buffers hold a few MiB, not 32 MiB).
    let total = (TEXTS * CHUNK) as u64;
    assert!(server.handle().stats().bytes_out < total);
    // Nothing was dropped: once the stalled peer reads, every frame arrives.
    let mut got = 0u64;
    within(20, "the stalled peer's frames", async {
        while got < total {
            match stalled_ws.next().await {
                Some(Ok(Message::Binary(b))) => got += b.len() as u64,
                Some(Ok(_)) => {}
                other => panic!("stalled peer: {other:?}"),
            }
        }
    })
    .await;
    let _ws = within(10, "sender", sender).await.expect("join");
    server.shutdown().await;
}

//! Server driver over real loopback sockets with real tokio-tungstenite peers.

mod common;

use std::time::Duration;

use agentwire_core::{CloseCode, FrameBuf};
use agentwire_tokio::{Accept, Limits, Reject, Server, ServerConfig, UpgradeRequest};
use common::*;
use futures_util::{SinkExt, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};

async fn echo_server(
    mut config: ServerConfig,
) -> (Server<TestMachine>, agentwire_tokio::Events<Ev>, String) {
    // Peers in these tests often stop reading; do not wait 5 s for their close replies.
    config.limits.close_timeout = Duration::from_millis(500);
    let (server, events) = Server::bind("127.0.0.1:0", TestMachine::echo(), config)
        .await
        .expect("bind");
    let url = format!("ws://{}", server.local_addr());
    (server, events, url)
}

#[tokio::test]
async fn echoes_text_and_binary_and_reports_the_path() {
    let (server, mut events, url) = echo_server(ServerConfig::default()).await;
    let mut ws = raw_client(&format!("{url}/echo?x=1")).await;
    let (conn, peer) = next_connected(&mut events).await;
    assert_eq!(peer.path, "/echo");
    assert!(peer.remote_addr.is_some());
    assert_eq!(
        round_trip(&mut ws, Message::text("hello")).await,
        Message::text("hello")
    );
    assert_eq!(
        round_trip(&mut ws, Message::binary(vec![1u8, 2, 3])).await,
        Message::binary(vec![1u8, 2, 3])
    );
    assert_eq!(
        next_matching(&mut events, "text", |e| matches!(e, Ev::Text(..))).await,
        Ev::Text(conn, "hello".into())
    );
    ws.close(None).await.expect("close");
    disconnected(&mut events, conn).await;
    server.shutdown().await;
}

#[tokio::test]
async fn call_runs_in_the_owner_task_and_its_frames_are_sent() {
    let (server, mut events, url) = echo_server(ServerConfig::default()).await;
    let mut ws = raw_client(&url).await;
    let (conn, _) = next_connected(&mut events).await;
    let handle = server.handle();
    let open = handle
        .call(move |m: &mut TestMachine, _now| {
            m.out.send(conn, FrameBuf::text("pushed"));
            m.conns.len()
        })
        .await
        .expect("call");
    assert_eq!(open, 1);
    assert_eq!(next_data(&mut ws).await, Message::text("pushed"));
    server.shutdown().await;
    assert!(handle.is_closed());
    assert!(handle.call(|_, _| ()).await.is_err());
}

#[tokio::test]
async fn hook_rejections_reach_the_client_as_http_statuses() {
    let hook = |req: &UpgradeRequest<'_>| match req.header("x-want").map(str::parse::<u16>) {
        Some(Ok(status)) => Err(Reject::new(status, "no")),
        _ => Ok(Accept::new()),
    };
    let (server, mut events, url) = echo_server(ServerConfig::default().with_hook(hook)).await;
    for status in [401u16, 426, 429, 503] {
        let mut req = url.as_str().into_client_request().expect("request");
        req.headers_mut()
            .insert("x-want", status.to_string().parse().expect("value"));
        match within(10, "rejection", tokio_tungstenite::connect_async(req)).await {
            Err(tungstenite::Error::Http(resp)) => assert_eq!(resp.status().as_u16(), status),
            other => panic!("expected HTTP {status}, got {:?}", other.map(|_| ())),
        }
    }
    // Still serving, and nothing reached the machine before this connect.
    let _ws = raw_client(&url).await;
    let first = within(10, "event", events.recv()).await.expect("event");
    assert!(matches!(first, Ev::Connected(..)), "{first:?}");
    server.shutdown().await;
}

#[tokio::test]
async fn hook_chosen_subprotocol_and_headers_reach_peer_info() {
    let hook = |req: &UpgradeRequest<'_>| {
        if req.offers("mcp.v1") {
            Ok(Accept::with_subprotocol("mcp.v1"))
        } else {
            Err(Reject::upgrade_required())
        }
    };
    let (server, mut events, url) = echo_server(ServerConfig::default().with_hook(hook)).await;
    let mut req = url.as_str().into_client_request().expect("request");
    req.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        "foo, mcp.v1".parse().expect("value"),
    );
    req.headers_mut()
        .insert("Authorization", "Bearer t0k".parse().expect("value"));
    let (mut ws, resp) = within(10, "connect", tokio_tungstenite::connect_async(req))
        .await
        .expect("connect");
    assert_eq!(
        resp.headers()
            .get("sec-websocket-protocol")
            .and_then(|v| v.to_str().ok()),
        Some("mcp.v1")
    );
    let (_, peer) = next_connected(&mut events).await;
    assert_eq!(peer.subprotocol.as_deref(), Some("mcp.v1"));
    assert_eq!(peer.header("authorization"), Some("Bearer t0k"));
    assert!(peer
        .headers
        .iter()
        .all(|(n, _)| *n == n.to_ascii_lowercase()));
    assert_eq!(
        round_trip(&mut ws, Message::text("x")).await,
        Message::text("x")
    );
    match within(10, "426", tokio_tungstenite::connect_async(url.as_str())).await {
        Err(tungstenite::Error::Http(resp)) => assert_eq!(resp.status().as_u16(), 426),
        other => panic!("expected 426, got {:?}", other.map(|_| ())),
    }
    server.shutdown().await;
}

#[tokio::test]
async fn max_connections_answers_503_and_frees_the_slot_on_disconnect() {
    let (server, mut events, url) =
        echo_server(ServerConfig::default().with_max_connections(1)).await;
    let mut first = raw_client(&url).await;
    let (conn, _) = next_connected(&mut events).await;
    match within(10, "503", tokio_tungstenite::connect_async(url.as_str())).await {
        Err(tungstenite::Error::Http(resp)) => assert_eq!(resp.status().as_u16(), 503),
        other => panic!("expected 503, got {:?}", other.map(|_| ())),
    }
    first.close(None).await.expect("close");
    disconnected(&mut events, conn).await;
    let mut again = raw_client(&url).await;
    assert_eq!(
        round_trip(&mut again, Message::text("ok")).await,
        Message::text("ok")
    );
    server.shutdown().await;
}

#[tokio::test]
async fn oversize_message_closes_with_1009_and_others_keep_working() {
    let limits = Limits::default()
        .with_max_message_size(1024)
        .with_max_frame_size(1024);
    let (server, mut events, url) = echo_server(ServerConfig::default().with_limits(limits)).await;
    let mut big = raw_client(&url).await;
    let (big_id, _) = next_connected(&mut events).await;
    let mut small = raw_client(&url).await;
    big.send(Message::text("y".repeat(2048)))
        .await
        .expect("send");
    assert_eq!(close_code(&mut big).await, Some(1009));
    disconnected(&mut events, big_id).await;
    assert_eq!(
        round_trip(&mut small, Message::text("fine")).await,
        Message::text("fine")
    );
    server.shutdown().await;
}

#[tokio::test]
async fn slow_reader_is_closed_while_a_reading_peer_keeps_going() {
    let limits = Limits::default()
        .with_send_queue_frames(64)
        .with_send_queue_bytes(1 << 20)
        .with_ping_interval(None);
    let (server, mut events, url) = echo_server(ServerConfig::default().with_limits(limits)).await;
    let handle = server.handle();
    let _stalled = raw_client(&url).await; // never read again
    let (slow, _) = next_connected(&mut events).await;
    let mut reader = raw_client(&url).await;
    let (fast, _) = next_connected(&mut events).await;
    let (count_tx, mut count_rx) = tokio::sync::watch::channel(0usize);
    let read_task = tokio::spawn(async move {
        let mut n = 0usize;
        while let Some(Ok(m)) = reader.next().await {
            if let Message::Binary(b) = m {
                n += b.len();
                count_tx.send_replace(n);
            }
            if n >= 1 << 40 {
                break;
            }
        }
        reader
    });
    let chunk = bytes::Bytes::from(vec![7u8; 32 << 10]);
    let mut sent_fast = 0usize;
    let mut killed = false;
    for _ in 0..4000 {
        let c = chunk.clone();
        handle
            .call(move |m: &mut TestMachine, _| {
                m.out.send(slow, FrameBuf::Binary(c.clone()));
                m.out.send(fast, FrameBuf::Binary(c));
            })
            .await
            .expect("call");
        sent_fast += chunk.len();
        while let Some(e) = events.try_recv() {
            assert_ne!(e, Ev::Disconnected(fast), "the reading peer was closed");
            if e == Ev::Disconnected(slow) {
                killed = true;
            }
        }
        if killed {
            break;
        }
        // Let the fast reader keep up (no sleeping: wait for its progress).
        let want = sent_fast.saturating_sub(2 << 20);
        within(10, "reader progress", count_rx.wait_for(|n| *n >= want))
            .await
            .expect("reader alive");
    }
    assert!(killed, "the stalled peer was never closed");
    within(10, "all frames", count_rx.wait_for(|n| *n >= sent_fast))
        .await
        .expect("reader alive");
    read_task.abort();
    server.shutdown().await;
}

#[tokio::test]
async fn oversize_handshake_headers_are_refused_and_slow_handshakes_do_not_block() {
    let (server, mut events, url) = echo_server(ServerConfig::default()).await;
    let mut req = url.as_str().into_client_request().expect("request");
    req.headers_mut()
        .insert("x-big", "z".repeat(20 << 10).parse().expect("value"));
    let res = within(10, "big handshake", tokio_tungstenite::connect_async(req)).await;
    assert!(res.is_err(), "a 20 KiB upgrade request was accepted");
    // Many sockets that never finish their handshake...
    let addr = server.local_addr();
    let mut idle = Vec::new();
    for _ in 0..1000 {
        let mut s = tokio::net::TcpStream::connect(addr).await.expect("tcp");
        s.write_all(b"GET / HTTP/1.1\r\n").await.expect("partial");
        idle.push(s);
    }
    // ...do not stall a normal client (from another address: the idle ones' address is
    // over its pending-handshake cap, loopback or not).
    let tcp = tokio::net::TcpSocket::new_v4().expect("socket");
    tcp.bind("127.0.0.2:0".parse().expect("addr"))
        .expect("bind");
    let tcp = within(10, "tcp", tcp.connect(addr)).await.expect("tcp");
    let (mut ws, _) = within(
        10,
        "upgrade",
        tokio_tungstenite::client_async(
            url.as_str(),
            tokio_tungstenite::MaybeTlsStream::Plain(tcp),
        ),
    )
    .await
    .expect("upgrade");
    assert_eq!(
        round_trip(&mut ws, Message::text("hi")).await,
        Message::text("hi")
    );
    let (_, _) = next_connected(&mut events).await;
    drop(idle);
    server.shutdown().await;
}

#[tokio::test]
async fn shutdown_closes_with_1001_and_reports_every_disconnect() {
    let (server, mut events, url) = echo_server(ServerConfig::default()).await;
    let mut a = raw_client(&url).await;
    let (a_id, _) = next_connected(&mut events).await;
    let mut b = raw_client(&url).await;
    let (b_id, _) = next_connected(&mut events).await;
    let stop = tokio::spawn(server.shutdown());
    assert_eq!(close_code(&mut a).await, Some(1001));
    assert_eq!(close_code(&mut b).await, Some(1001));
    within(20, "shutdown", stop).await.expect("join");
    let mut rest = Vec::new();
    while let Some(e) = within(10, "events end", events.recv()).await {
        rest.push(e);
    }
    assert!(rest.contains(&Ev::Disconnected(a_id)), "{rest:?}");
    assert!(rest.contains(&Ev::Disconnected(b_id)), "{rest:?}");
}

#[tokio::test]
async fn machine_close_output_sends_the_code_and_reason() {
    let (server, mut events, url) = echo_server(ServerConfig::default()).await;
    let mut ws = raw_client(&url).await;
    let (conn, _) = next_connected(&mut events).await;
    let long = "é".repeat(100);
    server
        .handle()
        .call(move |m: &mut TestMachine, _| {
            m.out.send(conn, FrameBuf::text("last"));
            m.out.close(conn, CloseCode::POLICY, long);
            m.out.send(conn, FrameBuf::text("dropped"));
        })
        .await
        .expect("call");
    assert_eq!(next_data(&mut ws).await, Message::text("last"));
    match next_data(&mut ws).await {
        Message::Close(Some(f)) => {
            assert_eq!(u16::from(f.code), 1008);
            assert_eq!(f.reason.len(), 122);
        }
        other => panic!("expected close, got {other:?}"),
    }
    disconnected(&mut events, conn).await;
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn machine_timers_fire() {
    let (server, mut events) = Server::bind(
        "127.0.0.1:0",
        TestMachine::ticking(Duration::from_secs(1)),
        ServerConfig::default(),
    )
    .await
    .expect("bind");
    let mut ws = raw_client(&format!("ws://{}", server.local_addr())).await;
    let start = tokio::time::Instant::now();
    assert_eq!(next_data(&mut ws).await, Message::text("tick"));
    assert_eq!(next_data(&mut ws).await, Message::text("tick"));
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(1500) && took <= Duration::from_secs(3),
        "{took:?}"
    );
    next_matching(&mut events, "tick event", |e| *e == Ev::Tick).await;
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn silent_peer_is_closed_after_the_pong_timeout() {
    let limits = Limits::default()
        .with_ping_interval(Some(Duration::from_secs(1)))
        .with_pong_timeout(Duration::from_secs(3))
        .with_close_timeout(Duration::from_secs(1));
    let (server, mut events, url) = echo_server(ServerConfig::default().with_limits(limits)).await;
    let _silent = raw_client(&url).await; // completes the handshake, then never reads
    let (silent_id, _) = next_connected(&mut events).await;
    let mut alive = raw_client(&url).await;
    let (alive_id, _) = next_connected(&mut events).await;
    let start = tokio::time::Instant::now();
    // The live peer answers pings while it reads (tungstenite replies automatically).
    let keep_reading = tokio::spawn(async move {
        let got = next_data(&mut alive).await;
        (alive, got)
    });
    let ev = next_matching(&mut events, "a disconnect", |e| {
        matches!(e, Ev::Disconnected(_))
    })
    .await;
    assert_eq!(ev, Ev::Disconnected(silent_id));
    let took = start.elapsed();
    assert!(
        took >= Duration::from_secs(3) && took <= Duration::from_secs(8),
        "{took:?}"
    );
    server
        .handle()
        .call(move |m: &mut TestMachine, _| m.out.send(alive_id, FrameBuf::text("still here")))
        .await
        .expect("call");
    let (_alive, got) = within(10, "live peer", keep_reading).await.expect("join");
    assert_eq!(got, Message::text("still here"));
    server.shutdown().await;
}

#[tokio::test]
async fn dropped_events_are_discarded_and_unread_events_do_not_block_shutdown() {
    let config = ServerConfig::default().with_event_capacity(1);
    let (server, events, url) = echo_server(config).await;
    drop(events);
    let mut ws = raw_client(&url).await;
    for i in 0..20 {
        let m = Message::text(format!("m{i}"));
        assert_eq!(round_trip(&mut ws, m.clone()).await, m);
    }
    server.shutdown().await;

    // An application that holds `Events` but stops reading: frames stall (backpressure),
    // and shutdown still completes.
    let (server, _unread, url) = echo_server(ServerConfig::default().with_event_capacity(1)).await;
    let mut ws = raw_client(&url).await;
    for i in 0..5 {
        ws.send(Message::text(format!("m{i}"))).await.expect("send");
    }
    within(20, "shutdown", server.shutdown()).await;
}

#[tokio::test]
async fn invalid_utf8_text_closes_with_1007_and_others_keep_working() {
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    use tokio_tungstenite::tungstenite::protocol::frame::Frame as WsFrame;
    let (server, mut events, url) = echo_server(ServerConfig::default()).await;
    let mut bad = raw_client(&url).await;
    let (bad_id, _) = next_connected(&mut events).await;
    let mut good = raw_client(&url).await;
    let frame = WsFrame::message(vec![0xffu8, 0xfe, 0x41], OpCode::Data(Data::Text), true);
    bad.send(Message::Frame(frame)).await.expect("send");
    assert_eq!(close_code(&mut bad).await, Some(1007));
    disconnected(&mut events, bad_id).await;
    assert!(
        !events_seen_text(&mut events),
        "the invalid frame reached the machine"
    );
    assert_eq!(
        round_trip(&mut good, Message::text("ok")).await,
        Message::text("ok")
    );
    server.shutdown().await;
}

/// Whether a text event is already waiting.
fn events_seen_text(events: &mut agentwire_tokio::Events<Ev>) -> bool {
    let mut seen = false;
    while let Some(e) = events.try_recv() {
        seen |= matches!(e, Ev::Text(..));
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_echo_concurrently_on_a_multi_thread_runtime() {
    let (server, mut events, url) = echo_server(ServerConfig::default()).await;
    let mut tasks = Vec::new();
    for c in 0..8 {
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let mut ws = raw_client(&url).await;
            for i in 0..50 {
                ws.feed(Message::text(format!("{c}:{i}")))
                    .await
                    .expect("feed");
            }
            ws.flush().await.expect("flush");
            for i in 0..50 {
                assert_eq!(next_data(&mut ws).await, Message::text(format!("{c}:{i}")));
            }
            ws.close(None).await.expect("close");
            while let Some(Ok(_)) = ws.next().await {}
        }));
    }
    for t in tasks {
        within(30, "client", t).await.expect("client task");
    }
    let mut connects = 0;
    let mut disconnects = 0;
    while disconnects < 8 {
        match within(20, "events", events.recv()).await.expect("event") {
            Ev::Connected(..) => connects += 1,
            Ev::Disconnected(_) => disconnects += 1,
            _ => {}
        }
    }
    assert_eq!(connects, 8);
    server.shutdown().await;
}

#[tokio::test]
async fn a_burst_larger_than_the_send_queue_is_echoed_not_mistaken_for_a_slow_reader() {
    let (server, mut events, url) = echo_server(ServerConfig::default()).await;
    let mut ws = raw_client(&url).await;
    next_connected(&mut events).await;
    drop(events); // 4,000 text events would otherwise (rightly) stall the driver
                  // 4,000 messages in one flush: far more than the 256-frame send queue.
    for i in 0..4000 {
        ws.feed(Message::text(format!("b{i}"))).await.expect("feed");
    }
    ws.flush().await.expect("flush");
    for i in 0..4000 {
        assert_eq!(
            next_data(&mut ws).await,
            Message::text(format!("b{i}")),
            "echo {i}"
        );
    }
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_stalled_handshake_is_dropped_after_the_handshake_timeout() {
    use tokio::io::AsyncReadExt;
    let (server, _events, _url) = echo_server(ServerConfig::default()).await;
    let mut s = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .expect("tcp");
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("partial");
    let start = tokio::time::Instant::now();
    let mut buf = [0u8; 64];
    let n = within(60, "drop", s.read(&mut buf)).await.unwrap_or(0);
    assert_eq!(n, 0, "expected the server to hang up");
    let took = start.elapsed();
    assert!(
        took >= Duration::from_secs(10) && took < Duration::from_secs(11),
        "{took:?}"
    );
    server.shutdown().await;
}

/// An application that awaits `Handle::call` in the task that reads events, with the event
/// channel full behind it: the driver keeps running commands while it waits for room, so
/// neither side waits for the other forever.
#[tokio::test]
async fn a_call_awaited_while_reading_events_does_not_deadlock_a_full_event_channel() {
    let (server, mut events, url) =
        echo_server(ServerConfig::default().with_event_capacity(1)).await;
    let handle = server.handle();
    let mut ws = raw_client(&url).await;
    let (conn, _) = next_connected(&mut events).await;
    for i in 0..20 {
        ws.send(Message::text(format!("m{i}"))).await.expect("send");
    }
    let reader = async {
        let mut seen = Vec::new();
        while seen.len() < 20 {
            match events.recv().await {
                Some(Ev::Text(c, t)) if c == conn => {
                    // The channel is full again by now; before the fix the driver sat in
                    // its event send while this call waited for the driver.
                    let open = handle
                        .call(|m: &mut TestMachine, _| m.conns.len())
                        .await
                        .expect("call");
                    assert_eq!(open, 1);
                    seen.push(t);
                }
                Some(_) => {}
                None => panic!("events ended"),
            }
        }
        seen
    };
    let seen = within(20, "20 events, each answered by a call", reader).await;
    let want: Vec<String> = (0..20).map(|i| format!("m{i}")).collect();
    assert_eq!(seen, want, "events in order");
    for i in 0..20 {
        assert_eq!(next_data(&mut ws).await, Message::text(format!("m{i}")));
    }
    server.shutdown().await;
}

//! Client driver: echo, reconnect with backoff, one socket at a time, wss.

mod common;

use std::time::Duration;

use agentwire_core::{CloseCode, FrameBuf};
use agentwire_tokio::{tls, Backoff, Client, ClientConfig, Limits, Server, ServerConfig};
use common::*;

fn quick_client() -> ClientConfig {
    ClientConfig::default()
        .with_backoff(Backoff::new(
            Duration::from_secs(1),
            Duration::from_secs(30),
        ))
        .with_limits(Limits::default().with_close_timeout(Duration::from_millis(500)))
}

#[tokio::test]
async fn client_echo_round_trip_with_headers_and_subprotocol() {
    let hook = |req: &agentwire_tokio::UpgradeRequest<'_>| {
        if req.header("authorization") == Some("Bearer k") && req.offers("chat") {
            Ok(agentwire_tokio::Accept::with_subprotocol("chat"))
        } else {
            Err(agentwire_tokio::Reject::unauthorized())
        }
    };
    let (server, mut sevents) = Server::bind(
        "127.0.0.1:0",
        TestMachine::echo(),
        ServerConfig::default().with_hook(hook),
    )
    .await
    .expect("bind");
    let url = format!("ws://{}/chat", server.local_addr());
    let config = quick_client()
        .with_header("Authorization", "Bearer k")
        .with_subprotocol("chat");
    let (handle, mut events) =
        Client::connect(&url, TestMachine::recorder(), config).expect("connect");
    let (conn, peer) = next_connected(&mut events).await;
    assert_eq!(peer.path, "/chat");
    assert_eq!(peer.subprotocol.as_deref(), Some("chat"));
    let (_, speer) = next_connected(&mut sevents).await;
    assert_eq!(speer.subprotocol.as_deref(), Some("chat"));
    handle
        .call(move |m: &mut TestMachine, _| {
            m.out.send(conn, FrameBuf::text("hi"));
            m.out.send(conn, FrameBuf::binary(vec![9u8, 8]));
        })
        .await
        .expect("call");
    assert_eq!(
        next_matching(&mut events, "echo", |e| matches!(e, Ev::Text(..))).await,
        Ev::Text(conn, "hi".into())
    );
    assert_eq!(
        next_matching(&mut events, "echo", |e| matches!(e, Ev::Binary(..))).await,
        Ev::Binary(conn, vec![9, 8])
    );
    handle.shutdown().await;
    disconnected(&mut events, conn).await;
    assert!(within(10, "end", events.recv()).await.is_none());
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn reconnects_with_a_new_conn_id_and_never_two_sockets() {
    let (server, mut sevents) =
        Server::bind("127.0.0.1:0", TestMachine::echo(), ServerConfig::default())
            .await
            .expect("bind");
    let url = format!("ws://{}/", server.local_addr());
    let (handle, mut events) =
        Client::connect(&url, TestMachine::recorder(), quick_client()).expect("connect");
    let mut client_ids = Vec::new();
    let mut server_log = Vec::new();
    let mut down_at = None;
    for round in 0..3 {
        let (c, _) = next_connected(&mut events).await;
        if let Some(t) = down_at.take() {
            // Each connection stayed open for `stable_after` (30 s), so the attempt counter
            // reset: every reconnect waits ~1 s.
            let gap = tokio::time::Instant::now() - t;
            assert!(
                gap >= Duration::from_secs(1) && gap < Duration::from_millis(1500),
                "{gap:?}"
            );
        }
        client_ids.push(c);
        let (s, _) = next_connected(&mut sevents).await;
        server_log.push(Ev::Connected(s, agentwire_core::PeerInfo::default()));
        // Simulated time: the connection stays up long enough to count as stable.
        tokio::time::sleep(Duration::from_secs(30)).await;
        // The server drops the connection; the client must notice and come back.
        server
            .handle()
            .call(move |m: &mut TestMachine, _| m.out.close(s, CloseCode::GOING_AWAY, "bye"))
            .await
            .expect("call");
        disconnected(&mut events, c).await;
        down_at = Some(tokio::time::Instant::now());
        // Every server-side disconnect comes before the next connect: one socket at a time.
        let e = next_matching(&mut sevents, "server disconnect", |e| {
            matches!(e, Ev::Disconnected(_) | Ev::Connected(..))
        })
        .await;
        assert_eq!(e, Ev::Disconnected(s), "round {round}");
        server_log.push(e);
        if round == 2 {
            break;
        }
        // A message sent to the old id while disconnected is dropped, not an error.
        handle
            .call(move |m: &mut TestMachine, _| m.out.send(c, FrameBuf::text("stale")))
            .await
            .expect("call");
    }
    assert!(client_ids.windows(2).all(|w| w[0] < w[1]), "{client_ids:?}");
    assert_eq!(server_log.len(), 6);
    handle.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn failed_attempts_back_off_exponentially() {
    // A listener that accepts and hangs up at once: every upgrade fails.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("ws://{}/", listener.local_addr().expect("addr"));
    // A ticking machine: its timers and commands keep running while no socket is open.
    let (handle, mut events) = Client::connect(
        &url,
        TestMachine::ticking(Duration::from_secs(1)),
        quick_client(),
    )
    .expect("connect");
    handle
        .call(|m: &mut TestMachine, now| m.next_tick = Some(now + Duration::from_secs(1)))
        .await
        .expect("call");
    let mut times = Vec::new();
    for _ in 0..5 {
        let (sock, _) = within(120, "attempt", listener.accept())
            .await
            .expect("accept");
        times.push(tokio::time::Instant::now());
        drop(sock);
    }
    let gaps: Vec<u128> = times
        .windows(2)
        .map(|w| (w[1] - w[0]).as_millis())
        .collect();
    for (gap, want) in gaps.iter().zip([1000u128, 2000, 4000, 8000]) {
        assert!(*gap >= want && *gap < want + 200, "gaps {gaps:?}");
    }
    let open = handle
        .call(|m: &mut TestMachine, _| m.conns.len())
        .await
        .expect("call while disconnected");
    assert_eq!(open, 0);
    // The machine never saw a connection, yet its timer fired about once a second.
    let mut ticks = 0;
    while let Some(e) = events.try_recv() {
        assert_eq!(e, Ev::Tick, "no connection ever opened");
        ticks += 1;
    }
    assert!(ticks >= 10, "{ticks} ticks in 15 s");
    handle.shutdown().await;
    assert!(handle.is_closed());
}

#[tokio::test]
async fn without_reconnect_the_driver_stops_after_the_socket_ends() {
    let (server, mut sevents) =
        Server::bind("127.0.0.1:0", TestMachine::echo(), ServerConfig::default())
            .await
            .expect("bind");
    let url = format!("ws://{}/", server.local_addr());
    let (handle, mut events) = Client::connect(
        &url,
        TestMachine::recorder(),
        quick_client().with_reconnect(false),
    )
    .expect("connect");
    let (c, _) = next_connected(&mut events).await;
    let (s, _) = next_connected(&mut sevents).await;
    server
        .handle()
        .call(move |m: &mut TestMachine, _| m.out.close(s, CloseCode::NORMAL, ""))
        .await
        .expect("call");
    disconnected(&mut events, c).await;
    assert!(within(10, "end", events.recv()).await.is_none());
    assert!(handle.is_closed());
    server.shutdown().await;
}

#[tokio::test]
async fn bad_urls_are_config_errors() {
    let cfg = ClientConfig::default;
    assert!(Client::connect("http://x/", TestMachine::recorder(), cfg()).is_err());
    assert!(Client::connect("not a url", TestMachine::recorder(), cfg()).is_err());
    assert!(Client::connect(
        "ws://x/",
        TestMachine::recorder(),
        cfg().with_header("bad header", "v")
    )
    .is_err());
}

#[tokio::test]
async fn wss_echo_with_a_self_signed_certificate() {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("cert");
    let cert_pem = ck.cert.pem();
    let key_pem = ck.signing_key.serialize_pem();
    let server_tls =
        tls::server_config(cert_pem.as_bytes(), key_pem.as_bytes()).expect("server tls");
    let (server, mut sevents) = Server::bind(
        "127.0.0.1:0",
        TestMachine::echo(),
        ServerConfig::default().with_tls(server_tls),
    )
    .await
    .expect("bind");
    let url = format!("wss://localhost:{}/secure", server.local_addr().port());
    let client_tls = tls::client_config_trusting(cert_pem.as_bytes()).expect("client tls");
    let (handle, mut events) = Client::connect(
        &url,
        TestMachine::recorder(),
        quick_client().with_tls(client_tls),
    )
    .expect("connect");
    let (conn, peer) = next_connected(&mut events).await;
    assert_eq!(peer.path, "/secure");
    let (_, speer) = next_connected(&mut sevents).await;
    assert_eq!(speer.path, "/secure");
    handle
        .call(move |m: &mut TestMachine, _| m.out.send(conn, FrameBuf::text("over tls")))
        .await
        .expect("call");
    assert_eq!(
        next_matching(&mut events, "echo", |e| matches!(e, Ev::Text(..))).await,
        Ev::Text(conn, "over tls".into())
    );
    // A client that does not trust the certificate never connects.
    let other = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("cert");
    let wrong = tls::client_config_trusting(other.cert.pem().as_bytes()).expect("tls");
    let (h2, mut e2) = Client::connect(
        &url,
        TestMachine::recorder(),
        quick_client().with_tls(wrong).with_reconnect(false),
    )
    .expect("connect");
    assert!(within(10, "refused", e2.recv()).await.is_none());
    assert!(h2.is_closed());
    handle.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_machine_close_ends_the_socket_and_the_client_reconnects() {
    let (server, mut sevents) =
        Server::bind("127.0.0.1:0", TestMachine::echo(), ServerConfig::default())
            .await
            .expect("bind");
    let url = format!("ws://{}/", server.local_addr());
    let (handle, mut events) =
        Client::connect(&url, TestMachine::recorder(), quick_client()).expect("connect");
    let (c1, _) = next_connected(&mut events).await;
    let (s1, _) = next_connected(&mut sevents).await;
    handle
        .call(move |m: &mut TestMachine, _| m.out.close(c1, CloseCode::NORMAL, "done"))
        .await
        .expect("call");
    disconnected(&mut events, c1).await;
    disconnected(&mut sevents, s1).await;
    let (c2, _) = next_connected(&mut events).await;
    assert_ne!(c1, c2);
    let (s2, _) = next_connected(&mut sevents).await;
    assert_ne!(s1, s2);
    handle.shutdown().await;
    disconnected(&mut sevents, s2).await;
    server.shutdown().await;
}

/// A machine with its own dial policy: dials when `want`, retries 1 s after every failure
/// or disconnect, gives up after `max_failures` failed attempts or when `stop` is set.
struct Redialer {
    inner: TestMachine,
    want: bool,
    retry_at: Option<std::time::Instant>,
    failures: u32,
    max_failures: u32,
    stop: bool,
}

impl Redialer {
    fn new(max_failures: u32) -> Self {
        Self {
            inner: TestMachine::recorder(),
            want: true,
            retry_at: None,
            failures: 0,
            max_failures,
            stop: false,
        }
    }
}

impl agentwire_core::Machine for Redialer {
    type Event = Ev;
    fn handle_connect(
        &mut self,
        conn: agentwire_core::ConnId,
        peer: &agentwire_core::PeerInfo,
        now: std::time::Instant,
    ) {
        self.want = false;
        self.inner.handle_connect(conn, peer, now);
    }
    fn handle_frame(
        &mut self,
        conn: agentwire_core::ConnId,
        frame: agentwire_core::Frame<'_>,
        now: std::time::Instant,
    ) {
        self.inner.handle_frame(conn, frame, now);
    }
    fn handle_disconnect(&mut self, conn: agentwire_core::ConnId, now: std::time::Instant) {
        self.retry_at = Some(now + Duration::from_secs(1));
        self.inner.handle_disconnect(conn, now);
    }
    fn handle_timeout(&mut self, now: std::time::Instant) {
        if self.retry_at.is_some_and(|t| t <= now) {
            self.retry_at = None;
            self.want = true;
        }
    }
    fn poll_timeout(&self) -> Option<std::time::Instant> {
        self.retry_at
    }
    fn poll_output(&mut self) -> Option<agentwire_core::Output<Ev>> {
        self.inner.out.pop()
    }
}

impl agentwire_core::Dialer for Redialer {
    fn poll_dial(&self) -> agentwire_core::Dial {
        if self.stop || self.failures >= self.max_failures {
            agentwire_core::Dial::Stop
        } else if self.want {
            agentwire_core::Dial::Now
        } else {
            agentwire_core::Dial::Wait
        }
    }
    fn handle_dial_failed(&mut self, _reason: &str, now: std::time::Instant) {
        self.failures += 1;
        self.want = false;
        self.inner.out.event(Ev::Tick); // one Tick per failed attempt
        self.retry_at = Some(now + Duration::from_secs(1));
    }
}

#[tokio::test(start_paused = true)]
async fn a_dialer_machine_paces_its_attempts_and_gives_up() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("ws://{}/", listener.local_addr().expect("addr"));
    let (handle, mut events) =
        Client::connect_dialer(&url, Redialer::new(3), quick_client()).expect("connect");
    let mut times = Vec::new();
    for _ in 0..3 {
        let (sock, _) = within(60, "attempt", listener.accept())
            .await
            .expect("accept");
        times.push(tokio::time::Instant::now());
        drop(sock);
    }
    // The machine's 1 s retry timer, not the transport's backoff (which would double).
    for w in times.windows(2) {
        let gap = (w[1] - w[0]).as_millis();
        assert!((1000..1200).contains(&gap), "{gap}");
    }
    let mut failures = 0;
    while let Some(e) = within(20, "end", events.recv()).await {
        assert_eq!(e, Ev::Tick);
        failures += 1;
    }
    assert_eq!(
        failures, 3,
        "three failed attempts reported, then the driver stopped"
    );
    assert!(handle.is_closed());
    // No fourth attempt.
    assert!(
        tokio::time::timeout(Duration::from_secs(5), listener.accept())
            .await
            .is_err()
    );
}

#[tokio::test(start_paused = true)]
async fn a_dialer_machine_reconnects_when_it_wants_and_stops_on_request() {
    let (server, mut sevents) =
        Server::bind("127.0.0.1:0", TestMachine::echo(), ServerConfig::default())
            .await
            .expect("bind");
    let url = format!("ws://{}/", server.local_addr());
    let (handle, mut events) =
        Client::connect_dialer(&url, Redialer::new(3), quick_client()).expect("connect");
    let (c1, _) = next_connected(&mut events).await;
    let (s1, _) = next_connected(&mut sevents).await;
    server
        .handle()
        .call(move |m: &mut TestMachine, _| m.out.close(s1, CloseCode::GOING_AWAY, "bye"))
        .await
        .expect("call");
    disconnected(&mut events, c1).await;
    let down = tokio::time::Instant::now();
    let (c2, _) = next_connected(&mut events).await;
    let gap = tokio::time::Instant::now() - down;
    assert!(gap >= Duration::from_secs(1), "{gap:?}");
    assert!(c2 > c1);
    // The machine says Stop: the driver closes the socket (1001) and ends.
    handle
        .call(|m: &mut Redialer, _| m.stop = true)
        .await
        .expect("call");
    disconnected(&mut events, c2).await;
    assert!(within(20, "end", events.recv()).await.is_none());
    assert!(handle.is_closed());
    server.shutdown().await;
}

/// A server that upgrades every connection and closes it with 1008 at once (a rejected
/// hello), except those whose index is in `hold`, which stay open for 31 s first. Reports
/// when each connection was accepted and when it was closed.
async fn rejecting_server(
    hold: &'static [usize],
) -> (
    String,
    tokio::sync::mpsc::UnboundedReceiver<(tokio::time::Instant, tokio::time::Instant)>,
) {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::protocol::frame::{coding, CloseFrame};
    use tokio_tungstenite::tungstenite::Message;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("ws://{}/", listener.local_addr().expect("addr"));
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        for index in 0..32usize {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let accepted = tokio::time::Instant::now();
            let tx = tx.clone();
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
                    return;
                };
                if hold.contains(&index) {
                    // Stay up (reading, so pings are answered) for 31 s.
                    let _ = tokio::time::timeout(Duration::from_secs(31), async {
                        while let Some(Ok(_)) = ws.next().await {}
                    })
                    .await;
                }
                let closed = tokio::time::Instant::now();
                let frame = CloseFrame {
                    code: coding::CloseCode::Policy,
                    reason: "rejected".into(),
                };
                let _ = ws.send(Message::Close(Some(frame))).await;
                while let Some(Ok(_)) = ws.next().await {}
                let _ = tx.send((accepted, closed));
            });
        }
    });
    (url, rx)
}

/// [`quick_client`] without WebSocket pings: under paused time, a ping timer due while a
/// close frame is in flight on loopback would let the clock jump to it first.
fn unpinged_client() -> ClientConfig {
    quick_client().with_limits(
        Limits::default()
            .with_close_timeout(Duration::from_millis(500))
            .with_ping_interval(None),
    )
}

/// Gaps (ms) between each connection's close and the next one's accept.
async fn redial_gaps(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<(tokio::time::Instant, tokio::time::Instant)>,
    n: usize,
) -> Vec<u128> {
    let mut seen = Vec::new();
    for _ in 0..n {
        seen.push(
            within(300, "a connection", rx.recv())
                .await
                .expect("server"),
        );
    }
    seen.windows(2)
        .map(|w| (w[1].0 - w[0].1).as_millis())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_peer_that_rejects_right_after_the_upgrade_is_redialled_with_growing_delays() {
    // Index 4 stays up for 31 s: after it the backoff starts over.
    let (url, mut rx) = rejecting_server(&[4]).await;
    let (handle, _events) =
        Client::connect(&url, TestMachine::recorder(), unpinged_client()).expect("connect");
    let gaps = redial_gaps(&mut rx, 6).await;
    let want = [1000u128, 2000, 4000, 8000, 1000];
    assert!(
        gaps.iter().zip(want).all(|(g, w)| *g >= w && *g < w + 200),
        "gaps {gaps:?}, want about {want:?}"
    );
    handle.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_dialer_machine_is_held_to_the_backoff_after_early_closes() {
    // Redialer retries 1 s after every end; the transport's floor makes that 1, 2, 4 s
    // while the peer keeps closing at once, and lets it be after a stable connection.
    let (url, mut rx) = rejecting_server(&[3]).await;
    let (handle, _events) =
        Client::connect_dialer(&url, Redialer::new(3), unpinged_client()).expect("connect");
    let gaps = redial_gaps(&mut rx, 5).await;
    let want = [1000u128, 2000, 4000, 1000];
    assert!(
        gaps.iter().zip(want).all(|(g, w)| *g >= w && *g < w + 200),
        "gaps {gaps:?}, want about {want:?}"
    );
    handle.shutdown().await;
}

/// A `tracing` writer that sends each log line to a channel.
#[derive(Clone)]
struct LineSink(tokio::sync::mpsc::UnboundedSender<String>);

impl std::io::Write for LineSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = self.0.send(String::from_utf8_lossy(buf).into_owned());
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn a_refused_connect_is_logged_with_the_os_error_at_once() {
    let (tx, mut lines) = tokio::sync::mpsc::unbounded_channel();
    let sink = LineSink(tx);
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    // A port nobody listens on.
    let dead = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind")
        .local_addr()
        .expect("addr");
    let url = format!("ws://{dead}/");
    let config = ClientConfig::default().with_backoff(Backoff::new(
        Duration::from_secs(60),
        Duration::from_secs(60),
    ));
    let start = tokio::time::Instant::now();
    let (handle, _events) =
        Client::connect(&url, TestMachine::recorder(), config).expect("connect");
    let line = within(120, "a warning", lines.recv()).await.expect("line");
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "logged only after the first backoff"
    );
    assert!(line.contains("WARN"), "{line}");
    assert!(line.to_lowercase().contains("refused"), "{line}");
    assert!(line.contains(&url), "{line}");
    assert!(line.contains("retrying in 60.0 s"), "{line}");
    handle.shutdown().await;
}

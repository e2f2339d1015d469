//! UDP beside the WebSocket: a toy datagram machine driven over real loopback sockets.

mod common;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use agentwire_core::{
    ConnId, DatagramMachine, Frame, FrameBuf, Machine, Outbox, Output, PeerInfo, Transmit,
};
use agentwire_tokio::{
    Client, ClientConfig, ListenerConfig, Router, Server, ServerConfig, UdpLimits,
};
use common::*;
use tokio::net::UdpSocket;
use tokio_tungstenite::tungstenite::Message;

/// What the UDP echo machine reports.
#[derive(Debug, Clone, PartialEq, Eq)]
enum UdpEv {
    Connected(ConnId),
    Disconnected(ConnId),
    Datagram {
        remote: SocketAddr,
        local: SocketAddr,
        contents: Vec<u8>,
    },
}

/// Echoes datagrams back to their sender and WebSocket text back on its connection; on a
/// timer, sends one "beacon" datagram to `beacon_to`.
#[derive(Default)]
struct UdpEcho {
    out: Outbox<UdpEv>,
    transmits: VecDeque<Transmit>,
    /// Report every datagram as an event (off for floods: the event channel would fill).
    report: bool,
    received: u64,
    /// Datagrams handled between two drains of the outputs, at most.
    max_between_drains: u64,
    since_drain: u64,
    beacon_to: Option<SocketAddr>,
    beacon_at: Option<Instant>,
    local: Option<SocketAddr>,
}

impl Machine for UdpEcho {
    type Event = UdpEv;

    fn handle_connect(&mut self, conn: ConnId, _: &PeerInfo, _: Instant) {
        self.out.event(UdpEv::Connected(conn));
    }

    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, _: Instant) {
        if let Frame::Text(t) = frame {
            self.out.send(conn, FrameBuf::text(t.to_owned()));
        }
    }

    fn handle_disconnect(&mut self, conn: ConnId, _: Instant) {
        self.out.event(UdpEv::Disconnected(conn));
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.beacon_at.is_some_and(|at| at <= now) {
            self.beacon_at = None;
            if let (Some(remote), Some(local)) = (self.beacon_to, self.local) {
                self.transmits.push_back(Transmit {
                    local,
                    remote,
                    contents: b"beacon".to_vec(),
                });
            }
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.beacon_at
    }

    fn poll_output(&mut self) -> Option<Output<UdpEv>> {
        self.since_drain = 0;
        self.out.pop()
    }
}

impl DatagramMachine for UdpEcho {
    fn handle_datagram(
        &mut self,
        remote: SocketAddr,
        local: SocketAddr,
        contents: &[u8],
        _: Instant,
    ) {
        self.received += 1;
        self.since_drain += 1;
        self.max_between_drains = self.max_between_drains.max(self.since_drain);
        self.local = Some(local);
        if self.report {
            self.out.event(UdpEv::Datagram {
                remote,
                local,
                contents: contents.to_vec(),
            });
        }
        self.transmits.push_back(Transmit {
            local,
            remote,
            contents: contents.to_vec(),
        });
    }

    fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }
}

fn reporting() -> UdpEcho {
    UdpEcho {
        report: true,
        ..UdpEcho::default()
    }
}

async fn udp_server(machine: UdpEcho, config: ServerConfig) -> (Server<UdpEcho>, SocketAddr) {
    let udp = UdpSocket::bind("127.0.0.1:0").await.expect("bind udp");
    let (server, _events) = Server::bind_with_udp("127.0.0.1:0", udp, machine, config)
        .await
        .expect("bind");
    let addr = server.udp_local_addr().expect("udp address");
    (server, addr)
}

async fn recv(sock: &UdpSocket) -> (Vec<u8>, SocketAddr) {
    let mut buf = vec![0u8; 2048];
    let (n, from) = within(20, "a datagram", sock.recv_from(&mut buf))
        .await
        .expect("recv");
    buf.truncate(n);
    (buf, from)
}

#[tokio::test]
async fn datagrams_reach_the_machine_with_both_addresses_and_its_transmits_go_out() {
    let udp = UdpSocket::bind("127.0.0.1:0").await.expect("bind udp");
    let (server, mut events) =
        Server::bind_with_udp("127.0.0.1:0", udp, reporting(), ServerConfig::default())
            .await
            .expect("bind");
    let server_udp = server.udp_local_addr().expect("udp address");
    assert_ne!(server_udp.port(), 0);
    let peer = UdpSocket::bind("127.0.0.1:0").await.expect("bind peer");
    peer.send_to(b"hello", server_udp).await.expect("send");
    let (echo, from) = recv(&peer).await;
    assert_eq!(echo, b"hello");
    assert_eq!(from, server_udp, "sent from the one socket");
    let ev = within(20, "an event", events.recv()).await.expect("event");
    assert_eq!(
        ev,
        UdpEv::Datagram {
            remote: peer.local_addr().expect("addr"),
            local: server_udp,
            contents: b"hello".to_vec(),
        }
    );
    let stats = server.udp_stats().expect("stats");
    assert_eq!((stats.received, stats.received_bytes), (1, 5));
    assert_eq!((stats.sent, stats.sent_bytes), (1, 5));
    assert_eq!(stats.dropped_full + stats.send_errors, 0);
    server.shutdown().await;
}

#[tokio::test]
async fn the_websocket_side_works_beside_the_udp_socket() {
    // The raw peer never answers the shutdown's close; do not wait 5 s for it.
    let mut config = ServerConfig::default();
    config.limits.close_timeout = Duration::from_millis(200);
    let (server, udp_addr) = udp_server(UdpEcho::default(), config).await;
    let mut ws = raw_client(&format!("ws://{}", server.local_addr())).await;
    let peer = UdpSocket::bind("127.0.0.1:0").await.expect("bind peer");
    for i in 0..20u8 {
        peer.send_to(&[i], udp_addr).await.expect("send");
        assert_eq!(
            round_trip(&mut ws, Message::text(format!("t{i}"))).await,
            Message::text(format!("t{i}"))
        );
        assert_eq!(recv(&peer).await.0, vec![i]);
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_flood_is_taken_in_bounded_slices_and_every_datagram_is_handled() {
    let mut limits = UdpLimits::default();
    limits.datagrams_per_wake = 8;
    let (server, udp_addr) = udp_server(
        UdpEcho::default(),
        ServerConfig::default().with_udp_limits(limits),
    )
    .await;
    let peer = UdpSocket::bind("127.0.0.1:0").await.expect("bind peer");
    const N: usize = 200;
    for i in 0..N {
        peer.send_to(&(i as u32).to_be_bytes(), udp_addr)
            .await
            .expect("send");
    }
    // Every echo comes back (loopback, 200 small datagrams fit the socket buffers).
    for _ in 0..N {
        recv(&peer).await;
    }
    let (received, max_slice) = server
        .handle()
        .call(|m: &mut UdpEcho, _| (m.received, m.max_between_drains))
        .await
        .expect("call");
    assert_eq!(received, N as u64);
    assert!(
        max_slice <= 8,
        "outputs are drained after at most 8 datagrams, saw {max_slice}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_transmit_the_os_refuses_is_counted_and_the_driver_goes_on() {
    let (server, udp_addr) = udp_server(UdpEcho::default(), ServerConfig::default()).await;
    // An IPv6 destination from an IPv4 socket: the OS refuses the send.
    let v6: SocketAddr = "[::1]:9".parse().expect("addr");
    server
        .handle()
        .call(move |m: &mut UdpEcho, _| {
            m.transmits.push_back(Transmit {
                local: udp_addr,
                remote: v6,
                contents: b"x".to_vec(),
            });
        })
        .await
        .expect("call");
    // The command's reply comes before the step ends; the next command runs after its
    // transmits were sent.
    server.handle().call(|_, _| ()).await.expect("call");
    let stats = server.udp_stats().expect("stats");
    assert_eq!(stats.send_errors, 1, "{stats:?}");
    assert_eq!(stats.sent, 0);
    let peer = UdpSocket::bind("127.0.0.1:0").await.expect("bind peer");
    peer.send_to(b"still", udp_addr).await.expect("send");
    assert_eq!(recv(&peer).await.0, b"still");
    server.shutdown().await;
}

#[tokio::test]
async fn a_fresh_socket_sends_the_first_transmit_at_once() {
    let (server, udp_addr) = udp_server(UdpEcho::default(), ServerConfig::default()).await;
    let peer = UdpSocket::bind("127.0.0.1:0").await.expect("bind peer");
    let to = peer.local_addr().expect("addr");
    server
        .handle()
        .call(move |m: &mut UdpEcho, _| {
            m.transmits.push_back(Transmit {
                local: udp_addr,
                remote: to,
                contents: b"first".to_vec(),
            });
        })
        .await
        .expect("call");
    assert_eq!(recv(&peer).await, (b"first".to_vec(), udp_addr));
    assert_eq!(server.udp_stats().expect("stats").dropped_full, 0);
    server.shutdown().await;
}

#[tokio::test]
async fn a_server_without_a_socket_has_no_udp_stats() {
    let (server, _events) =
        Server::bind("127.0.0.1:0", TestMachine::echo(), ServerConfig::default())
            .await
            .expect("bind");
    assert!(server.udp_stats().is_none());
    assert!(server.udp_local_addr().is_none());
    assert!(server.handle().udp_stats().is_none());
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_machine_timer_sends_a_datagram_at_its_deadline_in_simulated_time() {
    let peer = UdpSocket::bind("127.0.0.1:0").await.expect("bind peer");
    let peer_addr = peer.local_addr().expect("addr");
    let (server, udp_addr) = udp_server(UdpEcho::default(), ServerConfig::default()).await;
    let start = tokio::time::Instant::now();
    server
        .handle()
        .call(move |m: &mut UdpEcho, now| {
            m.beacon_to = Some(peer_addr);
            m.local = Some(udp_addr);
            m.beacon_at = Some(now + Duration::from_secs(10));
        })
        .await
        .expect("call");
    let (beacon, from) = recv(&peer).await;
    assert_eq!(beacon, b"beacon");
    assert_eq!(from, udp_addr);
    assert!(
        start.elapsed() >= Duration::from_secs(10),
        "sent at the machine's deadline, not before"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_client_keeps_its_udp_socket_across_reconnects() {
    // A WebSocket server that the test makes drop its connection.
    let (ws_server, mut ws_events) =
        Server::bind("127.0.0.1:0", TestMachine::echo(), ServerConfig::default())
            .await
            .expect("bind");
    let url = format!("ws://{}", ws_server.local_addr());
    let udp = UdpSocket::bind("127.0.0.1:0").await.expect("bind udp");
    let client_udp = udp.local_addr().expect("addr");
    let config = ClientConfig::default().with_backoff(agentwire_tokio::Backoff::new(
        Duration::from_millis(10),
        Duration::from_millis(10),
    ));
    let (handle, mut events) =
        Client::connect_with_udp(&url, udp, reporting(), config).expect("connect");
    let peer = UdpSocket::bind("127.0.0.1:0").await.expect("bind peer");
    let first = loop {
        if let Some(UdpEv::Connected(c)) = within(20, "an event", events.recv()).await {
            break c;
        }
    };
    peer.send_to(b"one", client_udp).await.expect("send");
    assert_eq!(recv(&peer).await, (b"one".to_vec(), client_udp));
    // The server drops the connection; the client reconnects.
    let (conn, _) = next_connected(&mut ws_events).await;
    ws_server
        .handle()
        .call(move |m: &mut TestMachine, _| {
            m.out.close(conn, agentwire_core::CloseCode(4000), "bye")
        })
        .await
        .expect("call");
    let second = loop {
        if let Some(UdpEv::Connected(c)) = within(20, "an event", events.recv()).await {
            break c;
        }
    };
    assert_ne!(first, second);
    peer.send_to(b"two", client_udp).await.expect("send");
    assert_eq!(recv(&peer).await, (b"two".to_vec(), client_udp));
    let stats = handle.udp_stats().expect("stats");
    assert_eq!((stats.received, stats.sent), (2, 2));
    handle.shutdown().await;
    ws_server.shutdown().await;
}

#[tokio::test]
async fn a_routed_machine_drives_its_udp_socket_beside_the_other_routes() {
    let mut router = Router::new(ListenerConfig::default());
    let udp = UdpSocket::bind("127.0.0.1:0").await.expect("bind udp");
    let udp_addr = udp.local_addr().expect("udp address");
    let (rtc, mut rtc_events) = router
        .route_with_udp("/llmrtc", udp, reporting(), ServerConfig::default())
        .expect("route");
    let (_bus, mut bus_events) = router
        .route("/bus", TestMachine::echo(), ServerConfig::default())
        .expect("route");
    let listener = router.bind("127.0.0.1:0").await.expect("bind");
    let base = format!("ws://{}", listener.local_addr());

    // The routed machine gets its WebSocket connections and its datagrams ...
    let mut ws = raw_client(&format!("{base}/llmrtc")).await;
    let conn = match within(20, "connect", rtc_events.recv()).await {
        Some(UdpEv::Connected(c)) => c,
        other => panic!("expected a connect, got {other:?}"),
    };
    let peer = UdpSocket::bind("127.0.0.1:0").await.expect("bind peer");
    peer.send_to(b"hello", udp_addr).await.expect("send");
    assert_eq!(recv(&peer).await, (b"hello".to_vec(), udp_addr));
    assert_eq!(
        within(20, "a datagram event", rtc_events.recv()).await,
        Some(UdpEv::Datagram {
            remote: peer.local_addr().expect("addr"),
            local: udp_addr,
            contents: b"hello".to_vec(),
        })
    );
    assert_eq!(
        round_trip(&mut ws, Message::text("ws")).await,
        Message::text("ws")
    );
    let stats = rtc.udp_stats().expect("stats");
    assert_eq!((stats.received, stats.sent), (1, 1));
    // ... and the other route serves on the same listener.
    let mut bus = raw_client(&format!("{base}/bus")).await;
    assert_eq!(
        round_trip(&mut bus, Message::text("bus")).await,
        Message::text("bus")
    );
    next_connected(&mut bus_events).await;
    drop(bus);

    let ((), code) = tokio::join!(listener.shutdown(), close_code(&mut ws));
    assert_eq!(code, Some(1001));
    assert_eq!(
        within(20, "disconnect", rtc_events.recv()).await,
        Some(UdpEv::Disconnected(conn))
    );
    assert!(rtc.is_closed());
}

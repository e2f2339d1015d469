//! Several machines on one listener by path, over real sockets on 127.0.0.1.

mod common;

use std::collections::HashSet;

use agentwire_core::ConnId;
use agentwire_core::FrameBuf;
use agentwire_tokio::{
    tls, Client, ClientConfig, ConfigError, Events, Handle, Listener, ListenerConfig, Router,
    ServerConfig,
};
use common::{
    close_code, disconnected, next_connected, next_matching, raw_client, round_trip, within, Ev,
    TestMachine,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::{self, Message};

type Route = (Handle<TestMachine>, Events<Ev>);

/// Three echo machines at `/a`, `/b` and `/agent/ws` on one listener.
async fn three_routes() -> (Listener, Vec<Route>) {
    let mut router = Router::new(ListenerConfig::default());
    let mut routes = Vec::new();
    for (path, protocol) in [("/a", "alpha"), ("/b", "beta"), ("/agent/ws", "relay")] {
        let config = ServerConfig::default().with_endpoint(protocol, path);
        routes.push(
            router
                .route(path, TestMachine::echo(), config)
                .expect("route"),
        );
    }
    let listener = router.bind("127.0.0.1:0").await.expect("bind");
    (listener, routes)
}

/// Sends `request` on a fresh TCP connection and reads the whole answer.
async fn http(listener: &Listener, request: &str) -> String {
    let mut tcp = TcpStream::connect(listener.local_addr())
        .await
        .expect("connect");
    tcp.write_all(request.as_bytes()).await.expect("write");
    let mut answer = String::new();
    within(10, "http answer", tcp.read_to_string(&mut answer))
        .await
        .expect("read");
    answer
}

/// The HTTP status of a WebSocket upgrade to `url` that is refused.
async fn refused_status(url: &str) -> u16 {
    match within(10, "refusal", tokio_tungstenite::connect_async(url)).await {
        Err(tungstenite::Error::Http(resp)) => resp.status().as_u16(),
        other => panic!("expected an HTTP refusal, got {:?}", other.map(|_| ())),
    }
}

#[tokio::test]
async fn each_machine_gets_only_the_connections_to_its_own_path() {
    let (listener, mut routes) = three_routes().await;
    let base = format!("ws://{}", listener.local_addr());
    let mut sockets = Vec::new();
    for (i, path) in ["/a", "/b", "/agent/ws"].iter().enumerate() {
        let mut ws = raw_client(&format!("{base}{path}?n={i}")).await;
        let text = format!("to {path}");
        assert_eq!(
            round_trip(&mut ws, Message::text(text.clone())).await,
            Message::text(text)
        );
        let (_, peer) = next_connected(&mut routes[i].1).await;
        assert_eq!(peer.path, *path);
        sockets.push(ws);
    }
    // Each machine saw exactly one connection: its own.
    for (handle, _) in &routes {
        let conns = handle.call(|m, _| m.conns.len()).await.expect("call");
        assert_eq!(conns, 1);
    }
    assert_eq!(
        listener.paths().collect::<Vec<_>>(),
        ["/a", "/b", "/agent/ws"]
    );
    drop(sockets);
    listener.shutdown().await;
}

#[tokio::test]
async fn an_unknown_path_gets_404_and_a_plain_get_gets_the_routes_426() {
    let (listener, mut routes) = three_routes().await;
    let base = format!("ws://{}", listener.local_addr());
    // An upgrade to a path no route serves: 404 before the upgrade.
    assert_eq!(refused_status(&format!("{base}/nope")).await, 404);
    assert_eq!(refused_status(&format!("{base}/a/")).await, 404);
    // A plain GET on an unknown path: a real 404 with a body.
    let answer = http(&listener, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 404 Not Found\r\n"), "{answer}");
    assert!(
        answer.ends_with("No WebSocket endpoint at this path.\n"),
        "{answer}"
    );
    // A plain GET on a known path: that route's 426, naming its protocol and path.
    let answer = http(
        &listener,
        "GET /agent/ws HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n",
    )
    .await;
    assert!(
        answer.starts_with("HTTP/1.1 426 Upgrade Required\r\n"),
        "{answer}"
    );
    assert!(answer.contains("Upgrade: websocket\r\n"), "{answer}");
    assert!(
        answer.ends_with("This is the relay WebSocket endpoint at /agent/ws; connect to it with a WebSocket client.\n"),
        "{answer}"
    );
    // None of it reached a machine.
    for (_, events) in &mut routes {
        assert!(events.try_recv().is_none());
    }
    listener.shutdown().await;
}

#[tokio::test]
async fn shutting_one_route_down_leaves_the_others_serving() {
    let (listener, mut routes) = three_routes().await;
    let base = format!("ws://{}", listener.local_addr());
    let mut on_a = raw_client(&format!("{base}/a")).await;
    let mut on_b = raw_client(&format!("{base}/b")).await;
    let (a_conn, _) = next_connected(&mut routes[0].1).await;
    next_connected(&mut routes[1].1).await;

    let (a, mut a_events) = routes.remove(0);
    let ((), code) = tokio::join!(a.shutdown(), close_code(&mut on_a));
    assert_eq!(code, Some(1001));
    disconnected(&mut a_events, a_conn).await;
    assert!(a.is_closed());

    // Its path is gone; the others serve on, old connections and new.
    assert_eq!(refused_status(&format!("{base}/a")).await, 404);
    assert_eq!(
        round_trip(&mut on_b, Message::text("still")).await,
        Message::text("still")
    );
    let mut fresh = raw_client(&format!("{base}/agent/ws")).await;
    assert_eq!(
        round_trip(&mut fresh, Message::text("new")).await,
        Message::text("new")
    );
    drop((on_b, fresh));
    listener.shutdown().await;
}

#[tokio::test]
async fn shutting_the_listener_down_closes_every_connection_with_1001() {
    let (listener, mut routes) = three_routes().await;
    let base = format!("ws://{}", listener.local_addr());
    let mut sockets = Vec::new();
    let mut conns: Vec<HashSet<ConnId>> = Vec::new();
    for (i, path) in ["/a", "/b", "/agent/ws"].iter().enumerate() {
        let mut seen = HashSet::new();
        for _ in 0..2 {
            sockets.push(raw_client(&format!("{base}{path}")).await);
            seen.insert(next_connected(&mut routes[i].1).await.0);
        }
        conns.push(seen);
    }
    let addr = listener.local_addr();
    let codes = futures_util::future::join_all(sockets.iter_mut().map(close_code));
    let ((), codes) = tokio::join!(listener.shutdown(), codes);
    assert_eq!(codes, vec![Some(1001); 6]);
    // Every machine saw every one of its connections end, then its events ended.
    for ((handle, events), mut open) in routes.iter_mut().zip(conns) {
        while !open.is_empty() {
            match next_matching(events, "disconnect", |e| matches!(e, Ev::Disconnected(_))).await {
                Ev::Disconnected(c) => assert!(open.remove(&c), "unexpected {c:?}"),
                _ => unreachable!(),
            }
        }
        assert!(within(10, "events end", events.recv()).await.is_none());
        assert!(handle.is_closed());
    }
    // Nothing accepts any more.
    assert!(TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn a_route_is_refused_for_a_bad_or_repeated_path() {
    let mut router = Router::new(ListenerConfig::default());
    router
        .route("/x", TestMachine::echo(), ServerConfig::default())
        .expect("route");
    for path in ["/x", "x", "/y?q=1"] {
        let err = router
            .route(path, TestMachine::echo(), ServerConfig::default())
            .expect_err("refused");
        assert!(matches!(err, ConfigError::InvalidRoute(_)), "{err}");
    }
}

#[tokio::test]
async fn the_per_address_cap_is_each_routes_own() {
    let mut router = Router::new(ListenerConfig::default());
    let capped = ServerConfig::default().with_max_connections_per_address(1);
    let (_a, mut a_events) = router
        .route("/a", TestMachine::echo(), capped)
        .expect("route");
    let (_b, mut b_events) = router
        .route("/b", TestMachine::echo(), ServerConfig::default())
        .expect("route");
    let listener = router.bind("127.0.0.1:0").await.expect("bind");
    let base = format!("ws://{}", listener.local_addr());
    let first = raw_client(&format!("{base}/a")).await;
    next_connected(&mut a_events).await;
    // The route's own refusal (the default: 429) for its second connection from 127.0.0.1 ...
    assert_eq!(refused_status(&format!("{base}/a")).await, 429);
    // ... while the other route still takes connections from the same address.
    let one = raw_client(&format!("{base}/b")).await;
    let two = raw_client(&format!("{base}/b")).await;
    next_connected(&mut b_events).await;
    next_connected(&mut b_events).await;
    assert!(a_events.try_recv().is_none());
    drop((first, one, two));
    listener.shutdown().await;
}

#[tokio::test]
async fn a_tls_listener_serves_every_route_over_wss() {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("cert");
    let cert_pem = ck.cert.pem();
    let key_pem = ck.signing_key.serialize_pem();
    let server_tls =
        tls::server_config(cert_pem.as_bytes(), key_pem.as_bytes()).expect("server tls");
    let mut router = Router::new(ListenerConfig::default().with_tls(server_tls.clone()));
    let err = router
        .route(
            "/own-tls",
            TestMachine::echo(),
            ServerConfig::default().with_tls(server_tls),
        )
        .expect_err("tls is the listener's");
    assert!(matches!(err, ConfigError::TlsOnRoute(_)), "{err}");
    let mut servers = Vec::new();
    for path in ["/a", "/b"] {
        servers.push(
            router
                .route(path, TestMachine::echo(), ServerConfig::default())
                .expect("route"),
        );
    }
    let listener = router.bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().port();
    let client_tls = tls::client_config_trusting(cert_pem.as_bytes()).expect("client tls");
    for (path, (_, sevents)) in ["/a", "/b"].into_iter().zip(&mut servers) {
        let url = format!("wss://localhost:{port}{path}");
        let config = ClientConfig::default()
            .with_tls(client_tls.clone())
            .with_reconnect(false);
        let (handle, mut events) =
            Client::connect(&url, TestMachine::recorder(), config).expect("connect");
        let (conn, _) = next_connected(&mut events).await;
        let (_, speer) = next_connected(sevents).await;
        assert_eq!(speer.path, path);
        handle
            .call(move |m: &mut TestMachine, _| m.out.send(conn, FrameBuf::text(path)))
            .await
            .expect("call");
        assert_eq!(
            next_matching(&mut events, "echo", |e| matches!(e, Ev::Text(..))).await,
            Ev::Text(conn, path.into())
        );
        handle.shutdown().await;
    }
    listener.shutdown().await;
}

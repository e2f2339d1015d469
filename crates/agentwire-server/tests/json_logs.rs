//! `logging::build(LogFormat::Json, ..)` over a real server and client: every line is one
//! JSON object, and the lines written for a connection name its `conn` span with the peer
//! address and protocol. (A test binary of its own: a subscriber set for one thread must
//! not race other tests for the same log call sites.)

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentwire::jsonrpc_bus::{BusConfig, ClientConfig as BusClientConfig};
use agentwire_server::config::LogFormat;
use agentwire_server::{bus, logging};
use serde_json::Value;

async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// Lines a subscriber writes, kept for the test to read.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("buffer").extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn json_logs_are_one_object_per_line_with_the_connection_span() {
    let buf = Capture::default();
    let sink = buf.clone();
    let sub = logging::build(LogFormat::Json, "debug", move || sink.clone(), false).expect("log");
    // Current-thread runtime: the server's tasks log through this subscriber.
    let _guard = tracing::subscriber::set_default(sub);
    let app = bus::server_app::start("127.0.0.1:0", BusConfig::default(), |_| {})
        .await
        .expect("bus");
    let (client, _) = bus::client_app::connect(
        &app.url(),
        BusClientConfig::new("logged"),
        bus::client_app::transport_config(),
        |_| {},
    )
    .expect("bus client");
    within("ping", client.ping()).await.expect("ping");
    client.shutdown().await;
    app.server.shutdown().await;
    let text = String::from_utf8(buf.0.lock().expect("buffer").clone()).expect("utf-8");
    let mut in_conn = 0;
    for line in text.lines() {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a log line that is not one JSON object ({e}): {line}"));
        assert!(
            v["timestamp"].is_string() && v["level"].is_string(),
            "{line}"
        );
        let spans = v["spans"].as_array().cloned().unwrap_or_default();
        // The server's connections (the client's own `conn` spans sit under `client`).
        let served = spans.first().is_some_and(|s| s["name"] == "server");
        if let Some(conn) = spans.iter().find(|s| s["name"] == "conn" && served) {
            in_conn += 1;
            assert_eq!(conn["protocol"], "jsonrpc-bus", "{line}");
            let peer = conn["peer"].as_str().expect("peer");
            assert!(peer.starts_with("127.0.0.1:"), "{line}");
        }
    }
    assert!(in_conn > 0, "no line in a connection's span:\n{text}");
}

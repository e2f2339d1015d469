//! Every connection's log lines carry one `conn` span with its id, peer address and the
//! protocol named by `ServerConfig::with_endpoint`.

mod common;

use std::sync::{Arc, Mutex};

use agentwire_tokio::{Server, ServerConfig};
use common::*;
use tokio_tungstenite::tungstenite::Message;

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
async fn a_connections_span_names_its_protocol_and_peer() {
    let buf = Capture::default();
    let sink = buf.clone();
    let sub = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::DEBUG)
        .finish();
    // Current-thread runtime: every task of the driver logs through this subscriber.
    let _guard = tracing::subscriber::set_default(sub);
    let mut config = ServerConfig::default().with_endpoint("echo-proto", "/");
    config.limits.close_timeout = std::time::Duration::from_millis(200);
    let (server, mut events) = Server::bind("127.0.0.1:0", TestMachine::echo(), config)
        .await
        .expect("bind");
    let mut ws = raw_client(&format!("ws://{}/", server.local_addr())).await;
    let (_, peer) = next_connected(&mut events).await;
    assert_eq!(
        round_trip(&mut ws, Message::text("x")).await,
        Message::text("x")
    );
    server.shutdown().await;
    let text = String::from_utf8(buf.0.lock().expect("buffer").clone()).expect("utf-8");
    let addr = peer.remote_addr.expect("peer address");
    let span = format!("conn{{id=1 peer={addr} protocol=\"echo-proto\"}}");
    assert!(
        text.lines()
            .any(|l| l.contains(&span) && l.contains("connected")),
        "no line in {span} in:\n{text}"
    );
}

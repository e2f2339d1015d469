//! Flow control (rule 8 of the `Machine` contract) over real sockets: a paused connection's
//! socket is not read, so the peer's writes block (TCP pushes back); nothing of it reaches the
//! machine until the resume, and then everything does, in order. The connection survives a
//! pause much longer than the pong timeout.

mod common;

use std::time::{Duration, Instant};

use agentwire_core::{ConnId, Flow, Frame, Machine, Outbox, Output, PeerInfo};
use agentwire_tokio::{Server, ServerConfig};
use common::{raw_client, within};
use futures_util::SinkExt;
use tokio_tungstenite::tungstenite::Message;

/// Counts frames (checking they come numbered in order); pauses the sender on `pause`.
#[derive(Default)]
struct Gate {
    out: Outbox<()>,
    conn: Option<ConnId>,
    numbered: u64,
    out_of_order: bool,
    ended: bool,
}

impl Machine for Gate {
    type Event = ();
    fn handle_connect(&mut self, conn: ConnId, _: &PeerInfo, _: Instant) {
        self.conn = Some(conn);
    }
    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, _: Instant) {
        let Frame::Text(t) = frame else { return };
        if t == "pause" {
            self.out.pause_reading(conn);
        } else {
            let n: Option<u64> = t.split(':').next().and_then(|n| n.parse().ok());
            self.out_of_order |= n != Some(self.numbered);
            self.numbered += 1;
            if self.numbered == FRAMES {
                self.out.event(()); // all there
            }
        }
    }
    fn handle_disconnect(&mut self, _: ConnId, _: Instant) {
        self.ended = true;
    }
    fn handle_timeout(&mut self, _: Instant) {}
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn poll_output(&mut self) -> Option<Output<()>> {
        self.out.pop()
    }
    fn poll_flow(&mut self) -> Option<Flow> {
        self.out.pop_flow()
    }
}

/// Frames the peer sends after the pause: 256 x 256 KiB = 64 MiB, far more than loopback
/// socket buffers hold.
const FRAMES: u64 = 256;
const FRAME_BYTES: usize = 256 << 10;

#[tokio::test(start_paused = true)]
async fn a_paused_connection_is_not_read_until_resumed_and_loses_nothing() {
    let (server, mut events) =
        Server::bind("127.0.0.1:0", Gate::default(), ServerConfig::default())
            .await
            .expect("bind");
    let handle = server.handle();
    let mut ws = raw_client(&format!("ws://{}/", server.local_addr())).await;
    ws.send(Message::text("pause")).await.expect("send");
    let writer = tokio::spawn(async move {
        let filler = "x".repeat(FRAME_BYTES);
        for i in 0..FRAMES {
            let text = format!("{i}:{filler}");
            ws.send(Message::text(text)).await.expect("send");
        }
        ws
    });
    let mut writer = Box::pin(writer);

    // Paused time only moves when every task is idle: the writer stays blocked for a minute,
    // twice the pong timeout, because the server does not read.
    let blocked = tokio::time::timeout(Duration::from_secs(60), &mut writer).await;
    assert!(blocked.is_err(), "the peer's writes were not held back");
    let (seen, ended) = handle
        .call(|m: &mut Gate, _| (m.numbered, m.ended))
        .await
        .expect("call");
    assert_eq!(seen, 0, "frames reached the machine while paused");
    assert!(!ended, "a paused connection was closed");

    let conn = handle
        .call(|m: &mut Gate, _| m.conn)
        .await
        .expect("call")
        .expect("connected");
    handle
        .call(move |m: &mut Gate, _| m.out.resume_reading(conn))
        .await
        .expect("call");
    let _ws = within(60, "writes after the resume", writer)
        .await
        .expect("writer");
    within(60, "every frame", events.recv())
        .await
        .expect("the all-there event");
    let (n, bad) = handle
        .call(|m: &mut Gate, _| (m.numbered, m.out_of_order))
        .await
        .expect("call");
    assert_eq!(n, FRAMES);
    assert!(!bad, "frames out of order");
    server.shutdown().await;
}

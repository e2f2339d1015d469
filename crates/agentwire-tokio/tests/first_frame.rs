//! `Limits::first_frame_delay`: a server that greets first holds its first frame after the
//! upgrade, so the greeting never shares a TCP read with the HTTP 101 (the npm `ws` client
//! loses such a frame to code that attaches its listener after `open`). Simulated time.

mod common;

use std::time::{Duration, Instant};

use agentwire_core::{ConnId, Frame, FrameBuf, Machine, Output, PeerInfo};
use agentwire_tokio::{Limits, Server, ServerConfig};
use common::{next_data, raw_client, TestMachine};
use futures_util::SinkExt;
use tokio_tungstenite::tungstenite::Message;

/// An echo machine that greets every connection with "hello" as soon as it connects.
struct Greeter(TestMachine);

impl Machine for Greeter {
    type Event = common::Ev;

    fn handle_connect(&mut self, conn: ConnId, peer: &PeerInfo, now: Instant) {
        self.0.handle_connect(conn, peer, now);
        self.0.out.send(conn, FrameBuf::text("hello"));
    }

    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        self.0.handle_frame(conn, frame, now);
    }

    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        self.0.handle_disconnect(conn, now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.0.handle_timeout(now);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.0.poll_timeout()
    }

    fn poll_output(&mut self) -> Option<Output<common::Ev>> {
        self.0.poll_output()
    }
}

async fn greeter(delay: Duration) -> (Server<Greeter>, String) {
    let limits = Limits::default().with_first_frame_delay(delay);
    let (server, _events) = Server::bind(
        "127.0.0.1:0",
        Greeter(TestMachine::echo()),
        ServerConfig::default().with_limits(limits),
    )
    .await
    .expect("bind");
    let url = format!("ws://{}", server.local_addr());
    (server, url)
}

#[test]
fn first_frame_delay_is_off_by_default() {
    assert_eq!(Limits::default().first_frame_delay, Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn the_greeting_waits_for_the_first_frame_delay() {
    let (server, url) = greeter(Duration::from_millis(20)).await;
    let start = tokio::time::Instant::now();
    let mut ws = raw_client(&url).await;
    assert_eq!(next_data(&mut ws).await, Message::text("hello"));
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(20) && took < Duration::from_secs(1),
        "{took:?}"
    );
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn without_a_delay_the_greeting_goes_out_at_once() {
    let (server, url) = greeter(Duration::ZERO).await;
    let start = tokio::time::Instant::now();
    let mut ws = raw_client(&url).await;
    assert_eq!(next_data(&mut ws).await, Message::text("hello"));
    assert!(
        start.elapsed() < Duration::from_millis(20),
        "{:?}",
        start.elapsed()
    );
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn frames_sent_during_the_hold_are_answered_after_the_greeting_in_order() {
    let (server, url) = greeter(Duration::from_millis(20)).await;
    let mut ws = raw_client(&url).await;
    // The client speaks before the greeting has come: the machine reads it at once, and its
    // echo waits behind the greeting.
    ws.send(Message::text("early")).await.expect("send");
    assert_eq!(next_data(&mut ws).await, Message::text("hello"));
    assert_eq!(next_data(&mut ws).await, Message::text("early"));
    // Later frames are not held.
    let start = tokio::time::Instant::now();
    ws.send(Message::text("later")).await.expect("send");
    assert_eq!(next_data(&mut ws).await, Message::text("later"));
    assert!(
        start.elapsed() < Duration::from_millis(20),
        "{:?}",
        start.elapsed()
    );
    server.shutdown().await;
}

//! The driver re-anchors its machine's wall clock (rule 9 of the `Machine` contract): on the
//! first wake-up, after every period, and at once when the wall clock jumps, with the wall
//! clock read from an injected source and moved under a running server.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire_core::{ConnId, Frame, FrameBuf, Machine, Outbox, Output, PeerInfo, WallClock};
use agentwire_tokio::{Limits, Server, ServerConfig, WallClockSync, WallSource};
use common::*;
use tokio_tungstenite::tungstenite::Message;

/// Answers every frame with its wall clock's Unix milliseconds at that time.
struct Stamp {
    out: Outbox<()>,
    wall: WallClock,
}

impl Machine for Stamp {
    type Event = ();
    fn handle_connect(&mut self, _: ConnId, _: &PeerInfo, _: Instant) {}
    fn handle_frame(&mut self, conn: ConnId, _: Frame<'_>, now: Instant) {
        let ms = self.wall.unix_ms(now);
        self.out.send(conn, FrameBuf::text(ms.to_string()));
    }
    fn handle_disconnect(&mut self, _: ConnId, _: Instant) {}
    fn handle_timeout(&mut self, _: Instant) {}
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn poll_output(&mut self) -> Option<Output<()>> {
        self.out.pop()
    }
    fn handle_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        self.wall.set(now, unix_ms);
    }
}

const BASE: u64 = 1_700_000_000_000;
const HOUR: u64 = 3_600_000;

/// A wall clock that runs with tokio's (paused) clock from `BASE`, plus a step the test
/// sets: what a real clock does across a suspend or an NTP step.
struct TestWall {
    start: tokio::time::Instant,
    step: Arc<AtomicU64>,
}

impl TestWall {
    fn new() -> (Self, WallSource) {
        let start = tokio::time::Instant::now();
        let step = Arc::new(AtomicU64::new(0));
        let read = Arc::clone(&step);
        let source = WallSource::from_fn(move || {
            let elapsed = start.elapsed().as_millis() as u64;
            BASE + elapsed + read.load(Ordering::Relaxed)
        });
        (Self { start, step }, source)
    }

    fn elapsed(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn step(&self, ms: u64) {
        self.step.fetch_add(ms, Ordering::Relaxed);
    }
}

/// A server whose machine starts anchored at Unix time 0, so only the driver can make its
/// answers right.
async fn stamp_server(sync: WallClockSync) -> (Server<Stamp>, RawWs) {
    let machine = Stamp {
        out: Outbox::new(),
        wall: WallClock::new(tokio::time::Instant::now().into_std(), 0),
    };
    // No WebSocket pings: the test's peer reads only when it asks, and time is advanced.
    let limits = Limits::default().with_ping_interval(None);
    let config = ServerConfig::default()
        .with_limits(limits)
        .with_wall_clock(sync);
    let (server, _events) = Server::bind("127.0.0.1:0", machine, config)
        .await
        .expect("bind");
    let ws = raw_client(&format!("ws://{}", server.local_addr())).await;
    (server, ws)
}

/// The machine's wall time as it answers a frame, with the test wall's elapsed time just
/// before the frame was sent and just after the answer came.
async fn ask(ws: &mut RawWs, wall: &TestWall) -> (u64, u64, u64) {
    let before = wall.elapsed();
    let Message::Text(t) = round_trip(ws, Message::text("now?")).await else {
        panic!("text expected");
    };
    let after = wall.elapsed();
    (before, t.parse().expect("a number"), after)
}

#[tokio::test(start_paused = true)]
async fn a_jump_of_the_wall_clock_reaches_the_machine_before_its_next_input() {
    let (wall, source) = TestWall::new();
    let (server, mut ws) = stamp_server(WallClockSync::default().with_source(source)).await;
    let (lo, got, hi) = ask(&mut ws, &wall).await;
    assert!((BASE + lo..=BASE + hi).contains(&got), "anchored: {got}");
    // A suspend: an hour of wall time passes while the monotonic clock stands still.
    wall.step(HOUR);
    let (lo, got, hi) = ask(&mut ws, &wall).await;
    assert!(
        (BASE + HOUR + lo..=BASE + HOUR + hi).contains(&got),
        "re-anchored after the jump: {got}"
    );
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_drift_under_max_jump_is_corrected_at_the_period() {
    let (wall, source) = TestWall::new();
    let sync = WallClockSync::default()
        .with_source(source)
        .with_period(Some(Duration::from_secs(60)))
        .with_max_jump(Duration::from_secs(5));
    let (server, mut ws) = stamp_server(sync).await;
    ask(&mut ws, &wall).await;
    wall.step(2_000); // under max_jump: not a jump
    let (lo, got, hi) = ask(&mut ws, &wall).await;
    assert!((BASE + lo..=BASE + hi).contains(&got), "not yet: {got}");
    tokio::time::advance(Duration::from_secs(61)).await;
    let (lo, got, hi) = ask(&mut ws, &wall).await;
    assert!(
        (BASE + 2_000 + lo..=BASE + 2_000 + hi).contains(&got),
        "corrected at the period: {got}"
    );
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn with_re_anchoring_off_the_machine_keeps_its_own_anchor() {
    let (wall, source) = TestWall::new();
    let (server, mut ws) = stamp_server(WallClockSync::off().with_source(source)).await;
    wall.step(HOUR);
    let (lo, got, hi) = ask(&mut ws, &wall).await;
    assert!((lo..=hi).contains(&got), "still counting from 0: {got}");
    server.shutdown().await;
}

//! Test machines and helpers shared by the transport's tests.
#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::time::{Duration, Instant};

use agentwire_core::{ConnId, Frame, FrameBuf, Machine, Outbox, Output, PeerInfo};
use agentwire_tokio::Events;
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// What the test machine reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ev {
    Connected(ConnId, PeerInfo),
    Text(ConnId, String),
    Binary(ConnId, Vec<u8>),
    Disconnected(ConnId),
    Tick,
}

/// Records everything as events; optionally echoes frames and sends "tick" periodically.
#[derive(Default)]
pub struct TestMachine {
    pub out: Outbox<Ev>,
    pub echo: bool,
    pub conns: Vec<ConnId>,
    pub tick_every: Option<Duration>,
    pub next_tick: Option<Instant>,
}

impl TestMachine {
    pub fn echo() -> Self {
        Self {
            echo: true,
            ..Self::default()
        }
    }

    pub fn recorder() -> Self {
        Self::default()
    }

    pub fn ticking(every: Duration) -> Self {
        Self {
            tick_every: Some(every),
            ..Self::default()
        }
    }
}

impl Machine for TestMachine {
    type Event = Ev;

    fn handle_connect(&mut self, conn: ConnId, peer: &PeerInfo, now: Instant) {
        self.conns.push(conn);
        self.out.event(Ev::Connected(conn, peer.clone()));
        if let (Some(every), None) = (self.tick_every, self.next_tick) {
            self.next_tick = Some(now + every);
        }
    }

    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, _now: Instant) {
        match frame {
            Frame::Text(t) => {
                self.out.event(Ev::Text(conn, t.to_owned()));
                if self.echo {
                    self.out.send(conn, FrameBuf::text(t.to_owned()));
                }
            }
            Frame::Binary(b) => {
                self.out.event(Ev::Binary(conn, b.to_vec()));
                if self.echo {
                    self.out.send(conn, FrameBuf::binary(b.to_vec()));
                }
            }
        }
    }

    fn handle_disconnect(&mut self, conn: ConnId, _now: Instant) {
        self.conns.retain(|c| *c != conn);
        self.out.event(Ev::Disconnected(conn));
    }

    fn handle_timeout(&mut self, now: Instant) {
        if let (Some(at), Some(every)) = (self.next_tick, self.tick_every) {
            if at <= now {
                for c in &self.conns {
                    self.out.send(*c, FrameBuf::text("tick"));
                }
                self.out.event(Ev::Tick);
                self.next_tick = Some(now + every);
            }
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.next_tick
    }

    fn poll_output(&mut self) -> Option<Output<Ev>> {
        self.out.pop()
    }
}

/// Awaits `f`, failing the test after `secs` seconds (tokio time).
pub async fn within<F: Future>(secs: u64, what: &str, f: F) -> F::Output {
    match tokio::time::timeout(Duration::from_secs(secs), f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

/// The next event matching `pred` (others are skipped), bounded by `within`.
pub async fn next_matching(
    events: &mut Events<Ev>,
    what: &str,
    mut pred: impl FnMut(&Ev) -> bool,
) -> Ev {
    within(20, what, async {
        loop {
            match events.recv().await {
                Some(e) if pred(&e) => return e,
                Some(_) => {}
                None => panic!("events ended while waiting for {what}"),
            }
        }
    })
    .await
}

/// The next `Connected` event's id and peer.
pub async fn next_connected(events: &mut Events<Ev>) -> (ConnId, PeerInfo) {
    match next_matching(events, "connect", |e| matches!(e, Ev::Connected(..))).await {
        Ev::Connected(c, p) => (c, p),
        _ => unreachable!(),
    }
}

/// Waits for `Disconnected(conn)`.
pub async fn disconnected(events: &mut Events<Ev>, conn: ConnId) {
    next_matching(events, "disconnect", |e| *e == Ev::Disconnected(conn)).await;
}

pub type RawWs = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A plain tokio-tungstenite client.
pub async fn raw_client(url: &str) -> RawWs {
    let (ws, _) = within(10, "raw connect", tokio_tungstenite::connect_async(url))
        .await
        .expect("connect");
    ws
}

/// Sends `msg` and returns the next text/binary/close message.
pub async fn round_trip(ws: &mut RawWs, msg: Message) -> Message {
    ws.send(msg).await.expect("send");
    next_data(ws).await
}

/// The next text, binary or close message (pings/pongs skipped).
pub async fn next_data(ws: &mut RawWs) -> Message {
    within(10, "message", async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(m)) => return m,
                Some(Err(e)) => panic!("read error: {e}"),
                None => panic!("stream ended"),
            }
        }
    })
    .await
}

/// The close code the peer sent, reading past data; `None` if the socket ended without one.
pub async fn close_code(ws: &mut RawWs) -> Option<u16> {
    within(20, "close", async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Close(f))) => {
                    // Keep polling so tungstenite sends the close reply.
                    while let Some(Ok(_)) = ws.next().await {}
                    return f.map(|f| u16::from(f.code));
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return None,
            }
        }
    })
    .await
}

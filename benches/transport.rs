//! agentwire-tokio over loopback, each figure against a bare tokio-tungstenite baseline
//! measured in the same group and run (absolute numbers drift by up to 40% on shared
//! machines; ratios hold).
//!
//! Groups:
//!
//! - `transport/loopback/echo/{100B,1KiB}`: a client keeps 64 messages in flight (feeds 64,
//!   flushes once, reads 64 echoes). `agentwire` is a no-op echo [`Machine`] driven by
//!   [`Server`]; `bare` is a tokio-tungstenite echo loop that feeds every message that is
//!   already readable and flushes only when no more input is ready (the fast way to write
//!   a bare server; a flush per message would be 5-10x slower and flatter us).
//! - `transport/loopback/rtt`: one 32-byte request at a time, same two servers.
//! - `transport/loopback/oneway/{100B,16KiB}`: the client feeds 256 messages and flushes
//!   once; the server only counts them and answers one small "ack" per 256. This measures
//!   the receive path (socket -> connection task -> owner task -> `handle_frame`) against a bare
//!   loop that counts in place. The client is the same bare feed-then-flush sender for both.
//! - `transport/idle_connections`: opens 1,000 idle WebSocket connections (raw TCP clients
//!   doing the upgrade by hand, so the client side costs no user-space memory) and prints
//!   the server's RSS growth per connection from `/proc/self/status` `VmRSS`, for
//!   agentwire (default limits: 4 KiB read buffer) and for a bare tokio-tungstenite server
//!   with its defaults (measured second, so it can only look better than it is).
//!
//! Latency benches use a current-thread runtime (client and server tasks on one thread; a
//! wake-up across the two cores costs ~50 us here).
//!
//! Run: `cargo bench --bench transport` (add `-- --quick` for a short run). The ratios are
//! printed at the end and recorded in `crates/agentwire-tokio/README.md`.
#![allow(missing_docs)]

use agentwire_testkit::bench::{median_ns, open_idle_websockets, rss_kib};

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use agentwire_core::{ConnId, Frame, FrameBuf, Machine, Outbox, Output, PeerInfo};
use agentwire_tokio::{Limits, Server, ServerConfig};
use criterion::Criterion;
use futures_util::{FutureExt, SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// Messages in flight in the echo benches.
const IN_FLIGHT: usize = 64;
/// Messages per ack in the one-way benches.
const ONEWAY_BATCH: u64 = 256;
/// Connections opened by the idle-connection measurement.
const IDLE_CONNS: usize = 1000;

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// What the server side does with each message.
#[derive(Clone, Copy)]
enum Mode {
    /// Send it back.
    Echo,
    /// Count it; reply "ack" every `ONEWAY_BATCH` messages.
    Count,
}

/// The agentwire side: a machine that echoes or counts.
struct Bench {
    out: Outbox<()>,
    mode: Mode,
    counts: BTreeMap<ConnId, u64>,
}

impl Bench {
    fn new(mode: Mode) -> Self {
        Self {
            out: Outbox::new(),
            mode,
            counts: BTreeMap::new(),
        }
    }
}

impl Machine for Bench {
    type Event = ();

    fn handle_connect(&mut self, conn: ConnId, _: &PeerInfo, _: Instant) {
        self.counts.insert(conn, 0);
    }

    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, _: Instant) {
        match self.mode {
            Mode::Echo => {
                let reply = match frame {
                    Frame::Text(t) => FrameBuf::text(t.to_owned()),
                    Frame::Binary(b) => FrameBuf::binary(bytes::Bytes::copy_from_slice(b)),
                };
                self.out.send(conn, reply);
            }
            Mode::Count => {
                let n = self.counts.entry(conn).or_insert(0);
                *n += 1;
                if *n % ONEWAY_BATCH == 0 {
                    self.out.send(conn, FrameBuf::text("ack"));
                }
            }
        }
    }

    fn handle_disconnect(&mut self, conn: ConnId, _: Instant) {
        self.counts.remove(&conn);
    }

    fn handle_timeout(&mut self, _: Instant) {}

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn poll_output(&mut self) -> Option<Output<()>> {
        self.out.pop()
    }
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn criterion() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .configure_from_args()
}

/// Starts an agentwire server with `mode`; returns its address (the server keeps running).
async fn ours(mode: Mode) -> SocketAddr {
    let (server, _events) = Server::bind("127.0.0.1:0", Bench::new(mode), ServerConfig::default())
        .await
        .expect("bind");
    let addr = server.local_addr();
    std::mem::forget(server); // runs until the runtime is dropped
    addr
}

/// Starts a bare tokio-tungstenite server with `mode` and `config`.
async fn bare(
    mode: Mode,
    config: Option<tokio_tungstenite::tungstenite::protocol::WebSocketConfig>,
) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let _ = tcp.set_nodelay(true);
            tokio::spawn(bare_conn(tcp, mode, config));
        }
    });
    addr
}

/// One bare connection: handle every message already readable, then flush once.
async fn bare_conn(
    tcp: TcpStream,
    mode: Mode,
    config: Option<tokio_tungstenite::tungstenite::protocol::WebSocketConfig>,
) {
    let Ok(mut ws) = tokio_tungstenite::accept_async_with_config(tcp, config).await else {
        return;
    };
    let mut count = 0u64;
    while let Some(Ok(first)) = ws.next().await {
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            if msg.is_text() || msg.is_binary() {
                match mode {
                    Mode::Echo => {
                        if ws.feed(msg).await.is_err() {
                            return;
                        }
                    }
                    Mode::Count => {
                        count += 1;
                        if count % ONEWAY_BATCH == 0 && ws.feed(Message::text("ack")).await.is_err()
                        {
                            return;
                        }
                    }
                }
            }
            if let Some(Some(Ok(m))) = ws.next().now_or_never() {
                next = Some(m);
            }
        }
        if ws.flush().await.is_err() {
            return;
        }
    }
}

/// A bare client with the same limits and `TCP_NODELAY`.
async fn client(addr: SocketAddr) -> Ws {
    let url = format!("ws://{addr}/");
    let config = Limits::default().websocket_config();
    let (ws, _) = tokio_tungstenite::connect_async_with_config(url, Some(config), true)
        .await
        .expect("connect");
    ws
}

/// Feeds `n` copies of `msg`, flushes, and reads `n` echoes.
async fn echo_round(ws: &mut Ws, msg: &Message, n: usize) {
    for _ in 0..n {
        ws.feed(msg.clone()).await.expect("feed");
    }
    ws.flush().await.expect("flush");
    let mut got = 0;
    while got < n {
        match ws.next().await {
            Some(Ok(m)) if m.is_text() || m.is_binary() => got += 1,
            Some(Ok(_)) => {}
            other => panic!("echo ended: {other:?}"),
        }
    }
}

/// Feeds `ONEWAY_BATCH` copies of `msg`, flushes, and waits for the ack.
async fn oneway_round(ws: &mut Ws, msg: &Message) {
    for _ in 0..ONEWAY_BATCH {
        ws.feed(msg.clone()).await.expect("feed");
    }
    ws.flush().await.expect("flush");
    loop {
        match ws.next().await {
            Some(Ok(m)) if m.is_text() => return,
            Some(Ok(_)) => {}
            other => panic!("oneway ended: {other:?}"),
        }
    }
}

/// Times `iters` rounds of `round` on tokio's clock.
fn timed<F>(rt: &Runtime, ws: &mut Ws, iters: u64, mut round: F) -> Duration
where
    F: AsyncFnMut(&mut Ws),
{
    rt.block_on(async {
        let start = tokio::time::Instant::now();
        for _ in 0..iters {
            round(ws).await;
        }
        start.elapsed()
    })
}

fn loopback_echo(c: &mut Criterion) {
    let rt = runtime();
    let (ours_addr, bare_addr) = rt.block_on(async {
        (
            ours(Mode::Echo).await,
            bare(Mode::Echo, Some(Limits::default().websocket_config())).await,
        )
    });
    let mut ours_ws = rt.block_on(client(ours_addr));
    let mut bare_ws = rt.block_on(client(bare_addr));
    for (name, size) in [("100B", 100usize), ("1KiB", 1024)] {
        let msg = Message::text("x".repeat(size));
        let mut g = c.benchmark_group(format!("transport/loopback/echo/{name}"));
        g.throughput(criterion::Throughput::Elements(IN_FLIGHT as u64));
        g.bench_function("agentwire", |b| {
            b.iter_custom(|iters| {
                timed(&rt, &mut ours_ws, iters, async |ws| {
                    echo_round(ws, &msg, IN_FLIGHT).await
                })
            })
        });
        g.bench_function("bare", |b| {
            b.iter_custom(|iters| {
                timed(&rt, &mut bare_ws, iters, async |ws| {
                    echo_round(ws, &msg, IN_FLIGHT).await
                })
            })
        });
        g.finish();
    }
    let msg = Message::text("r".repeat(32));
    let mut g = c.benchmark_group("transport/loopback/rtt");
    g.bench_function("agentwire", |b| {
        b.iter_custom(|iters| {
            timed(&rt, &mut ours_ws, iters, async |ws| {
                echo_round(ws, &msg, 1).await
            })
        })
    });
    g.bench_function("bare", |b| {
        b.iter_custom(|iters| {
            timed(&rt, &mut bare_ws, iters, async |ws| {
                echo_round(ws, &msg, 1).await
            })
        })
    });
    g.finish();
}

fn loopback_oneway(c: &mut Criterion) {
    let rt = runtime();
    let (ours_addr, bare_addr) = rt.block_on(async {
        (
            ours(Mode::Count).await,
            bare(Mode::Count, Some(Limits::default().websocket_config())).await,
        )
    });
    let mut ours_ws = rt.block_on(client(ours_addr));
    let mut bare_ws = rt.block_on(client(bare_addr));
    for (name, size) in [("100B", 100usize), ("16KiB", 16 << 10)] {
        let msg = Message::binary(vec![5u8; size]);
        let mut g = c.benchmark_group(format!("transport/loopback/oneway/{name}"));
        g.throughput(criterion::Throughput::Bytes(ONEWAY_BATCH * size as u64));
        g.bench_function("agentwire", |b| {
            b.iter_custom(|iters| {
                timed(&rt, &mut ours_ws, iters, async |ws| {
                    oneway_round(ws, &msg).await
                })
            })
        });
        g.bench_function("bare", |b| {
            b.iter_custom(|iters| {
                timed(&rt, &mut bare_ws, iters, async |ws| {
                    oneway_round(ws, &msg).await
                })
            })
        });
        g.finish();
    }
}

/// RSS growth per idle connection (KiB), agentwire first, then bare tokio-tungstenite.
fn idle_connections() -> Option<(f64, f64)> {
    let rt = runtime();
    let ours_kib = rt.block_on(async {
        // All 1,000 come from 127.0.0.1: lift the per-address cap (default 256) for them.
        let (server, _events) = Server::bind(
            "127.0.0.1:0",
            Bench::new(Mode::Count),
            ServerConfig::default().with_max_connections_per_address(IDLE_CONNS),
        )
        .await
        .expect("bind");
        let handle = server.handle();
        let before = rss_kib()?;
        let socks = open_idle_websockets(server.local_addr(), IDLE_CONNS).await;
        // Every connection has reached the machine (and its tasks are running).
        for _ in 0..1000 {
            let n = handle.call(|m: &mut Bench, _| m.counts.len()).await.ok()?;
            if n == IDLE_CONNS {
                break;
            }
            tokio::task::yield_now().await;
        }
        let after = rss_kib()?;
        drop(socks);
        server.shutdown().await;
        Some(after.saturating_sub(before) as f64 / IDLE_CONNS as f64)
    })?;
    let bare_kib = rt.block_on(async {
        let addr = bare(Mode::Count, None).await;
        let before = rss_kib()?;
        let socks = open_idle_websockets(addr, IDLE_CONNS).await;
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        let after = rss_kib()?;
        drop(socks);
        Some(after.saturating_sub(before) as f64 / IDLE_CONNS as f64)
    })?;
    Some((ours_kib, bare_kib))
}

fn print_ratios(idle: Option<(f64, f64)>) {
    println!();
    println!("transport ratios (medians of this run; time agentwire / time bare, lower is better)");
    for group in [
        "transport/loopback/echo/100B",
        "transport/loopback/echo/1KiB",
        "transport/loopback/rtt",
        "transport/loopback/oneway/100B",
        "transport/loopback/oneway/16KiB",
    ] {
        let (Some(o), Some(b)) = (median_ns(group, "agentwire"), median_ns(group, "bare")) else {
            println!("  {group}: no estimates found");
            continue;
        };
        println!(
            "  {group}: agentwire {o:.0} ns, bare {b:.0} ns -> {:.2}x time ({:.2}x throughput)",
            o / b,
            b / o
        );
    }
    match idle {
        Some((ours, bare)) => println!(
            "  transport/idle_connections: agentwire {ours:.1} KiB/connection (target <= 32), \
             bare tokio-tungstenite defaults {bare:.1} KiB/connection -> {:.2}x",
            ours / bare.max(0.1)
        ),
        None => println!("  transport/idle_connections: /proc/self/status not readable"),
    }
}

fn main() {
    let mut c = criterion();
    loopback_echo(&mut c);
    loopback_oneway(&mut c);
    let idle = idle_connections();
    c.final_summary();
    print_ratios(idle);
}

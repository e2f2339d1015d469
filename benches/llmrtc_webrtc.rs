//! llmrtc over WebRTC on loopback: the reference server with WebRTC
//! (`server_app::start_webrtc`) and the reference client (`LlmrtcClientApp`), every figure
//! against the WebSocket path measured in the same group and run (absolute numbers drift on
//! shared machines; ratios hold better, except the latency's, which depends on how busy the
//! machine is: see the crate README).
//!
//! Groups (criterion):
//!
//! - `llmrtc_webrtc/latency`: one payload message (`error`, which goes on both channels)
//!   from a server command to the client's event, with the server on a runtime and thread
//!   of its own and the clients on another: the latency a client sees, both ends working at
//!   once. `data_channel` for a client whose data channel is open (the WebSocket copy is
//!   set aside), `websocket` for a client without WebRTC on the same server. Printed with
//!   it: per message, the datagrams each end sent on the data channel path, and how often
//!   each thread was woken (its voluntary context switches) on either path.
//! - `llmrtc_webrtc/payload`: the same message with server and clients on one
//!   current-thread runtime, so one thread does the server's and the client's work one after
//!   the other: the sum of both ends' CPU per message, not a latency.
//! - `llmrtc_webrtc/burst_200`: 200 payload messages from one command, until the client
//!   has all of them (messages per second through one data channel, and through one
//!   WebSocket; 200 stays under the transport's 256-frame send queue per connection).
//!
//! Measured once per run and printed:
//!
//! - memory (first, before anything is freed, so no measurement reuses another's freed
//!   memory): RSS growth per idle WebSocket session without WebRTC (1,000 raw upgrades that
//!   never read) on a server without WebRTC and on the WebRTC server, then per connected
//!   WebRTC session (100 sessions, both ends in this process, so the server's share is at
//!   most that);
//! - setup: offer -> data channel open (client start to `ChannelOpen`), median of 20, and
//!   the CPU time of both peers per setup (this thread's `schedstat`: the runtime is
//!   current-thread), and setups per second done one after another.
//!
//! Run: `cargo bench --bench llmrtc_webrtc` (add `-- --quick` for a short run; a group's
//! name, e.g. `-- llmrtc_webrtc/latency`, runs that group alone, and
//! `llmrtc_webrtc/setup` and `llmrtc_webrtc/memory` name the once-per-run figures). The
//! figures are printed at the end and recorded in `crates/llmrtc-webrtc/README.md`.
#![allow(missing_docs)]

use std::time::Duration;

use agentwire::core::ConnId;
use agentwire::llmrtc::{ClientConfig, ClientEvent, ErrorCode, ServerConfig, ServerEvent};
use agentwire::llmrtc::{Reconnection, ServerMessage};
use agentwire_server::common::AddressLimits;
use agentwire_server::llmrtc::client_app::LlmrtcClientApp;
use agentwire_server::llmrtc::providers::{Providers, ScriptedStt};
use agentwire_server::llmrtc::server_app::{self, LlmrtcApp, Pacing, WebrtcOptions};
use agentwire_server::llmrtc::webrtc::{AudioOffer, WebrtcClientEvent};
use agentwire_testkit::bench::{family_filter, median_ns, open_idle_websockets, rss_kib};
use criterion::Criterion;
use tokio::net::TcpStream;
use tokio::runtime::Runtime;
use tokio::sync::mpsc;

/// Messages per burst: one command's worth, under the transport's 256-frame send queue
/// (a command that queues more than that for one connection closes it as a slow reader).
const BURST: usize = 200;
/// Setups timed.
const SETUPS: usize = 20;
/// Connected WebRTC sessions measured.
const RTC_SESSIONS: usize = 100;
/// Idle WebSocket sessions measured.
const IDLE_CONNS: usize = 1000;
/// Bound of every wait.
const PATIENCE: Duration = Duration::from_secs(30);

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A runtime whose tasks run on one worker thread of its own (`block_on` only waits), for
/// the server of `llmrtc_webrtc/latency`.
fn server_runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("llmrtc-server")
        .enable_all()
        .build()
        .expect("runtime")
}

/// The server with WebRTC; its connections are reported on the receiver.
async fn server() -> (LlmrtcApp, mpsc::UnboundedReceiver<ConnId>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = server_app::start_webrtc(
        "127.0.0.1:0",
        ServerConfig::default(),
        WebrtcOptions::default(),
        Providers::stand_ins(ScriptedStt::example()),
        Pacing::fast(),
        move |e| {
            if let ServerEvent::SessionStarted { conn, .. } = e {
                let _ = tx.send(*conn);
            }
        },
    )
    .await
    .expect("bind");
    (app, rx)
}

fn client_config() -> ClientConfig {
    let mut r = Reconnection::default();
    r.base_delay = Duration::from_millis(20);
    ClientConfig::default().with_reconnection(r)
}

async fn channel_open(c: &mut LlmrtcClientApp) {
    c.wait_for_event(
        "data channel",
        PATIENCE,
        |_| {},
        |e| matches!(e, WebrtcClientEvent::ChannelOpen),
    )
    .await
    .expect("data channel open");
}

async fn ready(c: &mut LlmrtcClientApp) {
    c.wait_for(
        "ready",
        PATIENCE,
        |_| {},
        |e| matches!(e, ClientEvent::Ready { .. }),
    )
    .await
    .expect("ready");
}

/// Sends `n` payload messages to `conn` in one command and waits until the client has
/// them all.
async fn payloads(app: &LlmrtcApp, conn: ConnId, c: &mut LlmrtcClientApp, n: usize) {
    app.handle
        .call(move |m, _| {
            for _ in 0..n {
                m.send_error(conn, ErrorCode::INTERNAL_ERROR, "bench")
                    .expect("send");
            }
        })
        .await
        .expect("call");
    let mut got = 0;
    c.wait_for(
        "payloads",
        PATIENCE,
        |_| {},
        |e| {
            if matches!(e, ClientEvent::Message(ServerMessage::Error(_))) {
                got += 1;
            }
            got == n
        },
    )
    .await
    .expect("payloads");
}

/// A server with one WebRTC client (channel open) and one WebSocket-only client.
struct Pair {
    app: LlmrtcApp,
    rtc: (ConnId, LlmrtcClientApp),
    ws: (ConnId, LlmrtcClientApp),
}

async fn pair() -> Pair {
    let (app, mut conns) = server().await;
    let mut ws = LlmrtcClientApp::start(&app.url(), client_config(), 1)
        .await
        .expect("client");
    ready(&mut ws).await;
    let ws_conn = conns.recv().await.expect("conn");
    let mut rtc = LlmrtcClientApp::start_webrtc(&app.url(), client_config(), 2, AudioOffer::None)
        .await
        .expect("client");
    channel_open(&mut rtc).await;
    let rtc_conn = conns.recv().await.expect("conn");
    Pair {
        app,
        rtc: (rtc_conn, rtc),
        ws: (ws_conn, ws),
    }
}

fn timed(
    rt: &Runtime,
    app: &LlmrtcApp,
    target: &mut (ConnId, LlmrtcClientApp),
    iters: u64,
    n: usize,
) -> Duration {
    rt.block_on(async {
        let start = tokio::time::Instant::now();
        for _ in 0..iters {
            payloads(app, target.0, &mut target.1, n).await;
        }
        start.elapsed()
    })
}

/// `llmrtc_webrtc/latency`: the server's tasks on a worker thread of their own, the
/// clients' and the timing on this thread; one message per iteration.
fn latency_bench(c: &mut Criterion) {
    let server_rt = server_runtime();
    let (app, mut conns) = server_rt.block_on(server());
    let rt = runtime();
    let (mut rtc, mut ws) = rt.block_on(async {
        let mut ws = LlmrtcClientApp::start(&app.url(), client_config(), 1)
            .await
            .expect("client");
        ready(&mut ws).await;
        let ws_conn = conns.recv().await.expect("conn");
        let mut rtc =
            LlmrtcClientApp::start_webrtc(&app.url(), client_config(), 2, AudioOffer::None)
                .await
                .expect("client");
        channel_open(&mut rtc).await;
        let rtc_conn = conns.recv().await.expect("conn");
        ((rtc_conn, rtc), (ws_conn, ws))
    });
    let mut g = c.benchmark_group("llmrtc_webrtc/latency");
    g.throughput(criterion::Throughput::Elements(1));
    let server_before = app.server.udp_stats();
    let client_before = rtc.1.udp_stats();
    let (messages, sleeps) = counted(&mut g, "data_channel", &rt, &app, &mut rtc);
    // Datagrams per data-channel message, warm-up included: the message's own, and the
    // client's SACKs (keep-alives over the few seconds are a rounding error).
    if let (Some(s0), Some(s1), Some(c0), Some(c1)) = (
        server_before,
        app.server.udp_stats(),
        client_before,
        rtc.1.udp_stats(),
    ) {
        let per = |n: u64| n as f64 / messages.max(1) as f64;
        println!(
            "llmrtc_webrtc/latency/data_channel: per message, the server sent {:.2} datagrams \
             ({:.0} bytes), the client {:.2} ({:.0} bytes), over {messages} messages",
            per(s1.sent - s0.sent),
            per(s1.sent_bytes - s0.sent_bytes),
            per(c1.sent - c0.sent),
            per(c1.sent_bytes - c0.sent_bytes),
        );
    }
    Sleeps::report("data_channel", sleeps, messages);
    let (messages, sleeps) = counted(&mut g, "websocket", &rt, &app, &mut ws);
    Sleeps::report("websocket", sleeps, messages);
    g.finish();
    rt.block_on(async {
        rtc.1.close().await;
        ws.1.close().await;
    });
    server_rt.block_on(app.shutdown());
}

/// Times `function` of the latency group on `target` (one message per iteration) and
/// returns the messages sent, warm-up included, with the threads' wake-up counts around it.
fn counted(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    function: &str,
    rt: &Runtime,
    app: &LlmrtcApp,
    target: &mut (ConnId, LlmrtcClientApp),
) -> (u64, Option<(Sleeps, Sleeps)>) {
    let mut messages = 0u64;
    let before = Sleeps::now();
    g.bench_function(function, |b| {
        b.iter_custom(|iters| {
            messages += iters;
            timed(rt, app, target, iters, 1)
        })
    });
    (messages, Sleeps::since(before))
}

/// Voluntary context switches so far (each a sleep the thread was woken from) of this thread
/// (the clients') and of the server runtime's worker (`llmrtc-server`), from `/proc`.
#[derive(Debug, Clone, Copy)]
struct Sleeps {
    client: u64,
    server: u64,
}

impl Sleeps {
    fn now() -> Option<Self> {
        let client = voluntary_switches(std::path::Path::new("/proc/thread-self"))?;
        let mut server = None;
        for task in std::fs::read_dir("/proc/self/task").ok()? {
            let dir = task.ok()?.path();
            let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
            if comm.trim_end() == "llmrtc-server" {
                *server.get_or_insert(0) += voluntary_switches(&dir)?;
            }
        }
        Some(Self {
            client,
            server: server?,
        })
    }

    /// The counts now paired with `before`: `(after, before)`.
    fn since(before: Option<Self>) -> Option<(Self, Self)> {
        Self::now().zip(before)
    }

    /// Prints the wake-ups per message of `function` between `before` and `after`.
    fn report(function: &str, span: Option<(Self, Self)>, messages: u64) {
        let Some((after, before)) = span else {
            return;
        };
        let per = |n: u64| n as f64 / messages.max(1) as f64;
        println!(
            "llmrtc_webrtc/latency/{function}: per message, the client's thread woke {:.2} \
             times, the server's {:.2}",
            per(after.client - before.client),
            per(after.server - before.server),
        );
    }
}

/// `voluntary_ctxt_switches` of the task whose `/proc` directory is `dir`.
fn voluntary_switches(dir: &std::path::Path) -> Option<u64> {
    let status = std::fs::read_to_string(dir.join("status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?
        .trim()
        .parse()
        .ok()
}

fn payload_benches(c: &mut Criterion) {
    let rt = runtime();
    let mut p = rt.block_on(pair());
    for (group, n) in [
        ("llmrtc_webrtc/payload".to_owned(), 1usize),
        (format!("llmrtc_webrtc/burst_{BURST}"), BURST),
    ] {
        let mut g = c.benchmark_group(group);
        g.throughput(criterion::Throughput::Elements(n as u64));
        if n > 1 {
            g.sample_size(10);
        }
        g.bench_function("data_channel", |b| {
            b.iter_custom(|iters| timed(&rt, &p.app, &mut p.rtc, iters, n))
        });
        g.bench_function("websocket", |b| {
            b.iter_custom(|iters| timed(&rt, &p.app, &mut p.ws, iters, n))
        });
        g.finish();
    }
    rt.block_on(async {
        p.rtc.1.close().await;
        p.ws.1.close().await;
        p.app.shutdown().await;
    });
}

/// This thread's CPU time so far (`/proc/thread-self/schedstat`, nanoseconds).
fn thread_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Setup figures: median ms offer -> open, CPU ms per setup, setups per second.
struct Setup {
    median_ms: f64,
    cpu_ms: Option<f64>,
    per_second: f64,
}

fn setups() -> Setup {
    let rt = runtime();
    rt.block_on(async {
        let (app, _conns) = server().await;
        let mut times = Vec::with_capacity(SETUPS);
        let cpu_before = thread_cpu_ns();
        let all = tokio::time::Instant::now();
        for seed in 0..SETUPS as u64 {
            let start = tokio::time::Instant::now();
            let mut c =
                LlmrtcClientApp::start_webrtc(&app.url(), client_config(), seed, AudioOffer::None)
                    .await
                    .expect("client");
            channel_open(&mut c).await;
            times.push(start.elapsed());
            c.close().await;
        }
        let wall = all.elapsed();
        let cpu = cpu_before
            .zip(thread_cpu_ns())
            .map(|(a, b)| b.saturating_sub(a) as f64 / 1e6 / SETUPS as f64);
        app.shutdown().await;
        times.sort();
        Setup {
            median_ms: times[SETUPS / 2].as_secs_f64() * 1e3,
            cpu_ms: cpu,
            per_second: SETUPS as f64 / wall.as_secs_f64(),
        }
    })
}

/// Memory figures, KiB of RSS growth: per idle WebSocket session without WebRTC, on a
/// server without WebRTC and on the WebRTC server, and per connected WebRTC session (both
/// ends in this process).
///
/// Measured first in the run, and nothing is freed between the three (freed memory would be
/// reused by the next measurement and hide its growth).
struct Memory {
    idle_plain: f64,
    idle_webrtc: f64,
    rtc_session: f64,
}

async fn idle_sessions(app: &LlmrtcApp) -> Option<(f64, Vec<TcpStream>)> {
    let before = rss_kib()?;
    let socks = open_idle_websockets(app.local_addr(), IDLE_CONNS).await;
    for _ in 0..1000 {
        let n = app.handle.call(|m, _| m.connections()).await.ok()?;
        if n == IDLE_CONNS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // `ready` goes out after the first-frame delay.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let after = rss_kib()?;
    Some((
        after.saturating_sub(before) as f64 / IDLE_CONNS as f64,
        socks,
    ))
}

fn memory(rt: &Runtime) -> Option<Memory> {
    AddressLimits {
        max_connections_per_address: IDLE_CONNS * 2,
        max_pending_handshakes_per_address: IDLE_CONNS * 2,
    }
    .install();
    rt.block_on(async {
        let plain = server_app::start(
            "127.0.0.1:0",
            ServerConfig::default(),
            Providers::stand_ins(ScriptedStt::example()),
            Pacing::fast(),
            |_| {},
        )
        .await
        .expect("bind");
        let (rtc_app, _conns) = server().await;
        // The connected sessions get a server of their own: the idle ones fill the first
        // one's connection limit.
        let (sessions_app, _conns2) = server().await;
        // Warm up: the first WebRTC session pays for lazily built tables.
        let mut warm = LlmrtcClientApp::start_webrtc(
            &sessions_app.url(),
            client_config(),
            99,
            AudioOffer::None,
        )
        .await
        .expect("client");
        channel_open(&mut warm).await;
        let (idle_plain, plain_socks) = idle_sessions(&plain).await?;
        let (idle_webrtc, rtc_socks) = idle_sessions(&rtc_app).await?;
        let before = rss_kib()?;
        let mut clients = Vec::with_capacity(RTC_SESSIONS);
        for seed in 0..RTC_SESSIONS as u64 {
            let mut c = LlmrtcClientApp::start_webrtc(
                &sessions_app.url(),
                client_config(),
                seed,
                AudioOffer::None,
            )
            .await
            .expect("client");
            channel_open(&mut c).await;
            clients.push(c);
        }
        let after = rss_kib()?;
        let rtc_session = after.saturating_sub(before) as f64 / RTC_SESSIONS as f64;
        drop((plain_socks, rtc_socks));
        for c in clients {
            c.close().await;
        }
        warm.close().await;
        sessions_app.shutdown().await;
        rtc_app.shutdown().await;
        plain.shutdown().await;
        Some(Memory {
            idle_plain,
            idle_webrtc,
            rtc_session,
        })
    })
}

/// Prints the figures of this run: the criterion groups `ran` names (their estimates on
/// disk may be from an earlier run otherwise), setup and memory when measured.
fn report(ran: &[String], setup: Option<&Setup>, memory: Option<&Memory>) {
    println!();
    println!("llmrtc over WebRTC (medians of this run; data channel / WebSocket, lower is better)");
    for group in ran {
        let (Some(d), Some(w)) = (
            median_ns(group, "data_channel"),
            median_ns(group, "websocket"),
        ) else {
            println!("  {group}: no estimates (filtered out?)");
            continue;
        };
        println!(
            "  {group}: data channel {:.1} us, websocket {:.1} us, ratio {:.2}x",
            d / 1e3,
            w / 1e3,
            d / w
        );
        if group.contains("burst") {
            println!(
                "    messages/s: data channel {:.0}, websocket {:.0}",
                BURST as f64 / (d / 1e9),
                BURST as f64 / (w / 1e9)
            );
        }
    }
    if let Some(setup) = setup {
        println!(
            "  setup (offer -> data channel open): median {:.1} ms of {SETUPS}; {:.1} setups/s \
             one after another; CPU per setup, both peers: {}",
            setup.median_ms,
            setup.per_second,
            setup
                .cpu_ms
                .map_or("n/a".to_owned(), |ms| format!("{ms:.1} ms"))
        );
    }
    match memory {
        Some(m) => {
            println!(
                "  memory per connected WebRTC session (both ends in this process): {:.0} KiB",
                m.rtc_session
            );
            println!(
                "  memory per idle WebSocket session: {:.1} KiB on the WebRTC server, {:.1} KiB \
                 on a server without WebRTC",
                m.idle_webrtc, m.idle_plain
            );
        }
        None => println!("  memory: not measured (not asked for, or no /proc)"),
    }
}

fn main() {
    let wants = family_filter();
    let memory = if wants("llmrtc_webrtc/memory") {
        memory(&runtime())
    } else {
        None
    };
    let mut c = Criterion::default()
        .configure_from_args()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    let mut ran = Vec::new();
    if wants("llmrtc_webrtc/latency") {
        latency_bench(&mut c);
        ran.push("llmrtc_webrtc/latency".to_owned());
    }
    let payload = "llmrtc_webrtc/payload".to_owned();
    let burst = format!("llmrtc_webrtc/burst_{BURST}");
    if wants(&payload) || wants(&burst) {
        payload_benches(&mut c);
        ran.extend([payload, burst].into_iter().filter(|g| wants(g)));
    }
    c.final_summary();
    let setup = wants("llmrtc_webrtc/setup").then(setups);
    report(&ran, setup.as_ref(), memory.as_ref());
}

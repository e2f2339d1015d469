//! agent-relay benchmarks, each figure against a baseline measured in the same group and run
//! (absolute numbers drift by up to 40% on shared machines; ratios hold).
//!
//! Groups:
//!
//! - `relay/decode/{tool.call,state.updated-16KiB}`: the typed decode of a whole message,
//!   envelope included (`Envelope::<AgentMessage>::decode` of the spec's `tool.call`,
//!   `Envelope::<HostMessage>::decode` of a `state.updated` of 16 KiB carrying a movie
//!   screen's `uiSpec` and a chat history), vs `serde_json::from_slice::<Value>` of the same
//!   bytes.
//! - `relay/forward/loopback`: one agent -> relay -> host -> relay -> agent `tool.call` /
//!   `tool.result` round trip over real sockets (agentwire-tokio server on 127.0.0.1, raw
//!   tokio-tungstenite agent and host, the host answering at once), with the study log off
//!   (the bare `Relay`) and on (the examples' `LoggingRelay` writing JSONL into a temp dir, a
//!   `write` per record), vs two bare request/response round trips to an agentwire-tokio
//!   server whose machine answers each frame with a fixed reply, in the same run.
//!
//! Loopback benches use a current-thread runtime (a wake-up across the two cores costs
//! ~50 us here). Run: `cargo bench --bench relay` (about a minute). The ratios are printed at
//! the end and recorded in `crates/agent-relay-proto/README.md`.
#![allow(missing_docs)]

use agentwire_testkit::bench::{median_ns, paired, Paired};
use std::hint::black_box;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use agent_relay_proto::{
    AgentMessage, Envelope, HostMessage, Limits as RelayLimits, Relay, RelayConfig, ENDPOINT_PATH,
};
use agentwire_core::{ConnId, Frame, FrameBuf, Machine, Outbox, Output, PeerInfo, UuidV4Ids};
use agentwire_server::relay;
use agentwire_tokio::{Limits, Server, ServerConfig};
use criterion::Criterion;
use futures_util::{SinkExt, StreamExt};
use relay::log_writer::{StudyLog, SyncPolicy};
use relay::logging_relay::LoggingRelay;
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio::runtime::Runtime;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// 2026-02-13T10:22:17.123Z.
const UNIX_MS: u64 = 1_770_978_137_123;
const MAX: usize = 1 << 20;

fn criterion() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1500))
        .configure_from_args()
}

#[allow(clippy::disallowed_methods)] // the bench's one base time
fn t0() -> Instant {
    Instant::now()
}

// ---------------------------------------------------------------------------------------
// relay/decode
// ---------------------------------------------------------------------------------------

const TOOL_CALL: &str = r#"{"v":"mvp-0.2","type":"tool.call","id":"req-003","payload":{"toolName":"select","params":{"itemId":"m1"},"reason":"Pick the first available movie option to continue the flow."}}"#;

/// A `state.updated` of about 16 KiB: a seat screen's `uiSpec` (40 seats with their fields,
/// filters, highlights, notes, the booking) and a chat history, padded to 16 KiB exactly.
fn state_updated_16k() -> String {
    let seats: Vec<Value> = (0..40)
        .map(|i| {
            json!({"id": format!("{}{}", (b'A' + (i / 8) as u8) as char, i % 8 + 1),
                   "row": ((b'A' + (i / 8) as u8) as char).to_string(), "number": i % 8 + 1,
                   "type": if i >= 24 { "premium" } else { "standard" },
                   "available": i % 3 != 0, "selected": i == 10,
                   "note": if i % 5 == 0 { Value::from("Good view of the screen") } else { Value::Null }})
        })
        .collect();
    let mut history: Vec<Value> = Vec::new();
    let mut i = 0;
    loop {
        let mut v = json!({"v": "mvp-0.2", "type": "state.updated", "payload": {
            "source": "tool",
            "uiSpec": {"stage": "seat", "stageIndex": 4, "title": "Choose your seats",
                       "stages": ["movie", "theater", "date", "time", "seat", "ticket", "confirm"],
                       "items": seats, "itemCount": 40,
                       "modifications": {"filters": [{"field": "available", "operator": "eq", "value": true}],
                                         "sort": null, "highlights": {"C3": "glow"}, "augments": {}},
                       "booking": {"movie": {"id": "m6", "label": "Glass Mountain"}, "seats": ["C3"],
                                   "tickets": {}, "ticketCount": 0, "totalCents": 0, "status": "open", "reference": null}},
            "messageHistory": history}});
        let len = v.to_string().len();
        if len >= 16 * 1024 - 120 {
            // Pad the last chat line to exactly 16 KiB.
            let pad = 16 * 1024 - len;
            if let Some(last) = v["payload"]["messageHistory"]
                .as_array_mut()
                .and_then(|h| h.last_mut())
            {
                let text = last["text"].as_str().unwrap_or_default().to_owned() + &"x".repeat(pad);
                last["text"] = Value::from(text);
            }
            let s = v.to_string();
            assert_eq!(s.len(), 16 * 1024);
            return s;
        }
        history.push(json!({"role": if i % 2 == 0 { "user" } else { "agent" },
                            "text": format!("Message {i}: which seats are still free near the middle?")}));
        i += 1;
    }
}

fn decode(c: &mut Criterion, out: &mut Vec<Paired>) {
    let state = state_updated_16k();
    let cases: [(&str, &str, bool); 2] = [
        ("tool.call", TOOL_CALL, true),
        ("state.updated-16KiB", &state, false),
    ];
    for (name, text, agent) in cases {
        let typed = move || {
            if agent {
                let e = Envelope::<AgentMessage>::decode(Frame::Text(black_box(text)), MAX);
                black_box(e.is_ok())
            } else {
                let e = Envelope::<HostMessage>::decode(Frame::Text(black_box(text)), MAX);
                black_box(e.is_ok())
            }
        };
        assert!(typed(), "{name} decodes");
        let value =
            move || black_box(serde_json::from_slice::<Value>(black_box(text.as_bytes())).is_ok());
        let group = format!("relay/decode/{name}");
        let mut g = c.benchmark_group(&group);
        g.throughput(criterion::Throughput::Bytes(text.len() as u64));
        g.bench_function("typed", |b| b.iter(typed));
        g.bench_function("serde_json_value", |b| b.iter(value));
        g.finish();
        out.push(paired(
            group,
            || {
                typed();
            },
            || {
                value();
            },
        ));
    }
}

// ---------------------------------------------------------------------------------------
// relay/forward/loopback
// ---------------------------------------------------------------------------------------

const RESULT: &str = r#"{"v":"mvp-0.2","type":"tool.result","replyTo":"req-003","payload":{"ok":true,"toolName":"select"}}"#;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

async fn connect(addr: SocketAddr) -> Ws {
    let url = format!("ws://{addr}{ENDPOINT_PATH}");
    let config = Limits::default().websocket_config();
    let (ws, _) = tokio_tungstenite::connect_async_with_config(url, Some(config), true)
        .await
        .expect("connect");
    ws
}

/// Sends `text` and waits for the next text message.
async fn round_trip(ws: &mut Ws, text: &str) -> String {
    ws.send(Message::text(text.to_owned())).await.expect("send");
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(t))) => return t.to_string(),
            Some(Ok(_)) => {}
            other => panic!("connection ended: {other:?}"),
        }
    }
}

async fn join(addr: SocketAddr, role: &str) -> Ws {
    let mut ws = connect(addr).await;
    let r = round_trip(
        &mut ws,
        &json!({"v": "mvp-0.2", "type": "relay.join", "id": "j", "payload": {"role": role}})
            .to_string(),
    )
    .await;
    assert!(r.contains("relay.joined"), "join: {r}");
    ws
}

/// A raw host that answers every message with [`RESULT`] at once.
async fn host(addr: SocketAddr) {
    let mut ws = join(addr, "host").await;
    tokio::spawn(async move {
        while let Some(Ok(msg)) = ws.next().await {
            if msg.is_text() && ws.send(Message::text(RESULT)).await.is_err() {
                return;
            }
        }
    });
}

/// The relay's config for the bench: no greeting or presence, no rate limit.
fn relay_config() -> RelayConfig {
    let mut limits = RelayLimits::default();
    limits.rate = None;
    RelayConfig::default()
        .with_hello(false)
        .with_presence(false)
        .with_limits(limits)
}

/// The baseline's server machine: answers every frame with one fixed reply.
struct Answer {
    out: Outbox<()>,
    reply: FrameBuf,
}

impl Machine for Answer {
    type Event = ();

    fn handle_connect(&mut self, _: ConnId, _: &PeerInfo, _: Instant) {}

    fn handle_frame(&mut self, conn: ConnId, _: Frame<'_>, _: Instant) {
        self.out.send(conn, self.reply.clone());
    }

    fn handle_disconnect(&mut self, _: ConnId, _: Instant) {}

    fn handle_timeout(&mut self, _: Instant) {}

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn poll_output(&mut self) -> Option<Output<()>> {
        self.out.pop()
    }
}

/// Runs `iters` rounds of `round` on tokio's clock.
fn timed<S, F>(rt: &Runtime, state: &mut S, iters: u64, mut round: F) -> Duration
where
    F: AsyncFnMut(&mut S),
{
    rt.block_on(async {
        let start = tokio::time::Instant::now();
        for _ in 0..iters {
            round(state).await;
        }
        start.elapsed()
    })
}

async fn relayed(ws: &mut Ws) {
    let r = round_trip(ws, TOOL_CALL).await;
    debug_assert!(r.contains("tool.result"), "{r}");
}

async fn two_bare(ws: &mut Ws) {
    round_trip(ws, TOOL_CALL).await;
    round_trip(ws, TOOL_CALL).await;
}

fn forward_loopback(c: &mut Criterion, out: &mut Vec<Paired>, log_dir: &std::path::Path) {
    let rt = runtime();
    let (plain, logged, bare) = rt.block_on(async {
        let cfg = relay::server_app::server_config(&relay_config());
        let r = Relay::new(relay_config(), UuidV4Ids, t0(), UNIX_MS);
        let (server, events) = Server::bind("127.0.0.1:0", r, cfg.clone())
            .await
            .expect("bind");
        drop(events);
        let plain = server.local_addr();
        std::mem::forget(server); // runs until the runtime is dropped
        let log = StudyLog::open(log_dir, SyncPolicy::SessionEnd).expect("log dir");
        let r = LoggingRelay::new(Relay::new(relay_config(), UuidV4Ids, t0(), UNIX_MS), log);
        let (server, events) = Server::bind("127.0.0.1:0", r, cfg).await.expect("bind");
        drop(events);
        let logged = server.local_addr();
        std::mem::forget(server);
        let answer = Answer {
            out: Outbox::new(),
            reply: FrameBuf::text(RESULT.to_owned()),
        };
        let (server, _events) = Server::bind("127.0.0.1:0", answer, ServerConfig::default())
            .await
            .expect("bind");
        let bare = server.local_addr();
        std::mem::forget(server);
        host(plain).await;
        host(logged).await;
        (plain, logged, bare)
    });
    let (mut agent, mut agent_logged, mut bare) = rt.block_on(async {
        let mut a = join(plain, "agent").await;
        let mut l = join(logged, "agent").await;
        assert!(round_trip(&mut a, TOOL_CALL).await.contains("tool.result"));
        assert!(round_trip(&mut l, TOOL_CALL).await.contains("tool.result"));
        (a, l, connect(bare).await)
    });

    let group = "relay/forward/loopback";
    let mut g = c.benchmark_group(group);
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    g.bench_function("relay_log_off", |b| {
        b.iter_custom(|iters| timed(&rt, &mut agent, iters, async |ws| relayed(ws).await))
    });
    g.bench_function("relay_log_on", |b| {
        b.iter_custom(|iters| timed(&rt, &mut agent_logged, iters, async |ws| relayed(ws).await))
    });
    g.bench_function("two_bare_round_trips", |b| {
        b.iter_custom(|iters| timed(&rt, &mut bare, iters, async |ws| two_bare(ws).await))
    });
    g.finish();
    out.push(paired(
        format!("{group}/log_off"),
        || rt.block_on(relayed(&mut agent)),
        || rt.block_on(two_bare(&mut bare)),
    ));
    out.push(paired(
        format!("{group}/log_on"),
        || rt.block_on(relayed(&mut agent_logged)),
        || rt.block_on(two_bare(&mut bare)),
    ));
}

// ---------------------------------------------------------------------------------------
// Ratios
// ---------------------------------------------------------------------------------------

fn print_ratios(paired: &[Paired]) {
    println!();
    println!("relay ratios, from criterion's medians");
    for name in ["tool.call", "state.updated-16KiB"] {
        let group = format!("relay/decode/{name}");
        if let (Some(o), Some(b)) = (
            median_ns(&group, "typed"),
            median_ns(&group, "serde_json_value"),
        ) {
            println!(
                "  {group}: typed {o:.0} ns, Value {b:.0} ns -> {:.2}x faster (target >= 1.3x)",
                b / o
            );
        }
    }
    let group = "relay/forward/loopback";
    if let Some(b) = median_ns(group, "two_bare_round_trips") {
        for f in ["relay_log_off", "relay_log_on"] {
            if let Some(o) = median_ns(group, f) {
                println!(
                    "  {group}/{f}: {:.1} us per relayed tool call ({:.0}/s), two bare round trips {:.1} us -> {:.2}x their cost (target <= 1.5x)",
                    o / 1e3, 1e9 / o, b / 1e3, o / b
                );
            }
        }
    }
    println!();
    println!("relay ratios, paired (41 interleaved rounds each; median of per-round ratios)");
    for p in paired {
        let (o, b, x) = (p.ours_ns, p.base_ns, p.speedup);
        let g = &p.group;
        if g.starts_with("relay/decode/") {
            println!("  {g}: typed {o:.0} ns, Value {b:.0} ns -> {x:.2}x faster (target >= 1.3x)");
        } else {
            println!(
                "  {g}: relayed {:.1} us ({:.0} tool calls/s), two bare round trips {:.1} us -> {:.2}x their cost (target <= 1.5x)",
                o / 1e3, 1e9 / o, b / 1e3, 1.0 / x
            );
        }
    }
}

fn main() {
    let mut c = criterion();
    let mut paired = Vec::new();
    decode(&mut c, &mut paired);
    let log_dir: PathBuf =
        std::env::temp_dir().join(format!("agentwire-relay-bench-{}", std::process::id()));
    forward_loopback(&mut c, &mut paired, &log_dir);
    let _ = std::fs::remove_dir_all(&log_dir);
    c.final_summary();
    print_ratios(&paired);
}

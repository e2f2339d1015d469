//! JSON-RPC bus benchmarks, each figure against a baseline measured in the same group and
//! run (absolute numbers drift by up to 40% on shared machines; ratios hold).
//!
//! Groups:
//!
//! - `bus/decode/sendMessage/{190B,1KiB,4KiB}`: the typed decode of a client `sendMessage`
//!   request, i.e. the work the `Bus` does before it matches the topic (`split_body`,
//!   `classify`, params into the borrowed `SendMessageRef`), vs
//!   `serde_json::from_slice::<Value>` of the same bytes. The payload is a chat message
//!   (`chat_id`, `text`, `from`, `ts`, and `entities` objects in the larger sizes).
//! - `bus/topic_match/{10,100,1000,10000}`: `TopicIndex::matches_into` vs a naive scan calling
//!   `Pattern::matches` on every pattern, same patterns (mostly `inbound:chat-{i}-*`, then
//!   literals `outbound:{i}`, `agent:{i}:?`, and a few `inbound:*` and `*`), 8 topics per
//!   iteration (hits, misses, wildcard-only hits).
//! - `bus/fanout/in_memory/{1,10,100}`: one publish through a chain of K subscribers with the
//!   `Bus` driven fully in memory (the publisher's request frame in, then each subscriber's
//!   reply `{"success":true,"stopPropagation":false}` to the request it got, until the
//!   publisher's result is out) vs K x (encode one hop request + decode one reply), the bare
//!   codec work the chain needs anyway.
//! - `bus/fanout/loopback/chain10`: the same over real sockets (agentwire-tokio server on
//!   127.0.0.1, 10 raw tokio-tungstenite subscribers answering at once, a raw publisher) vs
//!   ten bare request/response round trips to an agentwire-tokio server whose machine
//!   answers each frame with a fixed reply, in the same run.
//! - `bus/fanout/loopback/64_publishers`: 64 publishers each publish once at the same time
//!   through the same chain of 10; printed as publishes per second.
//!
//! Loopback benches use a current-thread runtime (clients, subscribers and server on one
//! thread; a wake-up across the two cores costs ~50 us here).
//!
//! Run: `cargo bench --bench bus` (about three minutes). The ratios are printed at the end
//! and recorded in `crates/jsonrpc-bus-proto/README.md`.
#![allow(missing_docs)]

use agentwire_testkit::bench::{family_filter, median_ns, paired, Paired};

use std::hint::black_box;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use agentwire_core::{
    ConnId, Frame, FrameBuf, Machine, Outbox, Output, PeerInfo, SequentialIds, UuidV4Ids,
};
use agentwire_tokio::{Limits, Server, ServerConfig};
use criterion::Criterion;
use futures_util::{FutureExt, SinkExt, StreamExt};
use jsonrpc_bus_proto::codec::{
    classify, split_body, write_call_raw, write_result_with, Body, Incoming,
};
use jsonrpc_bus_proto::message::{SendMessageRef, SendMessageResult};
use jsonrpc_bus_proto::topic::{MatchMode, Pattern, TopicIndex};
use jsonrpc_bus_proto::{Bus, BusConfig, Id};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio::runtime::Runtime;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// 2025-02-14T12:00:00Z.
const UNIX_MS: u64 = 1_739_534_400_000;
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
// bus/decode/sendMessage/{190B,1KiB,4KiB}
// ---------------------------------------------------------------------------------------

/// A compact client `sendMessage` request of exactly `size` bytes: the spec's chat message,
/// with `entities` objects added for the larger sizes and `text` padded to fit.
fn send_message_body(size: usize) -> String {
    let entities = size / 256;
    let build = |text_len: usize| {
        let mut payload = format!(
            r#"{{"chat_id":"chat-1","text":"{}","from":"user-1","ts":1739534400000"#,
            "hello world, ".repeat(text_len / 13 + 1)[..text_len].to_owned()
        );
        if entities > 0 {
            payload.push_str(r#","entities":["#);
            for i in 0..entities {
                if i > 0 {
                    payload.push(',');
                }
                payload.push_str(&format!(
                    r#"{{"type":"mention","offset":{},"length":6,"user":"user-{}","display":"@user{}"}}"#,
                    i * 7,
                    i + 2,
                    i + 2
                ));
            }
            payload.push(']');
        }
        payload.push('}');
        format!(
            r#"{{"jsonrpc":"2.0","method":"sendMessage","params":{{"topic":"inbound:chat-1","payload":{payload}}},"id":4}}"#
        )
    };
    let base = build(0).len();
    assert!(
        base <= size,
        "{size} B is too small for the template ({base} B)"
    );
    let body = build(size - base);
    assert_eq!(body.len(), size);
    body
}

/// The bus's decode path: body split, message classified, params parsed borrowed.
fn typed_decode(body: &[u8]) -> bool {
    let Ok(Body::Single(raw)) = split_body(body, MAX, 100) else {
        return false;
    };
    let Ok(Incoming::Call(call)) = classify(raw) else {
        return false;
    };
    call.method == "sendMessage"
        && call
            .params
            .and_then(|p| serde_json::from_str::<SendMessageRef<'_>>(p.get()).ok())
            .is_some_and(|m| !m.topic.is_empty() && m.payload.is_some())
}

fn decode(c: &mut Criterion, out: &mut Vec<Paired>) {
    for (name, size) in [("190B", 190usize), ("1KiB", 1024), ("4KiB", 4096)] {
        let body = send_message_body(size);
        assert!(typed_decode(body.as_bytes()), "{name} decodes");
        assert!(serde_json::from_str::<Value>(&body).is_ok());
        let mut g = c.benchmark_group(format!("bus/decode/sendMessage/{name}"));
        g.throughput(criterion::Throughput::Bytes(size as u64));
        g.bench_function("typed", |b| {
            b.iter(|| typed_decode(black_box(body.as_bytes())))
        });
        g.bench_function("serde_json_value", |b| {
            b.iter(|| serde_json::from_slice::<Value>(black_box(body.as_bytes())).is_ok())
        });
        g.finish();
        out.push(paired(
            format!("bus/decode/sendMessage/{name}"),
            || {
                black_box(typed_decode(black_box(body.as_bytes())));
            },
            || {
                black_box(serde_json::from_slice::<Value>(black_box(body.as_bytes())).is_ok());
            },
        ));
    }
}

// ---------------------------------------------------------------------------------------
// bus/topic_match/{10,100,1000,10000}
// ---------------------------------------------------------------------------------------

/// `n` subscription patterns: a few `inbound:*` and `*`, then mostly literal-prefixed globs.
fn patterns(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| match i {
            0 => "inbound:*".to_owned(),
            1 => "*".to_owned(),
            _ if i % 1000 == 999 => "inbound:*".to_owned(),
            _ => match i % 10 {
                0..=5 => format!("inbound:chat-{i}-*"),
                6 | 7 => format!("outbound:{i}"),
                _ => format!("agent:{i}:?"),
            },
        })
        .collect()
}

/// Topics published per iteration: exact and glob hits, misses, wildcard-only hits.
fn topics(n: usize) -> Vec<String> {
    let k = n / 2;
    vec![
        format!("inbound:chat-{}-abc", (k / 10) * 10 + 2),
        format!("inbound:chat-{}-x", (n / 10) * 10 + 4),
        format!("outbound:{}", (k / 10) * 10 + 6),
        "outbound:none".to_owned(),
        format!("agent:{}:a", (k / 10) * 10 + 8),
        "agent:spawn".to_owned(),
        "inbound:other".to_owned(),
        "zzz:none".to_owned(),
    ]
}

fn topic_match(c: &mut Criterion, out: &mut Vec<Paired>) {
    for n in [10usize, 100, 1000, 10_000] {
        let pats = patterns(n);
        let mut index = TopicIndex::new(MatchMode::Glob);
        for (i, p) in pats.iter().enumerate() {
            index.insert(p, i as u64);
        }
        let compiled: Vec<Pattern> = pats
            .iter()
            .map(|p| Pattern::new(p, MatchMode::Glob))
            .collect();
        let topics = topics(n);
        let mut hits = Vec::new();
        let mut naive_hits = Vec::new();
        let mut total = 0;
        for t in &topics {
            index.matches_into(t, &mut hits);
            naive_hits.clear();
            for (i, p) in compiled.iter().enumerate() {
                if p.matches(t) {
                    naive_hits.push(i as u64);
                }
            }
            assert_eq!(hits, naive_hits, "index and scan disagree on {t}");
            total += hits.len();
        }
        println!(
            "bus/topic_match/{n}: {total} matches over {} topics",
            topics.len()
        );
        let mut g = c.benchmark_group(format!("bus/topic_match/{n}"));
        g.throughput(criterion::Throughput::Elements(topics.len() as u64));
        g.bench_function("index", |b| {
            b.iter(|| {
                let mut sum = 0;
                for t in &topics {
                    index.matches_into(black_box(t), &mut hits);
                    sum += hits.len();
                }
                sum
            })
        });
        g.bench_function("naive_scan", |b| {
            b.iter(|| {
                let mut sum = 0;
                for t in &topics {
                    naive_hits.clear();
                    for (i, p) in compiled.iter().enumerate() {
                        if p.matches(black_box(t)) {
                            naive_hits.push(i as u64);
                        }
                    }
                    sum += naive_hits.len();
                }
                sum
            })
        });
        g.finish();
        let mut hits2 = Vec::new();
        out.push(paired(
            format!("bus/topic_match/{n}"),
            || {
                for t in &topics {
                    index.matches_into(black_box(t), &mut hits);
                }
            },
            || {
                for t in &topics {
                    hits2.clear();
                    for (i, p) in compiled.iter().enumerate() {
                        if p.matches(black_box(t)) {
                            hits2.push(i as u64);
                        }
                    }
                }
            },
        ));
    }
}

// ---------------------------------------------------------------------------------------
// bus/fanout/in_memory/{1,10,100}
// ---------------------------------------------------------------------------------------

const PUBLISH: &str = r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"inbound:chat-1","payload":{"chat_id":"chat-1","text":"hello","from":"user-1"}},"id":4}"#;
const PARAMS: &str =
    r#"{"topic":"inbound:chat-1","payload":{"chat_id":"chat-1","text":"hello","from":"user-1"}}"#;
const REPLY_HEAD: &str =
    r#"{"jsonrpc":"2.0","result":{"success":true,"stopPropagation":false},"id":""#;
const REPLY_ID: &str = "00000000-0000-4000-8000-000000000000";
/// A reply as only the general read path takes it: one extra leading member (`"x":0`), which
/// the bus's one-pass reader (`fast::read`) refuses at its first member and the general path
/// (`classify`) skips. The general side parses 6 bytes more per reply.
const REPLY_HEAD_GENERAL: &str =
    r#"{"x":0,"jsonrpc":"2.0","result":{"success":true,"stopPropagation":false},"id":""#;

/// A `Bus` with one publisher and `k` subscribers to `inbound:*`, all initialized.
struct Chain {
    bus: Bus,
    now: Instant,
    publisher: ConnId,
    /// The publisher's request.
    publish: &'static str,
    /// A subscriber's reply up to its id.
    head: &'static str,
    /// A subscriber's reply: `head`, then the id and `"}`.
    reply: String,
    completed: u64,
}

impl Chain {
    fn new(k: usize) -> Self {
        Self::with_frames(k, PUBLISH, REPLY_HEAD)
    }

    /// A chain whose publisher sends `publish` and whose subscribers answer with `head`,
    /// the id and `"}`.
    fn with_frames(k: usize, publish: &'static str, head: &'static str) -> Self {
        let now = t0();
        let mut bus = Bus::new(BusConfig::default(), SequentialIds::new(1), now, UNIX_MS);
        let peer = PeerInfo::new(None);
        let init = r#"{"jsonrpc":"2.0","method":"initialize","params":{"clientId":"a"},"id":1}"#;
        let sub = r#"{"jsonrpc":"2.0","method":"subscribe","params":{"topic":"inbound:*"},"id":2}"#;
        for i in 0..=k {
            let conn = ConnId::new(i as u64 + 1);
            bus.handle_connect(conn, &peer, now);
            bus.handle_frame(conn, Frame::Text(init), now);
            if i > 0 {
                bus.handle_frame(conn, Frame::Text(sub), now);
            }
        }
        while bus.poll_output().is_some() {}
        let reply = format!("{head}{REPLY_ID}\"}}");
        Self {
            bus,
            now,
            publisher: ConnId::new(1),
            publish,
            head,
            reply,
            completed: 0,
        }
    }

    /// One publish through the whole chain; returns the hops.
    fn cycle(&mut self) -> usize {
        let mut hops = 0;
        self.bus
            .handle_frame(self.publisher, Frame::Text(self.publish), self.now);
        loop {
            let mut next: Option<(ConnId, FrameBuf)> = None;
            let mut done = false;
            while let Some(out) = self.bus.poll_output() {
                if let Output::Send { conn, frame } = out {
                    if conn == self.publisher {
                        done = true;
                    } else {
                        next = Some((conn, frame));
                    }
                }
            }
            if done {
                self.completed += 1;
                return hops;
            }
            let Some((conn, frame)) = next else {
                panic!("chain stalled after {hops} hops");
            };
            // What a driver hands over: the subscriber's text frame, its id patched in place
            // (a bus request ends with `,"id":"<36 chars>"}`).
            let request = frame.as_bytes();
            let id = std::str::from_utf8(&request[request.len() - 38..request.len() - 2]);
            self.reply.truncate(self.head.len());
            self.reply.push_str(id.expect("an ASCII id"));
            self.reply.push_str("\"}");
            self.bus
                .handle_frame(conn, Frame::Text(&self.reply), self.now);
            hops += 1;
        }
    }
}

/// K x (encode one hop request + decode one subscriber reply); returns the replies decoded.
fn bare_hops(k: usize, buf: &mut Vec<u8>, id: &Id, reply: &str) -> usize {
    let mut ok = 0;
    for _ in 0..k {
        buf.clear();
        write_call_raw(buf, Some(id), "sendMessage", black_box(PARAMS).as_bytes());
        black_box(&buf);
        if let Ok(Body::Single(raw)) = split_body(black_box(reply.as_bytes()), MAX, 100) {
            if let Ok(Incoming::Reply(r)) = classify(raw) {
                if let Ok(result) = r.outcome {
                    ok += usize::from(
                        serde_json::from_str::<SendMessageResult>(result.get()).is_ok(),
                    );
                }
            }
        }
    }
    ok
}

fn fanout_in_memory(c: &mut Criterion, out: &mut Vec<Paired>) {
    for k in [1usize, 10, 100] {
        let mut chain = Chain::new(k);
        for _ in 0..100 {
            assert_eq!(chain.cycle(), k, "every subscriber gets a turn");
        }
        assert_eq!(chain.bus.deliveries_in_flight(), 0);
        let s = chain.bus.stats();
        assert_eq!(s.params_encoded, s.publishes, "one params blob per publish");

        // The baseline: per hop, encode the request and decode the reply.
        let id = Id::from(REPLY_ID);
        let reply = format!("{REPLY_HEAD}{REPLY_ID}\"}}");
        let mut buf = Vec::with_capacity(256);
        let mut bare = || bare_hops(k, &mut buf, &id, &reply);
        assert_eq!(bare(), k);

        // The same plus the publisher's side: decode its request, encode its result.
        let result = SendMessageResult {
            success: true,
            stop_propagation: false,
            delivered: Some(k as u32),
            errors: Some(0),
            timeouts: Some(0),
            disconnected: Some(0),
            overloaded: Some(0),
        };
        let mut result_buf = Vec::with_capacity(256);
        let mut buf2 = Vec::with_capacity(256);
        let mut bare_with_publish = || {
            let ok = typed_decode(black_box(PUBLISH.as_bytes()));
            let hops = bare_hops(k, &mut buf2, &id, &reply);
            result_buf.clear();
            write_result_with(&mut result_buf, &Id::from(4), |out| {
                black_box(&result).write_json(out);
            });
            black_box(&result_buf);
            usize::from(ok) + hops
        };
        assert_eq!(bare_with_publish(), k + 1);

        let mut g = c.benchmark_group(format!("bus/fanout/in_memory/{k}"));
        g.throughput(criterion::Throughput::Elements(k as u64));
        g.bench_function("bus", |b| b.iter(|| chain.cycle()));
        g.bench_function("encode_req_decode_reply", |b| b.iter(&mut bare));
        g.bench_function("with_publish_decode_result_encode", |b| {
            b.iter(&mut bare_with_publish)
        });
        g.finish();
        out.push(paired(
            format!("bus/fanout/in_memory/{k}"),
            || {
                black_box(chain.cycle());
            },
            || {
                black_box(bare());
            },
        ));
        out.push(paired(
            format!("bus/fanout/in_memory/{k} (bare incl. publish decode + result encode)"),
            || {
                black_box(chain.cycle());
            },
            || {
                black_box(bare_with_publish());
            },
        ));
        assert_eq!(chain.bus.deliveries_in_flight(), 0);
    }
}

/// `bus/read_path/10`: a publish through 10 subscribers whose replies the one-pass reader
/// takes, against the same chain read by the general path alone, as a paired ratio.
fn read_paths(c: &mut Criterion, out: &mut Vec<Paired>) {
    const K: usize = 10;
    let variants = [("general", PUBLISH, REPLY_HEAD_GENERAL)];
    let mut fast = Chain::new(K);
    let mut g = c.benchmark_group(format!("bus/read_path/{K}"));
    g.bench_function("default", |b| b.iter(|| fast.cycle()));
    let mut chains = Vec::new();
    for (name, publish, head) in variants {
        let mut general = Chain::with_frames(K, publish, head);
        assert_eq!(general.cycle(), K, "every subscriber gets a turn");
        g.bench_function(name, |b| b.iter(|| general.cycle()));
        chains.push((name, general));
    }
    g.finish();
    for (name, mut general) in chains {
        out.push(paired(
            format!("bus/read_path/{K}: default vs {name}"),
            || {
                black_box(fast.cycle());
            },
            || {
                black_box(general.cycle());
            },
        ));
    }
}

// ---------------------------------------------------------------------------------------
// bus/fanout/loopback
// ---------------------------------------------------------------------------------------

const CHAIN: usize = 10;
const PUBLISHERS: usize = 64;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A raw client with the transport's limits.
async fn connect(addr: SocketAddr) -> Ws {
    let url = format!("ws://{addr}/");
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

/// A raw peer that has sent `initialize`.
async fn initialized(addr: SocketAddr) -> Ws {
    let mut ws = connect(addr).await;
    let r = round_trip(
        &mut ws,
        r#"{"jsonrpc":"2.0","method":"initialize","params":{"clientId":"bench"},"id":1}"#,
    )
    .await;
    assert!(r.contains("\"result\""), "initialize: {r}");
    ws
}

/// A raw subscriber to `inbound:*` that answers every delivery at once (feeding every
/// answer for the messages already readable, then flushing once).
async fn subscriber(addr: SocketAddr) {
    let mut ws = initialized(addr).await;
    let r = round_trip(
        &mut ws,
        r#"{"jsonrpc":"2.0","method":"subscribe","params":{"topic":"inbound:*"},"id":2}"#,
    )
    .await;
    assert!(r.contains("\"result\""), "subscribe: {r}");
    tokio::spawn(async move {
        let mut reply = format!("{REPLY_HEAD}{REPLY_ID}\"}}");
        while let Some(Ok(first)) = ws.next().await {
            let mut next = Some(first);
            while let Some(msg) = next.take() {
                if let Message::Text(t) = &msg {
                    let at = REPLY_HEAD.len();
                    reply.replace_range(at..at + 36, &t[t.len() - 38..t.len() - 2]);
                    if ws.feed(Message::text(reply.clone())).await.is_err() {
                        return;
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
    });
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

/// One publish and its result.
async fn publish_once(ws: &mut Ws) {
    let r = round_trip(ws, PUBLISH).await;
    debug_assert!(r.contains("\"delivered\":10"), "publish: {r}");
}

fn fanout_loopback(c: &mut Criterion, out: &mut Vec<Paired>) {
    let rt = runtime();
    let (bus_addr, answer_addr) = rt.block_on(async {
        let bus = Bus::new(BusConfig::default(), UuidV4Ids, t0(), UNIX_MS);
        let (server, events) = Server::bind("127.0.0.1:0", bus, ServerConfig::default())
            .await
            .expect("bind");
        drop(events);
        let bus_addr = server.local_addr();
        std::mem::forget(server); // runs until the runtime is dropped
        let reply = FrameBuf::text(format!("{REPLY_HEAD}{REPLY_ID}\"}}"));
        let answer = Answer {
            out: Outbox::new(),
            reply,
        };
        let (server, _events) = Server::bind("127.0.0.1:0", answer, ServerConfig::default())
            .await
            .expect("bind");
        let answer_addr = server.local_addr();
        std::mem::forget(server);
        for _ in 0..CHAIN {
            subscriber(bus_addr).await;
        }
        (bus_addr, answer_addr)
    });
    let (mut publisher, mut bare) = rt.block_on(async {
        let mut p = initialized(bus_addr).await;
        let r = round_trip(&mut p, PUBLISH).await;
        assert!(r.contains("\"delivered\":10"), "publish: {r}");
        (p, connect(answer_addr).await)
    });
    let mut hop_request = Vec::new();
    write_call_raw(
        &mut hop_request,
        Some(&Id::from(REPLY_ID)),
        "sendMessage",
        PARAMS.as_bytes(),
    );
    let hop_request = String::from_utf8(hop_request).expect("utf-8");

    let mut g = c.benchmark_group("bus/fanout/loopback/chain10");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    g.bench_function("bus", |b| {
        b.iter_custom(|iters| {
            timed(&rt, &mut publisher, iters, async |ws| {
                publish_once(ws).await
            })
        })
    });
    g.bench_function("ten_round_trips", |b| {
        b.iter_custom(|iters| {
            timed(&rt, &mut bare, iters, async |ws| {
                for _ in 0..CHAIN {
                    round_trip(ws, &hop_request).await;
                }
            })
        })
    });
    g.finish();
    out.push(paired(
        "bus/fanout/loopback/chain10".to_owned(),
        || rt.block_on(publish_once(&mut publisher)),
        || {
            rt.block_on(async {
                for _ in 0..CHAIN {
                    round_trip(&mut bare, &hop_request).await;
                }
            })
        },
    ));

    let mut publishers: Vec<Ws> = rt.block_on(async {
        let mut v = Vec::with_capacity(PUBLISHERS);
        for _ in 0..PUBLISHERS {
            v.push(initialized(bus_addr).await);
        }
        v
    });
    rt.block_on(async {
        let results =
            futures_util::future::join_all(publishers.iter_mut().map(|ws| round_trip(ws, PUBLISH)))
                .await;
        for r in results {
            assert!(r.contains("\"delivered\":10"), "publish: {r}");
        }
    });
    let mut g = c.benchmark_group("bus/fanout/loopback/64_publishers");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(3));
    g.throughput(criterion::Throughput::Elements(PUBLISHERS as u64));
    g.bench_function("bus", |b| {
        b.iter_custom(|iters| {
            timed(&rt, &mut publishers, iters, async |all| {
                futures_util::future::join_all(all.iter_mut().map(publish_once)).await;
            })
        })
    });
    g.finish();
}

// ---------------------------------------------------------------------------------------
// Ratios
// ---------------------------------------------------------------------------------------

fn ratio(group: &str, ours: &str, base: &str) -> Option<(f64, f64)> {
    Some((median_ns(group, ours)?, median_ns(group, base)?))
}

fn print_ratios(paired: &[Paired]) {
    println!();
    println!("bus ratios (medians of this run)");
    for size in ["190B", "1KiB", "4KiB"] {
        let group = format!("bus/decode/sendMessage/{size}");
        if let Some((o, b)) = ratio(&group, "typed", "serde_json_value") {
            println!(
                "  {group}: typed {o:.0} ns, Value {b:.0} ns -> {:.2}x faster (target >= 1.3x)",
                b / o
            );
        }
    }
    let n_topics = topics(10).len() as f64;
    for n in [10, 100, 1000, 10_000] {
        let group = format!("bus/topic_match/{n}");
        if let Some((o, b)) = ratio(&group, "index", "naive_scan") {
            let target = match n {
                10_000 => " (target >= 10x)",
                1000 => " (target < 1 us per publish)",
                _ => "",
            };
            println!(
                "  {group}: index {:.0} ns/publish, scan {:.0} ns/publish -> {:.1}x faster{target}",
                o / n_topics,
                b / n_topics,
                b / o
            );
        }
    }
    for k in [1, 10, 100] {
        let group = format!("bus/fanout/in_memory/{k}");
        if let Some((o, b)) = ratio(&group, "bus", "encode_req_decode_reply") {
            println!(
                "  {group}: bus {o:.0} ns ({:.0} ns/delivery), K x (encode+decode) {b:.0} ns -> {:.2}x the bare deliveries/s (target >= 0.7x)",
                o / k as f64,
                b / o
            );
        }
        if let Some((o, b)) = ratio(&group, "bus", "with_publish_decode_result_encode") {
            println!(
                "  {group}: bus {o:.0} ns, bare incl. the publish's decode and result {b:.0} ns -> {:.2}x",
                b / o
            );
        }
    }
    // The marginal cost of one more delivery in a chain (the publish's fixed work cancels):
    // (T(100) - T(1)) / 99 against one encode + decode.
    if let (Some((t1, _)), Some((t100, b100))) = (
        ratio("bus/fanout/in_memory/1", "bus", "encode_req_decode_reply"),
        ratio("bus/fanout/in_memory/100", "bus", "encode_req_decode_reply"),
    ) {
        let marginal = (t100 - t1) / 99.0;
        let bare = b100 / 100.0;
        println!(
            "  bus/fanout/in_memory marginal: {marginal:.0} ns per extra delivery, bare {bare:.0} ns -> {:.2}x the bare deliveries/s",
            bare / marginal
        );
    }
    let group = "bus/fanout/loopback/chain10";
    if let Some((o, b)) = ratio(group, "bus", "ten_round_trips") {
        println!(
            "  {group}: publish through 10 subscribers {:.1} us, ten bare round trips {:.1} us -> {:.2}x the time (target <= 1.5x)",
            o / 1e3,
            b / 1e3,
            o / b
        );
    }
    let group = "bus/fanout/loopback/64_publishers";
    if let Some(o) = median_ns(group, "bus") {
        println!(
            "  {group}: 64 concurrent publishes through 10 subscribers in {:.2} ms -> {:.0} publishes/s ({:.0} deliveries/s)",
            o / 1e6,
            PUBLISHERS as f64 * 1e9 / o,
            (PUBLISHERS * CHAIN) as f64 * 1e9 / o
        );
    }
    println!();
    println!("bus ratios, paired (41 interleaved rounds each; median of per-round ratios)");
    for p in paired {
        let (o, b, x) = (p.ours_ns, p.base_ns, p.speedup);
        let g = &p.group;
        if g.starts_with("bus/decode/") {
            println!("  {g}: typed {o:.0} ns, Value {b:.0} ns -> {x:.2}x faster (target >= 1.3x)");
        } else if g.starts_with("bus/topic_match/") {
            println!(
                "  {g}: index {:.0} ns/publish, scan {:.0} ns/publish -> {x:.1}x faster",
                o / n_topics,
                b / n_topics
            );
        } else if g.starts_with("bus/read_path/") {
            println!(
                "  {g}: default {o:.0} ns, general path {b:.0} ns -> the default takes {:.0}% less time",
                (1.0 - 1.0 / x) * 100.0
            );
        } else if g.starts_with("bus/fanout/in_memory/") {
            println!(
                "  {g}: bus {o:.0} ns, bare {b:.0} ns -> {x:.2}x the bare deliveries/s (target >= 0.7x)"
            );
        } else {
            println!(
                "  {g}: bus {:.1} us, ten round trips {:.1} us -> {:.2}x the time (target <= 1.5x)",
                o / 1e3,
                b / 1e3,
                1.0 / x
            );
        }
    }
}

fn main() {
    let mut c = criterion();
    let mut paired = Vec::new();
    let wants = family_filter();
    if wants("bus/decode") {
        decode(&mut c, &mut paired);
    }
    if wants("bus/topic_match") {
        topic_match(&mut c, &mut paired);
    }
    if wants("bus/fanout/in_memory") {
        fanout_in_memory(&mut c, &mut paired);
    }
    if wants("bus/read_path") {
        read_paths(&mut c, &mut paired);
    }
    if wants("bus/fanout/loopback") {
        fanout_loopback(&mut c, &mut paired);
    }
    c.final_summary();
    print_ratios(&paired);
}

//! Chopsticks benchmarks: typed decode, encode into a reused buffer, and full
//! request/response cycles through the `Controller`, each against a baseline measured in
//! the same group and run (absolute numbers drift on shared machines; ratios hold).
//!
//! Run: `cargo bench --bench chopsticks`. The ratios are printed at the end and recorded
//! in `crates/chopsticks-proto/README.md`.
//!
//! Allocations are counted with `stats_alloc`'s instrumented `System` allocator: the
//! workspace forbids `unsafe_code` (on the command line, so a file-level `allow` cannot
//! relax it), and a hand-written `GlobalAlloc` would need `unsafe impl`.
#![allow(missing_docs)]

use agentwire_testkit::bench::median_ns;

use std::alloc::System;
use std::hint::black_box;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use agentwire_core::{ConnId, Frame, Id128, IdGen, Machine, Output, PeerInfo, SequentialIds};
use chopsticks_proto::{
    AgentMessage, Controller, ControllerConfig, ControllerEvent, ControllerMessage, RawJson, Req,
    Resp,
};
use criterion::{BatchSize, Criterion};
use serde::Serialize;
use serde_json::value::RawValue;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

// ---------------------------------------------------------------------------------------
// Counting allocator
// ---------------------------------------------------------------------------------------

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Allocations made while running `f` `n` times.
fn allocations_per_call(n: usize, mut f: impl FnMut()) -> f64 {
    let region = Region::new(GLOBAL);
    for _ in 0..n {
        f();
    }
    let stats = region.change();
    (stats.allocations + stats.reallocations) as f64 / n as f64
}

// ---------------------------------------------------------------------------------------
// Inputs: the spec's examples, compact, `type` first (as `JSON.stringify` writes them)
// ---------------------------------------------------------------------------------------

const HELLO: &str = r#"{"type":"hello","protocolVersion":"1.0.0","agentId":"agent1468195142467981395","botUserId":"1468195142467981395","tag":"MusicBot#1234","ready":true,"guildIds":["1445809891242414226"],"poolId":"pool_goot27"}"#;
const REQ: &str = r#"{"type":"req","id":"a1b2c3d4-e5f6-7890-abcd-ef1234567890","op":"play","data":{"guildId":"1445809891242414226","voiceChannelId":"1445809891242414229","query":"never gonna give you up"},"agentId":"agent1468195142467981395"}"#;
const RESP: &str = r#"{"type":"resp","id":"a1b2c3d4-e5f6-7890-abcd-ef1234567890","ok":true,"data":{"track":{"title":"Never Gonna Give You Up","author":"Rick Astley","duration":213000},"action":"playing"}}"#;
const REQ_DATA: &str = r#"{"guildId":"1445809891242414226","voiceChannelId":"1445809891242414229","query":"never gonna give you up"}"#;
const RESP_DATA: &str = r#"{"track":{"title":"Never Gonna Give You Up","author":"Rick Astley","duration":213000},"action":"playing"}"#;
const AGENT_ID: &str = "agent1468195142467981395";
const MAX: usize = 64 * 1024;

fn criterion() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args()
}

// ---------------------------------------------------------------------------------------
// chopsticks/decode/{hello,req,resp}: typed decode vs `from_slice::<Value>`
// ---------------------------------------------------------------------------------------

/// A message name, its body, and the typed decode to time.
type DecodeCase = (&'static str, &'static str, fn(&str) -> bool);

fn decode(c: &mut Criterion) {
    let cases: [DecodeCase; 3] = [
        ("hello", HELLO, |s| {
            AgentMessage::decode(Frame::Text(s), MAX).is_ok()
        }),
        ("req", REQ, |s| {
            ControllerMessage::decode(Frame::Text(s), MAX).is_ok()
        }),
        ("resp", RESP, |s| {
            AgentMessage::decode(Frame::Text(s), MAX).is_ok()
        }),
    ];
    for (name, body, typed) in cases {
        assert!(typed(body), "{name} decodes");
        let mut g = c.benchmark_group(format!("chopsticks/decode/{name}"));
        g.throughput(criterion::Throughput::Bytes(body.len() as u64));
        g.bench_function("typed", |b| b.iter(|| typed(black_box(body))));
        g.bench_function("serde_json_value", |b| {
            b.iter(|| {
                serde_json::from_slice::<serde_json::Value>(black_box(body.as_bytes())).is_ok()
            })
        });
        g.finish();
    }
}

// ---------------------------------------------------------------------------------------
// chopsticks/encode/{req,resp}: encode into a reused Vec vs `to_writer` of a plain struct
// ---------------------------------------------------------------------------------------

/// The baseline: what a hand-written derived struct costs to serialize.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PlainReq<'a> {
    #[serde(rename = "type")]
    ty: &'static str,
    id: &'a str,
    op: &'a str,
    data: &'a RawValue,
    agent_id: &'a str,
}

#[derive(Serialize)]
struct PlainResp<'a> {
    #[serde(rename = "type")]
    ty: &'static str,
    id: &'a str,
    ok: bool,
    data: &'a RawValue,
}

fn encode(c: &mut Criterion) {
    let req_data: Box<RawValue> = RawValue::from_string(REQ_DATA.to_owned()).expect("json");
    let resp_data: Box<RawValue> = RawValue::from_string(RESP_DATA.to_owned()).expect("json");
    let id = "a1b2c3d4-e5f6-7890-abcd-ef1234567890";

    let req = ControllerMessage::Req(Req {
        id: id.to_owned(),
        op: "play".to_owned(),
        data: RawJson::from_text(REQ_DATA).expect("json"),
        agent_id: AGENT_ID.to_owned(),
    });
    let plain_req = PlainReq {
        ty: "req",
        id,
        op: "play",
        data: &req_data,
        agent_id: AGENT_ID,
    };
    let resp = AgentMessage::Resp(Resp::ok(id, RawJson::from_text(RESP_DATA).expect("json")));
    let plain_resp = PlainResp {
        ty: "resp",
        id,
        ok: true,
        data: &resp_data,
    };

    // Same bytes from both, so the comparison is like for like.
    let (mut a, mut b) = (Vec::new(), Vec::new());
    req.encode(&mut a);
    serde_json::to_writer(&mut b, &plain_req).expect("encode");
    assert_eq!(a, b, "req encodings differ");
    assert_eq!(a, REQ.as_bytes());
    a.clear();
    b.clear();
    resp.encode(&mut a);
    serde_json::to_writer(&mut b, &plain_resp).expect("encode");
    assert_eq!(a, b, "resp encodings differ");
    assert_eq!(a, RESP.as_bytes());

    // Zero allocations per encode into a warmed-up, reused buffer.
    let mut buf = Vec::with_capacity(1024);
    let req_allocs = allocations_per_call(10_000, || {
        buf.clear();
        req.encode(&mut buf);
        black_box(&buf);
    });
    let resp_allocs = allocations_per_call(10_000, || {
        buf.clear();
        resp.encode(&mut buf);
        black_box(&buf);
    });
    println!("chopsticks/encode: allocations per encode after warm-up: req {req_allocs}, resp {resp_allocs}");
    assert_eq!(req_allocs, 0.0, "req encode allocates");
    assert_eq!(resp_allocs, 0.0, "resp encode allocates");

    let mut g = c.benchmark_group("chopsticks/encode/req");
    g.throughput(criterion::Throughput::Bytes(REQ.len() as u64));
    g.bench_function("typed", |bch| {
        bch.iter(|| {
            buf.clear();
            black_box(&req).encode(&mut buf);
            black_box(buf.len())
        })
    });
    g.bench_function("plain_struct", |bch| {
        bch.iter(|| {
            buf.clear();
            serde_json::to_writer(&mut buf, black_box(&plain_req)).expect("encode");
            black_box(buf.len())
        })
    });
    g.finish();

    let mut g = c.benchmark_group("chopsticks/encode/resp");
    g.throughput(criterion::Throughput::Bytes(RESP.len() as u64));
    g.bench_function("typed", |bch| {
        bch.iter(|| {
            buf.clear();
            black_box(&resp).encode(&mut buf);
            black_box(buf.len())
        })
    });
    g.bench_function("plain_struct", |bch| {
        bch.iter(|| {
            buf.clear();
            serde_json::to_writer(&mut buf, black_box(&plain_resp)).expect("encode");
            black_box(buf.len())
        })
    });
    g.finish();
}

// ---------------------------------------------------------------------------------------
// chopsticks/controller/request_response: full cycles through the Controller vs the bare
// encode (req) + decode (resp) it must do anyway
// ---------------------------------------------------------------------------------------

/// One registered agent on connection 1, and the driver's clock.
struct Rig {
    c: Controller,
    conn: ConnId,
    now: Instant,
    /// A twin of the controller's id generator, so that the agent's reply to the next
    /// request can be prepared before the request is made.
    ids: SequentialIds,
    data: RawJson,
    runs: u64,
    completed: u64,
}

/// The agent's `resp` frame answering request `id`: what a driver hands over after reading
/// it from the socket. The timed runs get it prepared beforehand: writing the agent's
/// message is the peer's work, neither the machine's nor the baseline's (which decodes a
/// constant frame).
fn resp_for(id: Id128) -> String {
    let at = RESP.find("a1b2c3d4").expect("id in resp");
    let mut resp = String::with_capacity(RESP.len());
    resp.push_str(&RESP[..at]);
    resp.push_str(id.hyphenated().as_str());
    resp.push_str(&RESP[at + 36..]);
    resp
}

impl Rig {
    fn new() -> Self {
        #[allow(clippy::disallowed_methods)] // the bench's one base time
        let now = Instant::now();
        let mut c = Controller::new(ControllerConfig::default(), SequentialIds::new(0));
        let conn = ConnId::new(1);
        let peer = PeerInfo::new(Some(SocketAddr::from((Ipv4Addr::LOCALHOST, 40_000))));
        c.handle_connect(conn, &peer, now);
        c.handle_frame(conn, Frame::Text(HELLO), now);
        while c.poll_output().is_some() {}
        assert!(c.agent(AGENT_ID).is_some(), "agent registered");
        Self {
            c,
            conn,
            now,
            ids: SequentialIds::new(0),
            data: RawJson::from_text(REQ_DATA).expect("json"),
            runs: 0,
            completed: 0,
        }
    }

    /// The agent's reply to the next request.
    fn next_resp(&mut self) -> String {
        resp_for(self.ids.next_id())
    }

    /// `request` → drain (the req frame) → the agent's `resp` → drain (the completion).
    fn run(&mut self, resp: &str) {
        // 10 ms per cycle keeps the agent under the 100 messages/s rate limit.
        self.now += Duration::from_millis(10);
        self.runs += 1;
        self.c
            .request(AGENT_ID, "play", &self.data, self.now)
            .expect("request");
        while let Some(out) = self.c.poll_output() {
            black_box(&out);
        }
        self.c.handle_frame(self.conn, Frame::Text(resp), self.now);
        if self.c.poll_timeout().is_some_and(|t| t <= self.now) {
            self.c.handle_timeout(self.now);
        }
        while let Some(out) = self.c.poll_output() {
            if let Output::Event(ControllerEvent::RequestCompleted { .. }) = out {
                self.completed += 1;
            }
        }
    }

    /// A whole cycle, the reply included.
    fn cycle(&mut self) {
        let resp = self.next_resp();
        self.run(&resp);
    }
}

fn controller(c: &mut Criterion) {
    // Sanity: every cycle completes its request, and nothing is left pending.
    let mut rig = Rig::new();
    for _ in 0..1000 {
        rig.cycle();
    }
    assert_eq!(rig.completed, 1000, "every request completes");
    assert_eq!(rig.c.pending_requests(), 0);
    let resps: Vec<String> = (0..1000).map(|_| rig.next_resp()).collect();
    let mut resps = resps.iter();
    let allocs = allocations_per_call(1000, || rig.run(resps.next().expect("a resp per run")));
    println!("chopsticks/controller: allocations per request/response cycle: {allocs}");

    let req = ControllerMessage::Req(Req {
        id: "00000000-0000-4000-8000-000000000001".to_owned(),
        op: "play".to_owned(),
        data: RawJson::from_text(REQ_DATA).expect("json"),
        agent_id: AGENT_ID.to_owned(),
    });
    let mut buf = Vec::with_capacity(1024);

    let mut g = c.benchmark_group("chopsticks/controller/request_response");
    g.throughput(criterion::Throughput::Elements(1));
    // Each batch's replies are prepared untimed (see `resp_for`); 256 of them (~50 KiB) stay
    // in cache, as a frame just read from a socket would be.
    let mut ids = rig.ids.clone();
    g.bench_function("controller", |b| {
        b.iter_batched_ref(
            || resp_for(ids.next_id()),
            |resp| rig.run(resp),
            BatchSize::NumIterations(256),
        )
    });
    g.bench_function("encode_req_decode_resp", |b| {
        b.iter(|| {
            buf.clear();
            black_box(&req).encode(&mut buf);
            black_box(AgentMessage::decode(Frame::Text(black_box(RESP)), MAX).is_ok())
        })
    });
    g.finish();
    rig.ids = ids; // the twin generator criterion's setup advanced
    if std::env::var_os("CHOPSTICKS_INTERLEAVED").is_some() {
        interleaved(&mut rig, &req, &mut buf);
    }
    assert_eq!(rig.completed, rig.runs, "every request completes");
    assert_eq!(rig.c.pending_requests(), 0, "nothing left pending");
}

/// Opt-in (`CHOPSTICKS_INTERLEAVED=1`): the two functions of the controller group alternate in
/// batches of 2,000 calls, 300 times each, so that a slow phase of the shared VM hits both
/// alike. Criterion times them one after the other (2.5 s each), and its ratio swings with the
/// VM's phases (0.5–0.9× on identical code); the ratio of the fastest batches holds within a
/// few per cent.
fn interleaved(rig: &mut Rig, req: &ControllerMessage, buf: &mut Vec<u8>) {
    const BATCH: u32 = 2_000;
    const ROUNDS: usize = 300;
    #[allow(clippy::disallowed_methods)] // a bench's timer
    fn ns_per_call(mut f: impl FnMut()) -> f64 {
        let start = Instant::now();
        f();
        start.elapsed().as_nanos() as f64 / f64::from(BATCH)
    }
    let (mut ours, mut base) = (Vec::with_capacity(ROUNDS), Vec::with_capacity(ROUNDS));
    for _ in 0..ROUNDS {
        let resps: Vec<String> = (0..BATCH).map(|_| rig.next_resp()).collect();
        ours.push(ns_per_call(|| resps.iter().for_each(|r| rig.run(r))));
        base.push(ns_per_call(|| {
            for _ in 0..BATCH {
                buf.clear();
                black_box(req).encode(buf);
                black_box(AgentMessage::decode(Frame::Text(black_box(RESP)), MAX).is_ok());
            }
        }));
    }
    ours.sort_by(f64::total_cmp);
    base.sort_by(f64::total_cmp);
    let (o_min, b_min) = (ours[0], base[0]);
    let (o_med, b_med) = (ours[ROUNDS / 2], base[ROUNDS / 2]);
    println!(
        "chopsticks/controller/request_response interleaved ({ROUNDS} x {BATCH} calls each): \
         controller min {o_min:.0} ns / median {o_med:.0} ns, encode_req_decode_resp min \
         {b_min:.0} ns / median {b_med:.0} ns -> {:.2}x (fastest batches), {:.2}x (medians)",
        b_min / o_min,
        b_med / o_med
    );
}

// ---------------------------------------------------------------------------------------
// Ratios
// ---------------------------------------------------------------------------------------

/// Prints each figure as a ratio against its baseline in the same group.
fn print_ratios() {
    println!();
    println!("chopsticks ratios (medians of this run)");
    let rows: [(&str, &str, &str, &str); 6] = [
        (
            "chopsticks/decode/hello",
            "typed",
            "serde_json_value",
            "speed-up vs Value, target >= 1.3x",
        ),
        (
            "chopsticks/decode/req",
            "typed",
            "serde_json_value",
            "speed-up vs Value, target >= 1.3x",
        ),
        (
            "chopsticks/decode/resp",
            "typed",
            "serde_json_value",
            "speed-up vs Value, target >= 1.3x",
        ),
        (
            "chopsticks/encode/req",
            "typed",
            "plain_struct",
            "time / plain struct's, target <= 1.1x",
        ),
        (
            "chopsticks/encode/resp",
            "typed",
            "plain_struct",
            "time / plain struct's, target <= 1.1x",
        ),
        (
            "chopsticks/controller/request_response",
            "controller",
            "encode_req_decode_resp",
            "rate / bare encode+decode rate, target >= 0.7x",
        ),
    ];
    for (group, ours, base, what) in rows {
        let (Some(o), Some(b)) = (median_ns(group, ours), median_ns(group, base)) else {
            continue;
        };
        let ratio = if group.contains("/encode/") {
            o / b
        } else {
            b / o
        };
        println!("  {group}: {ours} {o:.0} ns, {base} {b:.0} ns -> {ratio:.2}x ({what})");
    }
}

fn main() {
    let mut c = criterion();
    decode(&mut c);
    encode(&mut c);
    controller(&mut c);
    c.final_summary();
    print_ratios();
}

//! MCPW codec benchmarks, each figure against a baseline measured in the same group and run
//! (absolute numbers drift by up to 40% on shared machines; ratios hold).
//!
//! Groups:
//!
//! - `mcpw/header/{parse,write}`: `Header::parse` (magic, version, size and reserved checks)
//!   and `Header::to_bytes` vs three `u64::from_be_bytes` / `to_be_bytes` on the same 24 bytes.
//! - `mcpw/frame/decode/{1KiB,4KiB,64KiB}`: `Codec::decode_frame_bytes` of an uncompressed
//!   frame (header checks + a `Bytes::slice` of the payload) vs a `memcpy` of the payload and
//!   a bare `Bytes::slice`: the framing's own cost per frame.
//! - `mcpw/frame/{compress,decompress}/{1KiB,4KiB,64KiB}`: our gzip (header, CRC-32, ISIZE,
//!   size bound, reused state) vs the raw deflate engine with `reset()` on the same backend and
//!   level, for miniz_oxide (flate2's default backend) and zlib-rs, levels 1 and 6. In this
//!   package flate2 is built with `zlib-rs` (feature unification makes every flate2 in the
//!   build use it), so the zlib-rs baseline is `flate2::Compress`/`Decompress` and the
//!   miniz_oxide baseline is miniz_oxide's own stream API, which is what flate2's
//!   `rust_backend` wraps. `compress/1KiB` also times a fresh compressor per frame.
//! - `mcpw/decode/json/{190B,1KiB,4KiB}`: typed `json::decode` of a JSON-form message
//!   (heartbeat, then `task.complete` with findings) vs `serde_json::from_slice::<Value>`.
//! - `mcpw/gzip_bomb/refuse`: `Codec::decode` of a 24-byte frame whose gzip payload
//!   inflates to the 10 MiB cap + 1 byte (refused, `GzipError::TooLarge`) vs inflating a
//!   legitimate payload of exactly the cap: refusing a bomb costs what accepting the largest
//!   allowed payload costs (its memory bound is `tests/bomb.rs` in mcpw-codec).
//!
//! Run: `cargo bench --bench mcpw` (about five minutes). The paired ratios are printed at the
//! end and recorded in `crates/mcpw-codec/README.md`.
#![allow(missing_docs)]

use agentwire_testkit::bench::{family_filter, paired, Paired};

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::Criterion;
use mcpw_codec::gzip::{GzipDecoder, GzipEncoder};
use mcpw_codec::{
    json, AgentHeartbeat, Backend, Body, Codec, CodecConfig, Finding, Header, Limits, Message,
    MessageType, Method, TaskComplete, TaskResult, Workload,
};
use miniz_oxide::deflate::core::{create_comp_flags_from_zip_params, CompressorOxide};
use miniz_oxide::inflate::stream::InflateState;
use miniz_oxide::{DataFormat, MZFlush};
use serde_json::Value;

fn criterion() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1000))
        .configure_from_args()
}

// ---------------------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------------------

/// A compact `task.complete` JSON-form message of about `size` bytes (more findings for
/// larger sizes).
fn task_complete(size: usize) -> Vec<u8> {
    let finding = |i: u64| Finding {
        kind: Some("security".into()),
        severity: Some(["high", "medium", "low"][i as usize % 3].into()),
        file: Some(format!("src/handler_{i}.go")),
        line: Some(40 + i),
        description: Some("Potential SQL injection vulnerability".into()),
        suggestion: Some("Use parameterized queries".into()),
    };
    let mut n = 0;
    loop {
        let msg = Message::request(
            "550e8400-e29b-41d4-a716-446655440004",
            Body::TaskComplete(TaskComplete {
                task_id: "task-456".into(),
                agent_id: "agent-123".into(),
                status: Some("completed".into()),
                duration_ms: Some(2150),
                result: Some(TaskResult {
                    summary: Some("Found security issues and performance concerns".into()),
                    findings: Some((0..n).map(finding).collect()),
                    metrics: Some(serde_json::json!({"total_lines": 1523})),
                }),
                resource_usage: None,
                idempotency_key: None,
            }),
        );
        let mut out = Vec::new();
        json::encode(&msg, &mut out).unwrap();
        if out.len() >= size {
            return out;
        }
        n += 1;
    }
}

/// A compact heartbeat, about 190 bytes.
fn heartbeat() -> Vec<u8> {
    let msg = Message::request(
        "550e8400-e29b-41d4-a716-446655440001",
        Body::AgentHeartbeat(AgentHeartbeat {
            agent_id: "agent-123".into(),
            status: Some("healthy".into()),
            metrics: None,
            workload: Some(Workload {
                current_load: Some(0.6),
                queue_depth: Some(2),
                processing_rate: Some(0.5),
            }),
        }),
    );
    let mut out = Vec::new();
    json::encode(&msg, &mut out).unwrap();
    out
}

const SIZES: [(&str, usize); 3] = [("1KiB", 1 << 10), ("4KiB", 4 << 10), ("64KiB", 64 << 10)];

// ---------------------------------------------------------------------------------------
// mcpw/header
// ---------------------------------------------------------------------------------------

fn header(c: &mut Criterion, out: &mut Vec<Paired>) {
    let mut h = Header::new(MessageType::REQUEST, 12345, Method::TOOL_LIST);
    h.size = 100;
    let bytes = h.to_bytes();
    let limits = Limits::default();
    let parse = || Header::parse(black_box(&bytes), &limits).unwrap();
    let base_parse = || {
        let b = black_box(&bytes);
        let x = u64::from_be_bytes(b[0..8].try_into().unwrap());
        let y = u64::from_be_bytes(b[8..16].try_into().unwrap());
        let z = u64::from_be_bytes(b[16..24].try_into().unwrap());
        (x, y, z)
    };
    let write = || black_box(&h).to_bytes();
    let words = (1u64 << 40, 12345u64, 99u64);
    let base_write = || {
        let (x, y, z) = black_box(words);
        let mut b = [0u8; 24];
        b[0..8].copy_from_slice(&x.to_be_bytes());
        b[8..16].copy_from_slice(&y.to_be_bytes());
        b[16..24].copy_from_slice(&z.to_be_bytes());
        b
    };
    let mut g = c.benchmark_group("mcpw/header/parse");
    g.bench_function("ours", |b| b.iter(parse));
    g.bench_function("baseline_3x_u64_from_be_bytes", |b| b.iter(base_parse));
    g.finish();
    let mut g = c.benchmark_group("mcpw/header/write");
    g.bench_function("ours", |b| b.iter(write));
    g.bench_function("baseline_3x_u64_to_be_bytes", |b| b.iter(base_write));
    g.finish();
    out.push(paired(
        "mcpw/header/parse",
        || {
            black_box(parse());
        },
        || {
            black_box(base_parse());
        },
    ));
    out.push(paired(
        "mcpw/header/write",
        || {
            black_box(write());
        },
        || {
            black_box(base_write());
        },
    ));
}

// ---------------------------------------------------------------------------------------
// mcpw/frame/decode
// ---------------------------------------------------------------------------------------

fn frame_decode(c: &mut Criterion, out: &mut Vec<Paired>) {
    for (name, size) in SIZES {
        let payload = task_complete(size);
        let mut h = Header::new(MessageType::REQUEST, 1, Method::TASK_COMPLETE);
        h.size = payload.len() as u32;
        let mut frame = h.to_bytes().to_vec();
        frame.extend_from_slice(&payload);
        let frame = Bytes::from(frame);
        let mut codec = Codec::default();
        let mut copy = vec![0u8; payload.len()];
        let group = format!("mcpw/frame/decode/{name}");
        let mut g = c.benchmark_group(&group);
        g.bench_function("ours", |b| {
            b.iter(|| codec.decode_frame_bytes(black_box(frame.clone())).unwrap())
        });
        g.bench_function("baseline_memcpy", |b| {
            b.iter(|| copy.copy_from_slice(&black_box(&frame)[24..]))
        });
        g.bench_function("baseline_bytes_slice", |b| {
            b.iter(|| black_box(frame.clone()).slice(24..))
        });
        g.finish();
        let mut codec = Codec::default();
        out.push(paired(
            format!("{group} vs Bytes::slice"),
            || {
                black_box(codec.decode_frame_bytes(black_box(frame.clone())).unwrap());
            },
            || {
                black_box(black_box(frame.clone()).slice(24..));
            },
        ));
        out.push(paired(
            format!("{group} vs memcpy"),
            || {
                black_box(codec.decode_frame_bytes(black_box(frame.clone())).unwrap());
            },
            || copy.copy_from_slice(&black_box(&frame)[24..]),
        ));
    }
}

// ---------------------------------------------------------------------------------------
// mcpw/frame/{compress,decompress}
// ---------------------------------------------------------------------------------------

/// The raw engine with `reset()`, the baseline for one backend and level.
enum Raw {
    Miniz(Box<CompressorOxide>, Box<InflateState>),
    Zlib(Box<flate2::Compress>, Box<flate2::Decompress>),
}

impl Raw {
    fn new(backend: Backend, level: u32) -> Self {
        match backend {
            Backend::MinizOxide => Self::Miniz(
                Box::new(CompressorOxide::new(create_comp_flags_from_zip_params(
                    level as i32,
                    -15,
                    0,
                ))),
                InflateState::new_boxed(DataFormat::Raw),
            ),
            _ => Self::Zlib(
                Box::new(flate2::Compress::new(
                    flate2::Compression::new(level),
                    false,
                )),
                Box::new(flate2::Decompress::new(false)),
            ),
        }
    }

    /// Deflates `input` into `out` (sized by the caller); returns the bytes written.
    fn compress(&mut self, input: &[u8], out: &mut [u8]) -> usize {
        match self {
            Self::Miniz(c, _) => {
                c.reset();
                let r = miniz_oxide::deflate::stream::deflate(c, input, out, MZFlush::Finish);
                assert!(r.status.is_ok());
                r.bytes_written
            }
            Self::Zlib(c, _) => {
                c.reset();
                c.compress(input, out, flate2::FlushCompress::Finish)
                    .unwrap();
                c.total_out() as usize
            }
        }
    }

    /// Inflates raw deflate `input` into `out`; returns the bytes written.
    fn decompress(&mut self, input: &[u8], out: &mut [u8]) -> usize {
        match self {
            Self::Miniz(_, d) => {
                d.reset(DataFormat::Raw);
                let r = miniz_oxide::inflate::stream::inflate(d, input, out, MZFlush::Finish);
                assert!(r.status.is_ok());
                r.bytes_written
            }
            Self::Zlib(_, d) => {
                d.reset(false);
                d.decompress(input, out, flate2::FlushDecompress::Finish)
                    .unwrap();
                d.total_out() as usize
            }
        }
    }
}

fn backend_name(b: Backend) -> &'static str {
    match b {
        Backend::MinizOxide => "miniz_oxide",
        _ => "zlib-rs",
    }
}

fn compression(c: &mut Criterion, out: &mut Vec<Paired>) {
    let backends = [Backend::MinizOxide, Backend::ZlibRs];
    for (name, size) in SIZES {
        let payload = task_complete(size);
        for backend in backends {
            for level in [1u32, 6] {
                let id = format!("{}-L{level}", backend_name(backend));
                let mut ours = GzipEncoder::new(backend, level);
                let mut raw = Raw::new(backend, level);
                let mut z = Vec::with_capacity(payload.len());
                let mut raw_out = vec![0u8; payload.len() + 1024];
                let cgroup = format!("mcpw/frame/compress/{name}");
                let mut g = c.benchmark_group(&cgroup);
                g.bench_function(format!("{id}/ours"), |b| {
                    b.iter(|| {
                        z.clear();
                        assert!(ours.compress_within(
                            black_box(&payload),
                            &mut z,
                            payload.len() - 1
                        ));
                    })
                });
                g.bench_function(format!("{id}/raw_reset"), |b| {
                    b.iter(|| raw.compress(black_box(&payload), &mut raw_out))
                });
                if size == 1 << 10 {
                    g.bench_function(format!("{id}/fresh_per_frame"), |b| {
                        b.iter(|| {
                            let mut fresh = GzipEncoder::new(backend, level);
                            let mut z = Vec::new();
                            fresh.compress_within(black_box(&payload), &mut z, payload.len() - 1)
                        })
                    });
                }
                g.finish();
                out.push(paired(
                    format!("{cgroup} {id}"),
                    || {
                        z.clear();
                        ours.compress_within(black_box(&payload), &mut z, payload.len() - 1);
                    },
                    || {
                        black_box(raw.compress(black_box(&payload), &mut raw_out));
                    },
                ));
                if size == 1 << 10 {
                    out.push(paired(
                        format!("{cgroup} {id} fresh per frame"),
                        || {
                            let mut fresh = GzipEncoder::new(backend, level);
                            let mut z = Vec::new();
                            black_box(fresh.compress_within(
                                black_box(&payload),
                                &mut z,
                                payload.len() - 1,
                            ));
                        },
                        || {
                            z.clear();
                            ours.compress_within(black_box(&payload), &mut z, payload.len() - 1);
                        },
                    ));
                }

                // Decompress what each side produced.
                z.clear();
                ours.compress_within(&payload, &mut z, payload.len() - 1);
                let deflate = z[10..z.len() - 8].to_vec();
                println!(
                    "{name} {id}: {} -> {} bytes ({:.1}%)",
                    payload.len(),
                    z.len(),
                    100.0 * z.len() as f64 / payload.len() as f64
                );
                let mut dec = GzipDecoder::new(backend);
                let mut inflated = Vec::new();
                let mut raw_in = vec![0u8; payload.len()];
                let dgroup = format!("mcpw/frame/decompress/{name}");
                let mut g = c.benchmark_group(&dgroup);
                g.bench_function(format!("{id}/ours"), |b| {
                    b.iter(|| {
                        inflated.clear();
                        dec.decompress(black_box(&z), &mut inflated, 10 << 20)
                            .unwrap();
                    })
                });
                g.bench_function(format!("{id}/raw_reset"), |b| {
                    b.iter(|| raw.decompress(black_box(&deflate), &mut raw_in))
                });
                g.finish();
                out.push(paired(
                    format!("{dgroup} {id}"),
                    || {
                        inflated.clear();
                        dec.decompress(black_box(&z), &mut inflated, 10 << 20)
                            .unwrap();
                    },
                    || {
                        black_box(raw.decompress(black_box(&deflate), &mut raw_in));
                    },
                ));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// mcpw/decode/json
// ---------------------------------------------------------------------------------------

fn decode_json(c: &mut Criterion, out: &mut Vec<Paired>) {
    let limits = Limits::default();
    for (name, text) in [
        ("190B", heartbeat()),
        ("1KiB", task_complete(1 << 10)),
        ("4KiB", task_complete(4 << 10)),
    ] {
        println!("decode/json/{name}: {} bytes", text.len());
        let group = format!("mcpw/decode/json/{name}");
        let mut g = c.benchmark_group(&group);
        g.bench_function("typed", |b| {
            b.iter(|| json::decode(black_box(&text), &limits).unwrap())
        });
        g.bench_function("baseline_value", |b| {
            b.iter(|| serde_json::from_slice::<Value>(black_box(&text)).unwrap())
        });
        g.finish();
        out.push(paired(
            group,
            || {
                black_box(json::decode(black_box(&text), &limits).unwrap());
            },
            || {
                black_box(serde_json::from_slice::<Value>(black_box(&text)).unwrap());
            },
        ));
    }
}

// ---------------------------------------------------------------------------------------
// mcpw/orchestrator
// ---------------------------------------------------------------------------------------

/// The Orchestrator answering a registered agent's heartbeat (JSON form: checks, registry,
/// timer, typed result, reply encoded) vs the bare decode of the heartbeat and encode of
/// its answer that any server must do.
fn orchestrator(c: &mut Criterion, out: &mut Vec<Paired>) {
    use agentwire_core::{ConnId, Frame, Machine, PeerInfo, SequentialIds};
    use mcpw_codec::orchestrator::Orchestrator;
    use mcpw_codec::{HeartbeatAck, OrchestratorConfig};

    #[allow(clippy::disallowed_methods)] // the bench's one base time
    let start = std::time::Instant::now();
    let config = OrchestratorConfig::default().with_rate(None);
    let mut server = Orchestrator::new(config, SequentialIds::new(1), start, 0);
    let conn = ConnId::new(1);
    server.handle_connect(conn, &PeerInfo::new(None), start);
    let register = r#"{"id":"r","type":0,"method":"agent.register","params":{"agent_id":"agent-123","capabilities":[{"name":"review"}]}}"#;
    server.handle_frame(conn, Frame::Text(register), start);
    while server.poll_output().is_some() {}
    let beat = heartbeat();
    let text = std::str::from_utf8(&beat).unwrap().to_owned();
    let limits = Limits::default();
    let mut handle = || {
        server.handle_frame(conn, Frame::Text(black_box(&text)), start);
        while let Some(o) = server.poll_output() {
            black_box(o);
        }
    };
    let mut bare = || {
        let msg = json::decode(black_box(&beat), &limits).unwrap();
        let Body::AgentHeartbeat(p) = msg.body else {
            unreachable!()
        };
        let ack = HeartbeatAck {
            agent_id: p.agent_id,
            status: "ok".to_owned(),
        };
        let reply = Message::new(
            MessageType::RESPONSE,
            Body::Other(mcpw_codec::OtherCall::new(
                "",
                serde_json::to_value(&ack).unwrap(),
            )),
        )
        .with_id(msg.id.unwrap_or_default());
        let mut buf = Vec::new();
        json::encode(&reply, &mut buf).unwrap();
        black_box(buf);
    };
    let group = "mcpw/orchestrator/heartbeat";
    let mut g = c.benchmark_group(group);
    g.bench_function("orchestrator", |b| b.iter(&mut handle));
    g.bench_function("baseline_decode_encode", |b| b.iter(&mut bare));
    g.finish();
    out.push(paired(group, handle, bare));
}

// ---------------------------------------------------------------------------------------
// mcpw/gzip_bomb
// ---------------------------------------------------------------------------------------

fn gzip_bomb(c: &mut Criterion, out: &mut Vec<Paired>) {
    let cap = Limits::default().max_decompressed;
    let member = |len: usize| {
        let mut out = Vec::new();
        GzipEncoder::new(Backend::MinizOxide, 9).compress(&vec![0u8; len], &mut out);
        out
    };
    let bomb = member(cap + 1);
    let legit = member(cap);
    let mut h = Header::new(MessageType::REQUEST, 1, Method::TOOL_EXECUTE);
    h.flags = mcpw_codec::Flags::COMPRESSED;
    h.size = bomb.len() as u32;
    let mut frame = h.to_bytes().to_vec();
    frame.extend_from_slice(&bomb);
    println!(
        "gzip_bomb: cap {cap} bytes, bomb frame {} bytes, legitimate member {} bytes",
        frame.len(),
        legit.len()
    );
    let mut codec = Codec::new(CodecConfig::default());
    let mut dec = GzipDecoder::new(Backend::default());
    let mut refuse = || {
        let r = codec.decode(black_box(&frame));
        assert!(r.is_err(), "the bomb is refused");
    };
    let mut inflate_cap = || {
        let mut inflated = Vec::new();
        dec.decompress(black_box(&legit), &mut inflated, cap)
            .unwrap();
        black_box(inflated);
    };
    let group = "mcpw/gzip_bomb/refuse".to_owned();
    let mut g = c.benchmark_group(&group);
    g.bench_function("ours_refuse_cap_plus_1", |b| b.iter(&mut refuse));
    g.bench_function("baseline_inflate_cap", |b| b.iter(&mut inflate_cap));
    g.finish();
    out.push(paired(group, refuse, inflate_cap));
}

fn print_ratios(paired: &[Paired]) {
    println!("\npaired ratios (ours / baseline; below 1 = faster than the baseline):");
    for p in paired {
        println!(
            "{:60} ours {:>11.1} ns  baseline {:>11.1} ns  ratio {:>6.3}  diff {:>9.1} ns",
            p.group,
            p.ours_ns,
            p.base_ns,
            p.ratio,
            p.ours_ns - p.base_ns
        );
    }
}

fn main() {
    let mut c = criterion();
    let mut paired = Vec::new();
    let wants = family_filter();
    if wants("mcpw/header") {
        header(&mut c, &mut paired);
    }
    if wants("mcpw/frame/decode") {
        frame_decode(&mut c, &mut paired);
    }
    if wants("mcpw/frame/compress") || wants("mcpw/frame/decompress") {
        compression(&mut c, &mut paired);
    }
    if wants("mcpw/decode/json") {
        decode_json(&mut c, &mut paired);
    }
    if wants("mcpw/orchestrator") {
        orchestrator(&mut c, &mut paired);
    }
    if wants("mcpw/gzip_bomb") {
        gzip_bomb(&mut c, &mut paired);
    }
    // The codec's own default (zlib-rs, level 1) end to end, as a sanity line.
    let mut codec = Codec::new(CodecConfig::default());
    let msg = json::decode(&task_complete(4 << 10), &Limits::default()).unwrap();
    let mut f = Vec::new();
    let h = codec.encode(&msg, &mut f).unwrap();
    println!(
        "default codec: 4 KiB task.complete -> {} byte frame, flags {:?}",
        f.len(),
        h.flags
    );
    c.final_summary();
    print_ratios(&paired);
}

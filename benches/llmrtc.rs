//! llmrtc benchmarks, each figure against a baseline measured in the same group and run
//! (absolute numbers drift by up to 40% on shared machines; ratios hold).
//!
//! Groups:
//!
//! - `llmrtc/decode/{ping,llm-chunk,audio-64KiB}`: the typed decode the machines use
//!   (`ClientMessageRef::decode`, which borrows `audio.data`, for client messages;
//!   `ServerMessage::decode` for `llm-chunk`) of a compact message vs
//!   `serde_json::from_slice::<Value>` of the same bytes. `audio-64KiB` is an `audio` message
//!   whose `data` is 64 KiB of base64.
//! - `llmrtc/encode/tts-chunk-16KiB`: `encode_tts_chunk` (the whole `tts-chunk` message, base64
//!   written straight into the frame buffer) of 16 KiB of PCM vs a bare
//!   `base64::engine::general_purpose::STANDARD.encode` of the same PCM.
//! - `llmrtc/server/turn`: one full turn in memory: an `audio` frame with 1 s of 16 kHz speech
//!   (plus silence around it) into an `LlmrtcServer`, VAD, then stand-in providers answering at
//!   once (STT: a fixed sentence; LLM: 8 tokens; TTS: 0.5 s of 24 kHz tone in 4 chunks), until
//!   `tts-complete`. Printed as turns per second, beside the bare codec work of the same turn
//!   (decode the audio frame as a `Value`, base64-decode and parse the WAV, encode the 16
//!   outgoing messages).
//!
//! Run: `cargo bench --bench llmrtc` (about a minute). The ratios are printed at the end and
//! recorded in `crates/llmrtc-proto/README.md`.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use agentwire_testkit::bench::{paired, Paired};

use agentwire_core::{ConnId, Frame, Machine, Output, PeerInfo, SequentialIds};
use base64::Engine as _;
use criterion::Criterion;
use llmrtc_proto::wav::wav_from_samples;
use llmrtc_proto::{
    encode_audio, encode_tts_chunk, ClientMessageRef, LlmrtcServer, ServerConfig, ServerEvent,
    ServerMessage, DEFAULT_MAX_MESSAGE_BYTES,
};
use serde_json::Value;

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
// llmrtc/decode
// ---------------------------------------------------------------------------------------

fn audio_64k() -> String {
    // 48 KiB of WAV is 64 KiB of base64.
    let samples: Vec<i16> = (0..(48 * 1024 - 44) / 2)
        .map(|i| (i % 2000) as i16)
        .collect();
    let wav = wav_from_samples(16000, &samples);
    let mut out = Vec::new();
    encode_audio(&mut out, &wav, &[]);
    String::from_utf8(out).expect("utf8")
}

fn decode(c: &mut Criterion, paired_out: &mut Vec<Paired>) {
    let ping = r#"{"type":"ping","timestamp":1739534400123}"#.to_owned();
    let chunk =
        r#"{"type":"llm-chunk","content":" there! How can I help you today?","done":false}"#
            .to_owned();
    let audio = audio_64k();
    assert!(audio.len() >= 64 * 1024);
    let cases: [(&str, &String, bool); 3] = [
        ("ping", &ping, true),
        ("llm-chunk", &chunk, false),
        ("audio-64KiB", &audio, true),
    ];
    for (name, body, from_client) in cases {
        let group_name = format!("llmrtc/decode/{name}");
        let typed = || {
            let frame = Frame::Text(body);
            if from_client {
                // What the server decodes: `audio.data` borrowed from the frame.
                let m = ClientMessageRef::decode(frame, DEFAULT_MAX_MESSAGE_BYTES);
                assert!(matches!(m, Ok(llmrtc_proto::Decoded::Message(_))));
                black_box(m).ok();
            } else {
                let m = ServerMessage::decode(frame, DEFAULT_MAX_MESSAGE_BYTES);
                assert!(matches!(m, Ok(llmrtc_proto::Decoded::Message(_))));
                black_box(m).ok();
            }
        };
        let value = || {
            let v: Value = serde_json::from_slice(body.as_bytes()).expect("json");
            black_box(v);
        };
        let mut g = c.benchmark_group(&group_name);
        g.throughput(criterion::Throughput::Bytes(body.len() as u64));
        g.bench_function("typed", |b| b.iter(typed));
        g.bench_function("serde_json_Value", |b| b.iter(value));
        g.finish();
        paired_out.push(paired(&group_name, typed, value));
    }
}

// ---------------------------------------------------------------------------------------
// llmrtc/encode/tts-chunk-16KiB
// ---------------------------------------------------------------------------------------

fn encode(c: &mut Criterion, paired_out: &mut Vec<Paired>) {
    let pcm: Vec<u8> = (0..16 * 1024).map(|i| (i * 7 % 251) as u8).collect();
    let group_name = "llmrtc/encode/tts-chunk-16KiB";
    let mut buf = Vec::with_capacity(32 * 1024);
    let mut ours = || {
        buf.clear();
        encode_tts_chunk(&mut buf, "pcm", 24000, black_box(&pcm));
        black_box(&buf);
    };
    let base = || {
        let s = base64::engine::general_purpose::STANDARD.encode(black_box(&pcm));
        black_box(s);
    };
    let mut g = c.benchmark_group(group_name);
    g.throughput(criterion::Throughput::Bytes(pcm.len() as u64));
    g.bench_function("encode_tts_chunk", |b| b.iter(&mut ours));
    g.bench_function("bare_base64", |b| b.iter(base));
    g.finish();
    paired_out.push(paired(group_name, ours, base));
}

// ---------------------------------------------------------------------------------------
// llmrtc/server/turn
// ---------------------------------------------------------------------------------------

/// 1 s of 16 kHz speech with 300 ms of silence before and 700 ms after.
fn turn_audio() -> String {
    let mut s = vec![0i16; 4800];
    s.extend((0..16000).map(|i| if (i / 8) % 2 == 0 { 4000i16 } else { -4000 }));
    s.extend(std::iter::repeat_n(0, 11200));
    let wav = wav_from_samples(16000, &s);
    let mut out = Vec::new();
    encode_audio(&mut out, &wav, &[]);
    String::from_utf8(out).expect("utf8")
}

/// The stand-in TTS: 0.5 s of a 24 kHz tone as 16-bit PCM.
fn tone() -> Vec<u8> {
    (0..12000)
        .flat_map(|i| (((i % 48) as i16 - 24) * 400).to_le_bytes())
        .collect()
}

const TOKENS: [&str; 8] = ["Hi", " there", "!", " How", " can", " I", " help", "?"];

struct TurnBench {
    server: LlmrtcServer,
    conn: ConnId,
    now: Instant,
    frame: String,
    tts: Vec<u8>,
}

impl TurnBench {
    fn new() -> Self {
        let now = t0();
        let config = ServerConfig::default().with_heartbeat_timeout(None);
        let mut server = LlmrtcServer::new(config, SequentialIds::new(0)).expect("config");
        let conn = ConnId::new(1);
        server.handle_connect(conn, &PeerInfo::new(None), now);
        while server.poll_output().is_some() {}
        Self {
            server,
            conn,
            now,
            frame: turn_audio(),
            tts: tone(),
        }
    }

    /// One whole turn; returns the number of frames sent. Each turn comes a second after
    /// the last, as utterances do: the per-connection rate limits (message and byte rates)
    /// are paid but never reached, however many turns criterion runs.
    fn turn(&mut self) -> usize {
        self.now += Duration::from_secs(1);
        let (s, now) = (&mut self.server, self.now);
        s.handle_frame(self.conn, Frame::Text(&self.frame), now);
        let mut sent = 0;
        let mut complete = false;
        for _ in 0..64 {
            let mut asks = Vec::new();
            while let Some(out) = s.poll_output() {
                match out {
                    Output::Send { frame, .. } => {
                        sent += 1;
                        complete |= frame.as_bytes().starts_with(br#"{"type":"tts-complete""#);
                        black_box(frame);
                    }
                    Output::Event(e) => asks.push(e),
                    Output::Close { .. } => {}
                }
            }
            if asks.is_empty() {
                break;
            }
            for e in asks {
                match e {
                    ServerEvent::Stt(r) => {
                        let text = "Hello, what can you do for me today?".to_owned();
                        s.stt_result(r.request, Ok(text), now).expect("stt");
                    }
                    ServerEvent::Llm(r) => {
                        for t in TOKENS {
                            s.llm_chunk(r.request, t, now).expect("chunk");
                        }
                        s.llm_done(r.request, now).expect("done");
                    }
                    ServerEvent::Tts(r) => {
                        for part in self.tts.chunks(self.tts.len() / 4) {
                            s.tts_chunk(r.request, "pcm", 24000, part, now)
                                .expect("tts");
                        }
                        s.tts_done(r.request, now).expect("tts done");
                    }
                    _ => {}
                }
            }
        }
        assert!(complete, "the turn completed");
        sent
    }
}

/// The codec work a turn needs anyway: parse the audio frame, decode its base64 and WAV,
/// encode the 16 outgoing messages (the same 4 TTS chunks).
fn bare_turn(frame: &str, tts: &[u8]) -> usize {
    let v: Value = serde_json::from_str(frame).expect("json");
    let data = v["data"].as_str().expect("data");
    let wav = base64::engine::general_purpose::STANDARD
        .decode(data)
        .expect("base64");
    let parsed = llmrtc_proto::parse_wav(&wav).expect("wav");
    black_box(parsed.mono_samples().map(i32::from).sum::<i32>());
    let mut out = Vec::new();
    let mut n = 0;
    let mut emit = |m: ServerMessage| {
        out.clear();
        m.encode(&mut out);
        black_box(&out);
        n += 1;
    };
    emit(ServerMessage::SpeechStart);
    emit(ServerMessage::SpeechEnd);
    emit(ServerMessage::Transcript(llmrtc_proto::Transcript {
        text: "Hello, what can you do for me today?".into(),
        is_final: true,
    }));
    for (i, t) in TOKENS.iter().enumerate() {
        emit(ServerMessage::LlmChunk(llmrtc_proto::LlmChunk {
            content: (*t).into(),
            done: i == TOKENS.len() - 1,
        }));
    }
    emit(ServerMessage::Llm(llmrtc_proto::Llm {
        text: TOKENS.concat(),
    }));
    emit(ServerMessage::TtsStart);
    emit(ServerMessage::TtsComplete);
    let mut chunk = Vec::new();
    for part in tts.chunks(tts.len() / 4) {
        chunk.clear();
        encode_tts_chunk(&mut chunk, "pcm", 24000, part);
        black_box(&chunk);
        n += 1;
    }
    n
}

fn server_turn(c: &mut Criterion, paired_out: &mut Vec<Paired>) {
    let group_name = "llmrtc/server/turn";
    let mut bench = TurnBench::new();
    let frames = bench.turn();
    let frame = bench.frame.clone();
    let tts = bench.tts.clone();
    assert_eq!(
        bare_turn(&frame, &tts),
        frames,
        "the baseline encodes what the turn sends"
    );
    let mut g = c.benchmark_group(group_name);
    g.throughput(criterion::Throughput::Elements(1));
    g.bench_function("LlmrtcServer", |b| b.iter(|| bench.turn()));
    g.bench_function("bare_codec", |b| b.iter(|| bare_turn(&frame, &tts)));
    g.finish();
    paired_out.push(paired(
        group_name,
        || {
            bench.turn();
        },
        || {
            bare_turn(&frame, &tts);
        },
    ));
}

fn print_ratios(paired: &[Paired]) {
    println!();
    println!("llmrtc ratios, paired (41 interleaved rounds each; median of per-round ratios)");
    for p in paired {
        let (o, b, x) = (p.ours_ns, p.base_ns, p.speedup);
        let g = &p.group;
        if g.starts_with("llmrtc/decode/") {
            println!("  {g}: typed {o:.0} ns, Value {b:.0} ns -> {x:.2}x faster (target >= 1.3x)");
        } else if g.starts_with("llmrtc/encode/") {
            println!(
                "  {g}: encode_tts_chunk {o:.0} ns, bare base64 {b:.0} ns -> {:.2}x the bare time (target <= 1.3x)",
                1.0 / x
            );
        } else {
            println!(
                "  {g}: {:.0} turns/s ({:.1} us/turn); bare codec work {:.1} us -> the machine takes {:.2}x the bare time",
                1e9 / o,
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
    decode(&mut c, &mut paired);
    encode(&mut c, &mut paired);
    server_turn(&mut c, &mut paired);
    c.final_summary();
    print_ratios(&paired);
}

//! The `llmrtc_server` target: an [`LlmrtcServer`] driven by the input.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use agentwire_core::fuzzing::FuzzClock;
use agentwire_core::{ConnId, Frame, Machine, Output, PeerInfo, Rate, SequentialIds};
use arbitrary::Unstructured;
use serde_json::Value;

use crate::codec::encode_audio;
use crate::config::{Limits, ServerConfig};
use crate::event::ServerEvent;
use crate::ids::RequestId;
use crate::playbook::Playbook;
use crate::provider::{ProviderError, ProviderKind};
use crate::server::LlmrtcServer;
use crate::wav::wav_from_samples;

use super::pick;

/// Drives an [`LlmrtcServer`] with input chosen by `data`: connects, frames (valid messages,
/// audio with and without speech, garbage), disconnects, provider answers (in and out of
/// order), and time.
///
/// The input runs twice, through the same steps: once with the plain settings, then with
/// the *strict* ones: streaming TTS off (replies gathered into whole `tts` messages), a
/// message rate of 8 per second with bursts of 12 (so floods meet `RATE_LIMITED`), its
/// silence sent at 4 kHz (below the VAD's range: `VAD_ERROR`), and provider failures
/// reported as [`ProviderError::Internal`] (`INTERNAL_ERROR`). A third run, with the plain
/// settings, drives the WebRTC audio tracks: speech and silence come as track audio
/// ([`LlmrtcServer::track_audio`]) instead of `audio` messages, and the step that reports
/// the data channel also reports the audio track ([`LlmrtcServer::set_audio_track`]), so
/// TTS goes on the track and `tts-complete` waits for its playout. Runs instead of new
/// steps keep every committed seed's meaning in the first.
///
/// Checks: no panic; every frame sent is JSON with a string `type`; `ready` is the first
/// frame of every connection; `tts-start` / `tts-complete|tts-cancelled` alternate per
/// connection; track audio goes out only between them; limits hold; after every disconnect
/// and enough time, no session, request or deadline is left.
pub fn server(data: &[u8]) {
    server_outputs(data);
}

/// [`server`], returning what it reached: the frame types sent and the event kinds emitted
/// (for choosing seeds).
pub fn server_outputs(data: &[u8]) -> BTreeSet<String> {
    let mut reached = run(data, false, false);
    reached.extend(run(data, true, false));
    reached.extend(run(data, false, true));
    reached
}

/// One run of [`server`] over `data`, with the strict settings or not, with speech on the
/// WebRTC track or in `audio` messages.
fn run(data: &[u8], strict: bool, tracks: bool) -> BTreeSet<String> {
    let mut u = Unstructured::new(data);
    let mut limits = Limits {
        max_connections: 4,
        max_sessions: 4,
        max_queued_turns: 2,
        max_queued_attachments: 3,
        max_history: 4,
        max_message_bytes: 64 << 10,
        max_segment_bytes: 16 << 10,
        max_tool_rounds: 2,
        ..Limits::default()
    };
    if strict {
        limits.message_rate = Rate::per_second(8, 12);
        limits.max_tts_bytes = 64;
    }
    let playbook: Playbook = serde_json::from_value(serde_json::json!({
        "initialStage": "a",
        "stages": [
            {"name": "a", "tools": [{"name": "t"}],
             "transitions": [{"to": "b", "trigger": {"type": "tool_result", "tool": "t"}},
                             {"to": "b", "trigger": {"type": "keyword", "keywords": ["go"]}}]},
            {"name": "b", "tools": [{"name": "t"}]}
        ]
    }))
    .expect("playbook");
    let mut config = ServerConfig::default()
        .with_limits(limits.clone())
        .with_webrtc(u.arbitrary().unwrap_or(false))
        .with_streaming_tts(!strict);
    if u.arbitrary().unwrap_or(false) {
        config = config.with_playbook(playbook);
    }
    let mut s = LlmrtcServer::new(config, SequentialIds::new(1)).expect("config");
    let mut clock = FuzzClock::new();
    let mut st = Tracker {
        strict,
        ..Tracker::default()
    };
    let speech = audio_frame(8000, &speech_samples());
    let silence = audio_frame(if strict { 4000 } else { 8000 }, &[0i16; 1600]);
    for _ in 0..200 {
        let Ok(op) = u.int_in_range(0u8..=13) else {
            break;
        };
        let now = clock.t();
        match op {
            0 => {
                st.next += 1;
                let c = ConnId::new(st.next);
                s.handle_connect(c, &PeerInfo::new(None), now);
                st.open.insert(c);
            }
            1 => {
                if let Some(c) = pick(&mut u, &st.open) {
                    s.handle_disconnect(c, now);
                    st.open.remove(&c);
                    st.gone.insert(c);
                }
            }
            2 | 3 if tracks => {
                if let Some(c) = pick(&mut u, &st.open) {
                    let samples = if op == 2 {
                        speech_samples()
                    } else {
                        vec![0i16; 1600]
                    };
                    for piece in samples.chunks(160) {
                        let _ = s.track_audio(c, piece, 8000, now);
                    }
                }
            }
            2..=4 => {
                if let Some(c) = pick(&mut u, &st.open) {
                    let text: String = match op {
                        2 => speech.clone(),
                        3 => silence.clone(),
                        _ => pick_message(&mut u, &st),
                    };
                    s.handle_frame(c, Frame::Text(&text), now);
                }
            }
            5 => {
                if let Some(c) = pick(&mut u, &st.open) {
                    let len = u.int_in_range(0usize..=64).unwrap_or(0);
                    let bytes = u.bytes(len).unwrap_or(&[]);
                    s.handle_frame(c, Frame::Binary(bytes), now);
                }
            }
            6 => {
                let secs = u.int_in_range(0u64..=120).unwrap_or(1);
                clock.advance(Duration::from_secs(secs));
                s.handle_timeout(clock.t());
            }
            7 => {
                if let Some(t) = s.poll_timeout() {
                    clock.jump_to(t);
                    s.handle_timeout(clock.t());
                }
            }
            8..=12 => answer(&mut s, &mut u, &st, now, op, strict),
            _ => {
                if let Some(c) = pick(&mut u, &st.open) {
                    let open = u.arbitrary().unwrap_or(true);
                    let _ = s.set_data_channel_open(c, open);
                    if tracks {
                        let _ = s.set_audio_track(c, open);
                    }
                }
            }
        }
        drain(&mut s, &mut st);
        assert!(s.connections() <= limits.max_connections + st.refused_pending());
        assert!(s.sessions() <= limits.max_sessions);
    }
    // Everything ends: disconnect all and let every deadline pass.
    let now = clock.t();
    let open: Vec<ConnId> = st.open.iter().copied().collect();
    for c in open {
        s.handle_disconnect(c, now);
        st.open.remove(&c);
    }
    drain(&mut s, &mut st);
    for _ in 0..10_000 {
        let Some(t) = s.poll_timeout() else { break };
        clock.jump_to(t);
        s.handle_timeout(clock.t());
        drain(&mut s, &mut st);
    }
    assert_eq!(s.poll_timeout(), None, "deadlines left");
    assert_eq!(s.sessions(), 0, "sessions left");
    assert_eq!(s.pending_requests(), 0, "requests left");
    assert_eq!(s.connections(), 0);
    st.reached
}

/// What the server fuzzer remembers between steps.
#[derive(Default)]
struct Tracker {
    next: u64,
    open: BTreeSet<ConnId>,
    gone: BTreeSet<ConnId>,
    /// Connections that got at least one frame (so `ready` was first).
    greeted: BTreeSet<ConnId>,
    /// Connections refused (no `ready`).
    refused: BTreeSet<ConnId>,
    /// The strict settings (streaming TTS off: no `tts-chunk`).
    strict: bool,
    /// Connections with a `tts-start` not yet closed.
    tts_open: BTreeSet<ConnId>,
    requests: Vec<(RequestId, ProviderKind)>,
    sessions: Vec<String>,
    reached: BTreeSet<String>,
}

impl Tracker {
    fn refused_pending(&self) -> usize {
        self.refused.intersection(&self.open).count()
    }
}

fn speech_samples() -> Vec<i16> {
    let mut v = vec![0i16; 1600];
    v.extend((0..6400).map(|i| if (i / 8) % 2 == 0 { 5000 } else { -5000 }));
    v.extend(std::iter::repeat_n(0, 4000));
    v
}

fn audio_frame(rate: u32, samples: &[i16]) -> String {
    let wav = wav_from_samples(rate, samples);
    let mut out = Vec::new();
    encode_audio(&mut out, &wav, &[]);
    String::from_utf8(out).unwrap_or_default()
}

fn pick_message(u: &mut Unstructured<'_>, st: &Tracker) -> String {
    let session = st
        .sessions
        .get(u.choose_index(st.sessions.len().max(1)).unwrap_or(0))
        .cloned()
        .unwrap_or_else(|| "nope".into());
    match u.int_in_range(0u8..=7).unwrap_or(0) {
        0 => r#"{"type":"ping","timestamp":12}"#.into(),
        1 => format!(r#"{{"type":"reconnect","sessionId":"{session}"}}"#),
        2 => r#"{"type":"attachments","attachments":[{"data":"a"},{"data":"b"}]}"#.into(),
        3 => r#"{"type":"offer","signal":{"type":"offer","sdp":"v=0"}}"#.into(),
        4 => r#"{"type":"audio","data":"!!"}"#.into(),
        5 => r#"{"type":"audio","data":"UklGRg=="}"#.into(),
        6 => r#"{"type":"unknown-thing"}"#.into(),
        _ => {
            let len = u.int_in_range(0usize..=40).unwrap_or(0);
            String::from_utf8_lossy(u.bytes(len).unwrap_or(&[])).into_owned()
        }
    }
}

/// A provider answer chosen by the input (possibly stale, or of the wrong kind); `strict`
/// failures are internal ones.
fn answer(
    s: &mut LlmrtcServer,
    u: &mut Unstructured<'_>,
    st: &Tracker,
    now: Instant,
    op: u8,
    strict: bool,
) {
    if st.requests.is_empty() {
        return;
    }
    let i = u.choose_index(st.requests.len()).unwrap_or(0);
    let (req, _kind) = st.requests[i];
    let fail = u.arbitrary::<bool>().unwrap_or(false);
    let err = || {
        if fail {
            ProviderError::Timeout
        } else if strict {
            ProviderError::Internal("x".into())
        } else {
            ProviderError::Failed("x".into())
        }
    };
    let _ = match op {
        8 => s.stt_result(
            req,
            if u.arbitrary().unwrap_or(true) {
                Ok(if fail { String::new() } else { "go on".into() })
            } else {
                Err(err())
            },
            now,
        ),
        9 => {
            let _ = s.llm_chunk(req, "chunk ", now);
            if u.arbitrary().unwrap_or(false) {
                s.llm_tool_call(
                    req,
                    if fail { "zz" } else { "t" },
                    serde_json::Map::new(),
                    now,
                )
                .map(|_| ())
            } else if fail {
                s.llm_failed(req, err(), now)
            } else {
                s.llm_done(req, now)
            }
        }
        10 => {
            let _ = s.tts_chunk(req, "pcm", 24000, &[1, 2, 3, 4], now);
            if fail {
                s.tts_failed(req, err(), now)
            } else {
                s.tts_done(req, now)
            }
        }
        11 => s.tool_result(
            req,
            if fail {
                Err("no".into())
            } else {
                Ok(Value::Bool(true))
            },
            now,
        ),
        _ => s.stt_partial(req, "par", now),
    };
}

fn drain(s: &mut LlmrtcServer, st: &mut Tracker) {
    while let Some(out) = s.poll_output() {
        match out {
            Output::Send { conn, frame } => {
                assert!(
                    !st.gone.contains(&conn),
                    "send to a disconnected connection"
                );
                let v: Value = serde_json::from_slice(frame.as_bytes()).expect("JSON out");
                let ty = v["type"].as_str().expect("string type").to_owned();
                if ty == "error" {
                    st.reached
                        .insert(format!("error:{}", v["code"].as_str().unwrap_or("")));
                } else {
                    st.reached.insert(ty.clone());
                }
                if st.greeted.insert(conn) {
                    assert!(
                        ty == "ready" || (ty == "error" && v["code"] == "RATE_LIMITED"),
                        "first frame of {conn:?} is {ty}"
                    );
                    if ty == "error" {
                        st.refused.insert(conn);
                    }
                }
                match ty.as_str() {
                    "tts-start" => assert!(st.tts_open.insert(conn), "tts-start twice"),
                    "tts" | "tts-chunk" => {
                        assert!(st.tts_open.contains(&conn), "{ty} outside tts-start");
                        assert!(ty == "tts" || !st.strict, "tts-chunk with streaming off");
                    }
                    "tts-complete" | "tts-cancelled" => {
                        assert!(st.tts_open.remove(&conn), "{ty} without tts-start")
                    }
                    "ready" => {
                        if let Some(id) = v["id"].as_str() {
                            st.sessions.push(id.to_owned());
                        }
                    }
                    _ => {}
                }
            }
            Output::Close { reason, .. } => {
                st.reached.insert(format!("close:{reason}"));
            }
            Output::Event(e) => match e {
                ServerEvent::TrackAudio { conn, .. } => {
                    assert!(st.tts_open.contains(&conn), "track audio outside tts-start");
                    st.reached.insert("event:TrackAudio".into());
                }
                ServerEvent::Stt(r) => st.requests.push((r.request, ProviderKind::Stt)),
                ServerEvent::Llm(r) => st.requests.push((r.request, ProviderKind::Llm)),
                ServerEvent::Tts(r) => st.requests.push((r.request, ProviderKind::Tts)),
                ServerEvent::ToolCall(r) => st.requests.push((r.request, ProviderKind::Tool)),
                ServerEvent::TurnEnded { outcome, .. } => {
                    st.reached.insert(format!("turn:{outcome:?}"));
                }
                other => {
                    let name = format!("{other:?}");
                    let kind = name.split([' ', '(', '{']).next().unwrap_or("").to_owned();
                    st.reached.insert(format!("event:{kind}"));
                }
            },
        }
    }
    if st.requests.len() > 64 {
        st.requests.drain(..32);
    }
    if st.sessions.len() > 16 {
        st.sessions.drain(..8);
    }
}

//! A direct harness for the `LlmrtcServer`: connections are plain ids, frames JSON values.
//! The client's harness is in [`client`].
#![allow(dead_code, unreachable_pub)]

pub mod client;

use std::time::{Duration, Instant};

use agentwire_core::{CloseCode, ConnId, Frame, Machine, Output, PeerInfo, SequentialIds};
use llmrtc_proto::wav::wav_from_samples;
use llmrtc_proto::{encode_audio, LlmrtcServer, RequestId, ServerConfig, ServerEvent, SttRequest};
use serde_json::Value;

#[allow(clippy::disallowed_methods)] // the one base time of a test
pub fn t0() -> Instant {
    Instant::now()
}

/// `ms` of a loud square wave (speech to the VAD) at `rate`.
pub fn loud(rate: u32, ms: u32) -> Vec<i16> {
    let n = (rate as usize) * (ms as usize) / 1000;
    (0..n)
        .map(|i| if (i / 8) % 2 == 0 { 4000 } else { -4000 })
        .collect()
}

/// `ms` of silence at `rate`.
pub fn quiet(rate: u32, ms: u32) -> Vec<i16> {
    vec![0; (rate as usize) * (ms as usize) / 1000]
}

/// An utterance: 300 ms silence, `ms` speech, 600 ms silence.
pub fn utterance(rate: u32, ms: u32) -> Vec<i16> {
    let mut v = quiet(rate, 300);
    v.extend(loud(rate, ms));
    v.extend(quiet(rate, 600));
    v
}

/// The `audio` message for `samples`.
pub fn audio_text(rate: u32, samples: &[i16]) -> String {
    let wav = wav_from_samples(rate, samples);
    let mut out = Vec::new();
    encode_audio(&mut out, &wav, &[]);
    String::from_utf8(out).expect("utf8")
}

pub struct Harness {
    pub server: LlmrtcServer,
    pub now: Instant,
    next: u64,
    /// Every frame sent, in order.
    pub sent: Vec<(ConnId, Value)>,
    /// Every data-channel copy, in order.
    pub dc: Vec<(ConnId, Value)>,
    pub closes: Vec<(ConnId, CloseCode, String)>,
    pub events: Vec<ServerEvent>,
}

impl Harness {
    pub fn new(config: ServerConfig) -> Self {
        Self {
            server: LlmrtcServer::new(config, SequentialIds::new(0)).expect("config"),
            now: t0(),
            next: 1,
            sent: Vec::new(),
            dc: Vec::new(),
            closes: Vec::new(),
            events: Vec::new(),
        }
    }

    pub fn default_config() -> Self {
        Self::new(ServerConfig::default())
    }

    pub fn drain(&mut self) {
        while let Some(out) = self.server.poll_output() {
            match out {
                Output::Send { conn, frame } => {
                    let v: Value = serde_json::from_slice(frame.as_bytes())
                        .unwrap_or_else(|e| panic!("server sent invalid JSON ({e}): {frame:?}"));
                    self.sent.push((conn, v));
                }
                Output::Close { conn, code, reason } => {
                    self.closes.push((conn, code, reason.into_owned()))
                }
                Output::Event(ServerEvent::DataChannel { conn, frame }) => {
                    let v: Value = serde_json::from_slice(frame.as_bytes()).expect("json");
                    self.dc.push((conn, v));
                }
                Output::Event(e) => self.events.push(e),
            }
        }
    }

    pub fn connect(&mut self) -> ConnId {
        let conn = ConnId::new(self.next);
        self.next += 1;
        self.server
            .handle_connect(conn, &PeerInfo::new(None), self.now);
        self.drain();
        conn
    }

    /// Connects and returns the session id of `ready`, clearing what was sent.
    pub fn client(&mut self) -> (ConnId, String) {
        let c = self.connect();
        let ready = self.take(c);
        assert_eq!(ready[0]["type"], "ready", "{ready:?}");
        (c, ready[0]["id"].as_str().expect("id").to_owned())
    }

    pub fn send_text(&mut self, conn: ConnId, text: &str) {
        self.server.handle_frame(conn, Frame::Text(text), self.now);
        self.drain();
    }

    pub fn send(&mut self, conn: ConnId, v: Value) {
        self.send_text(conn, &v.to_string());
    }

    pub fn audio(&mut self, conn: ConnId, rate: u32, samples: &[i16]) {
        let text = audio_text(rate, samples);
        self.send_text(conn, &text);
    }

    pub fn disconnect(&mut self, conn: ConnId) {
        self.server.handle_disconnect(conn, self.now);
        self.drain();
    }

    /// Advances time by `d`, firing every deadline on the way, in order.
    pub fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        for _ in 0..100_000 {
            match self.server.poll_timeout() {
                Some(t) if t <= end => {
                    self.now = self.now.max(t);
                    self.server.handle_timeout(self.now);
                    self.drain();
                }
                _ => break,
            }
        }
        self.now = end;
        self.server.handle_timeout(self.now);
        self.drain();
    }

    /// Takes the frames sent to `conn` so far.
    pub fn take(&mut self, conn: ConnId) -> Vec<Value> {
        let (mine, rest): (Vec<_>, Vec<_>) = self.sent.drain(..).partition(|(c, _)| *c == conn);
        self.sent = rest;
        mine.into_iter().map(|(_, v)| v).collect()
    }

    /// The `type`s of the frames sent to `conn` so far (taken).
    pub fn types(&mut self, conn: ConnId) -> Vec<String> {
        self.take(conn)
            .iter()
            .map(|v| v["type"].as_str().unwrap_or("?").to_owned())
            .collect()
    }

    pub fn take_events(&mut self) -> Vec<ServerEvent> {
        std::mem::take(&mut self.events)
    }

    pub fn stt_requests(&mut self) -> Vec<SttRequest> {
        let mut out = Vec::new();
        self.events.retain(|e| match e {
            ServerEvent::Stt(r) => {
                out.push(r.clone());
                false
            }
            _ => true,
        });
        out
    }

    pub fn llm_request(&mut self) -> Option<RequestId> {
        let mut found = None;
        self.events.retain(|e| match e {
            ServerEvent::Llm(r) => {
                found = Some(r.request);
                false
            }
            _ => true,
        });
        found
    }

    pub fn tts_request(&mut self) -> Option<RequestId> {
        let mut found = None;
        self.events.retain(|e| match e {
            ServerEvent::Tts(r) => {
                found = Some(r.request);
                false
            }
            _ => true,
        });
        found
    }

    /// Runs one whole turn with providers that answer at once; returns the types sent.
    pub fn full_turn(&mut self, conn: ConnId, heard: &str, reply: &[&str]) -> Vec<String> {
        self.audio(conn, 16000, &utterance(16000, 400));
        let stt = self.stt_requests().pop().expect("stt request");
        let now = self.now;
        self.server
            .stt_result(stt.request, Ok(heard.to_owned()), now)
            .expect("stt");
        self.drain();
        let llm = self.llm_request().expect("llm request");
        for c in reply {
            self.server.llm_chunk(llm, c, now).expect("chunk");
        }
        self.server.llm_done(llm, now).expect("done");
        self.drain();
        if let Some(tts) = self.tts_request() {
            self.server
                .tts_chunk(tts, "pcm", 24000, &[0, 1, 2, 3], now)
                .expect("tts");
            self.server.tts_done(tts, now).expect("tts done");
            self.drain();
        }
        self.types(conn)
    }
}

/// The codes of the `error` frames in `frames`, in order.
pub fn codes(frames: &[Value]) -> Vec<String> {
    frames
        .iter()
        .filter(|v| v["type"] == "error")
        .map(|v| v["code"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// Drives one turn to its STT answer, returning the LLM request.
pub fn to_llm(h: &mut Harness, c: ConnId, heard: &str) -> RequestId {
    h.audio(c, 16000, &utterance(16000, 400));
    let stt = h.stt_requests().pop().expect("stt");
    let now = h.now;
    h.server
        .stt_result(stt.request, Ok(heard.into()), now)
        .expect("stt");
    h.drain();
    h.llm_request().expect("llm")
}

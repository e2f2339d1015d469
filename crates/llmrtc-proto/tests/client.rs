//! `LlmrtcClient` rules in simulated time, driven directly (the server is scripted JSON):
//! ready timeout, version warning, heartbeats, backoff, reconnect-first, dual-channel dedup,
//! llm/tts assembly, connection states.

use std::time::{Duration, Instant};

use agentwire_core::sim::{check_timer_contract, TimerInput};
use agentwire_core::{CloseCode, ConnId, Dial, Dialer, Frame, FrameBuf, Machine, Output, PeerInfo};
use base64::Engine as _;
use llmrtc_proto::{
    AssistantTranscript, ClientCommandError, ClientConfig, ClientEvent, ConnectionState, ErrorCode,
    ErrorMessage, FixedJitter, IgnoreReason, LlmrtcClient, LossReason, ModeChanged, ProtocolError,
    Reconnection, ServerMessage, SessionMode, SplitMix64, Usage, VisionAttachment,
    CLOSE_PONG_TIMEOUT, CLOSE_READY_TIMEOUT,
};
use proptest::prelude::*;
use serde_json::{json, Value};

#[allow(clippy::disallowed_methods)] // the one base time of a test
fn t0() -> Instant {
    Instant::now()
}

const S: Duration = Duration::from_secs(1);

struct H {
    c: LlmrtcClient,
    now: Instant,
    next: u64,
    sent: Vec<(ConnId, Value)>,
    closes: Vec<(ConnId, CloseCode, String)>,
    events: Vec<ClientEvent>,
}

impl H {
    fn new(config: ClientConfig) -> Self {
        Self {
            c: LlmrtcClient::new(config, FixedJitter(0)),
            now: t0(),
            next: 1,
            sent: Vec::new(),
            closes: Vec::new(),
            events: Vec::new(),
        }
    }

    fn default_started() -> Self {
        let mut h = Self::new(ClientConfig::default());
        h.c.start(h.now).expect("start");
        h.drain();
        h.events.clear();
        h
    }

    fn drain(&mut self) {
        while let Some(out) = self.c.poll_output() {
            match out {
                Output::Send { conn, frame } => {
                    let v = serde_json::from_slice(frame.as_bytes()).expect("client sent JSON");
                    self.sent.push((conn, v));
                }
                Output::Close { conn, code, reason } => {
                    self.closes.push((conn, code, reason.into_owned()));
                    // The driver reports the end of every connection, ours included.
                    self.c.handle_disconnect(conn, self.now);
                }
                Output::Event(e) => self.events.push(e),
            }
        }
    }

    /// Opens a connection (as the driver does after `Dial::Now`).
    fn connect(&mut self) -> ConnId {
        assert_eq!(self.c.poll_dial(), Dial::Now, "dialing only when asked");
        let conn = ConnId::new(self.next);
        self.next += 1;
        self.c.handle_connect(conn, &PeerInfo::new(None), self.now);
        self.drain();
        conn
    }

    fn recv(&mut self, conn: ConnId, v: Value) {
        self.c
            .handle_frame(conn, Frame::Text(&v.to_string()), self.now);
        self.drain();
    }

    fn recv_dc(&mut self, v: Value) {
        self.c
            .handle_data_channel_frame(Frame::Text(&v.to_string()), self.now);
        self.drain();
    }

    fn ready(&mut self, conn: ConnId, id: &str) {
        self.recv(
            conn,
            json!({"type":"ready","id":id,"protocolVersion":1,"iceServers":[{"urls":"stun:x"}]}),
        );
    }

    /// Connects and receives `ready{id}`; clears what was recorded.
    fn connected(&mut self, id: &str) -> ConnId {
        let c = self.connect();
        self.ready(c, id);
        assert_eq!(self.c.state(), ConnectionState::Connected);
        self.sent.clear();
        self.events.clear();
        c
    }

    fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        for _ in 0..10_000 {
            match self.c.poll_timeout() {
                Some(t) if t <= end => {
                    self.now = self.now.max(t);
                    self.c.handle_timeout(self.now);
                    self.drain();
                }
                _ => break,
            }
        }
        self.now = end;
    }

    fn types(&mut self) -> Vec<String> {
        self.sent
            .drain(..)
            .map(|(_, v)| v["type"].as_str().unwrap_or("?").to_owned())
            .collect()
    }

    fn take_events(&mut self) -> Vec<ClientEvent> {
        std::mem::take(&mut self.events)
    }

    fn states(&mut self) -> Vec<ConnectionState> {
        self.events
            .iter()
            .filter_map(|e| match e {
                ClientEvent::StateChanged { to, .. } => Some(*to),
                _ => None,
            })
            .collect()
    }

    fn delays(&self) -> Vec<Duration> {
        self.events
            .iter()
            .filter_map(|e| match e {
                ClientEvent::Reconnecting { delay, .. } => Some(*delay),
                _ => None,
            })
            .collect()
    }

    fn messages(&self) -> Vec<&'static str> {
        self.events
            .iter()
            .filter_map(|e| match e {
                ClientEvent::Message(m) => Some(m.type_name()),
                ClientEvent::TtsChunk { .. } => Some("tts-chunk"),
                _ => None,
            })
            .collect()
    }
}

#[test]
fn starts_disconnected_and_dials_only_after_start() {
    let mut h = H::new(ClientConfig::default());
    assert_eq!(h.c.state(), ConnectionState::Disconnected);
    assert_eq!(h.c.poll_dial(), Dial::Wait);
    assert_eq!(h.c.poll_timeout(), None);
    h.c.start(h.now).expect("start");
    h.drain();
    assert_eq!(h.states(), [ConnectionState::Connecting]);
    assert_eq!(h.c.poll_dial(), Dial::Now);
    assert_eq!(
        h.c.start(h.now),
        Err(ClientCommandError::AlreadyStarted(
            ConnectionState::Connecting
        ))
    );
    let c = h.connect();
    assert_eq!(h.c.poll_dial(), Dial::Wait, "one socket at a time");
    assert_eq!(
        h.c.state(),
        ConnectionState::Connecting,
        "connected only on ready"
    );
    h.ready(c, "s1");
    assert_eq!(h.c.state(), ConnectionState::Connected);
    assert_eq!(h.c.session_id(), Some("s1"));
    assert_eq!(h.c.ready_id(), Some("s1"));
    assert_eq!(h.c.server_protocol_version(), Some(1));
    assert_eq!(h.c.ice_servers().map(<[_]>::len), Some(1));
    assert!(
        h.sent.is_empty(),
        "a first connection sends nothing on ready"
    );
}

#[test]
fn no_ready_within_ten_seconds_closes_and_retries() {
    let mut h = H::default_started();
    let c = h.connect();
    h.c.send_audio(b"RIFF", &[], h.now).expect("queued");
    h.advance(S * 9 + Duration::from_millis(999));
    assert!(h.closes.is_empty());
    assert!(h.sent.is_empty(), "nothing is sent before ready");
    h.advance(Duration::from_millis(1));
    assert_eq!(
        h.closes,
        [(c, CloseCode::NORMAL, CLOSE_READY_TIMEOUT.to_owned())]
    );
    assert!(h.events.contains(&ClientEvent::ConnectionLost {
        reason: LossReason::ReadyTimeout
    }));
    assert_eq!(h.c.state(), ConnectionState::Reconnecting);
    assert_eq!(h.delays(), [S]);
    // A ready on the dead connection changes nothing.
    h.ready(c, "late");
    assert_eq!(h.c.state(), ConnectionState::Reconnecting);
    assert_eq!(h.c.queued(), 1, "the queued audio waits for the next ready");
}

#[test]
fn core_1_3_messages_surface_as_events_and_mode_follows_mode_changed() {
    let mut h = H::default_started();
    assert_eq!(h.c.mode(), None, "no mode before ready");
    let c = h.connect();
    h.recv(
        c,
        json!({"type":"ready","id":"s","protocolVersion":1,"mode":"realtime"}),
    );
    assert!(h.events.contains(&ClientEvent::Ready {
        id: "s".into(),
        protocol_version: 1,
        ice_servers: None,
        mode: Some(SessionMode::REALTIME),
    }));
    assert_eq!(h.c.mode(), Some(&SessionMode::REALTIME));
    h.events.clear();
    h.recv(
        c,
        json!({"type":"assistant-transcript","text":"Hello th","isFinal":false}),
    );
    h.recv(
        c,
        json!({"type":"usage","inputTokens":120,"outputTokens":45,"audioInputTokens":100,
               "audioOutputTokens":40,"cachedTokens":64}),
    );
    h.recv(
        c,
        json!({"type":"error","code":"BUDGET_EXCEEDED","message":"over budget"}),
    );
    h.recv(c, json!({"type":"mode-changed","mode":"pipeline"}));
    assert_eq!(
        h.take_events(),
        [
            ClientEvent::Message(ServerMessage::AssistantTranscript(AssistantTranscript {
                text: "Hello th".into(),
                is_final: false,
            })),
            ClientEvent::Message(ServerMessage::Usage(Usage {
                input_tokens: 120,
                output_tokens: 45,
                audio_input_tokens: Some(100),
                audio_output_tokens: Some(40),
                cached_tokens: Some(64),
            })),
            ClientEvent::Message(ServerMessage::Error(ErrorMessage::new(
                ErrorCode::BUDGET_EXCEEDED,
                "over budget"
            ))),
            ClientEvent::Message(ServerMessage::ModeChanged(ModeChanged {
                mode: SessionMode::PIPELINE,
            })),
        ]
    );
    assert_eq!(h.c.mode(), Some(&SessionMode::PIPELINE));
    // A server older than core 1.3.0 sends no mode: it runs the pipeline.
    h.c.drop_connection(h.now);
    h.drain();
    h.advance(Duration::from_secs(40));
    let c = h.connect();
    h.events.clear();
    h.recv(c, json!({"type":"ready","id":"t","protocolVersion":1}));
    assert!(h
        .events
        .iter()
        .any(|e| matches!(e, ClientEvent::Ready { mode: None, .. })));
    assert_eq!(h.c.mode(), Some(&SessionMode::PIPELINE));
    // An unknown mode does not break the connection; it is kept as sent.
    h.recv(c, json!({"type":"mode-changed","mode":"hybrid"}));
    assert_eq!(h.c.mode().map(SessionMode::as_str), Some("hybrid"));
    assert_eq!(h.c.state(), ConnectionState::Connected);
}

#[test]
fn a_protocol_version_mismatch_warns_and_the_connection_proceeds() {
    let mut h = H::default_started();
    let c = h.connect();
    h.recv(c, json!({"type":"ready","id":"s","protocolVersion":2}));
    assert!(h.events.contains(&ClientEvent::VersionMismatch {
        server: 2,
        client: 1
    }));
    assert_eq!(h.c.state(), ConnectionState::Connected);
    h.c.send_audio(b"RIFF....", &[], h.now).expect("send");
    h.drain();
    assert_eq!(h.types(), ["audio"]);
}

#[test]
fn pings_every_fifteen_seconds_and_measures_rtt_from_the_echo() {
    let mut h = H::default_started();
    h.c.set_wall_clock(h.now, 1_700_000_000_000);
    let c = h.connected("s");
    h.advance(S * 14);
    assert!(h.sent.is_empty());
    h.advance(S);
    assert_eq!(
        h.sent,
        [(c, json!({"type":"ping","timestamp":1_700_000_015_000u64}))]
    );
    h.sent.clear();
    h.advance(Duration::from_millis(120));
    h.recv(c, json!({"type":"pong","timestamp":1_700_000_015_000u64}));
    assert_eq!(
        h.take_events(),
        [ClientEvent::Pong {
            timestamp: 1_700_000_015_000,
            rtt: Some(Duration::from_millis(120))
        }]
    );
    assert_eq!(h.c.rtt(), Some(Duration::from_millis(120)));
    h.advance(S * 15);
    assert_eq!(h.types(), ["ping"]);
    assert_eq!(h.c.state(), ConnectionState::Connected);
}

#[test]
fn two_missed_pongs_in_a_row_drop_the_connection_and_reconnect() {
    let mut h = H::default_started();
    let c = h.connected("s");
    // First ping at 15 s, missed at 25 s.
    h.advance(S * 25);
    assert_eq!(h.types(), ["ping"]);
    assert_eq!(h.take_events(), [ClientEvent::PongMissed { missed: 1 }]);
    // Second ping at 30 s, missed at 40 s: the second miss in a row.
    h.advance(S * 15);
    assert_eq!(h.types(), ["ping"]);
    assert_eq!(
        h.closes,
        [(c, CloseCode::NORMAL, CLOSE_PONG_TIMEOUT.to_owned())]
    );
    let ev = h.take_events();
    assert_eq!(ev[0], ClientEvent::PongMissed { missed: 2 });
    assert!(ev.contains(&ClientEvent::ConnectionLost {
        reason: LossReason::HeartbeatTimeout
    }));
    assert_eq!(h.c.state(), ConnectionState::Reconnecting);
    h.advance(S);
    assert_eq!(h.c.poll_dial(), Dial::Now);
}

#[test]
fn a_pong_between_misses_resets_the_count() {
    let mut h = H::default_started();
    let c = h.connected("s");
    h.advance(S * 25); // miss 1
    h.advance(S * 5); // ping at 30 s
    let ts = h.sent.last().expect("ping").1["timestamp"].clone();
    h.recv(c, json!({"type":"pong","timestamp":ts}));
    h.advance(S * 25); // ping at 45 s missed at 55 s: one miss only
    assert!(h.closes.is_empty());
    assert_eq!(h.c.state(), ConnectionState::Connected);
    assert!(h.events.contains(&ClientEvent::PongMissed { missed: 1 }));
}

#[test]
fn backoff_doubles_from_one_second_and_gives_up_after_five_tries() {
    let mut h = H::default_started();
    // The first attempt and five retries all fail.
    let mut dial_times = Vec::new();
    for _ in 0..6 {
        let due = h.c.poll_timeout();
        if let Some(t) = due {
            h.advance(t - h.now);
        }
        assert_eq!(h.c.poll_dial(), Dial::Now);
        dial_times.push(h.now);
        h.c.handle_dial_failed("refused", h.now);
        h.drain();
    }
    assert_eq!(h.delays(), [S, S * 2, S * 4, S * 8, S * 16]);
    let gaps: Vec<Duration> = dial_times.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(gaps, [S, S * 2, S * 4, S * 8, S * 16]);
    assert_eq!(h.c.state(), ConnectionState::Failed);
    assert_eq!(h.c.poll_dial(), Dial::Wait);
    assert_eq!(h.c.poll_timeout(), None, "no more tries");
    let attempts: Vec<(u32, u32)> = h
        .events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Reconnecting {
                attempt,
                max_attempts,
                ..
            } => Some((*attempt, *max_attempts)),
            _ => None,
        })
        .collect();
    assert_eq!(attempts, [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]);
    // `start` from failed tries again, with a fresh count.
    h.c.start(h.now).expect("restart");
    assert_eq!(h.c.poll_dial(), Dial::Now);
    assert_eq!(h.c.reconnect_tries(), 0);
}

#[test]
fn backoff_caps_at_thirty_seconds_and_jitter_adds_at_most_thirty_percent() {
    let mut r = Reconnection::default();
    r.max_retries = 10;
    let plain: Vec<u64> = (0..8).map(|n| r.delay(n, 0).as_secs()).collect();
    assert_eq!(plain, [1, 2, 4, 8, 16, 30, 30, 30]);
    let mut rng = SplitMix64::new(7);
    let mut seen = std::collections::BTreeSet::new();
    for n in 0..8 {
        let base = r.delay(n, 0);
        for _ in 0..200 {
            let d = r.delay(n, llmrtc_proto::JitterSource::next_u64(&mut rng));
            assert!(d >= base && d <= base + base * 3 / 10, "{n}: {d:?}");
            seen.insert(d);
        }
    }
    assert!(seen.len() > 1000, "jitter varies: {} distinct", seen.len());
    assert_eq!(r.delay(5, u64::MAX), r.delay(5, u64::MAX), "deterministic");
    assert_eq!(r.delay(u32::MAX, 0), S * 30);
}

#[test]
fn the_same_seed_gives_the_same_schedule_and_another_seed_another() {
    let schedule = |seed| {
        let mut c = LlmrtcClient::new(ClientConfig::default(), SplitMix64::new(seed));
        let now = t0();
        c.start(now).expect("start");
        let mut delays = Vec::new();
        let mut t = now;
        for _ in 0..6 {
            if let Some(due) = c.poll_timeout() {
                t = due;
                c.handle_timeout(t);
            }
            c.handle_dial_failed("x", t);
            while let Some(o) = c.poll_output() {
                if let Output::Event(ClientEvent::Reconnecting { delay, .. }) = o {
                    delays.push(delay);
                }
            }
        }
        delays
    };
    assert_eq!(schedule(1), schedule(1));
    assert_ne!(schedule(1), schedule(2));
    assert_eq!(schedule(3).len(), 5);
}

#[test]
fn without_reconnection_a_loss_ends_in_failed() {
    let mut h = H::new(ClientConfig::default().with_reconnection(Reconnection::disabled()));
    h.c.start(h.now).expect("start");
    let c = h.connected("s");
    h.c.handle_disconnect(c, h.now);
    h.drain();
    assert_eq!(h.c.state(), ConnectionState::Failed);
    assert_eq!(h.c.poll_dial(), Dial::Wait);
}

#[test]
fn reconnect_is_sent_before_anything_else_and_the_session_follows_the_ack() {
    let mut h = H::default_started();
    let c1 = h.connected("first");
    h.c.handle_disconnect(c1, h.now);
    h.drain();
    assert_eq!(h.c.state(), ConnectionState::Reconnecting);
    // Commands while reconnecting are queued.
    h.c.send_attachments(
        vec![VisionAttachment::new("data:image/png;base64,AA==")],
        h.now,
    )
    .expect("queued");
    h.c.send_audio(b"RIFFwav", &[], h.now).expect("queued");
    assert_eq!(h.c.queued(), 2);
    h.advance(S);
    assert_eq!(h.states().last(), Some(&ConnectionState::Connecting));
    let c2 = h.connect();
    assert!(h.sent.is_empty());
    h.ready(c2, "second");
    assert_eq!(
        h.sent[0],
        (c2, json!({"type":"reconnect","sessionId":"first"}))
    );
    assert_eq!(h.types(), ["reconnect", "attachments", "audio"]);
    assert!(h.events.contains(&ClientEvent::ResumeRequested {
        previous: "first".into()
    }));
    h.recv(
        c2,
        json!({"type":"reconnect-ack","success":true,"sessionId":"first","historyRecovered":true}),
    );
    assert_eq!(h.c.session_id(), Some("first"));
    assert_eq!(h.c.ready_id(), Some("second"));
    // Next time the server has lost it: the client moves to the new session.
    h.c.handle_disconnect(c2, h.now);
    h.drain();
    h.advance(S);
    let c3 = h.connect();
    h.ready(c3, "third");
    assert_eq!(h.sent[0].1["sessionId"], "first");
    h.recv(
        c3,
        json!({"type":"reconnect-ack","success":false,"sessionId":"third","historyRecovered":false}),
    );
    assert_eq!(h.c.session_id(), Some("third"));
    assert!(h.events.contains(&ClientEvent::Resumed {
        success: false,
        session_id: "third".into(),
        history_recovered: false
    }));
}

#[test]
fn a_persisted_session_is_resumed_on_the_first_connection() {
    let mut h = H::new(ClientConfig::default().with_resume_session("saved"));
    h.c.start(h.now).expect("start");
    let c = h.connect();
    h.ready(c, "fresh");
    assert_eq!(
        h.sent,
        [(c, json!({"type":"reconnect","sessionId":"saved"}))]
    );
}

#[test]
fn tries_restart_from_one_second_after_a_successful_ready() {
    let mut h = H::default_started();
    h.c.handle_dial_failed("refused", h.now);
    h.drain();
    h.advance(S);
    h.c.handle_dial_failed("refused", h.now);
    h.drain();
    h.advance(S * 2);
    let c = h.connected("s");
    assert_eq!(h.c.reconnect_tries(), 0);
    h.c.handle_disconnect(c, h.now);
    h.drain();
    assert_eq!(h.delays(), [S]);
}

/// Every payload type the server sends on both channels.
fn payloads() -> Vec<Value> {
    let pcm = base64::engine::general_purpose::STANDARD.encode([1u8, 0, 2, 0]);
    vec![
        json!({"type":"speech-start"}),
        json!({"type":"speech-end"}),
        json!({"type":"transcript","text":"Hello","isFinal":true}),
        json!({"type":"llm-chunk","content":"Hi","done":false}),
        json!({"type":"llm-chunk","content":" there!","done":true}),
        json!({"type":"llm","text":"Hi there!"}),
        json!({"type":"tts-start"}),
        json!({"type":"tts-chunk","format":"pcm","sampleRate":24000,"data":pcm}),
        json!({"type":"tts-complete"}),
        json!({"type":"tool-call-start","name":"book","callId":"x","arguments":{}}),
        json!({"type":"tool-call-end","callId":"x","result":{"ok":true},"durationMs":3}),
        json!({"type":"stage-change","from":"a","to":"b","reason":"tool_result"}),
        json!({"type":"tts-cancelled"}),
        json!({"type":"error","code":"LLM_ERROR","message":"boom"}),
        json!({"type":"assistant-transcript","text":"Hi","isFinal":false}),
        json!({"type":"usage","inputTokens":12,"outputTokens":30}),
        json!({"type":"mode-changed","mode":"pipeline"}),
    ]
}

#[test]
fn dual_channel_each_payload_message_is_handled_once() {
    let mut h = H::default_started();
    let c = h.connected("s");
    let want: Vec<&str> = payloads()
        .iter()
        .map(|v| v["type"].as_str().expect("type"))
        .map(|t| {
            ServerMessage::TYPES
                .iter()
                .copied()
                .find(|k| *k == t)
                .expect("known")
        })
        .collect();
    // Data channel closed: the WebSocket copy counts; a stray data-channel copy does not.
    for p in payloads() {
        h.recv(c, p.clone());
        h.recv_dc(p);
    }
    assert_eq!(h.messages(), want);
    h.events.clear();
    // Data channel open: the server sends each payload to both; only the DC copy counts,
    // whichever arrives first.
    h.c.set_data_channel_open(true, h.now);
    for (i, p) in payloads().into_iter().enumerate() {
        if i % 2 == 0 {
            h.recv(c, p.clone());
            h.recv_dc(p);
        } else {
            h.recv_dc(p.clone());
            h.recv(c, p);
        }
    }
    assert_eq!(h.messages(), want);
    let ignored = h
        .events
        .iter()
        .filter(|e| {
            matches!(
                e,
                ClientEvent::Ignored {
                    reason: IgnoreReason::OtherChannel,
                    ..
                }
            )
        })
        .count();
    assert_eq!(ignored, want.len());
    h.events.clear();
    // Signalling always comes from the WebSocket, even with the data channel open.
    h.recv_dc(json!({"type":"pong","timestamp":1}));
    h.recv_dc(json!({"type":"signal","signal":{"type":"answer","sdp":"v=0"}}));
    h.recv_dc(
        json!({"type":"reconnect-ack","success":true,"sessionId":"z","historyRecovered":true}),
    );
    assert_eq!(h.c.session_id(), Some("s"));
    assert!(h.messages().is_empty());
    h.recv(
        c,
        json!({"type":"signal","signal":{"type":"answer","sdp":"v=0"}}),
    );
    assert_eq!(h.messages(), ["signal"]);
    // A lost connection closes the data channel with it.
    h.c.handle_disconnect(c, h.now);
    h.drain();
    assert!(!h.c.is_data_channel_open());
}

#[test]
fn llm_chunks_are_assembled_into_the_reply() {
    let mut h = H::default_started();
    let c = h.connected("s");
    h.recv(
        c,
        json!({"type":"transcript","text":"Hello","isFinal":true}),
    );
    h.recv(c, json!({"type":"llm-chunk","content":"Hi","done":false}));
    h.recv(
        c,
        json!({"type":"llm-chunk","content":" there!","done":true}),
    );
    h.recv(c, json!({"type":"llm","text":"Hi there!"}));
    assert!(h.events.contains(&ClientEvent::LlmReply {
        text: "Hi there!".into(),
        streamed: "Hi there!".into()
    }));
    h.events.clear();
    // The next reply starts from nothing.
    h.recv(c, json!({"type":"llm","text":"plain"}));
    assert!(h.events.contains(&ClientEvent::LlmReply {
        text: "plain".into(),
        streamed: String::new()
    }));
}

#[test]
fn the_llm_text_limit_stops_appending_and_says_so_once() {
    let mut config = ClientConfig::default();
    config.max_llm_text_bytes = 4;
    let mut h = H::new(config);
    h.c.start(h.now).expect("start");
    let c = h.connected("s");
    for part in ["ab", "cd", "ef", "gh"] {
        h.recv(c, json!({"type":"llm-chunk","content":part,"done":false}));
    }
    h.recv(c, json!({"type":"llm","text":"abcdefgh"}));
    let violations = h
        .events
        .iter()
        .filter(|e| matches!(e, ClientEvent::ProtocolViolation { .. }))
        .count();
    assert_eq!(violations, 1);
    assert!(h.events.contains(&ClientEvent::LlmReply {
        text: "abcdefgh".into(),
        streamed: "abcd".into()
    }));
}

#[test]
fn tts_chunks_are_decoded_and_joined_at_tts_complete() {
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let mut h = H::default_started();
    let c = h.connected("s");
    h.recv(c, json!({"type":"tts-start"}));
    h.recv(
        c,
        json!({"type":"tts-chunk","format":"pcm","sampleRate":24000,"data":b64(&[1,2])}),
    );
    h.recv(
        c,
        json!({"type":"tts-chunk","format":"pcm","sampleRate":24000,"data":b64(&[3,4,5,6])}),
    );
    assert!(h.events.contains(&ClientEvent::TtsChunk {
        format: "pcm".into(),
        sample_rate: 24000,
        audio: vec![3, 4, 5, 6]
    }));
    h.recv(c, json!({"type":"tts-complete"}));
    assert_eq!(
        h.events.last(),
        Some(&ClientEvent::TtsAudio {
            format: "pcm".into(),
            sample_rate: Some(24000),
            audio: vec![1, 2, 3, 4, 5, 6]
        })
    );
    h.events.clear();
    // Barge-in: a cancelled reply yields no audio.
    h.recv(c, json!({"type":"tts-start"}));
    h.recv(
        c,
        json!({"type":"tts-chunk","format":"pcm","sampleRate":24000,"data":b64(&[9,9])}),
    );
    h.recv(c, json!({"type":"tts-cancelled"}));
    h.recv(c, json!({"type":"tts-complete"}));
    assert!(!h
        .events
        .iter()
        .any(|e| matches!(e, ClientEvent::TtsAudio { .. })));
    // A whole `tts` message.
    h.recv(c, json!({"type":"tts","format":"mp3","data":b64(b"ID3")}));
    assert_eq!(
        h.events.last(),
        Some(&ClientEvent::TtsAudio {
            format: "mp3".into(),
            sample_rate: None,
            audio: b"ID3".to_vec()
        })
    );
    // Not base64: reported, the connection stays.
    h.recv(
        c,
        json!({"type":"tts-chunk","format":"pcm","sampleRate":24000,"data":"!!!"}),
    );
    assert_eq!(
        h.events.last(),
        Some(&ClientEvent::ProtocolViolation {
            error: ProtocolError::BadAudio("tts-chunk")
        })
    );
    assert_eq!(h.c.state(), ConnectionState::Connected);
}

#[test]
fn tts_audio_beyond_the_limit_is_dropped() {
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let mut config = ClientConfig::default();
    config.max_tts_audio_bytes = 4;
    let mut h = H::new(config);
    h.c.start(h.now).expect("start");
    let c = h.connected("s");
    h.recv(c, json!({"type":"tts-start"}));
    h.recv(
        c,
        json!({"type":"tts-chunk","format":"pcm","sampleRate":16000,"data":b64(&[1,2,3])}),
    );
    h.recv(
        c,
        json!({"type":"tts-chunk","format":"pcm","sampleRate":16000,"data":b64(&[4,5])}),
    );
    h.recv(c, json!({"type":"tts-complete"}));
    assert!(h.events.contains(&ClientEvent::ProtocolViolation {
        error: ProtocolError::AudioTooLarge { max: 4 }
    }));
    assert!(!h
        .events
        .iter()
        .any(|e| matches!(e, ClientEvent::TtsAudio { .. })));
}

#[test]
fn nothing_before_ready_unknown_types_and_garbage_are_ignored_without_harm() {
    let mut h = H::default_started();
    let c = h.connect();
    h.recv(
        c,
        json!({"type":"transcript","text":"early","isFinal":true}),
    );
    assert_eq!(
        h.take_events(),
        [ClientEvent::Ignored {
            type_name: "transcript".into(),
            reason: IgnoreReason::BeforeReady
        }]
    );
    h.ready(c, "s");
    h.events.clear();
    h.recv(c, json!({"type":"future-thing","x":1}));
    assert_eq!(
        h.take_events(),
        [ClientEvent::Ignored {
            type_name: "future-thing".into(),
            reason: IgnoreReason::UnknownType
        }]
    );
    for bad in [
        "",
        "{",
        "[1]",
        "{\"type\":3}",
        "{\"type\":\"llm\"}",
        "\u{0}",
    ] {
        h.c.handle_frame(c, Frame::Text(bad), h.now);
        h.drain();
    }
    h.c.handle_frame(c, Frame::Binary(&[0xff, 0xfe]), h.now);
    h.drain();
    assert_eq!(h.events.len(), 7);
    assert!(h
        .events
        .iter()
        .all(|e| matches!(e, ClientEvent::ProtocolViolation { .. })));
    // A frame for another connection id is ignored.
    h.c.handle_frame(
        ConnId::new(99),
        Frame::Text("{\"type\":\"tts-start\"}"),
        h.now,
    );
    h.drain();
    assert_eq!(h.events.len(), 7);
    assert_eq!(h.c.state(), ConnectionState::Connected);
    assert!(h.closes.is_empty());
}

#[test]
fn close_is_terminal() {
    let mut h = H::default_started();
    let c = h.connected("s");
    h.c.close(h.now);
    h.drain();
    assert_eq!(
        h.closes,
        [(c, CloseCode::NORMAL, "client-closed".to_owned())]
    );
    assert_eq!(h.c.state(), ConnectionState::Closed);
    assert_eq!(h.c.poll_dial(), Dial::Stop);
    assert_eq!(h.c.poll_timeout(), None);
    assert_eq!(h.states(), [ConnectionState::Closed]);
    assert_eq!(
        h.c.send_audio(b"x", &[], h.now),
        Err(ClientCommandError::Closed)
    );
    assert_eq!(h.c.start(h.now), Err(ClientCommandError::Closed));
    // A connection that opens anyway is closed at once.
    let late = ConnId::new(50);
    h.c.handle_connect(late, &PeerInfo::new(None), h.now);
    h.drain();
    assert_eq!(h.closes.last().map(|x| x.0), Some(late));
}

#[test]
fn the_full_state_cycle() {
    let mut h = H::new(ClientConfig::default());
    h.c.start(h.now).expect("start");
    h.drain();
    let c = h.connect();
    h.ready(c, "s");
    h.c.handle_disconnect(c, h.now);
    h.drain();
    h.advance(S);
    let c2 = h.connect();
    h.ready(c2, "t");
    h.c.close(h.now);
    h.drain();
    use ConnectionState::*;
    assert_eq!(
        h.states(),
        [
            Connecting,
            Connected,
            Reconnecting,
            Connecting,
            Connected,
            Closed
        ]
    );
}

#[test]
fn the_send_queue_is_bounded() {
    let mut config = ClientConfig::default();
    config.max_queued = 2;
    let mut h = H::new(config);
    h.c.send_audio(b"a", &[], h.now).expect("1");
    h.c.send_audio(b"b", &[], h.now).expect("2");
    assert_eq!(
        h.c.send_audio(b"c", &[], h.now),
        Err(ClientCommandError::QueueFull("max_queued"))
    );
    let mut config = ClientConfig::default();
    config.max_queued_bytes = 100;
    let mut h = H::new(config);
    assert_eq!(
        h.c.send_audio(&[0u8; 200], &[], h.now),
        Err(ClientCommandError::QueueFull("max_queued_bytes"))
    );
}

#[test]
fn outputs_for_a_data_channel_frame_without_a_connection_are_none() {
    let mut h = H::default_started();
    h.recv_dc(json!({"type":"tts-start"}));
    assert!(h.events.is_empty());
    // Frames (text or binary) as a driver delivers them decode the same.
    let c = h.connected("s");
    let f = FrameBuf::binary(br#"{"type":"speech-start"}"#.to_vec());
    h.c.handle_frame(c, f.as_frame(), h.now);
    h.drain();
    assert_eq!(h.messages(), ["speech-start"]);
}

fn input() -> impl Strategy<Value = TimerInput> {
    let frames = prop_oneof![
        Just(json!({"type":"ready","id":"s","protocolVersion":1})),
        Just(json!({"type":"pong","timestamp":15000})),
        Just(json!({"type":"tts-start"})),
        Just(json!({"type":"llm-chunk","content":"x","done":false})),
        Just(
            json!({"type":"reconnect-ack","success":true,"sessionId":"s","historyRecovered":true})
        ),
    ];
    prop_oneof![
        Just(TimerInput::Connect),
        (0usize..4, frames).prop_map(|(i, v)| TimerInput::Frame(i, FrameBuf::text(v.to_string()))),
        (0usize..4).prop_map(TimerInput::Disconnect),
        (0u64..40_000).prop_map(|ms| TimerInput::Advance(Duration::from_millis(ms))),
        (0u64..5_000).prop_map(|ms| TimerInput::Rewind(Duration::from_millis(ms))),
        Just(TimerInput::Timeout),
        Just(TimerInput::FireDue),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn the_client_keeps_the_timer_contract(inputs in proptest::collection::vec(input(), 1..60)) {
        let mut c = LlmrtcClient::new(ClientConfig::default(), SplitMix64::new(9));
        let start = t0();
        c.start(start).expect("start");
        if let Err(e) = check_timer_contract(&mut c, start, &inputs) {
            return Err(TestCaseError::fail(e));
        }
    }
}

#[test]
fn drop_connection_reconnects_with_the_session() {
    let mut h = H::default_started();
    let c = h.connected("s");
    assert!(h.c.drop_connection(h.now));
    h.drain();
    assert_eq!(
        h.closes,
        [(c, CloseCode::NORMAL, "client-reconnect".to_owned())]
    );
    assert!(h.events.contains(&ClientEvent::ConnectionLost {
        reason: LossReason::Requested
    }));
    assert!(!h.c.drop_connection(h.now), "nothing left to drop");
    h.advance(S);
    let c2 = h.connect();
    h.ready(c2, "t");
    assert_eq!(h.sent, [(c2, json!({"type":"reconnect","sessionId":"s"}))]);
}

/// One step of an arbitrary client life.
#[derive(Debug, Clone)]
enum Op {
    Connect,
    Disconnect,
    DialFailed,
    Ws(String),
    Dc(String),
    Binary(Vec<u8>),
    DcOpen(bool),
    Audio(usize),
    Drop,
    Start,
    Close,
    Advance(u64),
}

fn hostile_text() -> impl Strategy<Value = String> {
    let known = prop_oneof![
        Just(r#"{"type":"ready","id":"s","protocolVersion":1}"#.to_owned()),
        Just(r#"{"type":"ready","id":"s","protocolVersion":7}"#.to_owned()),
        Just(r#"{"type":"pong","timestamp":15000}"#.to_owned()),
        Just(r#"{"type":"tts-start"}"#.to_owned()),
        Just(
            r#"{"type":"tts-chunk","format":"pcm","sampleRate":24000,"data":"AAECAw=="}"#
                .to_owned()
        ),
        Just(r#"{"type":"tts-complete"}"#.to_owned()),
        Just(r#"{"type":"llm-chunk","content":"abc","done":false}"#.to_owned()),
        Just(r#"{"type":"llm","text":"abc"}"#.to_owned()),
        Just(
            r#"{"type":"reconnect-ack","success":false,"sessionId":"n","historyRecovered":false}"#
                .to_owned()
        ),
    ];
    prop_oneof![
        known,
        "\\PC{0,40}",
        "\\{\"type\":\"[a-z-]{0,14}\"(,\"[a-zA-Z]{1,8}\":(1|\"x\"|null|true|\\[\\]|\\{\\})){0,3}\\}",
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Connect),
        1 => Just(Op::Disconnect),
        1 => Just(Op::DialFailed),
        6 => hostile_text().prop_map(Op::Ws),
        2 => hostile_text().prop_map(Op::Dc),
        1 => proptest::collection::vec(any::<u8>(), 0..32).prop_map(Op::Binary),
        1 => any::<bool>().prop_map(Op::DcOpen),
        2 => (0usize..3000).prop_map(Op::Audio),
        1 => Just(Op::Drop),
        1 => Just(Op::Start),
        1 => Just(Op::Close),
        4 => (0u64..40_000).prop_map(Op::Advance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever the server sends and whatever the driver does, the client never panics,
    /// keeps its queue within its limits, never has two connections, and its state stays
    /// consistent with its connection.
    #[test]
    fn arbitrary_lives_keep_the_client_consistent(ops in proptest::collection::vec(op(), 1..80)) {
        let mut config = ClientConfig::default();
        config.max_queued = 3;
        config.max_queued_bytes = 10_000;
        config.max_tts_audio_bytes = 8;
        let mut h = H::new(config);
        h.c.start(h.now).expect("start");
        let mut open: Option<ConnId> = None;
        for op in ops {
            match op {
                Op::Connect => {
                    if h.c.poll_dial() == Dial::Now && open.is_none() {
                        open = Some(h.connect());
                    }
                }
                Op::Disconnect => {
                    if let Some(c) = open.take() {
                        h.c.handle_disconnect(c, h.now);
                    }
                }
                Op::DialFailed => {
                    if h.c.poll_dial() == Dial::Now && open.is_none() {
                        h.c.handle_dial_failed("refused", h.now);
                    }
                }
                Op::Ws(t) => {
                    if let Some(c) = open {
                        h.c.handle_frame(c, Frame::Text(&t), h.now);
                    }
                }
                Op::Dc(t) => h.c.handle_data_channel_frame(Frame::Text(&t), h.now),
                Op::Binary(b) => {
                    if let Some(c) = open {
                        h.c.handle_frame(c, Frame::Binary(&b), h.now);
                    }
                }
                Op::DcOpen(o) => h.c.set_data_channel_open(o, h.now),
                Op::Audio(n) => {
                    let _ = h.c.send_audio(&vec![0u8; n], &[], h.now);
                }
                Op::Drop => {
                    h.c.drop_connection(h.now);
                }
                Op::Start => {
                    let _ = h.c.start(h.now);
                }
                Op::Close => h.c.close(h.now),
                Op::Advance(ms) => h.advance(Duration::from_millis(ms)),
            }
            h.drain();
            // The harness reports the end of connections the client closed itself.
            if let Some(c) = open {
                if h.closes.iter().any(|(x, _, _)| *x == c) {
                    open = None;
                }
            }
            prop_assert!(h.c.queued() <= 3);
            prop_assert_eq!(h.c.conn(), open.filter(|_| h.c.state() != ConnectionState::Closed));
            let connected = h.c.state() == ConnectionState::Connected;
            prop_assert!(!connected || h.c.conn().is_some());
            if let Some(t) = h.c.poll_timeout() {
                prop_assert!(h.c.state() != ConnectionState::Closed, "no timers once closed: {:?}", t);
            }
        }
    }
}

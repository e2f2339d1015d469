//! The `llmrtc_client` target: an [`LlmrtcClient`] driven by the input.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use agentwire_core::fuzzing::{checked_wall_clock, FuzzClock};
use agentwire_core::{ConnId, Dial, Dialer, Frame, Machine, Output, PeerInfo};
use arbitrary::Unstructured;
use serde_json::Value;

use crate::client::{ClientEvent, ConnectionState, FixedJitter, LlmrtcClient};
use crate::config::{ClientConfig, Reconnection};
use crate::message::{RawJson, VisionAttachment};

/// Drives an [`LlmrtcClient`] with input chosen by `data`: start and close, dials that
/// succeed or fail, disconnects, server messages on the WebSocket and on the data channel
/// (valid, out of order, for stale connections, garbage), commands, the wall clock, and
/// time going forward, backward and to the next deadline.
///
/// Checks: no panic; frames go only to the current connection, are JSON with a string
/// `type`, and none goes out before `ready`; a `reconnect` is the first frame of its
/// connection; the queue stays within its limits; `StateChanged` events chain (`from` is the
/// previous `to`) and match [`LlmrtcClient::state`]; once closed, the client stays closed,
/// sends nothing and asks the driver to stop; `handle_timeout(t)` leaves no deadline at or
/// before `t`.
pub fn client(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let reconnection = if u.arbitrary().unwrap_or(false) {
        Reconnection::disabled()
    } else {
        Reconnection {
            max_retries: 3,
            ..Reconnection::default()
        }
    };
    let mut config = ClientConfig {
        reconnection,
        ..ClientConfig::default()
    };
    config.max_queued = 3;
    config.max_queued_bytes = 4096;
    config.max_llm_text_bytes = 32;
    config.max_tts_audio_bytes = 64;
    config.max_message_bytes = 1024;
    if u.arbitrary().unwrap_or(false) {
        config.resume_session = Some("resumed".into());
    }
    let max_queued = config.max_queued;
    let mut c = LlmrtcClient::new(config, FixedJitter(u.arbitrary().unwrap_or(0)));
    let mut clock = FuzzClock::new();
    let mut st = ClientTracker::default();
    for _ in 0..300 {
        let Ok(op) = u.int_in_range(0u8..=15) else {
            break;
        };
        let now = clock.t();
        match op {
            0 => {
                let _ = c.start(now);
            }
            1 => {
                // The driver: dial when asked; the try succeeds or fails.
                if c.poll_dial() == Dial::Now {
                    if u.arbitrary().unwrap_or(true) {
                        st.next += 1;
                        let conn = ConnId::new(st.next);
                        st.connected(conn);
                        c.handle_connect(conn, &PeerInfo::new(None), now);
                    } else {
                        c.handle_dial_failed("refused", now);
                    }
                }
            }
            2 => {
                if let Some(conn) = st.current {
                    st.current = None;
                    c.handle_disconnect(conn, now);
                }
            }
            3..=6 => {
                let text = server_message(&mut u, &st);
                let conn = match (u.int_in_range(0u8..=7).unwrap_or(0), st.current) {
                    (0, _) => ConnId::new(st.next + 1),
                    (1, _) => ConnId::new(st.next.saturating_sub(1)),
                    (_, Some(conn)) => conn,
                    (_, None) => ConnId::new(st.next),
                };
                if op == 6 {
                    c.handle_data_channel_frame(Frame::Text(&text), now);
                } else {
                    c.handle_frame(conn, Frame::Text(&text), now);
                }
            }
            7 => {
                let len = u.int_in_range(0usize..=64).unwrap_or(0);
                let bytes = u.bytes(len).unwrap_or(&[]);
                match st.current {
                    Some(conn) if u.arbitrary().unwrap_or(true) => {
                        c.handle_frame(conn, Frame::Binary(bytes), now);
                    }
                    _ => c.handle_data_channel_frame(Frame::Binary(bytes), now),
                }
            }
            8 => {
                let open = u.arbitrary().unwrap_or(true);
                c.set_data_channel_open(open, now);
            }
            9 => {
                let len = u.int_in_range(0usize..=2000).unwrap_or(0);
                let wav = vec![7u8; len];
                let attachments = if u.arbitrary().unwrap_or(false) {
                    vec![VisionAttachment::new("aGk=")]
                } else {
                    Vec::new()
                };
                let _ = c.send_audio(&wav, &attachments, now);
            }
            10 => {
                let _ = c.send_attachments(vec![VisionAttachment::new("aGk=")], now);
            }
            11 => {
                let _ = c.send_offer(RawJson::from_value(&serde_json::json!({"sdp": "v=0"})), now);
            }
            12 => {
                let secs = u.int_in_range(0u64..=40).unwrap_or(1);
                if u.arbitrary().unwrap_or(true) {
                    clock.advance(Duration::from_secs(secs));
                } else {
                    clock.rewind(Duration::from_secs(secs));
                }
                let t = clock.t();
                if let Some(unix_ms) = clock.wall_jump() {
                    checked_wall_clock(&mut c, t, unix_ms);
                }
                c.handle_timeout(t);
                st.check_timeout(&c, t);
            }
            13 => {
                if let Some(t) = c.poll_timeout() {
                    clock.jump_to(t);
                    let t = clock.t();
                    if let Some(unix_ms) = clock.wall_jump() {
                        checked_wall_clock(&mut c, t, unix_ms);
                    }
                    c.handle_timeout(t);
                    st.check_timeout(&c, t);
                }
            }
            14 => {
                let unix_ms = u.arbitrary().unwrap_or(1_700_000_000_000);
                c.set_wall_clock(now, unix_ms);
            }
            _ => match u.int_in_range(0u8..=15).unwrap_or(0) {
                0 => c.close(now),
                1 => {
                    // A dropped connection is closed (Output::Close), which `drain` sees.
                    c.drop_connection(now);
                }
                _ => {}
            },
        }
        drain(&mut c, &mut st, clock.now());
        assert!(c.queued() <= max_queued, "queue beyond max_queued");
        assert_eq!(c.state(), st.state, "state events and state() agree");
        assert_eq!(
            c.conn(),
            st.current,
            "the client's connection is the driver's"
        );
        if st.state == ConnectionState::Closed {
            assert_eq!(c.poll_dial(), Dial::Stop, "closed stops the driver");
        }
    }
}

/// What the client fuzzer remembers between steps.
#[derive(Debug)]
struct ClientTracker {
    next: u64,
    current: Option<ConnId>,
    /// Whether `ready` was delivered on the current connection (then frames may go out).
    ready: bool,
    /// Frames the client sent on the current connection.
    sent_here: usize,
    state: ConnectionState,
    /// The `ready` ids handed out, for `reconnect-ack`s.
    ids: Vec<String>,
    /// Timestamps of the pings sent, for matching pongs.
    pings: Vec<u64>,
    /// Connections ended by the client (closes it asked for).
    closed: BTreeSet<ConnId>,
}

impl Default for ClientTracker {
    fn default() -> Self {
        Self {
            next: 0,
            current: None,
            ready: false,
            sent_here: 0,
            state: ConnectionState::Disconnected,
            ids: Vec::new(),
            pings: Vec::new(),
            closed: BTreeSet::new(),
        }
    }
}

impl ClientTracker {
    fn connected(&mut self, conn: ConnId) {
        if self.current.is_none() && self.state != ConnectionState::Closed {
            self.current = Some(conn);
            self.ready = false;
            self.sent_here = 0;
        }
    }

    fn check_timeout(&self, c: &LlmrtcClient, t: Instant) {
        if let Some(next) = c.poll_timeout() {
            assert!(next > t, "a deadline at or before the handled time is left");
        }
    }
}

/// A server message chosen by the input: one of every type (with fields valid or not), a
/// `pong` echoing a ping sent or not, `reconnect-ack`s naming known ids, and garbage.
fn server_message(u: &mut Unstructured<'_>, st: &ClientTracker) -> String {
    let id = st
        .ids
        .get(u.choose_index(st.ids.len().max(1)).unwrap_or(0))
        .cloned()
        .unwrap_or_else(|| "resumed".into());
    let ts = st
        .pings
        .get(u.choose_index(st.pings.len().max(1)).unwrap_or(0))
        .copied()
        .unwrap_or(5);
    match u.int_in_range(0u8..=24).unwrap_or(0) {
        0 => format!(
            r#"{{"type":"ready","id":"s-{}","protocolVersion":1}}"#,
            st.next
        ),
        1 => format!(
            r#"{{"type":"ready","id":"s-{}","protocolVersion":2,"mode":"realtime","iceServers":[{{"urls":"stun:x"}}]}}"#,
            st.next
        ),
        2 => format!(r#"{{"type":"pong","timestamp":{ts}}}"#),
        3 => r#"{"type":"pong","timestamp":1e300}"#.into(),
        4 => format!(
            r#"{{"type":"reconnect-ack","success":true,"sessionId":"{id}","historyRecovered":true}}"#
        ),
        5 => format!(
            r#"{{"type":"reconnect-ack","success":false,"sessionId":"{id}","historyRecovered":false}}"#
        ),
        6 => r#"{"type":"transcript","text":"hi","isFinal":false}"#.into(),
        7 => r#"{"type":"transcript","text":"hi there","isFinal":true}"#.into(),
        8 => r#"{"type":"llm-chunk","content":"Hello there, this is a long chunk","done":false}"#
            .into(),
        9 => r#"{"type":"llm","text":"Hello"}"#.into(),
        10 => r#"{"type":"tts-start"}"#.into(),
        11 => r#"{"type":"tts-chunk","format":"pcm","sampleRate":24000,"data":"AAECAwQFBgcICQ=="}"#
            .into(),
        12 => r#"{"type":"tts-chunk","format":"pcm","sampleRate":24000,"data":"!!"}"#.into(),
        13 => r#"{"type":"tts","format":"mp3","data":"AAEC"}"#.into(),
        14 => r#"{"type":"tts","format":"mp3","data":"%%"}"#.into(),
        15 => r#"{"type":"tts-complete"}"#.into(),
        16 => r#"{"type":"tts-cancelled"}"#.into(),
        17 => r#"{"type":"mode-changed","mode":"realtime"}"#.into(),
        18 => r#"{"type":"error","code":"STT_ERROR","message":"x"}"#.into(),
        19 => r#"{"type":"signal","signal":{"type":"answer","sdp":"v=0"}}"#.into(),
        20 => r#"{"type":"speech-start"}"#.into(),
        21 => r#"{"type":"something-new"}"#.into(),
        22 => r#"{"type":"usage","inputTokens":1,"outputTokens":2}"#.into(),
        23 => r#"{"type":"ready"}"#.into(),
        _ => {
            let len = u.int_in_range(0usize..=40).unwrap_or(0);
            String::from_utf8_lossy(u.bytes(len).unwrap_or(&[])).into_owned()
        }
    }
}

fn drain(c: &mut LlmrtcClient, st: &mut ClientTracker, now: Instant) {
    while let Some(out) = c.poll_output() {
        match out {
            Output::Send { conn, frame } => {
                assert_ne!(st.state, ConnectionState::Closed, "a frame after close");
                assert_eq!(Some(conn), st.current, "a frame for another connection");
                assert!(st.ready, "a frame before ready");
                let v: Value = serde_json::from_slice(frame.as_bytes()).expect("JSON out");
                let ty = v["type"].as_str().expect("string type");
                if ty == "reconnect" {
                    assert_eq!(st.sent_here, 0, "reconnect is not the first frame");
                }
                if ty == "ping" {
                    if let Some(ts) = v["timestamp"].as_u64() {
                        st.pings.push(ts);
                        if st.pings.len() > 8 {
                            st.pings.remove(0);
                        }
                    }
                }
                st.sent_here += 1;
            }
            Output::Close { conn, .. } => {
                // The driver reports the end of every connection it closes.
                st.closed.insert(conn);
                if st.current == Some(conn) {
                    st.current = None;
                }
                c.handle_disconnect(conn, now);
            }
            Output::Event(e) => match e {
                ClientEvent::StateChanged { from, to } => {
                    assert_eq!(from, st.state, "state events chain");
                    assert_ne!(st.state, ConnectionState::Closed, "closed is terminal");
                    st.state = to;
                }
                ClientEvent::Ready { id, .. } => {
                    st.ready = true;
                    st.ids.push(id.to_string());
                    if st.ids.len() > 8 {
                        st.ids.remove(0);
                    }
                }
                ClientEvent::ConnectionLost { .. } => st.ready = false,
                ClientEvent::DataChannelSend { frame } => {
                    assert!(st.ready, "a data-channel frame before ready");
                    let v: Value = serde_json::from_slice(frame.as_bytes()).expect("JSON out");
                    assert_eq!(
                        v["type"], "attachments",
                        "only attachments go on the channel"
                    );
                }
                _ => {}
            },
        }
    }
}

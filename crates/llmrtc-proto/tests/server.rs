//! The server's rules, driven directly with simulated time.

mod common;

use common::*;

#[test]
fn a_whole_turn_sends_the_spec_sequence() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    let types = h.full_turn(c, "Hello", &["Hi", " there!"]);
    assert_eq!(
        types,
        [
            "speech-start",
            "speech-end",
            "transcript",
            "llm-chunk",
            "llm-chunk",
            "llm",
            "tts-start",
            "tts-chunk",
            "tts-complete"
        ]
    );
}

use std::time::Duration;

use agentwire_core::{CloseCode, ConnId, Frame, Machine, Output, PeerInfo};
use llmrtc_proto::{
    texts, ChatRole, ErrorCode, IceServer, Limits, Playbook, ProviderError, ProviderKind,
    ServerConfig, ServerEvent, ServerMessage, TurnOutcome, VisionAttachment, CLOSE_HEARTBEAT,
    PROTOCOL_VERSION,
};
use serde_json::{json, Value};

fn codes(frames: &[Value]) -> Vec<String> {
    frames
        .iter()
        .filter(|v| v["type"] == "error")
        .map(|v| v["code"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn ready_comes_first_with_id_version_ice_servers_and_mode() {
    let config =
        ServerConfig::default().with_ice_servers(vec![IceServer::stun("stun:stun.example:3478")]);
    let mut h = Harness::new(config);
    let c = ConnId::new(1);
    h.server.handle_connect(c, &PeerInfo::new(None), h.now);
    // A ping arriving at once (before the driver drained) is still answered after ready.
    h.server
        .handle_frame(c, Frame::Text(r#"{"type":"ping","timestamp":1}"#), h.now);
    h.drain();
    let frames = h.take(c);
    assert_eq!(frames[0]["type"], "ready");
    assert_eq!(frames[0]["protocolVersion"], json!(PROTOCOL_VERSION));
    // core 1.3.0's `ready.mode`: this server runs the pipeline, and says so.
    assert_eq!(frames[0]["mode"], "pipeline");
    assert_eq!(
        frames[0]["iceServers"],
        json!([{"urls": "stun:stun.example:3478"}])
    );
    assert_eq!(
        frames[0]["id"].as_str().map(str::len),
        Some(36),
        "a UUID session id"
    );
    assert_eq!(frames[1], json!({"type":"pong","timestamp":1}));
    assert_eq!(frames.len(), 2);
}

#[test]
fn ready_omits_ice_servers_when_none_are_configured() {
    let mut h = Harness::default_config();
    let c = h.connect();
    let ready = h.take(c).remove(0);
    assert!(ready.get("iceServers").is_none(), "{ready}");
}

#[test]
fn pong_echoes_the_timestamp_exactly() {
    // Each timestamp's text comes back byte for byte, so the client reads the very double it
    // sent. Without carrying the text, `5.5e299` came back as `5.4999999999999995e299`, `-0`
    // as `-0.0` and 2^64 as `1.8446744073709552e19` (the `llmrtc_decode` fuzz crash).
    let awkward: [(&str, f64); 17] = [
        ("5.5e299", 5.5e299),
        ("0.1", 0.1),
        ("1e-320", 1e-320), // subnormal
        ("4.9e-324", 4.9e-324),
        ("2.2250738585072011e-308", 2.225_073_858_507_201e-308),
        ("1.7976931348623157e308", f64::MAX),
        ("9007199254740993", 9_007_199_254_740_993.0), // 2^53 + 1: not a double
        ("18446744073709551616", 18_446_744_073_709_551_616.0), // 2^64: not a u64
        ("-9223372036854775809", -9_223_372_036_854_775_809.0), // below i64
        ("-0", -0.0),
        ("-0.0", -0.0),
        ("1.50", 1.5),
        ("1E+3", 1000.0),
        ("1700000000123", 1_700_000_000_123.0),
        ("1700000000123.5", 1_700_000_000_123.5),
        ("-3", -3.0),
        ("0", 0.0),
    ];
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    let pong_text = |h: &mut Harness, ping: &str| -> Vec<String> {
        h.server.handle_frame(c, Frame::Text(ping), h.now);
        let mut sent = Vec::new();
        while let Some(out) = h.server.poll_output() {
            if let Output::Send { frame, .. } = out {
                sent.push(frame.as_text().expect("text").to_owned());
            }
        }
        sent
    };
    for (ts, double) in awkward {
        for ping in [
            format!(r#"{{"type":"ping","timestamp":{ts}}}"#),
            format!("{{ \"timestamp\" :\t{ts} , \"type\": \"ping\" }}"),
        ] {
            let sent = pong_text(&mut h, &ping);
            assert_eq!(
                sent,
                [format!(r#"{{"type":"pong","timestamp":{ts}}}"#)],
                "{ping}"
            );
            // The client side reads the same double from the echo (and keeps the text).
            let Some(ServerMessage::Pong(p)) = ServerMessage::decode_str(&sent[0])
                .expect("decode")
                .message()
            else {
                panic!("{}", sent[0])
            };
            assert_eq!(p.timestamp.as_str(), ts);
            assert_eq!(p.timestamp.as_f64().to_bits(), double.to_bits(), "{ts}");
        }
    }
    // Beyond the double range (JavaScript reads Infinity, and would echo `null`): refused.
    for ts in ["1e400", "-1e400"] {
        let sent = pong_text(&mut h, &format!(r#"{{"type":"ping","timestamp":{ts}}}"#));
        assert_eq!(sent.len(), 1, "{sent:?}");
        let v: Value = serde_json::from_str(&sent[0]).expect("json");
        assert_eq!(
            (v["type"].as_str(), v["code"].as_str()),
            (Some("error"), Some("INVALID_MESSAGE")),
            "{ts}"
        );
    }
}

#[test]
fn no_ping_for_45_s_closes_and_pings_keep_it_open() {
    let mut h = Harness::default_config();
    let (c, sid) = h.client();
    h.advance(Duration::from_secs(30));
    h.send(c, json!({"type":"ping","timestamp":1}));
    h.advance(Duration::from_secs(44));
    assert!(h.closes.is_empty(), "44 s after the last ping");
    h.advance(Duration::from_secs(1));
    assert_eq!(
        h.closes,
        [(c, CloseCode::POLICY, CLOSE_HEARTBEAT.to_owned())]
    );
    assert!(h
        .take_events()
        .contains(&ServerEvent::HeartbeatTimeout { conn: c }));
    // The session outlives the socket.
    h.disconnect(c);
    assert_eq!(h.server.sessions(), 1);
    assert_eq!(h.server.conn_of(&sid), None);
}

#[test]
fn the_heartbeat_timeout_is_configurable_and_can_be_off() {
    let mut h =
        Harness::new(ServerConfig::default().with_heartbeat_timeout(Some(Duration::from_secs(5))));
    let _ = h.client();
    h.advance(Duration::from_secs(5));
    assert_eq!(h.closes.len(), 1);
    let mut h = Harness::new(ServerConfig::default().with_heartbeat_timeout(None));
    let _ = h.client();
    h.advance(Duration::from_secs(3600));
    assert!(h.closes.is_empty());
}

#[test]
fn a_session_expires_30_minutes_after_its_last_activity() {
    let mut h = Harness::default_config();
    let (c, sid) = h.client();
    h.advance(Duration::from_secs(10));
    h.disconnect(c);
    h.advance(Duration::from_secs(30 * 60 - 1));
    assert_eq!(h.server.sessions(), 1);
    h.advance(Duration::from_secs(1));
    assert_eq!(h.server.sessions(), 0);
    assert!(h.take_events().contains(&ServerEvent::SessionExpired {
        session: sid.into()
    }));
    assert_eq!(h.server.poll_timeout(), None);
}

#[test]
fn reconnect_with_a_known_id_recovers_the_history() {
    let mut h = Harness::default_config();
    let (c1, sid) = h.client();
    h.full_turn(c1, "Hello", &["Hi!"]);
    h.disconnect(c1);
    h.advance(Duration::from_secs(60));
    let (c2, new_id) = h.client();
    assert_ne!(new_id, sid);
    h.send(c2, json!({"type":"reconnect","sessionId": sid}));
    assert_eq!(
        h.take(c2),
        [json!({"type":"reconnect-ack","success":true,"sessionId":sid,"historyRecovered":true})]
    );
    assert_eq!(h.server.session_of(c2), Some(sid.as_str()));
    assert_eq!(
        h.server.sessions(),
        1,
        "the session made at connect is gone"
    );
    let history: Vec<_> = h
        .server
        .history(&sid)
        .expect("history")
        .map(|m| (m.role, m.text.clone()))
        .collect();
    assert_eq!(
        history,
        [
            (ChatRole::User, "Hello".to_owned()),
            (ChatRole::Assistant, "Hi!".to_owned())
        ]
    );
    // The next turn's LLM request carries the recovered history.
    h.audio(c2, 16000, &utterance(16000, 400));
    let stt = h.stt_requests().pop().expect("stt");
    let now = h.now;
    h.server
        .stt_result(stt.request, Ok("Again".into()), now)
        .expect("stt");
    h.drain();
    let llm = h
        .events
        .iter()
        .find_map(|e| match e {
            ServerEvent::Llm(r) => Some(r.clone()),
            _ => None,
        })
        .expect("llm");
    assert_eq!(llm.history.len(), 3);
    assert_eq!(llm.session, sid);
}

#[test]
fn reconnect_with_an_unknown_id_fails_with_the_current_id_and_session_not_found() {
    let mut h = Harness::default_config();
    let (c, current) = h.client();
    h.send(c, json!({"type":"reconnect","sessionId":"no-such-session"}));
    assert_eq!(
        h.take(c),
        [
            json!({"type":"reconnect-ack","success":false,"sessionId":current,"historyRecovered":false}),
            json!({"type":"error","code":"SESSION_NOT_FOUND","message":texts::SESSION_NOT_FOUND}),
        ]
    );
    assert_eq!(h.server.session_of(c), Some(current.as_str()));
}

#[test]
fn reconnect_with_an_expired_id_says_session_expired() {
    let mut h = Harness::default_config();
    let (c1, old) = h.client();
    h.disconnect(c1);
    h.advance(Duration::from_secs(31 * 60));
    let (c2, current) = h.client();
    h.send(c2, json!({"type":"reconnect","sessionId": old}));
    let sent = h.take(c2);
    assert_eq!(sent[0]["success"], false);
    assert_eq!(sent[0]["sessionId"], json!(current));
    assert_eq!(sent[0]["historyRecovered"], false);
    assert_eq!(codes(&sent), ["SESSION_EXPIRED"]);
}

#[test]
fn reconnect_takes_a_session_from_a_connection_still_holding_it() {
    let mut h = Harness::default_config();
    let (c1, sid) = h.client();
    let (c2, _) = h.client();
    h.send(c2, json!({"type":"reconnect","sessionId": sid}));
    assert_eq!(h.take(c2)[0]["success"], true);
    assert_eq!(
        h.closes,
        [(
            c1,
            CloseCode::NORMAL,
            llmrtc_proto::CLOSE_SESSION_MOVED.to_owned()
        )]
    );
    // Frames from the old connection are ignored from now on, and its end detaches nothing.
    h.send(c1, json!({"type":"ping","timestamp":1}));
    assert!(h.take(c1).is_empty());
    h.disconnect(c1);
    assert_eq!(h.server.conn_of(&sid), Some(c2));
}

#[test]
fn barge_in_sends_tts_cancelled_then_speech_start_and_drops_the_turn() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    h.audio(c, 16000, &utterance(16000, 400));
    let stt = h.stt_requests().pop().expect("stt");
    let now = h.now;
    h.server
        .stt_result(stt.request, Ok("Tell me a story".into()), now)
        .expect("stt");
    h.drain();
    let llm = h.llm_request().expect("llm");
    h.server
        .llm_chunk(llm, "Once upon a time", now)
        .expect("chunk");
    h.server.llm_done(llm, now).expect("done");
    h.drain();
    let tts = h.tts_request().expect("tts");
    h.server
        .tts_chunk(tts, "pcm", 24000, &[0; 64], now)
        .expect("chunk");
    h.drain();
    h.take(c);
    // The user speaks while TTS plays.
    h.audio(c, 16000, &utterance(16000, 400));
    let types = h.types(c);
    assert_eq!(types[..3], ["tts-cancelled", "speech-start", "speech-end"]);
    // The new utterance is the next turn.
    assert_eq!(h.stt_requests().len(), 1);
    let events = h.take_events();
    assert!(events.contains(&ServerEvent::Cancel {
        request: tts,
        kind: ProviderKind::Tts
    }));
    assert!(events.contains(&ServerEvent::TurnEnded {
        session: h.server.session_of(c).expect("sid").into(),
        outcome: TurnOutcome::Interrupted
    }));
    // The rest of that turn is dropped: its late audio is refused and sends nothing.
    assert_eq!(
        h.server.tts_chunk(tts, "pcm", 24000, &[0; 4], now),
        Err(llmrtc_proto::CommandError::UnknownRequest)
    );
    assert_eq!(
        h.server.tts_done(tts, now),
        Err(llmrtc_proto::CommandError::UnknownRequest)
    );
    h.drain();
    assert!(h.take(c).is_empty());
}

#[test]
fn speech_while_the_llm_thinks_is_no_barge_in_and_waits_its_turn() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    h.audio(c, 16000, &utterance(16000, 400));
    let first = h.stt_requests().pop().expect("stt");
    h.audio(c, 16000, &utterance(16000, 400));
    h.audio(c, 16000, &utterance(16000, 400));
    assert!(h.stt_requests().is_empty(), "turns are serialized");
    assert_eq!(
        h.types(c),
        [
            "speech-start",
            "speech-end",
            "speech-start",
            "speech-end",
            "speech-start",
            "speech-end"
        ]
    );
    let now = h.now;
    h.server
        .stt_result(first.request, Ok(String::new()), now)
        .expect("stt");
    h.drain();
    // An empty transcript ends the turn without an LLM call; the next one starts.
    assert_eq!(h.llm_request(), None);
    let second = h.stt_requests();
    assert_eq!(second.len(), 1);
    assert_eq!(h.types(c), ["transcript"]);
}

#[test]
fn the_next_turn_starts_only_after_tts_complete() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    h.audio(c, 16000, &utterance(16000, 400));
    let stt = h.stt_requests().pop().expect("stt");
    let now = h.now;
    h.server
        .stt_result(stt.request, Ok("one".into()), now)
        .expect("stt");
    h.drain();
    let llm = h.llm_request().expect("llm");
    h.audio(c, 16000, &utterance(16000, 400)); // queued while the LLM runs
    h.server.llm_chunk(llm, "reply", now).expect("chunk");
    h.server.llm_done(llm, now).expect("done");
    h.drain();
    let tts = h.tts_request().expect("tts");
    assert!(h.stt_requests().is_empty(), "still in the first turn");
    h.server.tts_done(tts, now).expect("done");
    h.drain();
    assert_eq!(h.stt_requests().len(), 1, "the queued utterance is next");
}

#[test]
fn attachments_queue_for_the_next_turn_only() {
    let mut h = Harness::default_config();
    let (c, sid) = h.client();
    h.send(
        c,
        json!({"type":"attachments","attachments":[{"data":"data:image/png;base64,AAAA","mimeType":"image/png"}]}),
    );
    assert_eq!(h.server.queued_attachments(&sid), 1);
    let wav = llmrtc_proto::wav::wav_from_samples(16000, &utterance(16000, 300));
    let mut body = Vec::new();
    llmrtc_proto::encode_audio(
        &mut body,
        &wav,
        &[VisionAttachment::new("https://x/y.jpg").with_alt("y")],
    );
    h.send_text(c, std::str::from_utf8(&body).expect("utf8"));
    assert_eq!(h.server.queued_attachments(&sid), 0);
    let stt = h.stt_requests().pop().expect("stt");
    let now = h.now;
    h.server
        .stt_result(stt.request, Ok("look".into()), now)
        .expect("stt");
    h.drain();
    let llm = h
        .take_events()
        .into_iter()
        .find_map(|e| match e {
            ServerEvent::Llm(r) => Some(r),
            _ => None,
        })
        .expect("llm");
    let data: Vec<_> = llm.attachments.iter().map(|a| a.data.as_str()).collect();
    assert_eq!(data, ["data:image/png;base64,AAAA", "https://x/y.jpg"]);
}

#[test]
fn too_many_attachments_are_rate_limited_and_dropped() {
    let mut limits = Limits::default();
    limits.max_queued_attachments = 2;
    let mut h = Harness::new(ServerConfig::default().with_limits(limits));
    let (c, sid) = h.client();
    let att = json!({"data":"u"});
    h.send(
        c,
        json!({"type":"attachments","attachments":[att, att, att]}),
    );
    assert_eq!(h.server.queued_attachments(&sid), 2);
    assert_eq!(codes(&h.take(c)), ["RATE_LIMITED"]);
}

/// Drives one turn to its STT answer, returning the LLM request.
fn to_llm(h: &mut Harness, c: ConnId, heard: &str) -> llmrtc_proto::RequestId {
    h.audio(c, 16000, &utterance(16000, 400));
    let stt = h.stt_requests().pop().expect("stt");
    let now = h.now;
    h.server
        .stt_result(stt.request, Ok(heard.into()), now)
        .expect("stt");
    h.drain();
    h.llm_request().expect("llm")
}

#[test]
fn provider_failures_become_their_error_codes() {
    // STT error and timeout (no heartbeat, so the long waits keep the connection).
    let mut h = Harness::new(ServerConfig::default().with_heartbeat_timeout(None));
    let (c, _) = h.client();
    h.audio(c, 16000, &utterance(16000, 400));
    let stt = h.stt_requests().pop().expect("stt");
    let now = h.now;
    h.server
        .stt_result(stt.request, Err(ProviderError::Failed("boom".into())), now)
        .expect("stt");
    h.drain();
    let sent = h.take(c);
    assert_eq!(
        sent.last(),
        Some(&json!({"type":"error","code":"STT_ERROR","message":"boom"}))
    );
    h.audio(c, 16000, &utterance(16000, 400));
    h.take(c);
    h.advance(Duration::from_secs(29));
    assert!(codes(&h.take(c)).is_empty());
    h.advance(Duration::from_secs(1));
    assert_eq!(codes(&h.take(c)), ["STT_TIMEOUT"]);
    assert!(h.take_events().iter().any(|e| matches!(
        e,
        ServerEvent::Cancel {
            kind: ProviderKind::Stt,
            ..
        }
    )));
    // LLM error mid-stream: the stream is closed with done:true, then the error; no `llm`.
    let llm = to_llm(&mut h, c, "hi");
    let now = h.now;
    h.server.llm_chunk(llm, "par", now).expect("chunk");
    h.server.llm_chunk(llm, "tial", now).expect("chunk");
    h.server
        .llm_failed(llm, ProviderError::Timeout, now)
        .expect("failed");
    h.drain();
    let sent = h.take(c);
    let tail: Vec<_> = sent.iter().rev().take(3).rev().cloned().collect();
    assert_eq!(
        tail,
        [
            json!({"type":"llm-chunk","content":"par","done":false}),
            json!({"type":"llm-chunk","content":"tial","done":true}),
            json!({"type":"error","code":"LLM_TIMEOUT","message":texts::LLM_TIMEOUT}),
        ]
    );
    // TTS failure: error, then tts-complete closes the tts-start.
    let llm = to_llm(&mut h, c, "hi");
    let now = h.now;
    h.server.llm_chunk(llm, "ok", now).expect("chunk");
    h.server.llm_done(llm, now).expect("done");
    h.drain();
    let tts = h.tts_request().expect("tts");
    h.server
        .tts_failed(tts, ProviderError::Failed("no voice".into()), now)
        .expect("failed");
    h.drain();
    let types = h.types(c);
    assert_eq!(
        types[types.len() - 3..],
        ["tts-start", "error", "tts-complete"]
    );
    // TTS timeout, by the machine's own clock.
    let llm = to_llm(&mut h, c, "hi");
    let now = h.now;
    h.server.llm_chunk(llm, "ok", now).expect("chunk");
    h.server.llm_done(llm, now).expect("done");
    h.drain();
    h.take(c);
    h.advance(Duration::from_secs(30));
    let sent = h.take(c);
    assert_eq!(codes(&sent), ["TTS_TIMEOUT"]);
    assert_eq!(
        sent.last().map(|v| v["type"].clone()),
        Some(json!("tts-complete"))
    );
}

#[test]
fn an_llm_reply_without_chunks_still_closes_the_stream_and_skips_tts() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    let llm = to_llm(&mut h, c, "hi");
    h.take(c);
    let now = h.now;
    h.server.llm_done(llm, now).expect("done");
    h.drain();
    assert_eq!(
        h.take(c),
        [
            json!({"type":"llm-chunk","content":"","done":true}),
            json!({"type":"llm","text":""}),
        ]
    );
    assert_eq!(h.tts_request(), None);
}

#[test]
fn payload_messages_are_copied_to_the_data_channel_and_signalling_is_not() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    h.server.set_data_channel_open(c, true).expect("conn");
    h.send(c, json!({"type":"ping","timestamp":5}));
    assert!(h.dc.is_empty(), "pong is WebSocket only");
    h.full_turn(c, "Hello", &["Hi"]);
    let dc_types: Vec<_> =
        h.dc.iter()
            .map(|(_, v)| v["type"].as_str().unwrap_or("").to_owned())
            .collect();
    assert_eq!(
        dc_types,
        [
            "speech-start",
            "speech-end",
            "transcript",
            "llm-chunk",
            "llm",
            "tts-start",
            "tts-chunk",
            "tts-complete"
        ]
    );
    h.server.set_data_channel_open(c, false).expect("conn");
    h.dc.clear();
    h.full_turn(c, "Again", &["Hi"]);
    assert!(h.dc.is_empty());
}

#[test]
fn offers_are_webrtc_unavailable_unless_the_application_answers_them() {
    let offer = json!({"type":"offer","signal":{"type":"offer","sdp":"v=0\r\n"}});
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    h.send(c, offer.clone());
    assert_eq!(codes(&h.take(c)), ["WEBRTC_UNAVAILABLE"]);

    let mut h = Harness::new(ServerConfig::default().with_webrtc(true));
    let (c, sid) = h.client();
    h.send(c, offer);
    let ev = h.take_events();
    let Some(ServerEvent::Offer {
        conn,
        session,
        signal,
    }) = ev.last().cloned()
    else {
        panic!("{ev:?}")
    };
    assert_eq!((conn, session), (c, sid.into()));
    assert_eq!(signal.to_value(), json!({"type":"offer","sdp":"v=0\r\n"}));
    h.server
        .signal(
            c,
            llmrtc_proto::RawJson::from_text(r#"{"type":"answer","sdp":"v=0"}"#).expect("json"),
        )
        .expect("signal");
    h.drain();
    assert_eq!(
        h.take(c),
        [json!({"type":"signal","signal":{"type":"answer","sdp":"v=0"}})]
    );
}

#[test]
fn history_and_sessions_are_bounded() {
    let mut limits = Limits::default();
    limits.max_history = 3;
    limits.max_sessions = 2;
    let mut h = Harness::new(ServerConfig::default().with_limits(limits));
    let (c, sid) = h.client();
    h.full_turn(c, "one", &["1"]);
    h.full_turn(c, "two", &["2"]);
    let texts: Vec<_> = h
        .server
        .history(&sid)
        .expect("h")
        .map(|m| m.text.clone())
        .collect();
    assert_eq!(texts, ["1", "two", "2"]);
    // Two sessions: a third connection evicts the oldest disconnected one...
    h.disconnect(c);
    let (_c2, _) = h.client();
    let (c3, _) = h.client();
    assert_eq!(h.server.sessions(), 2);
    assert!(h.take_events().contains(&ServerEvent::SessionExpired {
        session: sid.clone().into()
    }));
    h.send(c3, json!({"type":"reconnect","sessionId": sid}));
    assert_eq!(codes(&h.take(c3)), ["SESSION_EXPIRED"]);
    // ...and with every session connected, the next is refused.
    let c4 = h.connect();
    assert_eq!(codes(&h.take(c4)), ["RATE_LIMITED"]);
    assert_eq!(
        h.closes.last().map(|x| x.1),
        Some(CloseCode::TRY_AGAIN_LATER)
    );
}

#[test]
fn too_many_queued_utterances_are_rate_limited() {
    let mut limits = Limits::default();
    limits.max_queued_turns = 1;
    let mut h = Harness::new(ServerConfig::default().with_limits(limits));
    let (c, _) = h.client();
    h.audio(c, 16000, &utterance(16000, 300)); // the turn
    h.audio(c, 16000, &utterance(16000, 300)); // queued
    h.take(c);
    h.audio(c, 16000, &utterance(16000, 300)); // one too many
    assert_eq!(codes(&h.take(c)), ["RATE_LIMITED"]);
}

#[test]
fn a_segment_over_the_pcm_limit_ends_there() {
    let mut limits = Limits::default();
    limits.max_segment_bytes = 16000 * 2; // one second at 16 kHz
    let mut h = Harness::new(ServerConfig::default().with_limits(limits));
    let (c, _) = h.client();
    h.audio(c, 16000, &loud(16000, 3000));
    assert_eq!(h.types(c), ["speech-start", "speech-end"]);
    let stt = h.stt_requests().pop().expect("stt");
    assert_eq!(stt.segment.samples.len(), 16000);
}

#[test]
fn silence_starts_no_turn_and_stereo_is_mixed_down() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    h.audio(c, 16000, &quiet(16000, 2000));
    assert!(h.take(c).is_empty());
    assert!(h.stt_requests().is_empty());
    // 44.1 kHz stereo.
    let mono = utterance(44100, 400);
    let pcm: Vec<u8> = mono
        .iter()
        .flat_map(|s| [s.to_le_bytes(), s.to_le_bytes()].concat())
        .collect();
    let mut wav = Vec::new();
    llmrtc_proto::write_wav(
        &mut wav,
        llmrtc_proto::WavFormat {
            channels: 2,
            sample_rate: 44100,
        },
        &pcm,
    );
    let mut body = Vec::new();
    llmrtc_proto::encode_audio(&mut body, &wav, &[]);
    h.send_text(c, std::str::from_utf8(&body).expect("utf8"));
    let stt = h.stt_requests().pop().expect("stt");
    assert_eq!(stt.segment.sample_rate, 44100);
    assert!(stt.segment.duration_ms() >= 400);
}

fn playbook() -> Playbook {
    serde_json::from_value(json!({
        "initialStage": "greeting",
        "stages": [
            {"name": "greeting", "instructions": "Greet and book.",
             "tools": [{"name": "bookTable", "parameters": {"type": "object"}}],
             "transitions": [
                {"to": "confirmation", "trigger": {"type": "tool_result", "tool": "bookTable"}},
                {"to": "farewell", "trigger": {"type": "keyword", "keywords": ["goodbye"]}}
             ]},
            {"name": "confirmation", "instructions": "Confirm."},
            {"name": "farewell"}
        ]
    }))
    .expect("playbook")
}

#[test]
fn playbook_tool_calls_announce_start_end_and_move_the_stage() {
    let mut h = Harness::new(ServerConfig::default().with_playbook(playbook()));
    let (c, sid) = h.client();
    let llm = to_llm(&mut h, c, "Book a table for 2");
    h.take(c);
    let now = h.now;
    h.server.llm_chunk(llm, "I'll book", now).expect("chunk");
    let mut args = serde_json::Map::new();
    args.insert("people".into(), json!(2));
    let call_id = h
        .server
        .llm_tool_call(llm, "bookTable", args.clone(), now)
        .expect("call");
    h.server.llm_done(llm, now).expect("round done");
    h.drain();
    let tool = h
        .take_events()
        .into_iter()
        .find_map(|e| match e {
            ServerEvent::ToolCall(t) => Some(t),
            _ => None,
        })
        .expect("tool call");
    assert_eq!((tool.name.as_str(), &tool.arguments), ("bookTable", &args));
    h.advance(Duration::from_millis(120));
    let now = h.now;
    h.server
        .tool_result(tool.request, Ok(json!({"booked": true})), now)
        .expect("result");
    h.drain();
    let llm2 = h
        .take_events()
        .into_iter()
        .find_map(|e| match e {
            ServerEvent::Llm(r) => Some(r),
            _ => None,
        })
        .expect("second round");
    assert_eq!(
        llm2.stage.as_ref().map(|s| s.name.as_str()),
        Some("confirmation")
    );
    assert_eq!(llm2.tool_results.len(), 1);
    h.server
        .llm_chunk(llm2.request, "Done!", now)
        .expect("chunk");
    h.server.llm_done(llm2.request, now).expect("done");
    h.drain();
    let sent = h.take(c);
    let types: Vec<_> = sent
        .iter()
        .map(|v| v["type"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        types,
        [
            "llm-chunk",
            "tool-call-start",
            "tool-call-end",
            "stage-change",
            "llm-chunk",
            "llm",
            "tts-start"
        ]
    );
    assert_eq!(
        sent[0],
        json!({"type":"llm-chunk","content":"I'll book","done":false})
    );
    assert_eq!(
        sent[1],
        json!({"type":"tool-call-start","name":"bookTable","callId":call_id,"arguments":{"people":2}})
    );
    assert_eq!(
        sent[2],
        json!({"type":"tool-call-end","callId":call_id,"result":{"booked":true},"durationMs":120})
    );
    assert_eq!(
        sent[3],
        json!({"type":"stage-change","from":"greeting","to":"confirmation","reason":"tool_result"})
    );
    assert_eq!(
        sent[4],
        json!({"type":"llm-chunk","content":"Done!","done":true})
    );
    assert_eq!(sent[5], json!({"type":"llm","text":"I'll bookDone!"}));
    assert_eq!(h.server.stage(&sid), Some("confirmation"));
}

#[test]
fn playbook_keywords_move_the_stage_before_the_llm_is_asked() {
    let mut h = Harness::new(ServerConfig::default().with_playbook(playbook()));
    let (c, sid) = h.client();
    h.audio(c, 16000, &utterance(16000, 400));
    let stt = h.stt_requests().pop().expect("stt");
    let now = h.now;
    h.server
        .stt_result(stt.request, Ok("OK, Goodbye then".into()), now)
        .expect("stt");
    h.drain();
    let sent = h.take(c);
    assert_eq!(
        sent.last(),
        Some(
            &json!({"type":"stage-change","from":"greeting","to":"farewell","reason":"keyword_match"})
        )
    );
    assert_eq!(h.server.stage(&sid), Some("farewell"));
    h.server
        .change_stage(&sid, "greeting", "manual")
        .expect("stage");
    h.drain();
    assert_eq!(
        h.take(c),
        [json!({"type":"stage-change","from":"farewell","to":"greeting","reason":"manual"})]
    );
    assert_eq!(
        h.server.change_stage(&sid, "nowhere", "x"),
        Err(llmrtc_proto::CommandError::UnknownStage)
    );
}

#[test]
fn tool_failures_and_unknown_tools_are_tool_error_and_runaway_rounds_playbook_error() {
    let mut limits = Limits::default();
    limits.max_tool_rounds = 1;
    let config = ServerConfig::default()
        .with_playbook(playbook())
        .with_limits(limits)
        .with_heartbeat_timeout(None);
    let mut h = Harness::new(config);
    let (c, _) = h.client();
    let llm = to_llm(&mut h, c, "book");
    h.take(c);
    let now = h.now;
    h.server
        .llm_tool_call(llm, "launchRocket", serde_json::Map::new(), now)
        .expect("call");
    h.drain();
    let sent = h.take(c);
    assert_eq!(sent[1]["type"], "tool-call-end");
    assert_eq!(sent[1]["durationMs"], 0);
    assert!(sent[1]["error"]
        .as_str()
        .is_some_and(|e| e.contains("launchRocket")));
    assert_eq!(codes(&sent), ["TOOL_ERROR"]);
    h.server
        .llm_tool_call(llm, "bookTable", serde_json::Map::new(), now)
        .expect("call");
    h.server.llm_done(llm, now).expect("done");
    h.drain();
    let tool = h
        .take_events()
        .into_iter()
        .find_map(|e| match e {
            ServerEvent::ToolCall(t) => Some(t),
            _ => None,
        })
        .expect("tool");
    h.server
        .tool_result(tool.request, Err("fully booked".into()), now)
        .expect("result");
    h.drain();
    let sent = h.take(c);
    assert_eq!(sent[0]["type"], "tool-call-start");
    assert_eq!(sent[1]["error"], "fully booked");
    assert_eq!(codes(&sent), ["TOOL_ERROR"]);
    // Round 2 (allowed) calls a tool again; round 3 would exceed the limit.
    let llm2 = h.llm_request().expect("round 2");
    h.server
        .llm_tool_call(llm2, "bookTable", serde_json::Map::new(), now)
        .expect("call");
    h.server.llm_done(llm2, now).expect("done");
    h.drain();
    let tool = h
        .take_events()
        .into_iter()
        .find_map(|e| match e {
            ServerEvent::ToolCall(t) => Some(t),
            _ => None,
        })
        .expect("tool");
    // The tool times out (30 s): TOOL_ERROR, then the round limit: PLAYBOOK_ERROR.
    h.advance(Duration::from_secs(30));
    let sent = h.take(c);
    assert_eq!(codes(&sent), ["TOOL_ERROR", "PLAYBOOK_ERROR"]);
    assert!(h.take_events().contains(&ServerEvent::Cancel {
        request: tool.request,
        kind: ProviderKind::Tool
    }));
    assert!(!h.server.in_turn(h.server.session_of(c).expect("sid")));
}

#[test]
fn errors_for_bad_messages_keep_the_connection_and_unknown_types_are_ignored() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    h.send_text(c, "not json");
    h.send(c, json!({"type":"ping"}));
    h.send(c, json!({"type":"some-future-message","x":1}));
    h.send(c, json!({"type":"pong","timestamp":1}));
    assert_eq!(codes(&h.take(c)), ["INVALID_MESSAGE", "INVALID_MESSAGE"]);
    let ignored: Vec<_> = h
        .take_events()
        .into_iter()
        .filter_map(|e| match e {
            ServerEvent::Ignored { type_name, .. } => Some(type_name),
            _ => None,
        })
        .collect();
    assert_eq!(ignored, ["some-future-message", "pong"]);
    h.send(c, json!({"type":"ping","timestamp":2}));
    assert_eq!(h.types(c), ["pong"]);
    assert_eq!(ErrorCode::KNOWN.len(), 20);
}

//! `ready` first on connect, `pong` echoing the ping's timestamp text, the heartbeat
//! timeout, and bad messages answered with an error while the connection stays.
//!
//! The server driven directly with simulated time (harness in `common`).

mod common;

use common::*;

use std::time::Duration;

use agentwire_core::{CloseCode, ConnId, Frame, Machine, Output, PeerInfo};
use llmrtc_proto::{
    ErrorCode, IceServer, ServerConfig, ServerEvent, ServerMessage, CLOSE_HEARTBEAT,
    PROTOCOL_VERSION,
};
use serde_json::{json, Value};

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

//! Every TypeScript shape of the spec as a fixture (`tests/fixtures/*.json`): it decodes to the
//! expected message and re-encodes to the same JSON value.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use agentwire_core::Frame;
use llmrtc_proto::{
    channel_of, Channel, ClientMessage, Decoded, ErrorCode, IceUrls, ServerMessage, SessionMode,
    Usage, PROTOCOL_VERSION,
};
use serde_json::Value;

fn fixtures() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut out: Vec<_> = fs::read_dir(&dir)
        .expect("fixtures dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            let name = p.file_stem().expect("stem").to_string_lossy().into_owned();
            (name, fs::read_to_string(&p).expect("read"))
        })
        .collect();
    out.sort();
    out
}

fn value(text: &str) -> Value {
    serde_json::from_str(text).expect("fixture JSON")
}

#[test]
fn every_fixture_decodes_and_re_encodes_to_the_same_json() {
    let mut client_types = BTreeSet::new();
    let mut server_types = BTreeSet::new();
    for (name, text) in fixtures() {
        let text = text.trim();
        let again = if name.starts_with("client_") {
            let Decoded::Message(m) = ClientMessage::decode(Frame::Text(text), 1 << 20)
                .unwrap_or_else(|e| panic!("{name}: {e}"))
            else {
                panic!("{name}: unknown type")
            };
            client_types.insert(m.type_name());
            m.to_json()
        } else {
            let Decoded::Message(m) = ServerMessage::decode(Frame::Text(text), 1 << 20)
                .unwrap_or_else(|e| panic!("{name}: {e}"))
            else {
                panic!("{name}: unknown type")
            };
            server_types.insert(m.type_name());
            m.to_json()
        };
        assert_eq!(value(&again), value(text), "{name}");
        // `type` is written first, as the reference peers do (and the decoder's fast path).
        assert!(again.starts_with(r#"{"type":""#), "{name}: {again}");
    }
    assert_eq!(
        client_types,
        ClientMessage::TYPES.into_iter().collect::<BTreeSet<_>>(),
        "a fixture for every client message"
    );
    assert_eq!(
        server_types,
        ServerMessage::TYPES.into_iter().collect::<BTreeSet<_>>(),
        "a fixture for every server message"
    );
}

fn server(name: &str) -> ServerMessage {
    let text = fixtures()
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, t)| t)
        .unwrap_or_else(|| panic!("no fixture {name}"));
    ServerMessage::decode_str(text.trim())
        .expect("decode")
        .message()
        .expect("known")
}

fn client(name: &str) -> ClientMessage {
    let text = fixtures()
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, t)| t)
        .unwrap_or_else(|| panic!("no fixture {name}"));
    ClientMessage::decode_str(text.trim())
        .expect("decode")
        .message()
        .expect("known")
}

#[test]
fn fields_land_where_the_spec_puts_them() {
    let ServerMessage::Ready(r) = server("server_ready") else {
        panic!()
    };
    assert_eq!(r.protocol_version, PROTOCOL_VERSION);
    let ice = r.ice_servers.expect("ice");
    assert_eq!(
        ice[0].urls,
        IceUrls::One("stun:stun.relay.metered.ca:80".into())
    );
    assert_eq!(ice[1].credential.as_deref(), Some("secret"));
    let ServerMessage::Ready(r) = server("server_ready_minimal") else {
        panic!()
    };
    assert_eq!(r.ice_servers, None);

    let ServerMessage::TtsChunk(t) = server("server_tts_chunk") else {
        panic!()
    };
    assert_eq!((t.format.as_str(), t.sample_rate), ("pcm", 24000));

    let ServerMessage::ToolCallEnd(e) = server("server_tool_call_end") else {
        panic!()
    };
    assert_eq!((e.call_id.as_str(), e.duration_ms), ("xyz", 142));
    assert!(e.result.is_some() && e.error.is_none());
    let ServerMessage::ToolCallEnd(e) = server("server_tool_call_end_error") else {
        panic!()
    };
    assert_eq!(e.error.as_deref(), Some("No tables available"));
    assert_eq!(e.result, None);

    let ServerMessage::Error(e) = server("server_error") else {
        panic!()
    };
    assert_eq!(e.code, ErrorCode::SESSION_NOT_FOUND);

    // core 1.3.0's additions (protocol.d.ts).
    let ServerMessage::Ready(r) = server("server_ready_mode") else {
        panic!()
    };
    assert_eq!(r.mode, Some(SessionMode::PIPELINE));
    let ServerMessage::Ready(r) = server("server_ready_realtime") else {
        panic!()
    };
    assert_eq!(r.mode, Some(SessionMode::REALTIME));
    assert_eq!(server_ready_minimal_mode(), None);
    let ServerMessage::AssistantTranscript(t) = server("server_assistant_transcript") else {
        panic!()
    };
    assert_eq!(
        (t.text.as_str(), t.is_final),
        ("Sure, I can help with that.", true)
    );
    let ServerMessage::Usage(u) = server("server_usage") else {
        panic!()
    };
    assert_eq!(
        u,
        Usage {
            input_tokens: 1250,
            output_tokens: 380,
            audio_input_tokens: Some(900),
            audio_output_tokens: Some(310),
            cached_tokens: Some(512),
        }
    );
    let ServerMessage::Usage(u) = server("server_usage_minimal") else {
        panic!()
    };
    assert_eq!(
        (
            u.input_tokens,
            u.output_tokens,
            u.audio_input_tokens,
            u.cached_tokens
        ),
        (0, 7, None, None)
    );
    let ServerMessage::ModeChanged(m) = server("server_mode_changed") else {
        panic!()
    };
    assert_eq!(m.mode, SessionMode::PIPELINE);
    let ServerMessage::Error(e) = server("server_error_realtime") else {
        panic!()
    };
    assert_eq!(e.code, ErrorCode::REALTIME_ERROR);
    let ServerMessage::Error(e) = server("server_error_budget") else {
        panic!()
    };
    assert_eq!(e.code, ErrorCode::BUDGET_EXCEEDED);

    let ClientMessage::Audio(a) = client("client_audio") else {
        panic!()
    };
    let att = &a.attachments.expect("attachments")[0];
    assert_eq!(att.mime_type.as_deref(), Some("image/jpeg"));
    assert_eq!(att.alt.as_deref(), Some("A photo"));
    let ClientMessage::Audio(a) = client("client_audio_minimal") else {
        panic!()
    };
    assert_eq!(a.attachments, None);
    let ClientMessage::Reconnect(r) = client("client_reconnect") else {
        panic!()
    };
    assert_eq!(r.session_id, "previous-session-id");
    let ClientMessage::Offer(o) = client("client_offer") else {
        panic!()
    };
    assert!(
        o.signal.get().contains(r#""sdp":"v=0\r\n"#),
        "SDP kept as sent"
    );
}

fn server_ready_minimal_mode() -> Option<SessionMode> {
    let ServerMessage::Ready(r) = server("server_ready_minimal") else {
        panic!()
    };
    r.mode
}

#[test]
fn core_1_3_shapes_refuse_wrong_field_types_and_keep_unknown_modes() {
    for bad in [
        r#"{"type":"usage","inputTokens":1.5,"outputTokens":2}"#,
        r#"{"type":"usage","inputTokens":1}"#,
        r#"{"type":"usage","inputTokens":1,"outputTokens":2,"cachedTokens":"3"}"#,
        r#"{"type":"assistant-transcript","text":"x"}"#,
        r#"{"type":"mode-changed"}"#,
        r#"{"type":"mode-changed","mode":1}"#,
        r#"{"type":"ready","id":"x","protocolVersion":1,"mode":"pipeline","iceServers":7}"#,
    ] {
        assert!(ServerMessage::decode_str(bad).is_err(), "{bad}");
    }
    // An optional field sent as `null` reads as absent (as `iceServers` does).
    let ServerMessage::Ready(r) =
        ServerMessage::decode_str(r#"{"type":"ready","id":"x","protocolVersion":1,"mode":null}"#)
            .expect("decode")
            .message()
            .expect("known")
    else {
        panic!()
    };
    assert_eq!(r.mode, None);
    let text = r#"{"type":"mode-changed","mode":"hybrid"}"#;
    let ServerMessage::ModeChanged(m) = ServerMessage::decode_str(text)
        .expect("decode")
        .message()
        .expect("known")
    else {
        panic!()
    };
    assert!(!m.mode.is_known());
    assert_eq!(ServerMessage::ModeChanged(m).to_json(), text);
}

#[test]
fn the_fixture_audio_is_a_valid_empty_wav() {
    let ClientMessage::Audio(a) = client("client_audio_minimal") else {
        panic!()
    };
    let mut bytes = Vec::new();
    llmrtc_proto::decode_base64(&a.data, 1000, &mut bytes).expect("base64");
    let wav = llmrtc_proto::parse_wav(&bytes).expect("wav");
    assert_eq!(wav.format.sample_rate, 16000);
    assert_eq!(wav.frames(), 0);
}

#[test]
fn all_twenty_error_codes_decode_as_known() {
    // The spec's 18 and core 1.3.0's REALTIME_ERROR and BUDGET_EXCEEDED, in protocol.d.ts order.
    let names = [
        "WEBRTC_UNAVAILABLE",
        "CONNECTION_FAILED",
        "SESSION_NOT_FOUND",
        "SESSION_EXPIRED",
        "STT_ERROR",
        "STT_TIMEOUT",
        "LLM_ERROR",
        "LLM_TIMEOUT",
        "TTS_ERROR",
        "TTS_TIMEOUT",
        "AUDIO_PROCESSING_ERROR",
        "VAD_ERROR",
        "INVALID_MESSAGE",
        "INVALID_AUDIO_FORMAT",
        "TOOL_ERROR",
        "PLAYBOOK_ERROR",
        "REALTIME_ERROR",
        "BUDGET_EXCEEDED",
        "INTERNAL_ERROR",
        "RATE_LIMITED",
    ];
    let known: Vec<&str> = ErrorCode::KNOWN.iter().map(ErrorCode::as_str).collect();
    assert_eq!(known, names);
    assert_eq!(names.len(), ErrorCode::KNOWN.len());
    for n in names {
        let text = format!(r#"{{"type":"error","code":"{n}","message":"m"}}"#);
        let ServerMessage::Error(e) = ServerMessage::decode_str(&text)
            .expect("decode")
            .message()
            .expect("known")
        else {
            panic!()
        };
        assert!(e.code.is_known(), "{n}");
        assert_eq!(e.code.as_str(), n);
    }
}

#[test]
fn signalling_is_websocket_only_and_payload_goes_to_both_channels() {
    for t in ServerMessage::TYPES {
        let expected = if ["ready", "pong", "signal", "reconnect-ack"].contains(&t) {
            Channel::WebSocket
        } else {
            Channel::Both
        };
        assert_eq!(channel_of(t), expected, "{t}");
    }
}

#[test]
fn unknown_types_decode_as_unknown_for_either_sender() {
    let text = r#"{"type":"vision-frame","data":"x"}"#;
    assert_eq!(
        ClientMessage::decode_str(text).expect("decode"),
        Decoded::Unknown {
            type_name: "vision-frame".into()
        }
    );
    assert!(matches!(
        ServerMessage::decode_str(text).expect("decode"),
        Decoded::Unknown { .. }
    ));
    // A type of the other direction is unknown to this one.
    assert!(matches!(
        ServerMessage::decode_str(r#"{"type":"ping","timestamp":1}"#).expect("decode"),
        Decoded::Unknown { .. }
    ));
}

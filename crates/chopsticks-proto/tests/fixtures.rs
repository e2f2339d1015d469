//! Conformance fixtures: every JSON example of `specs/chopsticks.md`, verbatim, plus the
//! INTEROP.md facts about what the real peers send.
//!
//! Each fixture decodes with the decoder of its sender (as a text and as a binary frame),
//! is refused by the other sender's decoder, and re-encodes to the same `serde_json::Value`.
//! The version-alias fixtures re-encode with `protocolVersion` instead of the alias.

use std::fs;
use std::path::{Path, PathBuf};

use agentwire_core::{Frame, FrameError};
use chopsticks_proto::{
    AgentMessage, ControllerMessage, DecodeError, ErrorMessage, Event, Hello, Req, Resp,
    SessionKind,
};
use serde_json::{json, Value};

/// Far above every fixture, so the limit never decides a fixture test.
const MAX: usize = 64 * 1024;

/// Which decoder a fixture belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sender {
    Agent,
    Controller,
}

/// Every fixture file, its sender, and the version alias it uses (if any).
const FIXTURES: &[(&str, Sender, Option<&str>)] = &[
    // The spec's examples, verbatim.
    ("hello.json", Sender::Agent, None),
    ("guilds.json", Sender::Agent, None),
    ("event_released.json", Sender::Agent, None),
    ("event_add_success.json", Sender::Agent, None),
    ("event_add_failure.json", Sender::Agent, None),
    ("resp_success.json", Sender::Agent, None),
    ("resp_failure.json", Sender::Agent, None),
    ("req.json", Sender::Controller, None),
    ("error.json", Sender::Controller, None),
    // INTEROP.md: version aliases the real controller accepts.
    (
        "interop_hello_alias_protocol_version.json",
        Sender::Agent,
        Some("protocol_version"),
    ),
    (
        "interop_hello_alias_protocolversion.json",
        Sender::Agent,
        Some("protocolversion"),
    ),
    (
        "interop_hello_alias_version.json",
        Sender::Agent,
        Some("version"),
    ),
    // INTEROP.md: the real agent adds `agentId` and `runnerId` to every message.
    ("interop_hello_runner.json", Sender::Agent, None),
    ("interop_guilds_ids.json", Sender::Agent, None),
    ("interop_released_runner.json", Sender::Agent, None),
    ("interop_add_runner.json", Sender::Agent, None),
    ("interop_resp_ids.json", Sender::Agent, None),
    // INTEROP.md: the exact error texts of the real controller.
    (
        "interop_error_missing_version.json",
        Sender::Controller,
        None,
    ),
    (
        "interop_error_incompatible_version.json",
        Sender::Controller,
        None,
    ),
    ("interop_error_unauthorized.json", Sender::Controller, None),
    (
        "interop_error_frame_too_large.json",
        Sender::Controller,
        None,
    ),
    ("interop_error_invalid_json.json", Sender::Controller, None),
    ("interop_error_unknown_type.json", Sender::Controller, None),
];

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn read(name: &str) -> String {
    let path = dir().join(name);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn agent(name: &str) -> AgentMessage {
    let text = read(name);
    let m = AgentMessage::decode(Frame::Text(&text), MAX)
        .unwrap_or_else(|e| panic!("{name}: text decode: {e}"));
    let b = AgentMessage::decode(Frame::Binary(text.as_bytes()), MAX)
        .unwrap_or_else(|e| panic!("{name}: binary decode: {e}"));
    assert_eq!(m, b, "{name}: text and binary frames decode alike");
    m
}

fn controller(name: &str) -> ControllerMessage {
    let text = read(name);
    let m = ControllerMessage::decode(Frame::Text(&text), MAX)
        .unwrap_or_else(|e| panic!("{name}: text decode: {e}"));
    let b = ControllerMessage::decode(Frame::Binary(text.as_bytes()), MAX)
        .unwrap_or_else(|e| panic!("{name}: binary decode: {e}"));
    assert_eq!(m, b, "{name}: text and binary frames decode alike");
    m
}

fn value(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).expect("encoder writes JSON")
}

/// Decodes with the sender's decoder and re-encodes (through `encode` and `to_frame`).
fn reencode(name: &str, sender: Sender) -> Value {
    let mut out = Vec::new();
    let mut scratch = Vec::new();
    let frame = match sender {
        Sender::Agent => {
            let m = agent(name);
            m.encode(&mut out);
            m.to_frame(&mut scratch)
        }
        Sender::Controller => {
            let m = controller(name);
            m.encode(&mut out);
            m.to_frame(&mut scratch)
        }
    };
    assert_eq!(frame.as_text().map(str::as_bytes), Some(&out[..]), "{name}");
    value(&out)
}

#[test]
fn every_fixture_file_is_listed() {
    let mut on_disk: Vec<String> = fs::read_dir(dir())
        .expect("fixtures dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = FIXTURES.iter().map(|(n, ..)| (*n).to_owned()).collect();
    listed.sort();
    assert_eq!(on_disk, listed);
}

#[test]
fn every_fixture_round_trips_to_the_same_json_value() {
    for &(name, sender, alias) in FIXTURES {
        let original = value(read(name).as_bytes());
        let again = reencode(name, sender);
        match alias {
            None => assert_eq!(again, original, "{name}"),
            Some(alias) => {
                // Aliases are accepted, but we always write `protocolVersion`.
                let mut expected = original.clone();
                let obj = expected.as_object_mut().expect("object");
                let v = obj.remove(alias).expect("fixture uses its alias");
                obj.insert("protocolVersion".to_owned(), v);
                assert_eq!(again, expected, "{name}");
                assert_eq!(again["protocolVersion"], json!("1.0.0"), "{name}");
                assert!(
                    again.get(alias).is_none(),
                    "{name}: alias {alias} re-encoded"
                );
            }
        }
    }
}

#[test]
fn every_fixture_is_refused_by_the_other_senders_decoder() {
    for &(name, sender, _) in FIXTURES {
        let text = read(name);
        let err = match sender {
            Sender::Agent => ControllerMessage::decode(Frame::Text(&text), MAX).err(),
            Sender::Controller => AgentMessage::decode(Frame::Text(&text), MAX).err(),
        };
        assert!(
            matches!(err, Some(DecodeError::UnknownType)),
            "{name}: {err:?}"
        );
    }
}

#[test]
fn every_fixture_respects_the_frame_limit() {
    for &(name, sender, _) in FIXTURES {
        let text = read(name);
        let len = text.len();
        let (at, below) = match sender {
            Sender::Agent => (
                AgentMessage::decode(Frame::Text(&text), len).is_ok(),
                AgentMessage::decode(Frame::Text(&text), len - 1).err(),
            ),
            Sender::Controller => (
                ControllerMessage::decode(Frame::Text(&text), len).is_ok(),
                ControllerMessage::decode(Frame::Text(&text), len - 1).err(),
            ),
        };
        assert!(at, "{name}: exactly the limit is accepted");
        assert!(
            matches!(
                below,
                Some(DecodeError::Frame(FrameError::TooLarge { len: l, max }))
                    if l == len && max == len - 1
            ),
            "{name}: {below:?}"
        );
    }
}

fn hello(name: &str) -> Hello {
    match agent(name) {
        AgentMessage::Hello(h) => h,
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn spec_hello_fields() {
    let h = hello("hello.json");
    assert_eq!(
        h,
        Hello {
            protocol_version: Some("1.0.0".into()),
            agent_id: Some("agent1468195142467981395".into()),
            bot_user_id: Some("1468195142467981395".into()),
            tag: Some("MusicBot#1234".into()),
            ready: true,
            guild_ids: vec!["1445809891242414226".into()],
            pool_id: "pool_goot27".into(),
            runner_secret: None,
            runner_id: None,
        }
    );
}

#[test]
fn interop_version_aliases_decode_to_protocol_version() {
    let spec = hello("hello.json");
    for alias in ["protocol_version", "protocolversion", "version"] {
        let h = hello(&format!("interop_hello_alias_{alias}.json"));
        assert_eq!(h, spec, "{alias}");
        let mut out = Vec::new();
        AgentMessage::Hello(h).encode(&mut out);
        let text = String::from_utf8(out).expect("utf8");
        assert!(text.contains(r#""protocolVersion":"1.0.0""#), "{text}");
        assert!(!text.contains(&format!("\"{alias}\"")), "{text}");
    }
}

#[test]
fn interop_hello_with_runner_id_nulls_and_secret() {
    let h = hello("interop_hello_runner.json");
    assert_eq!(h.runner_id.as_deref(), Some("runner-7"));
    assert_eq!(h.runner_secret.as_deref(), Some("s3cret"));
    assert_eq!(h.agent_id.as_deref(), Some("agent1468195142467981395"));
    // `string | null` fields decode `null` to None and re-encode it as `null`.
    assert_eq!(h.bot_user_id, None);
    assert_eq!(h.tag, None);
    assert!(!h.ready);
    assert!(h.guild_ids.is_empty());
    let mut out = Vec::new();
    AgentMessage::Hello(h).encode(&mut out);
    let v = value(&out);
    assert_eq!(v["botUserId"], Value::Null);
    assert_eq!(v["tag"], Value::Null);
    assert!(v.as_object().expect("object").contains_key("botUserId"));
}

#[test]
fn spec_guilds_fields() {
    let AgentMessage::Guilds(g) = agent("guilds.json") else {
        panic!("guilds")
    };
    assert_eq!(g.guild_ids, ["1445809891242414226", "987654321098765432"]);
    assert_eq!(g.agent_id, None);
    assert_eq!(g.runner_id, None);

    let AgentMessage::Guilds(g) = agent("interop_guilds_ids.json") else {
        panic!("guilds")
    };
    assert_eq!(g.guild_ids, ["1445809891242414226"]);
    assert_eq!(g.agent_id.as_deref(), Some("agent1468195142467981395"));
    assert_eq!(g.runner_id.as_deref(), Some("runner-7"));
}

#[test]
fn spec_released_fields() {
    let AgentMessage::Event(Event::Released(r)) = agent("event_released.json") else {
        panic!("released")
    };
    assert_eq!(r.agent_id, "agent1468195142467981395");
    assert_eq!(r.guild_id, "1445809891242414226");
    assert_eq!(r.voice_channel_id, "1445809891242414229");
    assert_eq!(r.reason, "USER_LEFT");
    assert_eq!(r.kind, SessionKind::Music);
    assert_eq!(r.runner_id, None);

    let AgentMessage::Event(Event::Released(r)) = agent("interop_released_runner.json") else {
        panic!("released")
    };
    assert_eq!(r.reason, "TIMEOUT");
    assert_eq!(r.kind, SessionKind::Assistant);
    assert_eq!(r.runner_id.as_deref(), Some("runner-7"));
}

#[test]
fn spec_add_success_fields() {
    let AgentMessage::Event(Event::Add(a)) = agent("event_add_success.json") else {
        panic!("add")
    };
    assert_eq!(a.agent_id, "agent1468195142467981395");
    assert_eq!(a.guild_id, "1445809891242414226");
    assert_eq!(a.voice_channel_id, "1445809891242414229");
    assert_eq!(a.channel_id, "1445809891242414229");
    assert_eq!(a.text_channel_id, None);
    assert_eq!(a.kind, SessionKind::Music);
    assert_eq!(a.owner_user_id.as_deref(), Some("1457586883742928907"));
    assert!(a.ok);
    assert_eq!(a.error, None);

    let AgentMessage::Event(Event::Add(a)) = agent("interop_add_runner.json") else {
        panic!("add")
    };
    assert_eq!(a.text_channel_id.as_deref(), Some("1445809891242414230"));
    assert_eq!(a.kind, SessionKind::Assistant);
    assert_eq!(a.runner_id.as_deref(), Some("runner-7"));
}

#[test]
fn spec_add_failure_fields() {
    let AgentMessage::Event(Event::Add(a)) = agent("event_add_failure.json") else {
        panic!("add")
    };
    assert!(!a.ok);
    assert_eq!(
        a.error.as_deref(),
        Some("Missing permissions: CONNECT, SPEAK")
    );
    assert_eq!(a.owner_user_id, None);
    assert_eq!(a.kind, SessionKind::Music);
}

fn resp(name: &str) -> Resp {
    match agent(name) {
        AgentMessage::Resp(r) => r,
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn spec_resp_success_fields() {
    let r = resp("resp_success.json");
    assert_eq!(r.id, "a1b2c3d4-e5f6-7890-abcd-ef1234567890");
    assert!(r.ok);
    assert_eq!(r.error, None);
    let data = r.data.as_ref().expect("data");
    assert_eq!(
        data.to_value(),
        json!({
            "track": {
                "title": "Never Gonna Give You Up",
                "author": "Rick Astley",
                "duration": 213000
            },
            "action": "playing"
        })
    );
    // `data` is kept as the peer's text, byte for byte.
    let text = read("resp_success.json");
    assert!(text.contains(data.get()), "{}", data.get());
    assert_eq!(r.result().map(str::len), Ok(data.get().len()));
}

#[test]
fn spec_resp_failure_fields() {
    let r = resp("resp_failure.json");
    assert_eq!(
        r,
        Resp::err("a1b2c3d4-e5f6-7890-abcd-ef1234567890", "Track not found")
    );
    assert_eq!(r.result(), Err("Track not found"));

    let r = resp("interop_resp_ids.json");
    assert_eq!(r.id, "00000000-0000-4000-8000-000000000001");
    assert_eq!(r.result(), Err("unknown-op"));
    assert_eq!(r.agent_id.as_deref(), Some("agent1468195142467981395"));
    assert_eq!(r.runner_id.as_deref(), Some("runner-7"));
}

#[test]
fn spec_req_fields() {
    let ControllerMessage::Req(r) = controller("req.json") else {
        panic!("req")
    };
    let Req {
        id,
        op,
        data,
        agent_id,
    } = r;
    assert_eq!(id, "a1b2c3d4-e5f6-7890-abcd-ef1234567890");
    assert_eq!(op, "play");
    assert_eq!(agent_id, "agent1468195142467981395");
    assert_eq!(
        data.to_value(),
        json!({
            "guildId": "1445809891242414226",
            "voiceChannelId": "1445809891242414229",
            "query": "never gonna give you up"
        })
    );
}

#[test]
fn spec_error_and_interop_error_texts() {
    let cases = [
        (
            "error.json",
            "Incompatible protocol version 0.9.0. Controller expects 1.0.0.",
        ),
        (
            "interop_error_missing_version.json",
            "Protocol version required. Please upgrade agent.",
        ),
        (
            "interop_error_incompatible_version.json",
            "Incompatible protocol version 0.9.0. Controller expects 1.0.0.",
        ),
        (
            "interop_error_unauthorized.json",
            "Unauthorized runner secret.",
        ),
        ("interop_error_frame_too_large.json", "Frame too large"),
        ("interop_error_invalid_json.json", "Invalid JSON"),
        ("interop_error_unknown_type.json", "Unknown message type"),
    ];
    for (name, text) in cases {
        assert_eq!(
            controller(name),
            ControllerMessage::Error(ErrorMessage::new(text)),
            "{name}"
        );
    }
}

#[test]
fn decode_error_reply_texts_match_the_error_fixtures() {
    // The texts the codec hands the controller are the ones pinned by the fixtures above.
    let text_of = |name: &str| match controller(name) {
        ControllerMessage::Error(e) => e.error,
        other => panic!("{other:?}"),
    };
    let d = |s: &str, max| AgentMessage::decode(Frame::Text(s), max).err();
    let too_large = d("{}", 1).and_then(|e| e.reply_text());
    let invalid = d("{", MAX).and_then(|e| e.reply_text());
    let unknown = d(r#"{"type":"nope"}"#, MAX).and_then(|e| e.reply_text());
    assert_eq!(
        too_large.map(str::to_owned),
        Some(text_of("interop_error_frame_too_large.json"))
    );
    assert_eq!(
        invalid.map(str::to_owned),
        Some(text_of("interop_error_invalid_json.json"))
    );
    assert_eq!(
        unknown.map(str::to_owned),
        Some(text_of("interop_error_unknown_type.json"))
    );
}

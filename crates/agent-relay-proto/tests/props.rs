//! proptest: every message type round-trips through encode and decode (typed, serde and the
//! borrowed route agree); no input panics a decoder; and the relay keeps its limits and
//! invariants under arbitrary input.

use std::time::Duration;

use agent_relay_proto::{
    AgentMessage, AgentText, Body, Envelope, ErrorCode, ErrorPayload, HostMessage, Limits,
    PresenceAgent, RateLimit, RawJson, Relay, RelayConfig, RelayHello, RelayJoin, RelayJoined,
    RelayMessage, RelayPresence, Role, Route, SessionEnd, SessionEnded, SessionStart,
    SessionStarted, SnapshotGet, SnapshotState, StateUpdated, ToolCall, ToolResult, ToolSchema,
    UserText, VersionRule,
};
use agentwire_core::{ConnId, Frame, Machine, Output, PeerInfo, SequentialIds};
use proptest::prelude::*;
use serde_json::Value;

fn text() -> impl Strategy<Value = String> {
    "\\PC{0,16}"
}

fn opt_text() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(text())
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(text(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn raw() -> impl Strategy<Value = RawJson> {
    json_value().prop_map(|v| RawJson::from_value(&v))
}

fn role() -> impl Strategy<Value = Role> {
    prop_oneof![Just(Role::Host), Just(Role::Agent)]
}

fn code() -> impl Strategy<Value = ErrorCode> {
    prop_oneof![
        proptest::sample::select(ErrorCode::KNOWN.to_vec()),
        "[A-Z_]{1,20}".prop_map(ErrorCode::new),
    ]
}

fn join() -> impl Strategy<Value = RelayJoin> {
    (role(), opt_text(), opt_text(), opt_text(), opt_text()).prop_map(
        |(role, session_id, agent_name, client_name, name)| RelayJoin {
            role,
            session_id,
            agent_name,
            client_name,
            name,
        },
    )
}

fn error() -> impl Strategy<Value = ErrorPayload> {
    (code(), text()).prop_map(|(code, message)| ErrorPayload { code, message })
}

fn agent_message() -> impl Strategy<Value = AgentMessage> {
    prop_oneof![
        join().prop_map(AgentMessage::Join),
        (text(), text()).prop_map(|(study_id, participant_id)| AgentMessage::SessionStart(
            SessionStart {
                study_id,
                participant_id
            }
        )),
        Just(AgentMessage::SnapshotGet(SnapshotGet {})),
        (text(), raw(), text()).prop_map(|(tool_name, params, reason)| AgentMessage::ToolCall(
            ToolCall {
                tool_name,
                params,
                reason
            }
        )),
        text().prop_map(|text| AgentMessage::Message(AgentText { text })),
        opt_text().prop_map(|reason| AgentMessage::SessionEnd(SessionEnd { reason })),
    ]
}

fn tool_schema() -> impl Strategy<Value = ToolSchema> {
    (text(), text(), raw()).prop_map(|(name, description, parameters)| ToolSchema {
        name,
        description,
        parameters,
    })
}

fn host_message() -> impl Strategy<Value = HostMessage> {
    prop_oneof![
        join().prop_map(HostMessage::Join),
        text().prop_map(|session_id| HostMessage::SessionStarted(SessionStarted { session_id })),
        (
            text(),
            raw(),
            raw(),
            proptest::collection::vec(tool_schema(), 0..3)
        )
            .prop_map(|(session_id, ui_spec, message_history, tool_schema)| {
                HostMessage::SnapshotState(SnapshotState {
                    session_id,
                    ui_spec,
                    message_history,
                    tool_schema,
                })
            }),
        (
            any::<bool>(),
            text(),
            proptest::option::of(raw()),
            proptest::option::of(raw())
        )
            .prop_map(|(ok, tool_name, ui_spec, message_history)| {
                HostMessage::ToolResult(ToolResult {
                    ok,
                    tool_name,
                    ui_spec,
                    message_history,
                })
            }),
        (text(), raw(), raw()).prop_map(|(source, ui_spec, message_history)| {
            HostMessage::StateUpdated(StateUpdated {
                source,
                ui_spec,
                message_history,
            })
        }),
        (text(), opt_text())
            .prop_map(|(text, stage)| HostMessage::UserMessage(UserText { text, stage })),
        (text(), text(), any::<bool>()).prop_map(|(session_id, log_file, state_reset)| {
            HostMessage::SessionEnded(SessionEnded {
                session_id,
                log_file,
                state_reset,
            })
        }),
        error().prop_map(HostMessage::Error),
    ]
}

fn relay_message() -> impl Strategy<Value = RelayMessage> {
    prop_oneof![
        opt_text().prop_map(|message| RelayMessage::Hello(RelayHello { message })),
        (role(), text(), opt_text()).prop_map(|(role, session_id, client_name)| {
            RelayMessage::Joined(RelayJoined {
                role,
                session_id,
                client_name,
            })
        }),
        (text(), proptest::collection::vec((text(), text()), 0..3)).prop_map(
            |(session_id, agents)| {
                RelayMessage::Presence(RelayPresence {
                    session_id,
                    agent_count: agents.len() as u32,
                    agents: agents
                        .into_iter()
                        .map(|(id, name)| PresenceAgent { id, name })
                        .collect(),
                })
            }
        ),
        error().prop_map(RelayMessage::Error),
    ]
}

fn envelope<B: Body + std::fmt::Debug>(
    body: impl Strategy<Value = B>,
) -> impl Strategy<Value = Envelope<B>> {
    (opt_text(), opt_text(), body).prop_map(|(id, reply_to, body)| Envelope {
        id,
        reply_to,
        ..Envelope::new(body)
    })
}

/// encode → decode (typed), serde, and the route all agree with the original.
fn check<B: Body + std::fmt::Debug + PartialEq>(m: &Envelope<B>) -> Result<(), TestCaseError> {
    let mut out = Vec::new();
    m.encode(&mut out);
    let text = std::str::from_utf8(&out).unwrap();
    let back = Envelope::<B>::decode(Frame::Text(text), 1 << 20);
    prop_assert_eq!(back.as_ref(), Ok(m), "{}", text);
    let via_serde: Envelope<B> = serde_json::from_str(text).unwrap();
    prop_assert_eq!(&via_serde, m);
    let r = Route::parse(text, VersionRule::Required).unwrap();
    prop_assert_eq!(r.msg_type.as_ref(), m.msg_type());
    prop_assert_eq!(r.id.as_deref(), m.id.as_deref());
    prop_assert_eq!(r.reply_to.as_deref(), m.reply_to.as_deref());
    Ok(())
}

proptest! {
    #[test]
    fn agent_messages_round_trip(m in envelope(agent_message())) {
        check(&m)?;
    }

    #[test]
    fn host_messages_round_trip(m in envelope(host_message())) {
        check(&m)?;
    }

    #[test]
    fn relay_messages_round_trip(m in envelope(relay_message())) {
        check(&m)?;
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoders(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        for rule in [VersionRule::Required, VersionRule::MayBeMissing] {
            let _ = Route::decode(Frame::Binary(&bytes), 1 << 20, rule);
        }
        let _ = Envelope::<AgentMessage>::decode(Frame::Binary(&bytes), 1 << 20);
        let _ = Envelope::<HostMessage>::decode(Frame::Binary(&bytes), 1 << 20);
        let _ = Envelope::<RelayMessage>::decode(Frame::Binary(&bytes), 1 << 20);
    }

    #[test]
    fn arbitrary_envelopes_never_panic_the_decoders(
        v in proptest::option::of(json_value()),
        t in proptest::option::of(json_value()),
        id in proptest::option::of(json_value()),
        payload in proptest::option::of(json_value()),
        tname in proptest::sample::select(AgentMessage::TYPES.iter().chain(HostMessage::TYPES).copied().collect::<Vec<_>>()),
    ) {
        let mut m = serde_json::Map::new();
        if let Some(v) = v { m.insert("v".into(), v); } else { m.insert("v".into(), "mvp-0.2".into()); }
        m.insert("type".into(), t.unwrap_or_else(|| tname.into()));
        if let Some(id) = id { m.insert("id".into(), id); }
        if let Some(p) = payload { m.insert("payload".into(), p); }
        let text = Value::Object(m).to_string();
        if let Ok(r) = Route::parse(&text, VersionRule::Required) {
            prop_assert!(r.payload.get().starts_with('{'), "{}", text);
            let _ = r.clone().into_typed::<AgentMessage>();
            let _ = r.into_typed::<HostMessage>();
        }
    }
}

/// A frame a fuzzing peer might send (indexes pick among a few ids and sessions).
fn peer_frame() -> impl Strategy<Value = String> {
    let ids = proptest::sample::select(vec!["a", "b", "c"]);
    let sessions = proptest::sample::select(vec!["default", "s1", "s2", "s3"]);
    prop_oneof![
        (proptest::sample::select(vec!["host", "agent", "x"]), sessions).prop_map(|(r, s)| format!(
            r#"{{"v":"mvp-0.2","type":"relay.join","id":"j","payload":{{"role":"{r}","sessionId":"{s}"}}}}"#
        )),
        (proptest::sample::select(AgentMessage::TYPES.to_vec()), proptest::option::of(ids.clone())).prop_map(|(t, id)| {
            let id = id.map(|i| format!(r#","id":"{i}""#)).unwrap_or_default();
            format!(r#"{{"v":"mvp-0.2","type":"{t}"{id},"payload":{{}}}}"#)
        }),
        (proptest::sample::select(HostMessage::TYPES.to_vec()), proptest::option::of(ids)).prop_map(|(t, r)| {
            let r = r.map(|i| format!(r#","replyTo":"{i}""#)).unwrap_or_default();
            format!(r#"{{"v":"mvp-0.2","type":"{t}"{r},"payload":{{"x":1}}}}"#)
        }),
        "\\PC{0,30}",
    ]
}

#[derive(Debug, Clone)]
enum Input {
    Connect,
    Frame(usize, String),
    Disconnect(usize),
    Advance(u64),
}

fn inputs() -> impl Strategy<Value = Vec<Input>> {
    let one = prop_oneof![
        2 => Just(Input::Connect),
        10 => (0usize..8, peer_frame()).prop_map(|(n, f)| Input::Frame(n, f)),
        1 => (0usize..8).prop_map(Input::Disconnect),
        2 => (0u64..20_000).prop_map(Input::Advance),
    ];
    proptest::collection::vec(one, 1..120)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn the_relay_keeps_its_limits_and_invariants_under_arbitrary_input(inputs in inputs()) {
        let mut limits = Limits::default();
        limits.max_sessions = 2;
        limits.max_agents_per_session = 2;
        limits.max_pending_per_agent = 2;
        limits.max_connections = 6;
        limits.rate = Some(RateLimit { per_second: 5, burst: 10 });
        let cfg = RelayConfig::default()
            .with_limits(limits)
            .with_pending_timeout(Some(Duration::from_secs(15)));
        let mut now = common_t0();
        let mut relay = Relay::new(cfg, SequentialIds::new(0), now, 0);
        let mut conns: Vec<ConnId> = Vec::new();
        let peer = PeerInfo::new(None).with_path("/agent/ws");
        for input in inputs {
            match input {
                Input::Connect => {
                    let c = ConnId::new(conns.len() as u64 + 1);
                    conns.push(c);
                    relay.handle_connect(c, &peer, now);
                }
                Input::Frame(n, f) if !conns.is_empty() => {
                    relay.handle_frame(conns[n % conns.len()], Frame::Text(&f), now);
                }
                Input::Disconnect(n) if !conns.is_empty() => {
                    relay.handle_disconnect(conns[n % conns.len()], now);
                }
                Input::Advance(ms) => {
                    now += Duration::from_millis(ms);
                    relay.handle_timeout(now);
                }
                _ => {}
            }
            while let Some(out) = relay.poll_output() {
                match out {
                    Output::Send { frame, .. } => {
                        let v: Value = serde_json::from_slice(frame.as_bytes()).unwrap();
                        prop_assert_eq!(&v["v"], "mvp-0.2");
                        prop_assert!(v["type"].is_string() && v["payload"].is_object(), "{}", v);
                    }
                    Output::Close { .. } | Output::Event(_) => {}
                }
            }
            prop_assert!(relay.session_count() <= 2);
            prop_assert!(relay.connection_count() <= 6);
            for s in relay.sessions() {
                prop_assert!(relay.agents_of(s.as_str()).len() <= 2);
            }
            for c in &conns {
                prop_assert!(relay.pending_requests(*c) <= 2);
            }
            prop_assert!(relay.pending_total() <= 2 * 6);
        }
    }
}

#[allow(clippy::disallowed_methods)] // the one base time of a test
fn common_t0() -> std::time::Instant {
    std::time::Instant::now()
}

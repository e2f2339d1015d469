//! Property tests: `decode(encode(m)) == m` for every message type, in either field order.

use llmrtc_proto::{
    AssistantTranscript, Attachments, Audio, ClientMessage, Decoded, ErrorCode, ErrorMessage,
    IceServer, IceUrls, Llm, LlmChunk, ModeChanged, Offer, Ping, Pong, RawJson, Ready, Reconnect,
    ReconnectAck, ServerMessage, SessionMode, Signal, StageChange, Timestamp, ToolCallEnd,
    ToolCallStart, Transcript, Tts, TtsChunk, Usage, VisionAttachment,
};
use proptest::prelude::*;
use serde_json::{Map, Value};

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 ]{0,12}",
        any::<String>().prop_map(|s| s.chars().take(16).collect()),
        Just("quote \" backslash \\ newline \n".to_owned()),
    ]
}

fn number() -> impl Strategy<Value = Timestamp> {
    prop_oneof![
        any::<u64>().prop_map(Timestamp::from),
        any::<i64>().prop_map(Timestamp::from),
        // Any finite double, subnormals included, as its shortest text.
        any::<f64>().prop_filter_map("finite", Timestamp::from_f64),
        // Any JSON number text within the double range, kept as written (`-0`, `1.50`,
        // `12E+07`, long mantissas that are no double).
        (
            any::<bool>(),
            "(0|[1-9][0-9]{0,24})",
            prop::option::of("[0-9]{1,20}"),
            prop::option::of(("[eE]", "[+-]?", "[0-9]{1,3}")),
        )
            .prop_filter_map("finite", |(neg, int, frac, exp)| {
                let mut t = String::new();
                if neg {
                    t.push('-');
                }
                t.push_str(&int);
                if let Some(f) = frac {
                    t.push('.');
                    t.push_str(&f);
                }
                if let Some((e, sign, digits)) = exp {
                    t.push_str(&e);
                    t.push_str(&sign);
                    t.push_str(&digits);
                }
                Timestamp::parse(&t)
            }),
    ]
}

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn object() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map("[a-zA-Z]{1,6}", json(), 0..4).prop_map(|m| m.into_iter().collect())
}

fn attachment() -> impl Strategy<Value = VisionAttachment> {
    (text(), prop::option::of(text()), prop::option::of(text())).prop_map(|(d, m, a)| {
        VisionAttachment {
            data: d,
            mime_type: m,
            alt: a,
        }
    })
}

fn sdp() -> impl Strategy<Value = RawJson> {
    (text(), text())
        .prop_map(|(t, s)| RawJson::from_value(&serde_json::json!({"type": t, "sdp": s})))
}

fn code() -> impl Strategy<Value = ErrorCode> {
    prop_oneof![
        prop::sample::select(ErrorCode::KNOWN.to_vec()),
        "[A-Z_]{1,20}".prop_map(ErrorCode::new),
    ]
}

fn mode() -> impl Strategy<Value = SessionMode> {
    prop_oneof![
        Just(SessionMode::PIPELINE),
        Just(SessionMode::REALTIME),
        text().prop_map(SessionMode::new),
    ]
}

fn client_message() -> impl Strategy<Value = ClientMessage> {
    prop_oneof![
        number().prop_map(|timestamp| ClientMessage::Ping(Ping { timestamp })),
        sdp().prop_map(|signal| ClientMessage::Offer(Offer { signal })),
        text().prop_map(|session_id| ClientMessage::Reconnect(Reconnect { session_id })),
        (
            "[A-Za-z0-9+/]{0,40}",
            prop::option::of(prop::collection::vec(attachment(), 0..3))
        )
            .prop_map(|(data, attachments)| ClientMessage::Audio(Audio { data, attachments })),
        prop::collection::vec(attachment(), 0..3)
            .prop_map(|attachments| ClientMessage::Attachments(Attachments { attachments })),
    ]
}

fn ice() -> impl Strategy<Value = IceServer> {
    (
        prop_oneof![
            text().prop_map(IceUrls::One),
            prop::collection::vec(text(), 0..3).prop_map(IceUrls::Many)
        ],
        prop::option::of(text()),
        prop::option::of(text()),
    )
        .prop_map(|(urls, username, credential)| IceServer {
            urls,
            username,
            credential,
        })
}

fn server_message() -> impl Strategy<Value = ServerMessage> {
    prop_oneof![
        (
            text(),
            any::<u32>(),
            prop::option::of(prop::collection::vec(ice(), 0..3)),
            prop::option::of(mode()),
        )
            .prop_map(
                |(id, protocol_version, ice_servers, mode)| ServerMessage::Ready(Ready {
                    id,
                    protocol_version,
                    ice_servers,
                    mode,
                })
            ),
        (text(), any::<bool>()).prop_map(|(text, is_final)| {
            ServerMessage::AssistantTranscript(AssistantTranscript { text, is_final })
        }),
        (
            any::<u64>(),
            any::<u64>(),
            prop::option::of(any::<u64>()),
            prop::option::of(any::<u64>()),
            prop::option::of(any::<u64>()),
        )
            .prop_map(|(i, o, ai, ao, c)| ServerMessage::Usage(Usage {
                input_tokens: i,
                output_tokens: o,
                audio_input_tokens: ai,
                audio_output_tokens: ao,
                cached_tokens: c,
            })),
        mode().prop_map(|mode| ServerMessage::ModeChanged(ModeChanged { mode })),
        number().prop_map(|timestamp| ServerMessage::Pong(Pong { timestamp })),
        sdp().prop_map(|signal| ServerMessage::Signal(Signal { signal })),
        (any::<bool>(), text(), any::<bool>()).prop_map(
            |(success, session_id, history_recovered)| {
                ServerMessage::ReconnectAck(ReconnectAck {
                    success,
                    session_id,
                    history_recovered,
                })
            }
        ),
        (text(), any::<bool>())
            .prop_map(|(text, is_final)| ServerMessage::Transcript(Transcript { text, is_final })),
        (text(), any::<bool>())
            .prop_map(|(content, done)| ServerMessage::LlmChunk(LlmChunk { content, done })),
        text().prop_map(|text| ServerMessage::Llm(Llm { text })),
        Just(ServerMessage::TtsStart),
        (text(), any::<u32>(), "[A-Za-z0-9+/=]{0,40}").prop_map(|(format, sample_rate, data)| {
            ServerMessage::TtsChunk(TtsChunk {
                format,
                sample_rate,
                data,
            })
        }),
        (text(), "[A-Za-z0-9+/=]{0,40}")
            .prop_map(|(format, data)| ServerMessage::Tts(Tts { format, data })),
        Just(ServerMessage::TtsComplete),
        Just(ServerMessage::TtsCancelled),
        Just(ServerMessage::SpeechStart),
        Just(ServerMessage::SpeechEnd),
        (text(), text(), object()).prop_map(|(name, call_id, arguments)| {
            ServerMessage::ToolCallStart(ToolCallStart {
                name,
                call_id,
                arguments,
            })
        }),
        (
            text(),
            prop::option::of(json()),
            prop::option::of(text()),
            any::<u64>()
        )
            .prop_map(
                |(call_id, result, error, duration_ms)| ServerMessage::ToolCallEnd(ToolCallEnd {
                    call_id,
                    result,
                    error,
                    duration_ms
                })
            ),
        (text(), text(), text()).prop_map(|(from, to, reason)| ServerMessage::StageChange(
            StageChange { from, to, reason }
        )),
        (code(), text())
            .prop_map(|(code, message)| ServerMessage::Error(ErrorMessage { code, message })),
    ]
}

/// The same object with its keys in reverse order (`type` last for most messages: the slow
/// decode path). Values are moved as their text, so numbers are not re-formatted.
fn reversed(json: &str) -> String {
    let m: std::collections::BTreeMap<String, Box<serde_json::value::RawValue>> =
        serde_json::from_str(json).expect("object");
    let mut out = String::from("{");
    for (i, (k, v)) in m.iter().rev().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::to_string(k).expect("key"));
        out.push(':');
        out.push_str(v.get());
    }
    out.push('}');
    out
}

proptest! {
    #[test]
    fn client_messages_round_trip(m in client_message()) {
        let json = m.to_json();
        let prefix = format!(r#"{{"type":"{}""#, m.type_name());
        prop_assert!(json.starts_with(&prefix), "{}", json);
        prop_assert_eq!(ClientMessage::decode_str(&json).expect("decode"), Decoded::Message(m.clone()));
        let rev = reversed(&json);
        let back = ClientMessage::decode_str(&rev).expect("decode reversed").message().expect("known");
        prop_assert_eq!(back, m);
    }

    #[test]
    fn server_messages_round_trip(m in server_message()) {
        let json = m.to_json();
        let prefix = format!(r#"{{"type":"{}""#, m.type_name());
        prop_assert!(json.starts_with(&prefix), "{}", json);
        prop_assert_eq!(ServerMessage::decode_str(&json).expect("decode"), Decoded::Message(m.clone()));
        let rev = reversed(&json);
        let back = ServerMessage::decode_str(&rev).expect("decode reversed").message().expect("known");
        prop_assert_eq!(back, m);
    }

    #[test]
    fn the_fast_tts_encoders_agree_with_serde(format in text(), rate in any::<u32>(),
                                              audio in prop::collection::vec(any::<u8>(), 0..300)) {
        use base64::Engine as _;
        let data = base64::engine::general_purpose::STANDARD.encode(&audio);
        let mut out = Vec::new();
        llmrtc_proto::encode_tts_chunk(&mut out, &format, rate, &audio);
        let typed = ServerMessage::TtsChunk(TtsChunk { format: format.clone(), sample_rate: rate, data: data.clone() });
        prop_assert_eq!(String::from_utf8(out).expect("utf8"), typed.to_json());
        let mut out = Vec::new();
        llmrtc_proto::encode_tts(&mut out, &format, &audio);
        prop_assert_eq!(String::from_utf8(out).expect("utf8"), ServerMessage::Tts(Tts { format, data }).to_json());
        let mut back = Vec::new();
        let b64 = base64::engine::general_purpose::STANDARD.encode(&audio);
        prop_assert!(llmrtc_proto::decode_base64(&b64, audio.len(), &mut back).is_some());
        prop_assert_eq!(back, audio);
    }

    #[test]
    fn wav_round_trips(rate in 1u32..200_000, stereo in any::<bool>(),
                       samples in prop::collection::vec(any::<i16>(), 0..200)) {
        let channels = if stereo { 2 } else { 1 };
        let pcm: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
        let format = llmrtc_proto::WavFormat { channels, sample_rate: rate };
        let mut wav = Vec::new();
        llmrtc_proto::write_wav(&mut wav, format, &pcm);
        let parsed = llmrtc_proto::parse_wav(&wav).expect("wav");
        prop_assert_eq!(parsed.format, format);
        let whole = pcm.len() - pcm.len() % (2 * channels as usize);
        prop_assert_eq!(parsed.pcm, &pcm[..whole]);
    }
}

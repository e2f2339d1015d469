//! The binary form's rules: the method table, code-0 names, the reference's batch shape,
//! compression threshold and policy, encoder checks, and the streaming decoder.

use bytes::BytesMut;
use mcpw_codec::*;
use serde_json::json;

fn other(method: &str, params: serde_json::Value) -> Message {
    Message::new(
        MessageType::REQUEST,
        Body::Other(OtherCall::new(method, params)),
    )
}

fn payload_of(frame: &[u8]) -> serde_json::Value {
    serde_json::from_slice(&frame[HEADER_LEN..]).unwrap()
}

#[test]
fn reference_methods_keep_codes_1_to_9_and_spec_methods_get_10_to_19() {
    let names = [
        "initialize",
        "tool.list",
        "tool.execute",
        "context.get",
        "context.update",
        "event.subscribe",
        "event.unsubscribe",
        "ping",
        "pong",
    ];
    for (i, n) in names.iter().enumerate() {
        assert_eq!(Method::from_name(n), Method(i as u16 + 1));
    }
    let spec = [
        "agent.register",
        "registration.confirmed",
        "agent.heartbeat",
        "task.assigned",
        "task.progress",
        "task.complete",
        "agent.capability.update",
        "collaboration.request",
        "state.sync",
        "agent.shutdown",
    ];
    for (i, n) in spec.iter().enumerate() {
        assert_eq!(Method::from_name(n), Method(i as u16 + 10));
        assert_eq!(Method(i as u16 + 10).as_str(), Some(*n));
    }
    // tool.execute goes as code 3 with the bare params, as the reference sends it.
    let mut codec = Codec::default();
    let mut f = Vec::new();
    let h = codec
        .encode(&other("tool.execute", json!({"x": 1})), &mut f)
        .unwrap();
    assert_eq!(h.method, Method::TOOL_EXECUTE);
    assert_eq!(payload_of(&f), json!({"x": 1}));
}

#[test]
fn methods_without_a_code_travel_as_0_with_their_name_in_the_payload() {
    let mut codec = Codec::default();
    let msg = other("custom.report", json!({"n": 2}));
    let mut f = Vec::new();
    let h = codec.encode(&msg, &mut f).unwrap();
    assert_eq!(h.method, Method::UNKNOWN);
    assert_eq!(
        payload_of(&f),
        json!({"method": "custom.report", "params": {"n": 2}})
    );
    assert_eq!(codec.decode(&f).unwrap(), msg);
    // A Go peer's unknown method: code 0, bare params, no name.
    let mut h = Header::new(MessageType::NOTIFICATION, 3, Method::UNKNOWN);
    let p = br#"{"n":2}"#;
    h.size = p.len() as u32;
    let mut g = h.to_bytes().to_vec();
    g.extend_from_slice(p);
    let m = codec.decode(&g).unwrap();
    assert_eq!(
        m.body,
        Body::Other(OtherCall {
            method: String::new(),
            code: Method::UNKNOWN,
            params: json!({"n": 2})
        })
    );
}

#[test]
fn a_spec_batch_with_only_the_type_set_decodes_and_ours_sets_type_and_flag() {
    let mut codec = Codec::default();
    let inner = vec![
        other("ping", serde_json::Value::Null).with_id("a"),
        Message::error(ErrorBody::new(ErrorCode::RATE_LIMITED, "slow down")).with_id("b"),
    ];
    let batch = Message::batch(inner.clone()).with_seq(8);
    let mut f = Vec::new();
    let h = codec.encode(&batch, &mut f).unwrap();
    assert_eq!(h.kind, MessageType::BATCH);
    assert!(h.flags.contains(Flags::BATCH));
    assert_eq!(
        payload_of(&f),
        json!({"messages": [{"id": "a", "type": 0, "method": "ping"},
                            {"id": "b", "type": 3, "error": {"code": 4002, "message": "slow down"}}],
               "count": 2})
    );
    assert_eq!(codec.decode(&f).unwrap(), batch);
    // The spec's `BatchMessages` example sets only the type: type 6, flags 0, method 0.
    f[6..8].copy_from_slice(&[0, 0]);
    assert_eq!(codec.decode(&f).unwrap(), batch);
}

#[test]
fn compression_only_above_1024_bytes_and_only_if_smaller() {
    let mut codec = Codec::default();
    let text = |n: usize| json!("a".repeat(n));
    let mut f = Vec::new();
    // "aaa..." as a JSON string is n + 2 bytes.
    let h = codec.encode(&other("ping", text(1022)), &mut f).unwrap();
    assert_eq!(h.size, 1024);
    assert!(
        !h.flags.contains(Flags::COMPRESSED),
        "exactly 1024 is not compressed"
    );
    f.clear();
    let h = codec.encode(&other("ping", text(1023)), &mut f).unwrap();
    assert!(
        h.flags.contains(Flags::COMPRESSED),
        "1025 compressible bytes are"
    );
    assert!(h.size < 100);
    assert_eq!(&f[24..26], &[0x1f, 0x8b]);
    assert_eq!(
        codec.decode(&f).unwrap().body,
        other("ping", text(1023)).body
    );
    // Incompressible: sent as is.
    let mut x = 1u64;
    let noise: String = (0..3000)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            char::from(b'!' + (x >> 58) as u8 + ((x >> 40) as u8 % 30))
        })
        .filter(|c| *c != '"' && *c != '\\')
        .collect();
    f.clear();
    let h = codec.encode(&other("ping", json!(noise)), &mut f).unwrap();
    assert!(!h.flags.contains(Flags::COMPRESSED) || (h.size as usize) < noise.len());
}

#[test]
fn entropy_policy_skips_high_entropy_payloads() {
    let mut config = CodecConfig::default();
    config.compression.policy = CompressPolicy::SPEC_ENTROPY;
    let codec = Codec::new(config);
    let all_bytes: Vec<u8> = (0..4096u32).map(|i| (i * 167 % 256) as u8).collect();
    assert!(!codec.should_compress(&all_bytes), "8 bits per byte");
    assert!(codec.should_compress(&vec![b'a'; 4096]));
    assert!(
        !codec.should_compress(&vec![b'a'; 1024]),
        "threshold still applies"
    );
    let mut never = CodecConfig::default();
    never.compression.policy = CompressPolicy::Never;
    assert!(!Codec::new(never).should_compress(&vec![b'a'; 4096]));
}

#[test]
fn both_backends_and_levels_interoperate() {
    let msg = other(
        "tool.execute",
        json!({"rows": (0..400).collect::<Vec<_>>()}),
    );
    let mut backends = vec![Backend::MinizOxide];
    #[cfg(feature = "zlib-rs")]
    backends.push(Backend::ZlibRs);
    for enc in &backends {
        for level in [1, 6, 9] {
            let mut config = CodecConfig::default();
            config.compression.backend = *enc;
            config.compression.level = level;
            let mut f = Vec::new();
            let h = Codec::new(config).encode(&msg, &mut f).unwrap();
            assert!(h.flags.contains(Flags::COMPRESSED));
            for dec in &backends {
                let mut config = CodecConfig::default();
                config.compression.backend = *dec;
                assert_eq!(
                    Codec::new(config).decode(&f).unwrap(),
                    msg,
                    "{enc:?} -> {dec:?}"
                );
            }
        }
    }
}

#[test]
fn the_encoder_refuses_what_the_decoder_would_misread() {
    let mut codec = Codec::default();
    let mut out = vec![7];
    let wrong = Message::new(
        MessageType::ERROR,
        Body::Other(OtherCall::new("ping", json!(1))),
    );
    assert!(matches!(
        codec.encode(&wrong, &mut out),
        Err(EncodeError::KindMismatch { .. })
    ));
    let wrong = Message::new(MessageType::REQUEST, Body::Batch(vec![]));
    assert!(matches!(
        codec.encode(&wrong, &mut out),
        Err(EncodeError::KindMismatch { .. })
    ));
    let nested = Message::batch(vec![Message::batch(vec![])]);
    assert!(matches!(
        codec.encode(&nested, &mut out),
        Err(EncodeError::InvalidBatch(_))
    ));
    assert!(matches!(
        json::encode(&nested, &mut out),
        Err(EncodeError::InvalidBatch(_))
    ));
    let mut config = CodecConfig::default();
    config.limits.max_payload = 10;
    config.compression.policy = CompressPolicy::Never;
    let err = Codec::new(config).encode(&other("ping", json!("0123456789")), &mut out);
    assert!(matches!(
        err,
        Err(EncodeError::PayloadTooLarge { size: 12, max: 10 })
    ));
    assert_eq!(out, [7], "the output is untouched on error");
}

#[test]
fn the_stream_decoder_needs_whole_frames_and_consumes_exactly_one() {
    let mut codec = Codec::default();
    let msgs: Vec<Message> = (0..4)
        .map(|i| {
            other("tool.execute", json!({"i": i, "pad": "p".repeat(i * 700)})).with_seq(i as u64)
        })
        .collect();
    let mut wire = Vec::new();
    let mut ends = Vec::new();
    for m in &msgs {
        codec.encode(m, &mut wire).unwrap();
        ends.push(wire.len());
    }
    let mut buf = BytesMut::new();
    let mut got = Vec::new();
    for (i, b) in wire.iter().enumerate() {
        buf.extend_from_slice(&[*b]);
        match codec.decode_stream(&mut buf).unwrap() {
            Some(m) => {
                assert!(ends.contains(&(i + 1)), "a frame came out early");
                assert!(buf.is_empty());
                got.push(m);
            }
            None => assert!(!ends.contains(&(i + 1)), "a whole frame was not decoded"),
        }
    }
    assert_eq!(got, msgs);
    // All at once: one per call.
    let mut buf = BytesMut::from(&wire[..]);
    for m in &msgs {
        assert_eq!(codec.decode_stream(&mut buf).unwrap().as_ref(), Some(m));
    }
    assert_eq!(codec.decode_stream(&mut buf).unwrap(), None);
    // Raw frames from a stream: header and inflated payload.
    let mut buf = BytesMut::from(&wire[..]);
    let (h, p) = codec.decode_frame_stream(&mut buf).unwrap().unwrap();
    assert_eq!(h.seq, 0);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&p).unwrap()["i"],
        0
    );
}

#[test]
fn websocket_frames_pick_the_form_and_replies_can_follow_it() {
    let mut codec = Codec::default();
    let msg = other("ping", json!({})).with_id("x1");
    let text = codec.encode_ws(&msg, Form::Json).unwrap();
    let (m, form) = codec.decode_ws(text.as_frame()).unwrap();
    assert_eq!((m, form), (msg.clone(), Form::Json));
    let bin = codec.encode_ws(&msg, Form::Binary).unwrap();
    let (m, form) = codec.decode_ws(bin.as_frame()).unwrap();
    assert_eq!(form, Form::Binary);
    assert_eq!(m, Message { id: None, ..msg });
}

#[test]
fn json_result_is_read_as_params_and_errors_need_no_method() {
    let m = json::decode(
        br#"{"id":"r","type":1,"method":"tool.list","result":[1]}"#,
        &Limits::default(),
    )
    .unwrap();
    assert_eq!(m.body, Body::Other(OtherCall::new("tool.list", json!([1]))));
    let m = json::decode(
        br#"{"id":"e","type":3,"error":{"code":4242,"message":"?"}}"#,
        &Limits::default(),
    )
    .unwrap();
    let Body::Error(e) = m.body else {
        panic!("not an error")
    };
    assert_eq!(e.code, ErrorCode(4242));
    assert_eq!(format!("{:?}", e.code), "ErrorCode(4242)");
    assert_eq!(format!("{:?}", ErrorCode::CONFLICT), "CONFLICT");
    assert_eq!(
        ErrorCode::CONTEXT_TOO_LARGE.description(),
        Some("Context Too Large")
    );
}

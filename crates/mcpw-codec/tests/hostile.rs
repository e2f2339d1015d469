//! Hostile input through the public API: truncated, oversize, wrong-type and garbage frames,
//! and every way a gzip payload can be wrong. Each gives its typed error and spec code, never
//! a panic, and the same codec goes on decoding good frames afterwards.

use bytes::BytesMut;
use mcpw_codec::gzip::{GzipDecoder, GzipEncoder};
use mcpw_codec::*;
use serde_json::json;

fn good_frame(codec: &mut Codec) -> (Message, Vec<u8>) {
    let msg = Message::new(
        MessageType::REQUEST,
        Body::AgentHeartbeat(AgentHeartbeat {
            agent_id: "agent-1".into(),
            status: Some("healthy".into()),
            metrics: None,
            workload: None,
        }),
    )
    .with_seq(42);
    let mut f = Vec::new();
    codec.encode(&msg, &mut f).unwrap();
    (msg, f)
}

fn frame(flags: Flags, method: Method, payload: &[u8]) -> Vec<u8> {
    let mut h = Header::new(MessageType::REQUEST, 1, method);
    h.flags = flags;
    h.size = payload.len() as u32;
    let mut f = h.to_bytes().to_vec();
    f.extend_from_slice(payload);
    f
}

fn gz(data: &[u8]) -> Vec<u8> {
    let mut z = Vec::new();
    GzipEncoder::new(Backend::default(), 6).compress(data, &mut z);
    z
}

/// Decodes `f`, returns the error, and checks the codec still decodes a good frame.
fn refuse(codec: &mut Codec, f: &[u8]) -> DecodeError {
    let err = codec.decode(f).expect_err("hostile frame accepted");
    let (msg, good) = good_frame(codec);
    assert_eq!(
        codec.decode(&good).unwrap(),
        msg,
        "codec broken after {err}"
    );
    err
}

fn big_json() -> Vec<u8> {
    serde_json::to_vec(&json!({"rows": (0..500).map(|i| format!("r{i}")).collect::<Vec<_>>()}))
        .unwrap()
}

#[test]
fn gzip_edge_cases_each_have_a_typed_error() {
    let data = big_json();
    let z = gz(&data);
    let mut codec = Codec::default();
    let c = Flags::COMPRESSED;
    let m = Method::TOOL_EXECUTE;

    for cut in [1, 5, 9, 12, z.len() / 2, z.len() - 8, z.len() - 1] {
        let e = refuse(&mut codec, &frame(c, m, &z[..cut]));
        assert!(
            matches!(e, DecodeError::Gzip(GzipError::Truncated)),
            "cut {cut}: {e}"
        );
        assert_eq!(e.code(), ErrorCode::INVALID_MESSAGE);
    }
    let mut bad_crc = z.clone();
    let n = bad_crc.len();
    bad_crc[n - 8] ^= 0xff;
    assert!(matches!(
        refuse(&mut codec, &frame(c, m, &bad_crc)),
        DecodeError::Gzip(GzipError::Crc { .. })
    ));
    let mut bad_isize = z.clone();
    bad_isize[n - 1] ^= 0x01;
    assert!(matches!(
        refuse(&mut codec, &frame(c, m, &bad_isize)),
        DecodeError::Gzip(GzipError::Isize { .. })
    ));
    let mut garbage = z.clone();
    garbage.extend_from_slice(b"junk");
    assert!(matches!(
        refuse(&mut codec, &frame(c, m, &garbage)),
        DecodeError::Gzip(GzipError::TrailingGarbage(4))
    ));
    let mut two = z.clone();
    two.extend_from_slice(&z);
    assert!(matches!(
        refuse(&mut codec, &frame(c, m, &two)),
        DecodeError::Gzip(GzipError::MultiMember)
    ));
    let mut corrupt = z.clone();
    corrupt[10] = 0xff; // block type 3 (reserved) on the first block
    assert!(matches!(
        refuse(&mut codec, &frame(c, m, &corrupt)),
        DecodeError::Gzip(GzipError::Corrupt)
    ));
    let mut not_gzip = z.clone();
    not_gzip[0] = 0x78;
    assert!(matches!(
        refuse(&mut codec, &frame(c, m, &not_gzip)),
        DecodeError::Gzip(GzipError::BadHeader(_))
    ));
    let mut reserved_flag = z.clone();
    reserved_flag[3] = 0x80;
    assert!(matches!(
        refuse(&mut codec, &frame(c, m, &reserved_flag)),
        DecodeError::Gzip(GzipError::BadHeader(_))
    ));
    // The same member is fine on its own, with either backend, and in a small frame.
    let msg = codec.decode(&frame(c, m, &z)).unwrap();
    assert!(matches!(msg.body, Body::Other(ref o) if o.method == "tool.execute"));
}

#[test]
fn decompressed_size_is_capped_by_the_limit_and_answered_4007() {
    let data = vec![b' '; 5000];
    let z = gz(&data);
    let mut config = CodecConfig::default();
    config.limits.max_decompressed = 4999;
    let mut codec = Codec::new(config.clone());
    let e = refuse(&mut codec, &frame(Flags::COMPRESSED, Method::PING, &z));
    assert!(matches!(
        e,
        DecodeError::Gzip(GzipError::TooLarge { cap: 4999 })
    ));
    assert_eq!(e.code(), ErrorCode::CONTEXT_TOO_LARGE);
    config.limits.max_decompressed = 5000;
    let mut codec = Codec::new(config);
    let f = frame(Flags::COMPRESSED, Method::PING, &z);
    assert_eq!(codec.decode_frame(&f).unwrap().payload, &data[..]);
    let mut out = Vec::new();
    GzipDecoder::new(Backend::MinizOxide)
        .decompress(&z, &mut out, 5000)
        .unwrap();
    assert_eq!(out.len(), 5000);
}

#[test]
fn frame_length_must_match_the_header() {
    let mut codec = Codec::default();
    let (_, good) = good_frame(&mut codec);
    let e = refuse(&mut codec, &good[..good.len() - 1]);
    assert!(matches!(e, DecodeError::Truncated { .. }));
    let mut long = good.clone();
    long.push(b' ');
    assert!(matches!(
        refuse(&mut codec, &long),
        DecodeError::TrailingBytes(1)
    ));
    for n in [0, 1, 23] {
        assert!(matches!(
            refuse(&mut codec, &good[..n]),
            DecodeError::Header(HeaderError::Truncated(_))
        ));
    }
}

#[test]
fn header_errors_come_before_any_payload_work() {
    let mut codec = Codec::default();
    let mut f = frame(Flags::NONE, Method::PING, b"{}");
    f[0] = b'X';
    assert!(matches!(
        refuse(&mut codec, &f),
        DecodeError::Header(HeaderError::BadMagic(_))
    ));
    // A 2 MiB size claim in a 24-byte frame: refused as too large (4007), not truncated.
    let mut h = Header::new(MessageType::REQUEST, 1, Method::PING);
    h.size = 2 << 20;
    let e = refuse(&mut codec, &h.to_bytes());
    assert!(matches!(
        e,
        DecodeError::Header(HeaderError::PayloadTooLarge { .. })
    ));
    assert_eq!(e.code(), ErrorCode::CONTEXT_TOO_LARGE);
}

#[test]
fn garbage_payloads_are_4000_and_bad_params_4005_naming_the_field() {
    let mut codec = Codec::default();
    for payload in [
        &b"\xff\xfe"[..],
        b"not json",
        b"{\"agent_id\":",
        b"{\"a\":1}}",
    ] {
        let e = refuse(
            &mut codec,
            &frame(Flags::NONE, Method::AGENT_HEARTBEAT, payload),
        );
        assert_eq!(e.code(), ErrorCode::INVALID_MESSAGE, "{e}");
    }
    let cases = [
        (Method::AGENT_HEARTBEAT, json!({"status": "ok"}), "agent_id"),
        (Method::AGENT_HEARTBEAT, json!({"agent_id": 7}), "agent_id"),
        (
            Method::AGENT_REGISTER,
            json!({"agent_id": "a", "capabilities": [{"name": "x"}, {"confidence": 1}]}),
            "capabilities[1].name",
        ),
        (
            Method::STATE_SYNC,
            json!({"agent_id": "a", "vector_clock": {}, "operations": [{"type": "lww"}]}),
            "operations[0].type",
        ),
        (
            Method::TASK_COMPLETE,
            json!({"task_id": "t", "agent_id": "a", "result": {"findings": null, "summary": 3}}),
            "result.summary",
        ),
    ];
    for (method, params, field) in cases {
        let e = refuse(
            &mut codec,
            &frame(Flags::NONE, method, &serde_json::to_vec(&params).unwrap()),
        );
        assert_eq!(e.code(), ErrorCode::INVALID_PARAMS, "{e}");
        assert_eq!(e.field(), Some(field), "{e}");
        let body = e.to_error_body();
        assert_eq!(body.code, ErrorCode::INVALID_PARAMS);
        assert_eq!(body.data.as_ref().unwrap()["field"], field);
    }
}

#[test]
fn batch_limits_and_shape() {
    let mut codec = Codec::default();
    let item = json!({"type": 2, "method": "ping"});
    let batch = |n: usize, count: serde_json::Value| {
        let p = json!({"messages": vec![item.clone(); n], "count": count});
        let mut h = Header::new(MessageType::BATCH, 1, Method::UNKNOWN);
        let payload = serde_json::to_vec(&p).unwrap();
        h.size = payload.len() as u32;
        let mut f = h.to_bytes().to_vec();
        f.extend_from_slice(&payload);
        f
    };
    assert!(
        matches!(codec.decode(&batch(100, json!(100))).unwrap().body, Body::Batch(ref v) if v.len() == 100)
    );
    let e = refuse(&mut codec, &batch(101, json!(101)));
    assert!(
        matches!(e, DecodeError::BatchTooLarge { max: 100, .. }),
        "{e}"
    );
    assert_eq!(e.code(), ErrorCode::CONTEXT_TOO_LARGE);
    // The array is counted while parsing: a lying small `count` does not help.
    assert!(matches!(
        refuse(&mut codec, &batch(150, json!(1))),
        DecodeError::BatchTooLarge { .. }
    ));
    assert!(matches!(
        refuse(&mut codec, &batch(3, json!(2))),
        DecodeError::InvalidBatch(_)
    ));
    assert!(matches!(
        refuse(&mut codec, &batch(3, json!("3"))),
        DecodeError::Json(_)
    ));
    let nested = json!({"messages": [{"type": 6, "params": {"messages": []}}]});
    let e = codec.decode_json(
        serde_json::to_string(&json!({"type": 6, "params": nested}))
            .unwrap()
            .as_bytes(),
    );
    assert!(matches!(e, Err(DecodeError::InvalidBatch(_))));
}

#[test]
fn json_text_frames_are_checked_too() {
    let mut config = CodecConfig::default();
    config.limits.max_text = 64;
    let codec = Codec::new(config);
    let long = format!(
        r#"{{"type":0,"method":"ping","params":"{}"}}"#,
        "x".repeat(64)
    );
    let e = codec.decode_json(long.as_bytes()).unwrap_err();
    assert!(matches!(e, DecodeError::TextTooLarge { max: 64, .. }));
    assert_eq!(e.code(), ErrorCode::CONTEXT_TOO_LARGE);
    for bad in [
        &b"\xff"[..],
        b"{}",
        b"{\"type\":\"0\"}",
        b"{\"type\":300}",
        b"[]",
        b"{\"type\":0",
    ] {
        let e = codec.decode_json(bad).unwrap_err();
        assert_eq!(e.code(), ErrorCode::INVALID_MESSAGE, "{e}");
    }
    let e = codec
        .decode_json(br#"{"type":0,"method":"task.progress","params":{"task_id":"t"}}"#)
        .unwrap_err();
    assert_eq!(e.field(), Some("agent_id"));
    // No `type` but a method: a request (spec decision 13); register needs no capabilities.
    let m = codec
        .decode_json(br#"{"id":"r","method":"agent.register","params":{"agent_id":"a"}}"#)
        .unwrap();
    assert_eq!(m.kind, MessageType::REQUEST);
    assert!(matches!(m.body, Body::AgentRegister(ref p) if p.capabilities.is_empty()));
}

#[test]
fn encrypted_frames_are_refused_by_the_typed_codec_and_passed_raw() {
    let mut codec = Codec::default();
    let ciphertext = [0u8, 1, 2, 3, 250];
    let mut h = Header::new(MessageType::REQUEST, 5, Method::TOOL_EXECUTE);
    h.flags = Flags::ENCRYPTED;
    let mut f = Vec::new();
    let written = codec.encode_frame(h, &ciphertext, &mut f).unwrap();
    assert!(matches!(refuse(&mut codec, &f), DecodeError::Encrypted));
    let raw = codec.decode_frame(&f).unwrap();
    assert_eq!(raw.header, written);
    assert_eq!(raw.payload, ciphertext);
    let msg = Message::new(
        MessageType::REQUEST,
        Body::Other(OtherCall::new("ping", json!(1))),
    )
    .with_flags(Flags::ENCRYPTED);
    assert!(matches!(
        codec.encode(&msg, &mut Vec::new()),
        Err(EncodeError::Encrypted)
    ));
}

#[test]
fn a_stream_with_a_bad_frame_recovers_and_a_bad_header_stops() {
    let mut codec = Codec::default();
    let (msg, good) = good_frame(&mut codec);
    let bad_params = frame(Flags::NONE, Method::AGENT_HEARTBEAT, br#"{"agent_id":1}"#);
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&bad_params);
    buf.extend_from_slice(&good);
    assert!(matches!(
        codec.decode_stream(&mut buf),
        Err(DecodeError::InvalidParams { .. })
    ));
    assert_eq!(buf.len(), good.len(), "the bad frame is consumed");
    assert_eq!(codec.decode_stream(&mut buf).unwrap(), Some(msg));
    assert!(buf.is_empty());
    let mut bad_header = good.clone();
    bad_header[4] = 99;
    buf.extend_from_slice(&bad_header);
    for _ in 0..3 {
        assert!(matches!(
            codec.decode_stream(&mut buf),
            Err(DecodeError::Header(HeaderError::UnsupportedVersion(99)))
        ));
        assert_eq!(
            buf.len(),
            bad_header.len(),
            "nothing consumed on a header error"
        );
    }
}

#[test]
fn random_garbage_never_panics() {
    let mut codec = Codec::default();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for round in 0..2000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let len = (state % 300) as usize;
        let mut data: Vec<u8> = (0..len).map(|i| (state >> (i % 56)) as u8).collect();
        if round % 2 == 0 && len >= 24 {
            data[..5].copy_from_slice(b"MCPW\x01");
            data[18..20].copy_from_slice(&[0, 0]);
            data[20..24].copy_from_slice(&((len - 24) as u32).to_be_bytes());
        }
        let _ = codec.decode(&data);
        let _ = codec.decode_json(&data);
        let mut buf = BytesMut::from(&data[..]);
        let _ = codec.decode_stream(&mut buf);
    }
    let (msg, good) = good_frame(&mut codec);
    assert_eq!(codec.decode(&good).unwrap(), msg);
}

//! What the real Go code (developer-mesh) puts on the wire, pinned byte for byte from
//! `INTEROP.md`'s description: the binary batch body of `createBinaryBatch`, the 12-byte
//! form of `protocol.set_binary`, and the decoder's refusals of what the encoder could not
//! write back.

use agentwire_core::Frame;
use mcpw_codec::{
    BatchForm, Body, Codec, CodecConfig, CompactHeaderError, DecodeError, Flags, Form, Message,
    MessageType, Method, OtherCall, TaskAssigned,
};
use serde_json::json;

const PING_ENTRY: &[u8] = br#"{"id":"m-1","type":4}"#;
const TASK_ENTRY: &[u8] =
    br#"{"id":"m-2","type":2,"method":"task.assigned","params":{"task_id":"t-1"}}"#;

/// `createBinaryBatch` of the two entries above: the 24-byte header (type 6, flag BATCH
/// 0x0004, sequence 0, method 0, size 106), then count 2, then length + JSON per entry.
fn real_binary_batch() -> Vec<u8> {
    let mut f = vec![
        0x4d, 0x43, 0x50, 0x57, // MCPW
        0x01, // version
        0x06, // type: batch
        0x00, 0x04, // flags: BATCH
        0, 0, 0, 0, 0, 0, 0, 0, // sequence id
        0x00, 0x00, // method
        0x00, 0x00, // reserved
        0x00, 0x00, 0x00, 0x6a, // data size 106
        0x00, 0x00, 0x00, 0x02, // message count
        0x00, 0x00, 0x00, 0x15, // 21 bytes
    ];
    f.extend_from_slice(PING_ENTRY);
    f.extend_from_slice(&[0x00, 0x00, 0x00, 0x49]); // 73 bytes
    f.extend_from_slice(TASK_ENTRY);
    f
}

fn the_two_entries() -> Vec<Message> {
    vec![
        Message::new(
            MessageType::PING,
            Body::Other(OtherCall::new("", json!(null))),
        )
        .with_id("m-1"),
        Message::notification(
            "m-2",
            Body::TaskAssigned(TaskAssigned {
                task_id: "t-1".into(),
                task_type: None,
                priority: None,
                deadline: None,
                context: None,
                requirements: None,
                routing_metadata: None,
            }),
        ),
    ]
}

#[test]
fn the_real_binary_batch_body_decodes_and_is_written_byte_for_byte_when_chosen() {
    let mut codec = Codec::default();
    let frame = real_binary_batch();
    assert_eq!(frame.len(), 24 + 106);
    let batch = Message::batch(the_two_entries());
    assert_eq!(codec.decode(&frame).unwrap(), batch);
    assert_eq!(
        codec.decode_ws(Frame::Binary(&frame)).unwrap(),
        (batch.clone(), Form::Binary)
    );

    // The default is the spec's JSON body; the real body is a setting.
    let mut ours = Vec::new();
    codec.encode(&batch, &mut ours).unwrap();
    assert_eq!(ours[24], b'{', "default batch body is the spec's JSON");
    let mut config = CodecConfig::default();
    config.batch = BatchForm::Binary;
    let mut real = Codec::new(config);
    let mut ours = Vec::new();
    let h = real.encode(&batch, &mut ours).unwrap();
    assert!(h.flags.contains(Flags::BATCH) && h.kind == MessageType::BATCH);
    assert_eq!(ours, frame, "byte for byte as createBinaryBatch writes it");
    // Both bodies decode to the same batch, whatever the decoder's setting.
    assert_eq!(real.decode(&frame).unwrap(), batch);
}

#[test]
fn a_binary_batch_body_is_bounded_and_exact() {
    let mut codec = Codec::default();
    let frame_with = |body: &[u8]| {
        let mut f = real_binary_batch()[..24].to_vec();
        f[20..24].copy_from_slice(&(body.len() as u32).to_be_bytes());
        f.extend_from_slice(body);
        f
    };
    // A count above max_batch is refused before anything is read or allocated for it,
    // and the error names the real count.
    let err = codec
        .decode(&frame_with(&1000u32.to_be_bytes()))
        .unwrap_err();
    assert!(
        matches!(
            err,
            DecodeError::BatchTooLarge {
                count: 1000,
                max: 100
            }
        ),
        "{err:?}"
    );
    let body = &real_binary_batch()[24..];
    for cut in [2, 6, 10, 60, body.len() - 1] {
        let err = codec.decode(&frame_with(&body[..cut])).unwrap_err();
        assert!(
            matches!(err, DecodeError::InvalidBatch(_)),
            "{cut}: {err:?}"
        );
        assert_eq!(err.code().0, 4000);
    }
    let mut trailing = body.to_vec();
    trailing.push(b' ');
    assert!(matches!(
        codec.decode(&frame_with(&trailing)),
        Err(DecodeError::InvalidBatch("bytes after the last message"))
    ));
    // An entry may not be a batch.
    let inner = br#"{"type":6,"params":{"messages":[]}}"#;
    let mut nested = 1u32.to_be_bytes().to_vec();
    nested.extend_from_slice(&(inner.len() as u32).to_be_bytes());
    nested.extend_from_slice(inner);
    assert!(matches!(
        codec.decode(&frame_with(&nested)),
        Err(DecodeError::InvalidBatch("a batch inside a batch"))
    ));
}

/// A real server's reply in binary mode: version 1, flags 0, type 1 (u16 BE), length 70,
/// reserved 0, then the whole message JSON with `result`.
fn real_compact_response() -> Vec<u8> {
    let json = br#"{"id":"r-1","type":1,"result":{"pong":true,"timestamp":1735140600000}}"#;
    let mut f = vec![0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x46, 0, 0, 0, 0];
    f.extend_from_slice(json);
    f
}

#[test]
fn the_real_12_byte_frame_decodes_and_ours_is_byte_for_byte() {
    let mut codec = Codec::default();
    let frame = real_compact_response();
    assert_eq!(frame.len(), 12 + 70);
    let (msg, form) = codec.decode_ws(Frame::Binary(&frame)).unwrap();
    assert_eq!(
        form,
        Form::Compact,
        "the first byte (1, not 'M') picks the form"
    );
    assert_eq!(msg.kind, MessageType::RESPONSE);
    assert_eq!(msg.id.as_deref(), Some("r-1"));
    assert_eq!(
        msg.body,
        Body::Other(OtherCall {
            method: String::new(),
            code: Method::UNKNOWN,
            params: json!({"pong": true, "timestamp": 1_735_140_600_000u64}),
        })
    );

    // What we write: a request, exactly as the reference's BinaryEncoder lays it out.
    let req = Message::request("q-1", Body::Other(OtherCall::new("tool.list", json!({}))));
    let mut ours = Vec::new();
    let h = codec.encode_compact(&req, &mut ours).unwrap();
    let mut expected = vec![0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x36, 0, 0, 0, 0];
    expected.extend_from_slice(br#"{"id":"q-1","type":0,"method":"tool.list","params":{}}"#);
    assert_eq!(ours, expected);
    assert_eq!((h.size, h.flags), (0x36, 0));
    assert_eq!(codec.decode_compact(&ours).unwrap(), req);
    assert_eq!(
        codec.encode_ws(&req, Form::Compact).unwrap().as_bytes(),
        &expected[..]
    );
}

#[test]
fn the_12_byte_header_type_overrides_the_json_and_gzip_goes_over_the_threshold() {
    let mut codec = Codec::default();
    // The JSON says request (0); the header says pong (5): the header wins.
    let json = br#"{"id":"p-1","type":0,"method":"ping"}"#;
    let mut f = vec![
        0x01,
        0x00,
        0x00,
        0x05,
        0,
        0,
        0,
        json.len() as u8,
        0,
        0,
        0,
        0,
    ];
    f.extend_from_slice(json);
    let msg = codec.decode_compact(&f).unwrap();
    assert_eq!(msg.kind, MessageType::PONG);

    // Over 1024 bytes and smaller gzipped: flag bit 0 and a gzip member; at or under, plain.
    let big = Message::request(
        "big",
        Body::Other(OtherCall::new(
            "tool.execute",
            json!({"text": "x".repeat(4000)}),
        )),
    );
    let mut out = Vec::new();
    let h = codec.encode_compact(&big, &mut out).unwrap();
    assert_eq!(out[1], 0x01);
    assert_eq!(&out[12..14], &[0x1f, 0x8b]);
    assert_eq!(h.size as usize, out.len() - 12);
    assert!(out.len() < 1000);
    assert_eq!(codec.decode_compact(&out).unwrap(), big);
    let mut plain = Vec::new();
    codec.encode_compact_with(&big, None, &mut plain).unwrap();
    assert_eq!(plain[1], 0x00);
    assert_eq!(codec.decode_compact(&plain).unwrap(), big);

    // Refusals: type above 255, unknown flags, encrypted, truncated, trailing bytes.
    let mut bad = f.clone();
    bad[2] = 0x01;
    assert!(matches!(
        codec.decode_compact(&bad),
        Err(DecodeError::Compact(CompactHeaderError::TypeOutOfRange(
            0x0105
        )))
    ));
    let mut bad = f.clone();
    bad[1] = 0x80;
    assert!(matches!(
        codec.decode_compact(&bad),
        Err(DecodeError::Compact(CompactHeaderError::UnknownFlags(0x80)))
    ));
    let mut bad = f.clone();
    bad[1] = 0x02;
    assert!(matches!(
        codec.decode_compact(&bad),
        Err(DecodeError::Encrypted)
    ));
    assert!(matches!(
        codec.decode_compact(&f[..f.len() - 1]),
        Err(DecodeError::Truncated { .. })
    ));
    let mut bad = f.clone();
    bad.push(b'\n');
    assert!(matches!(
        codec.decode_compact(&bad),
        Err(DecodeError::TrailingBytes(1))
    ));
    let mut big_size = f.clone();
    big_size[4..8].copy_from_slice(&(2u32 << 20).to_be_bytes());
    let err = codec.decode_compact(&big_size).unwrap_err();
    assert_eq!(err.code().0, 4007, "{err:?}");
}

#[test]
fn a_type_that_does_not_fit_the_body_is_refused_by_the_decoder() {
    let mut codec = Codec::default();
    // The fuzz crash: a batch entry of type 3 without an error object decoded, and the
    // encoder then refused to write it back.
    let crash = include_bytes!(
        "../../../fuzz/seeds/mcpw_frame/regression_batch_entry_type3_without_error.bin"
    );
    let err = codec.decode(&crash[1..]).unwrap_err();
    assert!(
        matches!(
            err,
            DecodeError::KindMismatch {
                kind: MessageType::ERROR,
                body: "call"
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.code().0, 4000);
    // The same at the top level, and the other way round.
    for text in [
        r#"{"id":"a","type":3}"#,
        r#"{"id":"a","type":3,"method":"ping","params":{}}"#,
        r#"{"id":"a","type":0,"error":{"code":4000,"message":"x"}}"#,
        r#"{"id":"a","type":6,"error":{"code":4000,"message":"x"}}"#,
    ] {
        assert!(
            matches!(
                codec.decode_json(text.as_bytes()),
                Err(DecodeError::KindMismatch { .. })
            ),
            "{text}"
        );
    }
    // The BATCH flag on a type other than 6.
    let mut f = Vec::new();
    codec
        .encode(
            &Message::request("x", Body::Other(OtherCall::new("ping", json!(null)))),
            &mut f,
        )
        .unwrap();
    f[7] |= 0x04;
    assert!(matches!(
        codec.decode(&f),
        Err(DecodeError::KindMismatch { body: "batch", .. })
    ));
}

#[test]
fn a_code_0_frame_naming_a_typed_method_gets_its_typed_body() {
    let mut codec = Codec::default();
    let mut f = Vec::new();
    let payload = json!({"method": "task.assigned", "params": {"task_id": "t-9", "priority": 2}});
    let mut h = mcpw_codec::Header::new(MessageType::NOTIFICATION, 4, Method::UNKNOWN);
    h.flags = Flags::NONE;
    codec
        .encode_frame(h, payload.to_string().as_bytes(), &mut f)
        .unwrap();
    let msg = codec.decode(&f).unwrap();
    let Body::TaskAssigned(t) = &msg.body else {
        panic!("not typed: {msg:?}")
    };
    assert_eq!((t.task_id.as_str(), t.priority), ("t-9", Some(2)));
    // Bad params of a named typed method are 4005, as with its code.
    let bad = json!({"method": "registration.confirmed", "params": {"session_id": 1}});
    let mut f = Vec::new();
    codec
        .encode_frame(h, bad.to_string().as_bytes(), &mut f)
        .unwrap();
    assert_eq!(codec.decode(&f).unwrap_err().code().0, 4005);
}

//! Entry points of the cargo-fuzz targets in `fuzz/` (feature `fuzzing`).
//!
//! Each `fuzz/fuzz_targets/mcpw_*.rs` only calls one of these functions, so the bodies build
//! and run on stable Rust too: `tests/fuzz_seeds.rs` replays every committed seed through
//! them. Every function panics on a broken invariant; that is how the fuzzer finds bugs.

use bytes::BytesMut;
use serde_json::Value;

use crate::compact::{CompactHeader, COMPACT_COMPRESSED};
use crate::config::{Backend, CodecConfig, CompressPolicy, Limits, ReservedPolicy};
use crate::gzip::{GzipDecoder, GzipEncoder, GzipError};
use crate::header::{Flags, Header, HeaderError, MessageType, Method, HEADER_LEN, MAGIC, VERSION};
use crate::message::{Body, Message, OtherCall};
use crate::BatchForm;
use crate::{Codec, DecodeError};

mod agent;
mod orchestrator;

pub use self::agent::agent;
pub use self::orchestrator::orchestrator;

fn backends() -> [Backend; 2] {
    #[cfg(feature = "zlib-rs")]
    {
        [Backend::MinizOxide, Backend::ZlibRs]
    }
    #[cfg(not(feature = "zlib-rs"))]
    {
        [Backend::MinizOxide, Backend::MinizOxide]
    }
}

/// Parses `data` as a header under strict and lax limits.
///
/// Checks: no panic; fewer than 24 bytes is `Truncated`; the errors come in the documented
/// order (magic, version, size, reserved); a header the lax limits accept writes back to
/// exactly the same 24 bytes; strict acceptance implies lax acceptance of the same header.
pub fn header(data: &[u8]) {
    let strict = Limits::default();
    let lax = Limits {
        max_payload: u32::MAX,
        reserved: ReservedPolicy::Ignore,
        ..Limits::default()
    };
    let Some(bytes) = data.first_chunk::<HEADER_LEN>() else {
        assert_eq!(
            Header::parse_slice(data, &strict),
            Err(HeaderError::Truncated(data.len()))
        );
        return;
    };
    let magic_ok = bytes[..4] == MAGIC;
    let version_ok = bytes[4] == VERSION;
    let size = u32::from_be_bytes([bytes[20], bytes[21], bytes[22], bytes[23]]);
    let reserved = u16::from_be_bytes([bytes[18], bytes[19]]);
    let expected = if !magic_ok {
        Some(HeaderError::BadMagic([
            bytes[0], bytes[1], bytes[2], bytes[3],
        ]))
    } else if !version_ok {
        Some(HeaderError::UnsupportedVersion(bytes[4]))
    } else if size > strict.max_payload {
        Some(HeaderError::PayloadTooLarge {
            size,
            max: strict.max_payload,
        })
    } else if reserved != 0 {
        Some(HeaderError::ReservedNotZero(reserved))
    } else {
        None
    };
    let parsed = Header::parse(bytes, &strict);
    assert_eq!(parsed.err(), expected);
    match Header::parse(bytes, &lax) {
        Ok(h) => {
            assert!(magic_ok && version_ok);
            assert_eq!(&h.to_bytes(), bytes, "header not bit-exact");
            if let Ok(s) = parsed {
                assert_eq!(s, h);
            }
            let mut out = Vec::new();
            h.write(&mut out);
            assert_eq!(out, bytes);
        }
        Err(e) => assert!(
            matches!(
                e,
                HeaderError::BadMagic(_) | HeaderError::UnsupportedVersion(_)
            ),
            "{e:?}"
        ),
    }
}

/// Decodes `data[1..]` as a frame, and as a compressed payload; round-trips what decodes.
///
/// `data[0]` picks the mode: even = `data[1..]` is a whole frame, decoded as a 24-byte
/// frame, as a 12-byte frame, and through `decode_ws` (which picks by the first byte), and
/// as the payload of a 24-byte batch frame (so the binary batch body is read too); odd =
/// `data[1..]` is the payload of a frame flagged COMPRESSED, in both header forms (and also
/// inflated directly by both backends under a small cap, which must agree and never exceed
/// it). Checks: no panic; a decoded message re-encodes in both binary forms and JSON
/// (compressed at threshold 0 and uncompressed; batches with both bodies) and decodes to
/// itself; an arbitrary JSON-string payload survives gzip with every backend.
pub fn frame(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut codec = Codec::default();
    if mode % 2 == 0 {
        if let Ok(msg) = codec.decode(rest) {
            round_trip(&msg);
        }
        if let Ok(msg) = codec.decode_compact(rest) {
            round_trip(&msg);
        }
        if let Ok((msg, _)) = codec.decode_ws(agentwire_core::Frame::Binary(rest)) {
            round_trip(&msg);
        }
        // `rest` as a batch frame's body: the spec's JSON or the real binary body.
        let mut h = Header::new(MessageType::BATCH, 9, Method::UNKNOWN);
        h.flags = Flags::BATCH;
        let mut f = Vec::new();
        if codec.encode_frame(h, rest, &mut f).is_ok() {
            if let Ok(msg) = codec.decode(&f) {
                round_trip(&msg);
            }
        }
    } else {
        let mut h = Header::new(MessageType(mode >> 1), 7, Method(u16::from(mode)));
        h.flags = Flags::COMPRESSED;
        let mut f = Vec::new();
        if codec.encode_frame(h, rest, &mut f).is_ok() {
            // encode_frame clears COMPRESSED and compresses only if smaller: force the flag.
            f[6..8].copy_from_slice(&Flags::COMPRESSED.0.to_be_bytes());
            f.truncate(HEADER_LEN);
            f[20..24].copy_from_slice(&(rest.len() as u32).to_be_bytes());
            f.extend_from_slice(rest);
            if let Ok(msg) = codec.decode(&f) {
                round_trip(&msg);
            }
        }
        let mut c = CompactHeader::new(MessageType(mode >> 1));
        c.flags = COMPACT_COMPRESSED;
        c.size = rest.len() as u32;
        let mut f = c.to_bytes().to_vec();
        f.extend_from_slice(rest);
        if let Ok(msg) = codec.decode_compact(&f) {
            round_trip(&msg);
        }
        let cap = usize::from(mode) * 16;
        let results: Vec<Result<Vec<u8>, GzipError>> = backends()
            .iter()
            .map(|&b| {
                let mut out = Vec::new();
                GzipDecoder::new(b)
                    .decompress(rest, &mut out, cap)
                    .map(|()| out)
            })
            .collect();
        for r in &results {
            match r {
                Ok(out) => assert!(out.len() <= cap),
                Err(GzipError::TooLarge { cap: c }) => assert_eq!(*c, cap),
                Err(_) => {}
            }
        }
        if let (Ok(a), Ok(b)) = (&results[0], &results[1]) {
            assert_eq!(a, b, "backends disagree");
        }
    }
    // Any bytes, as a JSON string param, through gzip with every backend pair.
    let text = String::from_utf8_lossy(rest).into_owned();
    let msg = Message::new(
        MessageType::REQUEST,
        Body::Other(OtherCall::new("tool.execute", Value::String(text))),
    );
    round_trip(&msg);
    for enc in backends() {
        for dec in backends() {
            let mut z = Vec::new();
            GzipEncoder::new(enc, u32::from(mode % 10)).compress(rest, &mut z);
            let mut back = Vec::new();
            GzipDecoder::new(dec)
                .decompress(&z, &mut back, rest.len())
                .expect("own gzip output inflates");
            assert_eq!(back, rest);
        }
    }
}

/// Encodes `msg` compressed (threshold 0) and uncompressed, batches with both bodies, in
/// both binary forms; each must decode to `msg`.
fn round_trip(msg: &Message) {
    let full = msg;
    let msg = Message {
        id: None,
        flags: msg.flags.without(Flags::ENCRYPTED),
        ..msg.clone()
    };
    for (compress, batch) in [
        (true, BatchForm::Json),
        (false, BatchForm::Json),
        (true, BatchForm::Binary),
        (false, BatchForm::Binary),
    ] {
        let mut config = CodecConfig::default();
        config.compression.threshold = 0;
        config.limits.max_payload = u32::MAX;
        config.batch = batch;
        if !compress {
            config.compression.policy = CompressPolicy::Never;
        }
        let mut codec = Codec::new(config);
        // The 12-byte form carries the whole JSON form: the id too, not the sequence id.
        let mut f = Vec::new();
        match codec.encode_compact(full, &mut f) {
            Ok(_) => {
                let back = codec.decode_compact(&f).expect("own 12-byte frame decodes");
                assert_eq!((&back.id, back.kind), (&full.id, full.kind));
                assert_same(&back, full);
            }
            Err(e) => panic!("decoded message does not re-encode in 12 bytes: {e}"),
        }
        let mut f = Vec::new();
        match codec.encode(&msg, &mut f) {
            Ok(_) => {
                let back = codec.decode(&f).expect("own frame decodes");
                assert_eq!(
                    (back.seq, back.kind, back.flags),
                    (msg.seq, msg.kind, msg.flags)
                );
                assert_same(&back, &msg);
            }
            Err(e) => panic!("decoded message does not re-encode: {e}"),
        }
    }
    let mut text = Vec::new();
    if crate::json::encode(&msg, &mut text).is_ok() {
        let lax = Limits {
            max_text: usize::MAX,
            ..Limits::default()
        };
        let back = crate::json::decode(&text, &lax).expect("own JSON decodes");
        assert_same(&back, &msg);
    }
}

/// Asserts two messages have the same body, comparing their JSON forms with floats equal
/// within 1e-12 relative (serde_json's default float parser may be off by one ulp).
fn assert_same(a: &Message, b: &Message) {
    let to_value = |m: &Message| {
        let m = Message {
            id: None,
            ..m.clone()
        };
        serde_json::to_value(&m).expect("serialize")
    };
    let (va, vb) = (to_value(a), to_value(b));
    assert!(close(&va, &vb), "round trip differs:\n{va}\n{vb}");
}

fn close(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            x == y || (x - y).abs() <= 1e-12 * x.abs().max(y.abs())
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| close(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| close(v, w)))
        }
        _ => a == b,
    }
}

/// Feeds `data` to the streaming decoder in chunks whose sizes come from the data itself.
///
/// Checks: no panic; `Ok(None)` consumes nothing; `Ok(Some)` consumes exactly one frame
/// (24 + the header's size); a header error consumes nothing; a payload error consumes the
/// frame; the messages equal those of decoding the same bytes in one buffer.
pub fn stream(data: &[u8]) {
    let mut whole = BytesMut::from(data);
    let expected = drain(&mut Codec::default(), &mut whole);

    let mut codec = Codec::default();
    let mut buf = BytesMut::new();
    let mut got = Vec::new();
    let mut pos = 0;
    let mut i = 0;
    while pos < data.len() {
        let step = 1 + usize::from(data[i % data.len()]) * 3;
        i += 1;
        let end = (pos + step).min(data.len());
        buf.extend_from_slice(&data[pos..end]);
        pos = end;
        let more = drain(&mut codec, &mut buf);
        let stop = matches!(more.last(), Some(Err(e)) if e.starts_with("header"));
        got.extend(more);
        if stop {
            break;
        }
    }
    assert_eq!(got, expected, "chunked and whole decoding differ");
}

/// Decodes frames from `buf` until it needs more bytes or the header is bad; one line per
/// outcome.
fn drain(codec: &mut Codec, buf: &mut BytesMut) -> Vec<Result<String, String>> {
    let mut out = Vec::new();
    for _ in 0..10_000 {
        let before = buf.len();
        let size = buf
            .first_chunk::<HEADER_LEN>()
            .map(|h| u32::from_be_bytes([h[20], h[21], h[22], h[23]]) as usize);
        match codec.decode_stream(buf) {
            Ok(None) => {
                assert_eq!(buf.len(), before, "Ok(None) consumed bytes");
                break;
            }
            Ok(Some(m)) => {
                assert_eq!(before - buf.len(), HEADER_LEN + size.expect("header"));
                out.push(Ok(format!("{m:?}")));
            }
            Err(DecodeError::Header(e)) => {
                assert_eq!(buf.len(), before, "header error consumed bytes");
                out.push(Err(format!("header {e}")));
                break;
            }
            Err(e) => {
                assert_eq!(before - buf.len(), HEADER_LEN + size.expect("header"));
                out.push(Err(format!("{e}")));
            }
        }
    }
    out
}

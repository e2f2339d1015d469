//! The binary form as the orchestrator uses it: a 24-byte big-endian MCPW header whose
//! payload is the message's JSON form.

use agentwire_core::FrameBuf;

use super::wire::{self, codes, Form, Inbound, Outbound, ReplyKey, WireError};

const MAGIC: [u8; 4] = *b"MCPW";
const HEADER_LEN: usize = 24;
const FLAG_COMPRESSED: u16 = 1;

/// Decodes a binary frame: header checks (magic, version, size), then the JSON payload.
pub(crate) fn decode(b: &[u8], max_bytes: usize) -> Result<Inbound, WireError> {
    let err = |code, reply, detail: &str| WireError {
        form: Form::Binary,
        code,
        reply,
        detail: detail.to_owned(),
    };
    if b.len() < HEADER_LEN {
        return Err(err(
            codes::INVALID_MESSAGE,
            ReplyKey::None,
            "truncated header",
        ));
    }
    if b[0..4] != MAGIC {
        return Err(err(
            codes::INVALID_MESSAGE,
            ReplyKey::None,
            "invalid magic number",
        ));
    }
    if b[4] != 1 {
        return Err(err(
            codes::INVALID_MESSAGE,
            ReplyKey::None,
            "unsupported protocol version",
        ));
    }
    let mut seq = [0u8; 8];
    seq.copy_from_slice(&b[8..16]);
    let reply = ReplyKey::Seq(u64::from_be_bytes(seq));
    let flags = u16::from_be_bytes([b[6], b[7]]);
    let size = u32::from_be_bytes([b[20], b[21], b[22], b[23]]) as usize;
    if size > max_bytes {
        return Err(err(codes::CONTEXT_TOO_LARGE, reply, "payload too large"));
    }
    if b.len() - HEADER_LEN != size {
        return Err(err(
            codes::INVALID_MESSAGE,
            reply,
            "data size does not match the frame",
        ));
    }
    if flags & FLAG_COMPRESSED != 0 {
        return Err(err(
            codes::INVALID_MESSAGE,
            reply,
            "compressed payloads are not supported",
        ));
    }
    let mut msg = wire::decode_json(&b[HEADER_LEN..], Form::Binary).map_err(|mut e| {
        e.reply = reply.clone();
        e
    })?;
    msg.msg_type = b[5];
    msg.reply = reply;
    Ok(msg)
}

/// Encodes `msg` as a binary frame (the sequence id from its reply key, 0 if none).
pub(crate) fn encode(msg: &Outbound<'_>) -> FrameBuf {
    let seq = match msg.reply {
        ReplyKey::Seq(n) => *n,
        _ => 0,
    };
    let json = wire::encode_json(msg);
    let mut out = Vec::with_capacity(HEADER_LEN + json.len());
    out.extend_from_slice(&MAGIC);
    out.push(1);
    out.push(msg.msg_type);
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&seq.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&u32::try_from(json.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(json.as_bytes());
    FrameBuf::binary(out)
}

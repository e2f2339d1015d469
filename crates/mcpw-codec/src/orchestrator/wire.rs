//! The orchestrator's envelope layer: one inbound frame as typed [`Message`]s with the key
//! its replies are matched by, and replies encoded in the form the peer uses.

use agentwire_core::{Frame, FrameBuf};
use serde::Serialize;

use crate::compact::{is_compact, COMPACT_COMPRESSED};
use crate::config::{BatchForm, CodecConfig, CompressPolicy};
use crate::error::{ErrorBody, ErrorCode, ProtocolError};
use crate::json::{self, Shallow};
use crate::{Body, Codec, Form, Message, MessageType, OtherCall, MAGIC};

/// What a reply must carry to be matched to its message: the JSON `id` or the header's
/// sequence id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum ReplyKey {
    /// The JSON form's `id`.
    Id(String),
    /// The binary form's sequence id.
    Seq(u64),
    /// The message had no id.
    None,
}

impl ReplyKey {
    /// Sets `m`'s id or sequence id to this key.
    pub(crate) fn stamp(&self, m: &mut Message) {
        match self {
            Self::Id(id) => m.id = Some(id.clone()),
            Self::Seq(n) => m.seq = *n,
            Self::None => {}
        }
    }

    /// The key replies to `msg`, received in `form`, are matched by.
    fn of(msg: &Message, form: Form) -> Self {
        match form {
            Form::Json | Form::Compact => msg.id.clone().map_or(Self::None, Self::Id),
            Form::Binary => Self::Seq(msg.seq),
        }
    }
}

/// One decoded message and where its replies go.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Inbound {
    /// The form it came in.
    pub(crate) form: Form,
    /// Its id (JSON forms) or sequence id (24-byte form).
    pub(crate) reply: ReplyKey,
    /// Its type.
    pub(crate) kind: MessageType,
    /// What it says.
    pub(crate) body: Body,
}

impl Inbound {
    /// The method it names (`None` for errors, and for calls without a name).
    pub(crate) fn method(&self) -> Option<&str> {
        self.body.method().filter(|m| !m.is_empty())
    }
}

/// A frame or batch entry the codec refused, with the key its error reply carries.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BadFrame {
    /// The form of the frame.
    pub(crate) form: Form,
    /// The id recovered, if any.
    pub(crate) reply: ReplyKey,
    /// What was wrong ([`ProtocolError::Undecodable`]).
    pub(crate) error: ProtocolError,
    /// The method whose params were refused (4005 only).
    pub(crate) method: Option<&'static str>,
}

/// A batch as the orchestrator handles it: each entry decoded on its own, so a bad entry
/// gets its own error and the others are still handled.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct InboundBatch {
    /// The form of the frame that carried it.
    pub(crate) form: Form,
    /// The batch's own id (JSON and 12-byte forms) or sequence id (24-byte form).
    pub(crate) reply: ReplyKey,
    /// The body it came in (24-byte form: the spec's JSON or the real code's binary body).
    pub(crate) body: BatchForm,
    /// Each entry, decoded or refused, in order. Entries are messages in their JSON form, so
    /// each is answered by its `id` (and carries [`Form::Json`] when the batch came in a
    /// 24-byte frame, which has no place for an id).
    pub(crate) entries: Vec<Result<Inbound, BadFrame>>,
}

/// What one frame carried: a message, or a batch whose entries are answered one by one.
// A message is what nearly every frame carries: boxing it would cost an allocation per
// frame to save stack space in the rarer batch.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decoded {
    /// One message (boxed: a batch is small beside it).
    One(Box<Inbound>),
    /// A batch (type 6) in any form.
    Batch(InboundBatch),
}

/// The form a frame is in.
pub(crate) fn form_of(frame: Frame<'_>) -> Form {
    match frame {
        Frame::Text(_) => Form::Json,
        Frame::Binary(b) if is_compact(b) => Form::Compact,
        Frame::Binary(_) => Form::Binary,
    }
}

/// A connection's codec, sized by the orchestrator's limits: `max_bytes` bounds a text
/// frame, a binary payload on the wire, and (times ten) an inflated payload; `max_depth`
/// the nesting of a message; `policy` when outgoing payloads are gzipped.
pub(crate) fn codec_for(max_bytes: usize, max_depth: usize, policy: CompressPolicy) -> Codec {
    let mut config = CodecConfig::default();
    config.compression.policy = policy;
    config.limits.max_json_depth = max_depth;
    config.limits.max_payload = u32::try_from(max_bytes).unwrap_or(u32::MAX);
    config.limits.max_text = max_bytes;
    config.limits.max_decompressed = max_bytes.saturating_mul(10);
    Codec::new(config)
}

/// Decodes one frame with the connection's codec (text: the JSON form; binary: the 24-byte
/// or the 12-byte form, gzip, method code, typed params).
pub(crate) fn decode(codec: &mut Codec, frame: Frame<'_>) -> Result<Decoded, BadFrame> {
    let limits = json::entry_limits(codec.limits());
    let (shallow, form) = codec
        .decode_ws_shallow(frame)
        .map_err(|e| bad_frame(&e, form_of(frame), key_of_bad(frame)))?;
    match shallow {
        Shallow::One(msg) => Ok(Decoded::One(Box::new(Inbound {
            form,
            reply: ReplyKey::of(&msg, form),
            kind: msg.kind,
            body: msg.body,
        }))),
        Shallow::Batch {
            id,
            seq,
            form: body,
            entries,
        } => {
            let reply = match form {
                Form::Binary => ReplyKey::Seq(seq),
                Form::Json | Form::Compact => id.map_or(ReplyKey::None, ReplyKey::Id),
            };
            // Entries are messages in their JSON form, matched by id: an answer that leaves
            // after the batch's reply (a collaboration's) must carry that id, which a 24-byte
            // frame cannot, so it goes in the JSON form; in the other forms it goes in theirs.
            let entry_form = match form {
                Form::Binary => Form::Json,
                f => f,
            };
            let entries = entries
                .into_iter()
                .map(|text| match json::decode_entry(text, &limits) {
                    Ok(msg) => Ok(Inbound {
                        form: entry_form,
                        reply: ReplyKey::of(&msg, entry_form),
                        kind: msg.kind,
                        body: msg.body,
                    }),
                    Err(e) => Err(bad_frame(&e, entry_form, key_of_bad(Frame::Text(text)))),
                })
                .collect();
            Ok(Decoded::Batch(InboundBatch {
                form,
                reply,
                body,
                entries,
            }))
        }
    }
}

/// A decode error as the orchestrator answers it.
fn bad_frame(e: &crate::DecodeError, form: Form, reply: ReplyKey) -> BadFrame {
    BadFrame {
        form,
        reply,
        error: ProtocolError::from(e),
        method: match e {
            crate::DecodeError::InvalidParams { method, .. } => Some(method),
            _ => None,
        },
    }
}

/// The id (JSON) or sequence id (binary header) of a frame the codec refused or the
/// orchestrator will not decode (rate limit, size), if it can be read: the error reply
/// carries it. Only on these error paths is a text frame parsed again; a binary frame's
/// sequence id is read from its header bytes 8-16 without checking the rest.
pub(crate) fn key_of_bad(frame: Frame<'_>) -> ReplyKey {
    #[derive(serde::Deserialize)]
    struct IdOnly {
        id: Option<String>,
    }
    match frame {
        Frame::Binary(b) if b.len() >= 16 && b[..4] == MAGIC => {
            let mut s = [0u8; 8];
            s.copy_from_slice(&b[8..16]);
            ReplyKey::Seq(u64::from_be_bytes(s))
        }
        Frame::Text(t) => match serde_json::from_str::<IdOnly>(t) {
            Ok(IdOnly { id: Some(id) }) => ReplyKey::Id(id),
            _ => ReplyKey::None,
        },
        // The 12-byte form: the id inside an uncompressed payload.
        Frame::Binary(b) if is_compact(b) && b.len() >= 12 && b[1] & COMPACT_COMPRESSED == 0 => {
            match serde_json::from_slice::<IdOnly>(&b[12..]) {
                Ok(IdOnly { id: Some(id) }) => ReplyKey::Id(id),
                _ => ReplyKey::None,
            }
        }
        Frame::Binary(_) => ReplyKey::None,
    }
}

/// The body of a reply that names no method (or `method`, for a ping's pong): `result` as
/// the raw params the codec writes for a call without a typed body.
pub(crate) fn result_body(method: Option<&str>, result: &impl Serialize) -> Body {
    match serde_json::to_value(result) {
        Ok(params) => Body::Other(OtherCall::new(method.unwrap_or_default(), params)),
        Err(e) => Body::Error(ErrorBody::new(ErrorCode::SERVER_ERROR, e.to_string())),
    }
}

/// Encodes `m` in `form`: a 12-byte frame gzipped above `compact_threshold` (`None`:
/// never), a batch in a 24-byte frame with the body `batch`.
pub(crate) fn encode_message(
    codec: &mut Codec,
    form: Form,
    m: &Message,
    compact_threshold: Option<usize>,
    batch: BatchForm,
) -> FrameBuf {
    let mut out = Vec::new();
    let encoded = match form {
        Form::Compact => codec
            .encode_compact_with(m, compact_threshold, &mut out)
            .map(|_| FrameBuf::binary(out)),
        Form::Binary => codec
            .encode_with_batch(m, batch, &mut out)
            .map(|_| FrameBuf::binary(out)),
        Form::Json => codec.encode_ws(m, form),
    };
    match encoded {
        Ok(f) => f,
        Err(e) => {
            // Only reachable for a message over the payload limit: say so instead.
            let mut err = Message::error(ErrorBody::new(ErrorCode::SERVER_ERROR, e.to_string()));
            err.id.clone_from(&m.id);
            err.seq = m.seq;
            codec
                .encode_ws(&err, form)
                .unwrap_or_else(|_| FrameBuf::text(String::new()))
        }
    }
}

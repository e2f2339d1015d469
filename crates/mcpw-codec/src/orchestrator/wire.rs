//! The orchestrator's envelope layer: one inbound message in either form, and the
//! replies and requests it sends back in the form the peer uses.

use agentwire_core::{Frame, FrameBuf};
use serde_json::{json, Value};

use crate::compact::{is_compact, COMPACT_COMPRESSED};
use crate::json::{self, Shallow};
use crate::{
    BatchForm, Body, Codec, CodecConfig, DecodeError, ErrorBody, ErrorCode, Message, MessageType,
    OtherCall, MAGIC,
};

/// Error codes of the spec (4000-4008): the codec's [`ErrorCode`]s as
/// the numbers the orchestrator's events and metrics carry.
pub mod codes {
    /// Malformed message structure.
    pub const INVALID_MESSAGE: u16 = crate::ErrorCode::INVALID_MESSAGE.0 as u16;
    /// Invalid credentials or token.
    pub const AUTHENTICATION_FAILED: u16 = crate::ErrorCode::AUTHENTICATION_FAILED.0 as u16;
    /// Too many requests.
    pub const RATE_LIMITED: u16 = crate::ErrorCode::RATE_LIMITED.0 as u16;
    /// Internal server error (also: a server limit was reached).
    pub const SERVER_ERROR: u16 = crate::ErrorCode::SERVER_ERROR.0 as u16;
    /// Unknown method.
    pub const METHOD_NOT_FOUND: u16 = crate::ErrorCode::METHOD_NOT_FOUND.0 as u16;
    /// Invalid method parameters.
    pub const INVALID_PARAMS: u16 = crate::ErrorCode::INVALID_PARAMS.0 as u16;
    /// Task or operation cancelled.
    pub const OPERATION_CANCELLED: u16 = crate::ErrorCode::OPERATION_CANCELLED.0 as u16;
    /// Message exceeds size limit.
    pub const CONTEXT_TOO_LARGE: u16 = crate::ErrorCode::CONTEXT_TOO_LARGE.0 as u16;
    /// State conflict detected.
    pub const CONFLICT: u16 = crate::ErrorCode::CONFLICT.0 as u16;

    /// The metric status label of a code.
    pub fn status(code: u16) -> &'static str {
        match code {
            INVALID_MESSAGE => "invalid_message",
            AUTHENTICATION_FAILED => "authentication_failed",
            RATE_LIMITED => "rate_limited",
            SERVER_ERROR => "server_error",
            METHOD_NOT_FOUND => "method_not_found",
            INVALID_PARAMS => "invalid_params",
            OPERATION_CANCELLED => "operation_cancelled",
            CONTEXT_TOO_LARGE => "context_too_large",
            CONFLICT => "conflict",
            _ => "error",
        }
    }
}

/// MCPW message types (the header's `Type` byte, the JSON form's `type`).
pub mod types {
    /// Client request.
    pub const REQUEST: u8 = 0;
    /// Server response.
    pub const RESPONSE: u8 = 1;
    /// Async notification.
    pub const NOTIFICATION: u8 = 2;
    /// Error message.
    pub const ERROR: u8 = 3;
    /// Keepalive ping.
    pub const PING: u8 = 4;
    /// Keepalive pong.
    pub const PONG: u8 = 5;
    /// Batch of messages.
    pub const BATCH: u8 = 6;
    /// Progress update.
    pub const PROGRESS: u8 = 7;

    /// The metric label of a type.
    pub fn name(t: u8) -> &'static str {
        match t {
            REQUEST => "request",
            RESPONSE => "response",
            NOTIFICATION => "notification",
            ERROR => "error",
            PING => "ping",
            PONG => "pong",
            BATCH => "batch",
            PROGRESS => "progress",
            _ => "unknown",
        }
    }
}

pub use crate::Form;

/// The metric label of a form (`json` / `binary`).
pub fn form_label(form: Form) -> &'static str {
    match form {
        Form::Json => "json",
        Form::Binary => "binary",
        Form::Compact => "compact",
    }
}

/// What a reply must carry to be matched to its message: the JSON `id` or the header's
/// sequence id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReplyKey {
    /// The JSON form's `id` (a string, or a number kept as its text).
    Id(String),
    /// The binary form's sequence id.
    Seq(u64),
    /// The message had no id.
    None,
}

/// One decoded message (either form).
#[derive(Debug, Clone, PartialEq)]
pub struct Inbound {
    /// The form it came in.
    pub form: Form,
    /// Its id (JSON) or sequence id (binary).
    pub reply: ReplyKey,
    /// Its MCPW message type.
    pub msg_type: u8,
    /// `None` when the message names no method (responses and errors may not).
    pub method: Option<String>,
    /// The binary method code it came with (0 when none, or when the name travelled in
    /// the payload): a non-zero code without a name is a method this side does not know.
    pub code: u16,
    /// `params` (requests, notifications, progress), `result` (responses) or `error`.
    pub body: Value,
}

/// Why a frame could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError {
    /// The form of the frame.
    pub form: Form,
    /// The error code to answer with (4000 or 4007).
    pub code: u16,
    /// The id recovered, if any.
    pub reply: ReplyKey,
    /// What was wrong.
    pub detail: String,
    /// The error's `data` (`{"field", "reason"}` for bad params).
    pub data: Option<Value>,
    /// The method whose params were refused (4005 only).
    pub method: Option<&'static str>,
}

/// A connection's codec, sized by the orchestrator's limits: `max_bytes` bounds a text
/// frame, a binary payload on the wire, and (times ten) an inflated payload; `max_depth`
/// the nesting of a message.
pub(crate) fn codec_for(max_bytes: usize, max_depth: usize) -> Codec {
    let mut config = CodecConfig::default();
    config.limits.max_json_depth = max_depth;
    config.limits.max_payload = u32::try_from(max_bytes).unwrap_or(u32::MAX);
    config.limits.max_text = max_bytes;
    config.limits.max_decompressed = max_bytes.saturating_mul(10);
    Codec::new(config)
}

/// What one frame carried: a message, or a batch whose entries are answered one by one.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    /// One message.
    One(Inbound),
    /// A batch (type 6) in any form.
    Batch(InboundBatch),
}

/// A batch as the orchestrator handles it: each entry decoded on its own, so a bad entry
/// gets its own error and the others are still handled.
#[derive(Debug, Clone, PartialEq)]
pub struct InboundBatch {
    /// The form of the frame that carried it.
    pub form: Form,
    /// The batch's own id (JSON and 12-byte forms) or sequence id (24-byte form).
    pub reply: ReplyKey,
    /// The body it came in (24-byte form: the spec's JSON or the real code's binary body).
    pub body: BatchForm,
    /// Each entry, decoded or refused, in order. Entries are messages in their JSON form, so
    /// each is answered by its `id` (and carries [`Form::Json`] when the batch came in a
    /// 24-byte frame, which has no place for an id).
    pub entries: Vec<Result<Inbound, WireError>>,
}

/// Decodes one frame with the connection's codec (text: the JSON form; binary: the 24-byte
/// or the 12-byte form, gzip, method code, params) into the orchestrator's view of it.
pub fn decode(codec: &mut Codec, frame: Frame<'_>) -> Result<Decoded, WireError> {
    let form = match frame {
        Frame::Text(_) => Form::Json,
        Frame::Binary(b) if is_compact(b) => Form::Compact,
        Frame::Binary(_) => Form::Binary,
    };
    let limits = json::entry_limits(codec.limits());
    let (shallow, form) = codec
        .decode_ws_shallow(frame)
        .map_err(|e| wire_error(&e, form, key_of_bad(frame)))?;
    match shallow {
        Shallow::One(msg) => inbound(*msg, form).map(Decoded::One),
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
                    Ok(msg) => inbound(msg, entry_form),
                    Err(e) => Err(wire_error(&e, entry_form, key_of_bad(Frame::Text(text)))),
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

/// The orchestrator's view of a decoded message; replies to a `form` message are matched
/// by its id (JSON forms) or sequence id (24-byte form).
fn inbound(msg: Message, form: Form) -> Result<Inbound, WireError> {
    let reply = match form {
        Form::Json | Form::Compact => msg.id.clone().map_or(ReplyKey::None, ReplyKey::Id),
        Form::Binary => ReplyKey::Seq(msg.seq),
    };
    let method = msg.method().filter(|m| !m.is_empty()).map(str::to_owned);
    let code = msg.body.code().0;
    let body = body_value(msg.body).map_err(|e| WireError {
        form,
        code: codes::INVALID_MESSAGE,
        reply: reply.clone(),
        detail: e.to_string(),
        data: None,
        method: None,
    })?;
    Ok(Inbound {
        form,
        reply,
        msg_type: msg.kind.0,
        method,
        code,
        body,
    })
}

/// A decode error as the orchestrator answers it.
fn wire_error(e: &DecodeError, form: Form, reply: ReplyKey) -> WireError {
    let body = e.to_error_body();
    WireError {
        form,
        code: code_u16(body.code),
        reply,
        detail: body.message,
        data: body.data,
        method: match e {
            DecodeError::InvalidParams { method, .. } => Some(method),
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

/// The params (or error object) of a decoded body, as JSON for the orchestrator's checks.
fn body_value(body: Body) -> serde_json::Result<Value> {
    match body {
        Body::AgentRegister(p) => serde_json::to_value(p),
        Body::RegistrationConfirmed(p) => serde_json::to_value(p),
        Body::AgentHeartbeat(p) => serde_json::to_value(p),
        Body::TaskAssigned(p) => serde_json::to_value(p),
        Body::TaskProgress(p) => serde_json::to_value(p),
        Body::TaskComplete(p) => serde_json::to_value(p),
        Body::CapabilityUpdate(p) => serde_json::to_value(p),
        Body::CollaborationRequest(p) => serde_json::to_value(p),
        Body::StateSync(p) => serde_json::to_value(p),
        Body::AgentShutdown(p) => serde_json::to_value(p),
        Body::Error(e) => serde_json::to_value(e),
        // Batches are not part of the orchestrator's protocol: handed on as a method the
        // machine answers with 4004.
        Body::Batch(_) => Ok(Value::Null),
        Body::Other(c) => Ok(c.params),
    }
}

/// One message to encode.
#[derive(Debug, Clone, PartialEq)]
pub struct Outbound<'a> {
    /// Its MCPW message type.
    pub msg_type: u8,
    /// Its method, if any.
    pub method: Option<&'a str>,
    /// Its id / sequence id (or the one it answers).
    pub reply: &'a ReplyKey,
    /// `params`, `result` or the error object, by type.
    pub body: &'a Value,
}

/// Encodes `msg` in `form` with the connection's codec: the method's code from the codec's
/// [`Method`](crate::Method) table in the binary header, gzip above the threshold, errors as
/// the codec's [`ErrorBody`].
pub fn encode(codec: &mut Codec, form: Form, msg: &Outbound<'_>) -> FrameBuf {
    let threshold = Some(codec.config().compression.threshold);
    encode_message(codec, form, &message(msg), threshold, BatchForm::Json)
}

/// The codec's [`Message`] for `msg`.
pub(crate) fn message(msg: &Outbound<'_>) -> Message {
    let body = if msg.msg_type == types::ERROR {
        match serde_json::from_value::<ErrorBody>(msg.body.clone()) {
            Ok(e) => Body::Error(e),
            Err(_) => Body::Error(ErrorBody::new(
                ErrorCode::SERVER_ERROR,
                "unencodable error".to_owned(),
            )),
        }
    } else {
        Body::Other(OtherCall::new(
            msg.method.unwrap_or_default(),
            msg.body.clone(),
        ))
    };
    let mut m = Message::new(MessageType(msg.msg_type), body);
    match msg.reply {
        ReplyKey::Id(id) => m.id = Some(id.clone()),
        ReplyKey::Seq(n) => m.seq = *n,
        ReplyKey::None => {}
    }
    m
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

/// The wire number of an error code (the spec's are 4000-4008).
pub(crate) fn code_u16(code: ErrorCode) -> u16 {
    u16::try_from(code.0).unwrap_or(codes::SERVER_ERROR)
}

/// The error body `{code, message, data?}`.
pub(crate) fn error_body(code: u16, message: &str, data: Option<Value>) -> Value {
    let mut v = json!({"code": code, "message": message});
    if let Some(d) = data {
        v["data"] = d;
    }
    v
}

//! The orchestrator's envelope layer: one inbound message in either form, and the
//! replies and requests it sends back in the form the peer uses.

use agentwire_core::{Frame, FrameBuf};
use serde_json::{json, Value};

/// Error codes of the spec (4000-4008).
pub mod codes {
    /// Malformed message structure.
    pub const INVALID_MESSAGE: u16 = 4000;
    /// Invalid credentials or token.
    pub const AUTHENTICATION_FAILED: u16 = 4001;
    /// Too many requests.
    pub const RATE_LIMITED: u16 = 4002;
    /// Internal server error (also: a server limit was reached).
    pub const SERVER_ERROR: u16 = 4003;
    /// Unknown method.
    pub const METHOD_NOT_FOUND: u16 = 4004;
    /// Invalid method parameters.
    pub const INVALID_PARAMS: u16 = 4005;
    /// Task or operation cancelled.
    pub const OPERATION_CANCELLED: u16 = 4006;
    /// Message exceeds size limit.
    pub const CONTEXT_TOO_LARGE: u16 = 4007;
    /// State conflict detected.
    pub const CONFLICT: u16 = 4008;

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

/// Which form a peer speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Form {
    /// JSON in text frames.
    Json,
    /// The 24-byte header and a (possibly gzip-compressed) JSON payload, in binary frames.
    Binary,
}

impl Form {
    /// The metric label (`json` / `binary`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Json => "json",
            Self::Binary => "binary",
        }
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

impl ReplyKey {
    fn to_json(&self) -> Value {
        match self {
            Self::Id(s) => Value::String(s.clone()),
            Self::Seq(n) => Value::from(*n),
            Self::None => Value::Null,
        }
    }
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
}

/// Decodes one frame (text: the JSON form; binary: header and payload); `max_bytes`
/// bounds a binary payload.
pub fn decode(frame: Frame<'_>, max_bytes: usize) -> Result<Inbound, WireError> {
    match frame {
        Frame::Text(t) => decode_json(t.as_bytes(), Form::Json),
        Frame::Binary(b) => super::binary::decode(b, max_bytes),
    }
}

/// Decodes the JSON form (`{"id","type","method","params"|"result"|"error"}`).
pub(crate) fn decode_json(bytes: &[u8], form: Form) -> Result<Inbound, WireError> {
    let invalid = |reply: ReplyKey, detail: String| WireError {
        form,
        code: codes::INVALID_MESSAGE,
        reply,
        detail,
    };
    let v: Value = serde_json::from_slice(bytes)
        .map_err(|e| invalid(ReplyKey::None, format!("not JSON: {e}")))?;
    let Value::Object(mut obj) = v else {
        return Err(invalid(ReplyKey::None, "not a JSON object".into()));
    };
    let reply = match obj.get("id") {
        None | Some(Value::Null) => ReplyKey::None,
        Some(Value::String(s)) => ReplyKey::Id(s.clone()),
        Some(Value::Number(n)) => ReplyKey::Id(n.to_string()),
        Some(_) => return Err(invalid(ReplyKey::None, "id must be a string".into())),
    };
    let msg_type = match obj.get("type") {
        None | Some(Value::Null) => types::REQUEST,
        Some(v) => match v.as_u64().and_then(|n| u8::try_from(n).ok()) {
            Some(t) => t,
            None => return Err(invalid(reply, "type must be an integer 0-255".into())),
        },
    };
    let method = match obj.get("method") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(invalid(reply, "method must be a string".into())),
    };
    let key = match msg_type {
        types::RESPONSE => "result",
        types::ERROR => "error",
        _ => "params",
    };
    let body = obj.remove(key).unwrap_or(Value::Null);
    Ok(Inbound {
        form,
        reply,
        msg_type,
        method,
        body,
    })
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
    /// `params`, `result` or `error`, by type.
    pub body: &'a Value,
}

/// Encodes `msg` in `form` (text frame for JSON, binary frame with the header).
pub fn encode(form: Form, msg: &Outbound<'_>) -> FrameBuf {
    match form {
        Form::Json => FrameBuf::text(encode_json(msg)),
        Form::Binary => super::binary::encode(msg),
    }
}

/// The JSON form of `msg`.
pub(crate) fn encode_json(msg: &Outbound<'_>) -> String {
    let mut obj = serde_json::Map::new();
    if *msg.reply != ReplyKey::None {
        obj.insert("id".into(), msg.reply.to_json());
    }
    obj.insert("type".into(), Value::from(msg.msg_type));
    if let Some(m) = msg.method {
        obj.insert("method".into(), Value::String(m.to_owned()));
    }
    let key = match msg.msg_type {
        types::RESPONSE => "result",
        types::ERROR => "error",
        _ => "params",
    };
    if !msg.body.is_null() || key != "params" {
        obj.insert(key.into(), msg.body.clone());
    }
    Value::Object(obj).to_string()
}

/// The error body `{code, message, data?}`.
pub(crate) fn error_body(code: u16, message: &str, data: Option<Value>) -> Value {
    let mut v = json!({"code": code, "message": message});
    if let Some(d) = data {
        v["data"] = d;
    }
    v
}

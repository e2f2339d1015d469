//! The JSON-RPC 2.0 envelope: ids, the `"2.0"` marker, owned request, notification and
//! response types for building messages, error codes (an open newtype) and the error object.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Number;

agentwire_core::open_codes! {
    /// A JSON-RPC error code. Open: unknown codes from the wire survive a round trip.
    pub struct ErrorCode(i32) [with_value, serde], text fn message;
    /// -32700: the message is not JSON (or not UTF-8). Always answered with `id: null`.
    PARSE_ERROR = -32700, "Parse error";
    /// -32600: valid JSON that is not a valid request object; the spec also names it for a
    /// missing or empty `topic`.
    INVALID_REQUEST = -32600, "Invalid Request";
    /// -32601: no such method.
    METHOD_NOT_FOUND = -32601, "Method not found";
    /// -32602: params of the wrong shape.
    INVALID_PARAMS = -32602, "Invalid params";
    /// -32603: the bus failed internally.
    INTERNAL_ERROR = -32603, "Internal error";
    /// -32000 (ours): a method other than `initialize` before `initialize`. The reference bus
    /// uses -32001 here, which the spec assigns to "Already initialized"; we keep the two apart.
    NOT_INITIALIZED = -32000, "Not initialized";
    /// -32001: a second `initialize` on one connection.
    ALREADY_INITIALIZED = -32001, "Already initialized";
    /// -32002: `clientInfo` is neither `null` nor an object with string `name`/`version`.
    INVALID_CLIENT_INFO = -32002, "Invalid client info";
    /// -32003: `subscribe` to a topic string this connection already subscribed to.
    ALREADY_SUBSCRIBED = -32003, "Already subscribed";
    /// -32004: `unsubscribe` from a topic string this connection never subscribed to.
    SUBSCRIPTION_NOT_FOUND = -32004, "Subscription not found";
    /// -32005 (ours): a configured limit was reached (message size, batch length,
    /// subscriptions, pending publishes, connections); `data` names the limit.
    LIMIT_EXCEEDED = -32005, "Limit exceeded";
}

/// The JSON-RPC `error` member: `{code, message, data?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// The code.
    pub code: ErrorCode,
    /// A short description.
    pub message: String,
    /// Optional details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

impl ErrorObject {
    /// An error with the code's standard message.
    pub fn new(code: ErrorCode) -> Self {
        Self {
            code,
            message: code.message().unwrap_or("Server error").to_owned(),
            data: None,
        }
    }

    /// An error with the code's standard message and a `data` string.
    pub fn with_data(code: ErrorCode, data: impl Into<String>) -> Self {
        Self {
            data: Some(serde_json::Value::String(data.into())),
            ..Self::new(code)
        }
    }
}

impl fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.code.0, self.message)?;
        if let Some(data) = &self.data {
            write!(f, " ({data})")?;
        }
        Ok(())
    }
}

/// The `"jsonrpc": "2.0"` member: serializes as `"2.0"` and accepts nothing else.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct JsonRpc2;

impl Serialize for JsonRpc2 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("2.0")
    }
}

impl<'de> Deserialize<'de> for JsonRpc2 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v: Cow<'de, str> = Deserialize::deserialize(d)?;
        if v == "2.0" {
            Ok(Self)
        } else {
            Err(de::Error::invalid_value(
                de::Unexpected::Str(&v),
                &"the string \"2.0\"",
            ))
        }
    }
}

/// A request id: a string, a number or `null`, echoed back exactly as received.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Id {
    /// `null` (also the id of errors for messages whose id could not be read).
    #[default]
    Null,
    /// A number.
    Number(Number),
    /// A string (the reference uses UUID strings).
    Str(String),
}

impl Id {
    /// Reads an id from its raw JSON; `None` if it is not a string, number or null.
    pub fn from_raw(raw: &RawValue) -> Option<Self> {
        let text = raw.get();
        match text.as_bytes().first()? {
            b'"' => raw_str(raw).map(|s| Self::Str(s.into_owned())),
            b'n' => Some(Self::Null),
            b'-' | b'0'..=b'9' => raw_number(text).map(Self::Number),
            _ => None,
        }
    }

    /// The id as a string, if it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Appends the id's JSON to `out`.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Self::Null => out.extend_from_slice(b"null"),
            Self::Number(n) => match n.as_u64() {
                Some(n) => out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes()),
                // Negative and fractional ids: serde_json's own formatting.
                None => out.extend_from_slice(n.to_string().as_bytes()),
            },
            Self::Str(s) => write_json_str(out, s),
        }
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Null => f.write_str("null"),
            Self::Number(n) => write!(f, "{n}"),
            Self::Str(s) => write!(f, "{s:?}"),
        }
    }
}

impl From<u64> for Id {
    fn from(v: u64) -> Self {
        Self::Number(v.into())
    }
}

impl From<String> for Id {
    fn from(v: String) -> Self {
        Self::Str(v)
    }
}

impl From<&str> for Id {
    fn from(v: &str) -> Self {
        Self::Str(v.to_owned())
    }
}

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Null => s.serialize_unit(),
            Self::Number(n) => n.serialize(s),
            Self::Str(v) => s.serialize_str(v),
        }
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Null => Ok(Self::Null),
            serde_json::Value::Number(n) => Ok(Self::Number(n)),
            serde_json::Value::String(s) => Ok(Self::Str(s)),
            _ => Err(de::Error::custom("id must be a string, a number or null")),
        }
    }
}

/// A request (owned), for building or inspecting messages; `P` is the params type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(bound(deserialize = "P: Deserialize<'de>"))]
pub struct Request<P = Box<RawValue>> {
    /// Always `"2.0"`.
    pub jsonrpc: JsonRpc2,
    /// Method name.
    pub method: String,
    /// Params (omitted when `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<P>,
    /// Request id.
    pub id: Id,
}

impl<P> Request<P> {
    /// A request.
    pub fn new(id: impl Into<Id>, method: impl Into<String>, params: P) -> Self {
        Self {
            jsonrpc: JsonRpc2,
            method: method.into(),
            params: Some(params),
            id: id.into(),
        }
    }
}

/// A notification (owned): a request without an id, never answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(bound(deserialize = "P: Deserialize<'de>"))]
pub struct Notification<P = Box<RawValue>> {
    /// Always `"2.0"`.
    pub jsonrpc: JsonRpc2,
    /// Method name.
    pub method: String,
    /// Params (omitted when `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<P>,
}

/// The outcome carried by a [`Response`]: `result` or `error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome<R> {
    /// `"result": R`.
    Result(R),
    /// `"error": {code, message, data?}`.
    Error(ErrorObject),
}

/// A response (owned): `{"jsonrpc":"2.0","result"|"error":...,"id":...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response<R = Box<RawValue>> {
    /// Always `"2.0"`.
    pub jsonrpc: JsonRpc2,
    /// Result or error.
    #[serde(flatten)]
    pub outcome: Outcome<R>,
    /// The id of the request answered.
    pub id: Id,
}

impl<R> Response<R> {
    /// A success response.
    pub fn result(id: Id, result: R) -> Self {
        Self {
            jsonrpc: JsonRpc2,
            outcome: Outcome::Result(result),
            id,
        }
    }

    /// An error response.
    pub fn error(id: Id, error: ErrorObject) -> Self {
        Self {
            jsonrpc: JsonRpc2,
            outcome: Outcome::Error(error),
            id,
        }
    }
}

/// Reads a JSON number held raw. Up to 19 plain digits (every id a client counts up) are read
/// without serde, as the same `u64` serde_json would make; anything else goes to serde_json.
pub(crate) fn raw_number(text: &str) -> Option<Number> {
    if text.len() <= 19 && text.bytes().all(|b| b.is_ascii_digit()) {
        // Valid JSON (a raw value), so no leading zero; 19 digits fit a u64.
        return text.parse::<u64>().ok().map(Number::from);
    }
    serde_json::from_str(text).ok()
}

/// Decodes a JSON string held raw, borrowing when it has no escapes.
pub(crate) fn raw_str(raw: &RawValue) -> Option<Cow<'_, str>> {
    let text = raw.get();
    // A raw value is valid JSON already: a string without a backslash is its contents.
    if let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        if !inner.contains('\\') {
            return Some(Cow::Borrowed(inner));
        }
    }
    serde_json::from_str::<String>(text).ok().map(Cow::Owned)
}

/// Appends `s` as a JSON string literal.
pub(crate) fn write_json_str(out: &mut Vec<u8>, s: &str) {
    let needs_escape = s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\');
    if needs_escape {
        // serde_json's escaper is exact; writing a str to a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, s);
    } else {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_spec_table() {
        assert_eq!(ErrorCode::PARSE_ERROR.0, -32700);
        assert_eq!(ErrorCode::INVALID_REQUEST.0, -32600);
        assert_eq!(ErrorCode::METHOD_NOT_FOUND.0, -32601);
        assert_eq!(ErrorCode::INVALID_PARAMS.0, -32602);
        assert_eq!(ErrorCode::INTERNAL_ERROR.0, -32603);
        assert_eq!(ErrorCode::ALREADY_INITIALIZED.0, -32001);
        assert_eq!(ErrorCode::INVALID_CLIENT_INFO.0, -32002);
        assert_eq!(ErrorCode::ALREADY_SUBSCRIBED.0, -32003);
        assert_eq!(ErrorCode::SUBSCRIPTION_NOT_FOUND.0, -32004);
        assert_eq!(
            format!("{:?}", ErrorCode(-32003)),
            "ALREADY_SUBSCRIBED(-32003)"
        );
        assert_eq!(format!("{:?}", ErrorCode(7)), "ErrorCode(7)");
        assert_eq!(ErrorCode(7).message(), None);
    }
}

//! Shapes shared by several messages: vision attachments, ICE servers, timestamps.

use std::borrow::Cow;
use std::fmt;

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

/// An image for the LLM (`VisionAttachment`), sent with `audio` or queued by `attachments`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VisionAttachment {
    /// Base64 data URI (`data:image/jpeg;base64,...`) or URL.
    pub data: String,
    /// MIME type, e.g. `"image/jpeg"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Accessibility text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alt: Option<String>,
}

impl VisionAttachment {
    /// An attachment with only its data (URI or URL).
    pub fn new(data: impl Into<String>) -> Self {
        Self {
            data: data.into(),
            mime_type: None,
            alt: None,
        }
    }

    /// Sets the MIME type.
    pub fn with_mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }

    /// Sets the accessibility text.
    pub fn with_alt(mut self, alt: impl Into<String>) -> Self {
        self.alt = Some(alt.into());
        self
    }
}

/// One STUN/TURN server of `ready.iceServers` (the browser's `RTCIceServer`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IceServer {
    /// One URL or several (`"stun:stun.l.google.com:19302"`).
    pub urls: IceUrls,
    /// TURN user name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// TURN credential.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
}

impl IceServer {
    /// A server without credentials (STUN).
    pub fn stun(url: impl Into<String>) -> Self {
        Self {
            urls: IceUrls::One(url.into()),
            username: None,
            credential: None,
        }
    }

    /// A TURN server with credentials.
    pub fn turn(
        url: impl Into<String>,
        username: impl Into<String>,
        credential: impl Into<String>,
    ) -> Self {
        Self {
            urls: IceUrls::One(url.into()),
            username: Some(username.into()),
            credential: Some(credential.into()),
        }
    }
}

/// `RTCIceServer.urls`: a string or an array of strings, kept as sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum IceUrls {
    /// `"urls": "stun:..."`.
    One(String),
    /// `"urls": ["stun:...", "turn:..."]`.
    Many(Vec<String>),
}

/// A JSON number kept as its text (`ping.timestamp`, echoed by `pong`).
///
/// `Date.now()` is an integer, but the spec types it `number`, and a `pong` must give the
/// client back what it sent. The number is never converted to a float and back: its text
/// travels unchanged (`5.5e299`, `0.1`, `-0`, `1e-320`, `9007199254740993`, `1.50`), so every
/// reader parses the same double from the echo, whatever float parser this crate's build
/// happens to get (serde_json without `float_roundtrip` does not always find the closest
/// double). Equality compares the text.
///
/// Decoding accepts any JSON number whose value is a finite double; one beyond the double
/// range (`1e400`, which JavaScript reads as `Infinity`) is refused as a bad field.
#[derive(Clone)]
pub struct Timestamp(Box<RawValue>);

impl Timestamp {
    /// The number of `text`, which must be exactly one JSON number (no whitespace) with a
    /// finite value; `None` otherwise.
    pub fn parse(text: &str) -> Option<Self> {
        if !is_number_text(text) {
            return None;
        }
        RawValue::from_string(text.to_owned()).ok().map(Self)
    }

    /// The shortest text that reads back as `value` (`None` for NaN and infinities). An
    /// integral value is written without a fraction when it is below 2^53 in magnitude, as
    /// JavaScript's `JSON.stringify` writes it; `-0.0` is written `-0`.
    pub fn from_f64(value: f64) -> Option<Self> {
        if !value.is_finite() {
            return None;
        }
        let text = if value == 0.0 {
            if value.is_sign_negative() { "-0" } else { "0" }.to_owned()
        } else if value.fract() == 0.0 && value.abs() < 9_007_199_254_740_992.0 {
            // Exact: an integral double below 2^53 fits an i64.
            format!("{}", value as i64)
        } else {
            // Rust's `Display` for f64 is the shortest text that reads back the same.
            let plain = format!("{value}");
            let sci = format!("{value:e}");
            if sci.len() < plain.len() {
                sci
            } else {
                plain
            }
        };
        Self::parse(&text)
    }

    /// The JSON text, exactly as received (or as made).
    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The value as the closest double to the text (Rust's parser rounds correctly).
    pub fn as_f64(&self) -> f64 {
        self.as_str().parse().unwrap_or(f64::NAN)
    }

    /// The value when the text is a plain non-negative integer that fits a `u64` (what
    /// `Date.now()` sends); `None` for fractions, exponents, signs and larger integers.
    pub fn as_u64(&self) -> Option<u64> {
        let t = self.as_str();
        if t.bytes().all(|b| b.is_ascii_digit()) {
            t.parse().ok()
        } else {
            None
        }
    }
}

/// Whether `text` is one JSON number (RFC 8259 grammar, nothing around it) with a finite value.
fn is_number_text(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > start
    };
    if b.first() == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            digits(&mut i);
        }
        _ => return false,
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        if !digits(&mut i) {
            return false;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digits(&mut i) {
            return false;
        }
    }
    // Rust's f64 parser rounds correctly; an overflow reads as infinity.
    i == b.len() && text.parse::<f64>().is_ok_and(f64::is_finite)
}

impl PartialEq for Timestamp {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Timestamp {}

impl std::hash::Hash for Timestamp {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

macro_rules! timestamp_from_int {
    ($($t:ty),*) => {
        $(impl From<$t> for Timestamp {
            fn from(v: $t) -> Self {
                // An integer's decimal text is always a valid, finite JSON number.
                Self::parse(&v.to_string()).unwrap_or_else(|| Self(RawValue::NULL.to_owned()))
            }
        })*
    };
}
timestamp_from_int!(u32, u64, i32, i64);

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // serde_json writes a `RawValue` as its text, unchanged.
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        if is_number_text(raw.get()) {
            Ok(Self(raw))
        } else if raw
            .get()
            .starts_with(['-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9'])
        {
            Err(de::Error::custom(format_args!(
                "timestamp {} is beyond the range of a double",
                Cut(raw.get())
            )))
        } else {
            Err(de::Error::invalid_type(
                de::Unexpected::Other("a non-number"),
                &"a JSON number",
            ))
        }
    }
}

/// At most 32 bytes of a number's text, for error messages.
struct Cut<'a>(&'a str);

impl fmt::Display for Cut<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Number text is ASCII, so any byte index is a char boundary.
        match self.0.get(..32) {
            Some(head) if self.0.len() > 32 => write!(f, "{head}..."),
            _ => f.write_str(self.0),
        }
    }
}

/// `ready.mode` and `mode-changed.mode`: how the server runs the session (core 1.3.0).
///
/// `protocol.d.ts` types it `'pipeline' | 'realtime'`. Open, like [`ErrorCode`](crate::ErrorCode):
/// a mode this crate does not know survives a decode and re-encode, so a newer server's
/// `ready` is never refused for it. A `ready` without `mode` comes from a server older than
/// core 1.3.0, which is always [`PIPELINE`](Self::PIPELINE).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SessionMode(Cow<'static, str>);

impl SessionMode {
    /// `"pipeline"`: speech to text, the LLM, then text to speech (what this crate's server
    /// runs, and what a `ready` without `mode` means).
    pub const PIPELINE: Self = Self(Cow::Borrowed("pipeline"));
    /// `"realtime"`: a native speech-to-speech model relayed (the server streams
    /// `assistant-transcript` and `usage`).
    pub const REALTIME: Self = Self(Cow::Borrowed("realtime"));

    /// A mode from its wire text (the two known ones borrow their constant).
    pub fn new(mode: impl Into<Cow<'static, str>>) -> Self {
        let mode = mode.into();
        match mode.as_ref() {
            "pipeline" => Self::PIPELINE,
            "realtime" => Self::REALTIME,
            _ => Self(mode),
        }
    }

    /// The wire text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is `pipeline` or `realtime`.
    pub fn is_known(&self) -> bool {
        *self == Self::PIPELINE || *self == Self::REALTIME
    }
}

impl fmt::Debug for SessionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_known() {
            f.write_str(self.as_str())
        } else {
            write!(f, "SessionMode({:?})", self.as_str())
        }
    }
}

impl fmt::Display for SessionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for SessionMode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for SessionMode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Self::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_keep_their_text_and_refuse_what_is_no_finite_number() {
        for t in [
            "0",
            "-0",
            "1.50",
            "5.5e299",
            "1E+3",
            "1e-320",
            "18446744073709551616",
        ] {
            let ts = Timestamp::parse(t).expect(t);
            assert_eq!(ts.as_str(), t);
            assert_eq!(serde_json::to_string(&ts).expect("json"), t);
            assert_eq!(ts.as_f64().to_bits(), t.parse::<f64>().expect(t).to_bits());
        }
        for t in [
            "", "-", "01", "1.", ".5", "+1", "1e", "1e+", " 1", "1 ", "inf", "NaN", "1e400", "0x1",
            "\"1\"",
        ] {
            assert_eq!(Timestamp::parse(t), None, "{t}");
        }
        assert_eq!(
            Timestamp::from(1_700_000_000_123u64).as_u64(),
            Some(1_700_000_000_123)
        );
        assert_eq!(Timestamp::parse("1e3").and_then(|t| t.as_u64()), None);
        assert_eq!(Timestamp::from(-3i64).as_str(), "-3");
        // Doubles get their shortest text; whole ones below 2^53 have no fraction.
        for (v, t) in [
            (0.1, "0.1"),
            (-0.0, "-0"),
            (5.5e299, "5.5e299"),
            (1e-320, "1e-320"),
            (1_700_000_000_123.0, "1700000000123"),
            (2e53, "2e53"),
            (12.5, "12.5"),
        ] {
            let ts = Timestamp::from_f64(v).expect("finite");
            assert_eq!(ts.as_str(), t);
            assert_eq!(ts.as_f64().to_bits(), f64::to_bits(v));
        }
        assert_eq!(Timestamp::from_f64(f64::INFINITY), None);
        assert_eq!(Timestamp::from_f64(f64::NAN), None);
    }

    #[test]
    fn ice_urls_take_a_string_or_a_list() {
        let one: IceServer = serde_json::from_str(r#"{"urls":"stun:a"}"#).expect("one");
        assert_eq!(one, IceServer::stun("stun:a"));
        let many: IceServer =
            serde_json::from_str(r#"{"urls":["turn:a","turn:b"],"username":"u","credential":"c"}"#)
                .expect("many");
        assert_eq!(
            many.urls,
            IceUrls::Many(vec!["turn:a".into(), "turn:b".into()])
        );
        assert_eq!(
            serde_json::to_string(&IceServer::turn("turn:x", "u", "c")).expect("json"),
            r#"{"urls":"turn:x","username":"u","credential":"c"}"#
        );
    }
}

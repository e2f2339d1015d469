//! Inbound and outbound WebSocket message bodies.

use std::fmt;

use bytes::Bytes;

/// One inbound WebSocket message, borrowed from the driver's receive buffer.
///
/// The text/binary distinction is kept because specs rely on it (mcpw picks its decoder
/// by opcode; some peers send JSON in binary frames).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A text message; the driver has already checked that it is UTF-8.
    Text(&'a str),
    /// A binary message.
    Binary(&'a [u8]),
}

impl<'a> Frame<'a> {
    /// The message body as bytes, whatever its opcode.
    pub fn as_bytes(&self) -> &'a [u8] {
        match self {
            Frame::Text(s) => s.as_bytes(),
            Frame::Binary(b) => b,
        }
    }

    /// Length of the body in bytes.
    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }

    /// Whether the body is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether this is a text message.
    pub fn is_text(&self) -> bool {
        matches!(self, Frame::Text(_))
    }

    /// The body as text, the first check of every JSON protocol: at most `max_len` bytes
    /// (checked first, before anything is read), and UTF-8 for a binary frame (JSON peers
    /// may send it in either opcode).
    #[inline]
    pub fn text_within(&self, max_len: usize) -> Result<&'a str, FrameError> {
        let len = self.len();
        if len > max_len {
            return Err(FrameError::TooLarge { len, max: max_len });
        }
        match *self {
            Frame::Text(t) => Ok(t),
            Frame::Binary(b) => std::str::from_utf8(b).map_err(|_| FrameError::NotUtf8),
        }
    }
}

/// Why a frame's body cannot be read as text ([`Frame::text_within`]); each JSON protocol
/// crate's `DecodeError` wraps it and maps it to its own wire error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameError {
    /// The body is larger than the configured limit; nothing was parsed.
    TooLarge {
        /// Body length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A binary frame that is not UTF-8.
    NotUtf8,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLarge { len, max } => {
                write!(f, "message of {len} bytes exceeds the limit of {max}")
            }
            Self::NotUtf8 => f.write_str("message is not valid UTF-8"),
        }
    }
}

impl std::error::Error for FrameError {}

impl fmt::Debug for Frame<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Frame::Text(s) => f.debug_tuple("Text").field(&Preview(s.as_bytes())).finish(),
            Frame::Binary(b) => f.debug_tuple("Binary").field(&Preview(b)).finish(),
        }
    }
}

/// Bytes that are known to be valid UTF-8; cloning is a reference-count increment.
///
/// The transport turns this into tungstenite's `Utf8Bytes` without copying.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Utf8Bytes(Bytes);

impl Utf8Bytes {
    /// Wraps a static string without copying.
    pub const fn from_static(s: &'static str) -> Self {
        Self(Bytes::from_static(s.as_bytes()))
    }

    /// Copies a string slice.
    pub fn copy_from_str(s: &str) -> Self {
        Self(Bytes::copy_from_slice(s.as_bytes()))
    }

    /// Checks that `bytes` is UTF-8 and wraps it without copying.
    pub fn from_utf8(bytes: Bytes) -> Result<Self, std::str::Utf8Error> {
        std::str::from_utf8(&bytes)?;
        Ok(Self(bytes))
    }

    /// Wraps bytes from an encoder that only ever writes UTF-8 (such as serde_json),
    /// without checking them here.
    ///
    /// This is safe code: nothing here relies on the bytes being UTF-8 for memory safety.
    /// The transport checks once, when it hands the frame to the WebSocket library, so a
    /// wrong caller gets that frame dropped; [`as_str`](Self::as_str) would return `""`.
    /// It exists so that an encoded message is not checked twice on the hot path.
    pub fn from_encoder(bytes: Bytes) -> Self {
        Self(bytes)
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        // The constructors only admit valid UTF-8, so this cannot fail; an empty string is
        // returned rather than panicking should that invariant ever be broken.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }

    /// The underlying bytes (shares the allocation).
    pub fn as_bytes(&self) -> &Bytes {
        &self.0
    }

    /// Unwraps into the underlying `Bytes`.
    pub fn into_bytes(self) -> Bytes {
        self.0
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the text is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<String> for Utf8Bytes {
    fn from(s: String) -> Self {
        Self(Bytes::from(s.into_bytes()))
    }
}

impl From<&'static str> for Utf8Bytes {
    fn from(s: &'static str) -> Self {
        Self::from_static(s)
    }
}

impl fmt::Debug for Utf8Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Utf8Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One outbound WebSocket message, owned and cheap to clone (`Bytes`-backed).
///
/// Encoding a message once and sending the same `FrameBuf` to N connections costs N
/// reference-count increments, not N copies.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum FrameBuf {
    /// A text message.
    Text(Utf8Bytes),
    /// A binary message.
    Binary(Bytes),
}

impl FrameBuf {
    /// A text frame from an owned string (no copy).
    pub fn text(s: impl Into<String>) -> Self {
        Self::Text(Utf8Bytes::from(s.into()))
    }

    /// A text frame copied from an encoder's scratch buffer; `None` if it is not UTF-8.
    ///
    /// JSON encoders always produce UTF-8, so protocol crates use this after `encode`.
    pub fn text_from_slice(buf: &[u8]) -> Option<Self> {
        std::str::from_utf8(buf)
            .ok()
            .map(|s| Self::Text(Utf8Bytes::copy_from_str(s)))
    }

    /// A text frame copied from the output of a JSON encoder (serde_json writes only UTF-8),
    /// without a UTF-8 check here: see [`Utf8Bytes::from_encoder`].
    pub fn json_from_slice(buf: &[u8]) -> Self {
        Self::Text(Utf8Bytes::from_encoder(Bytes::copy_from_slice(buf)))
    }

    /// A text frame that takes ownership of a JSON encoder's output (no copy, no UTF-8
    /// check here: see [`Utf8Bytes::from_encoder`]).
    pub fn json_from_vec(buf: Vec<u8>) -> Self {
        Self::Text(Utf8Bytes::from_encoder(Bytes::from(buf)))
    }

    /// A binary frame.
    pub fn binary(b: impl Into<Bytes>) -> Self {
        Self::Binary(b.into())
    }

    /// Borrows this buffer as an inbound [`Frame`] (used by in-memory drivers).
    pub fn as_frame(&self) -> Frame<'_> {
        match self {
            Self::Text(t) => Frame::Text(t.as_str()),
            Self::Binary(b) => Frame::Binary(b),
        }
    }

    /// The body as bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Self::Text(t) => t.as_bytes(),
            Self::Binary(b) => b,
        }
    }

    /// The text, if this is a text frame.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text(t) => Some(t.as_str()),
            Self::Binary(_) => None,
        }
    }

    /// Length of the body in bytes.
    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }

    /// Whether the body is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl fmt::Debug for FrameBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_frame().fmt(f)
    }
}

/// Debug-prints at most 256 bytes of a body, as text where it is text.
struct Preview<'a>(&'a [u8]);

impl fmt::Debug for Preview<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const MAX: usize = 256;
        let cut = &self.0[..self.0.len().min(MAX)];
        match std::str::from_utf8(cut) {
            Ok(s) => fmt::Debug::fmt(s, f)?,
            Err(_) => write!(f, "{} bytes", self.0.len())?,
        }
        if self.0.len() > MAX {
            write!(f, "…(+{} bytes)", self.0.len() - MAX)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_frame_round_trips_through_as_frame() {
        let f = FrameBuf::text("{\"a\":1}");
        assert_eq!(f.as_frame(), Frame::Text("{\"a\":1}"));
        assert_eq!(f.as_text(), Some("{\"a\":1}"));
        assert_eq!(f.len(), 7);
    }

    #[test]
    fn text_from_slice_rejects_non_utf8() {
        assert!(FrameBuf::text_from_slice(&[0xff, 0xfe]).is_none());
        assert!(FrameBuf::text_from_slice(b"ok").is_some());
    }

    #[test]
    fn clone_shares_the_allocation() {
        let f = FrameBuf::text("x".repeat(1000));
        let g = f.clone();
        assert_eq!(f.as_bytes().as_ptr(), g.as_bytes().as_ptr());
    }

    #[test]
    fn debug_is_bounded() {
        let f = FrameBuf::text("y".repeat(10_000));
        let s = format!("{f:?}");
        assert!(s.len() < 400, "{}", s.len());
        let b = FrameBuf::binary(vec![0xffu8; 10]);
        assert_eq!(format!("{b:?}"), "Binary(10 bytes)");
    }

    #[test]
    fn text_within_checks_the_size_first_then_utf8() {
        assert_eq!(Frame::Text("{}").text_within(2), Ok("{}"));
        assert_eq!(Frame::Binary(b"{}").text_within(2), Ok("{}"));
        // Too large wins over not UTF-8: the size is checked before anything is read.
        assert_eq!(
            Frame::Binary(&[0xff, 0xfe, 0xfd]).text_within(2),
            Err(FrameError::TooLarge { len: 3, max: 2 })
        );
        assert_eq!(
            Frame::Binary(&[0xff, 0xfe]).text_within(2),
            Err(FrameError::NotUtf8)
        );
        assert_eq!(
            FrameError::TooLarge { len: 3, max: 2 }.to_string(),
            "message of 3 bytes exceeds the limit of 2"
        );
    }

    #[test]
    fn utf8_bytes_validates() {
        assert!(Utf8Bytes::from_utf8(Bytes::from_static(&[0xc3])).is_err());
        assert_eq!(
            Utf8Bytes::from_utf8(Bytes::from_static("é".as_bytes()))
                .map(|u| u.to_string())
                .ok(),
            Some("é".to_string())
        );
    }
}

//! Shapes shared by several messages: vision attachments, ICE servers, timestamps.

use serde::{Deserialize, Serialize};

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

/// A JSON number kept exactly as sent (`ping.timestamp`, echoed by `pong`).
///
/// `Date.now()` is an integer, but the spec types it `number`; a fraction or a negative value
/// survives the echo unchanged, and an integer is never rewritten as `1.0`.
pub type Timestamp = serde_json::Number;

#[cfg(test)]
mod tests {
    use super::*;

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

//! The `code` of an `error` message: an open code space.

agentwire_core::open_codes! {
    /// The `code` of an `error` message.
    ///
    /// Open: a code this crate does not know survives a decode and re-encode unchanged. The
    /// spec's 18 codes and core 1.3.0's `REALTIME_ERROR` and `BUDGET_EXCEEDED` have named
    /// constants ([`KNOWN`](Self::KNOWN), in `protocol.d.ts`'s order), and `Debug` prints a
    /// known code bare (`SESSION_NOT_FOUND`).
    pub struct ErrorCode(str) [serde];
    /// Server lacks WebRTC support (here: no application answers `offer`).
    WEBRTC_UNAVAILABLE;
    /// WebRTC or WebSocket connection failed.
    CONNECTION_FAILED;
    /// `reconnect` with an id the server does not know.
    SESSION_NOT_FOUND;
    /// `reconnect` with the id of a session that timed out and was cleaned up.
    SESSION_EXPIRED;
    /// Speech-to-text provider error.
    STT_ERROR;
    /// Speech-to-text operation timed out.
    STT_TIMEOUT;
    /// LLM provider error.
    LLM_ERROR;
    /// LLM operation timed out.
    LLM_TIMEOUT;
    /// Text-to-speech provider error.
    TTS_ERROR;
    /// Text-to-speech operation timed out.
    TTS_TIMEOUT;
    /// VAD or audio decoding failed (bad base64, audio over a size limit).
    AUDIO_PROCESSING_ERROR;
    /// Voice activity detection error.
    VAD_ERROR;
    /// Malformed message (not JSON, no string `type`, wrong fields of a known type).
    INVALID_MESSAGE;
    /// Audio format not supported (not a 16-bit PCM mono/stereo WAV).
    INVALID_AUDIO_FORMAT;
    /// Tool execution failed.
    TOOL_ERROR;
    /// Playbook orchestration error.
    PLAYBOOK_ERROR;
    /// The realtime (speech-to-speech) relay failed (core 1.3.0).
    REALTIME_ERROR;
    /// A usage budget of the session was exceeded (core 1.3.0).
    BUDGET_EXCEEDED;
    /// Unexpected server error.
    INTERNAL_ERROR;
    /// Request rate limit exceeded (also: a server limit such as sessions or queued turns).
    RATE_LIMITED;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_1_3_has_twenty_codes_and_unknown_ones_survive() {
        assert_eq!(ErrorCode::KNOWN.len(), 20);
        let c: ErrorCode = serde_json::from_str(r#""SOMETHING_NEW""#).expect("code");
        assert!(!c.is_known());
        assert_eq!(format!("{c:?}"), r#"ErrorCode("SOMETHING_NEW")"#);
        assert_eq!(
            serde_json::to_string(&c).expect("json"),
            r#""SOMETHING_NEW""#
        );
        assert_eq!(ErrorCode::new("STT_TIMEOUT"), ErrorCode::STT_TIMEOUT);
        assert_eq!(format!("{:?}", ErrorCode::STT_TIMEOUT), "STT_TIMEOUT");
    }
}

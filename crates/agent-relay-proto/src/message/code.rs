//! [`ErrorCode`]: the open code space of the `error` message.

agentwire_core::open_codes! {
    /// An error code of the `error` message (`payload.code`).
    ///
    /// Open: a code this crate does not know survives a decode and re-encode unchanged. The
    /// spec's six codes and our own [`LIMIT_EXCEEDED`](Self::LIMIT_EXCEEDED) and
    /// [`LOG_FLUSH_FAILED`](Self::LOG_FLUSH_FAILED) have named constants, and `Debug` prints a
    /// known code bare (`INVALID_MESSAGE`).
    pub struct ErrorCode(str) [serde];
    /// The message is not valid JSON, has no string `type`, a wrong `v`, a malformed envelope,
    /// a `type` the sender's role may not send, or an invalid `relay.join`.
    INVALID_MESSAGE;
    /// There is no session to talk to: not joined yet, no host connected, or the host was
    /// replaced or left before replying.
    SESSION_NOT_ACTIVE;
    /// `tool.call` named a tool the host does not have (sent by the host).
    UNKNOWN_TOOL;
    /// `tool.call` params do not fit the tool's schema (sent by the host).
    INVALID_PARAMS;
    /// No UI spec is loaded, so a tool cannot run (sent by the host).
    NO_ACTIVE_SPEC;
    /// The tool ran and failed (sent by the host).
    TOOL_EXECUTION_FAILED;
    /// Ours, not the spec's: a relay limit (message size, rate, pending requests, sessions,
    /// agents, connections, id length) refused the message. The `message` names the limit.
    /// The [`Host`](crate::Host) sends it too, when the chat timeline is full.
    LIMIT_EXCEEDED;
    /// Ours, not the spec's: the study log of a session was not saved. Sent by the
    /// [`Host`](crate::Host) when `session.end` could not flush the study log (the session
    /// stays active and its state is not reset), and by the reference relay in place of a
    /// `session.ended` whose log could not be written or synced.
    LOG_FLUSH_FAILED;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_spec_list_plus_ours() {
        let names: Vec<&str> = ErrorCode::KNOWN.iter().map(ErrorCode::as_str).collect();
        assert_eq!(
            names,
            [
                "INVALID_MESSAGE",
                "SESSION_NOT_ACTIVE",
                "UNKNOWN_TOOL",
                "INVALID_PARAMS",
                "NO_ACTIVE_SPEC",
                "TOOL_EXECUTION_FAILED",
                "LIMIT_EXCEEDED",
                "LOG_FLUSH_FAILED"
            ]
        );
        assert_eq!(format!("{:?}", ErrorCode::UNKNOWN_TOOL), "UNKNOWN_TOOL");
        assert_eq!(format!("{:?}", ErrorCode::new("X_1")), "ErrorCode(\"X_1\")");
        assert!(ErrorCode::new(String::from("NO_ACTIVE_SPEC")).is_known());
    }

    #[test]
    fn unknown_codes_round_trip() {
        let c: ErrorCode = serde_json::from_str("\"RATE_LIMITED_BY_HOST\"").unwrap();
        assert!(!c.is_known());
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            "\"RATE_LIMITED_BY_HOST\""
        );
    }
}

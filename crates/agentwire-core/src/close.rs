//! WebSocket close codes as an open newtype.

crate::open_codes! {
    /// A WebSocket close code (RFC 6455 §7.4).
    ///
    /// An open newtype: any `u16` from the wire survives, the common codes have names, and
    /// `Debug` prints the name where there is one (as h2's `Reason` does): `POLICY(1008)`.
    pub struct CloseCode(u16) [with_value];
    /// 1000: normal closure.
    NORMAL = 1000;
    /// 1001: the endpoint is going away (server shutdown, page navigation).
    GOING_AWAY = 1001;
    /// 1002: protocol error at the WebSocket level.
    PROTOCOL_ERROR = 1002;
    /// 1003: a data type the endpoint cannot accept.
    UNSUPPORTED_DATA = 1003;
    /// 1005: no status code was present (never sent on the wire).
    NO_STATUS = 1005;
    /// 1006: closed without a close frame (never sent on the wire).
    ABNORMAL = 1006;
    /// 1007: payload not consistent with the message type (e.g. non-UTF-8 text).
    INVALID_PAYLOAD = 1007;
    /// 1008: a message violates the endpoint's policy.
    POLICY = 1008;
    /// 1009: a message is too big to process.
    TOO_BIG = 1009;
    /// 1010: the client expected an extension the server did not negotiate.
    MANDATORY_EXTENSION = 1010;
    /// 1011: the server hit an unexpected condition.
    INTERNAL_ERROR = 1011;
    /// 1012: the service is restarting.
    SERVICE_RESTART = 1012;
    /// 1013: try again later (overload, e.g. a full send queue).
    TRY_AGAIN_LATER = 1013;
}

impl CloseCode {
    /// Whether the code may appear in a close frame on the wire (RFC 6455 §7.4.2).
    pub fn is_sendable(self) -> bool {
        matches!(self.0, 1000..=1003 | 1007..=1014 | 3000..=4999)
    }

    /// Whether the code is in the private-use range 4000..=4999.
    pub fn is_private(self) -> bool {
        (4000..=4999).contains(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_codes_print_their_name() {
        assert_eq!(format!("{:?}", CloseCode::POLICY), "POLICY(1008)");
        assert_eq!(format!("{:?}", CloseCode(4321)), "CloseCode(4321)");
        assert_eq!(CloseCode::TRY_AGAIN_LATER.0, 1013);
        assert_eq!(CloseCode::GOING_AWAY.name(), Some("GOING_AWAY"));
        assert_eq!(CloseCode(4321).name(), None);
        assert_eq!(CloseCode::POLICY.to_string(), "1008");
        assert_eq!(u16::from(CloseCode::from(1001)), 1001);
    }

    #[test]
    fn sendable_ranges() {
        assert!(CloseCode::NORMAL.is_sendable());
        assert!(CloseCode::POLICY.is_sendable());
        assert!(!CloseCode::NO_STATUS.is_sendable());
        assert!(!CloseCode::ABNORMAL.is_sendable());
        assert!(CloseCode(4000).is_sendable() && CloseCode(4000).is_private());
        assert!(!CloseCode(5000).is_sendable());
    }
}

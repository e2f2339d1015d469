//! How a connection ended, as its driver saw it.

use crate::CloseCode;

/// The longest close reason on the wire, in bytes (RFC 6455 §5.5: a control frame's
/// payload is at most 125 bytes, two of them the code).
pub const MAX_CLOSE_REASON: usize = 123;

/// `reason` cut to [`MAX_CLOSE_REASON`] bytes at a character boundary.
///
/// Drivers apply it to every reason they send or report, so a machine never sees (and a
/// peer never gets) a longer one.
pub fn truncate_close_reason(reason: &str) -> &str {
    let mut end = reason.len().min(MAX_CLOSE_REASON);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    &reason[..end]
}

/// How a connection ended: the argument of
/// [`Machine::handle_disconnect_with`](crate::Machine::handle_disconnect_with).
///
/// It says who ended the connection and with which close code, so a machine can tell a
/// peer that left cleanly (1000, 1001) from one that vanished, was dropped for not reading,
/// or was closed by the machine itself. Reasons are at most [`MAX_CLOSE_REASON`] bytes (the
/// [`peer`](Self::peer) and [`local`](Self::local) constructors cut them).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Disconnect {
    /// The peer sent a close frame first: its code ([`CloseCode::NO_STATUS`] when the frame
    /// carried none) and reason.
    Peer {
        /// The peer's close code.
        code: CloseCode,
        /// The peer's close reason (may be empty).
        reason: String,
    },
    /// This side closed it: the machine's [`Output::Close`](crate::Output::Close), or the
    /// driver's shutdown (1001 "going away"), with the code and reason it sent.
    Local {
        /// The close code sent.
        code: CloseCode,
        /// The close reason sent.
        reason: String,
    },
    /// The driver closed it because the peer did not read: its send queue overflowed. The
    /// close frame carried `code` (the driver's slow-reader code, 1013 by default).
    SlowReader {
        /// The close code sent.
        code: CloseCode,
    },
    /// The driver closed it because nothing (not even a pong to its pings) arrived within
    /// its pong timeout; the close frame carried 1008 "pong timeout".
    PongTimeout,
    /// The driver refused a frame of the peer (over the size limit, text that is not UTF-8,
    /// a WebSocket protocol error) and closed with `code` (1009, 1007, 1002).
    BadFrame {
        /// The close code sent.
        code: CloseCode,
    },
    /// The socket ended without a close frame from either side (end of stream, reset, an
    /// I/O error), or the driver cannot tell how it ended.
    Ended,
}

impl Disconnect {
    /// The peer closed with `code` and `reason` (cut to [`MAX_CLOSE_REASON`] bytes).
    pub fn peer(code: CloseCode, reason: &str) -> Self {
        Self::Peer {
            code,
            reason: truncate_close_reason(reason).to_owned(),
        }
    }

    /// This side closed with `code` and `reason` (cut to [`MAX_CLOSE_REASON`] bytes).
    pub fn local(code: CloseCode, reason: &str) -> Self {
        Self::Local {
            code,
            reason: truncate_close_reason(reason).to_owned(),
        }
    }

    /// The close code of the close frame that ended the connection, whoever sent it;
    /// `None` when no close frame was exchanged ([`Ended`](Self::Ended)).
    pub fn code(&self) -> Option<CloseCode> {
        match self {
            Self::Peer { code, .. }
            | Self::Local { code, .. }
            | Self::SlowReader { code }
            | Self::BadFrame { code } => Some(*code),
            Self::PongTimeout => Some(CloseCode::POLICY),
            Self::Ended => None,
        }
    }

    /// The close reason of a [`Peer`](Self::Peer) or [`Local`](Self::Local) close; empty
    /// otherwise.
    pub fn reason(&self) -> &str {
        match self {
            Self::Peer { reason, .. } | Self::Local { reason, .. } => reason,
            _ => "",
        }
    }

    /// Whether the peer ended it with a close frame.
    pub fn is_peer(&self) -> bool {
        matches!(self, Self::Peer { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_cut_at_a_char_boundary() {
        let long = "é".repeat(100); // 200 bytes
        let d = Disconnect::peer(CloseCode::NORMAL, &long);
        assert_eq!(d.reason().len(), 122);
        assert_eq!(d.code(), Some(CloseCode::NORMAL));
        assert!(d.is_peer());
        let d = Disconnect::local(CloseCode::POLICY, &"x".repeat(200));
        assert_eq!(d.reason().len(), MAX_CLOSE_REASON);
        assert!(!d.is_peer());
        assert_eq!(truncate_close_reason("bye"), "bye");
    }

    #[test]
    fn codes_of_the_driver_closes() {
        assert_eq!(Disconnect::PongTimeout.code(), Some(CloseCode::POLICY));
        assert_eq!(
            Disconnect::SlowReader {
                code: CloseCode::TRY_AGAIN_LATER
            }
            .code(),
            Some(CloseCode::TRY_AGAIN_LATER)
        );
        assert_eq!(Disconnect::Ended.code(), None);
        assert_eq!(Disconnect::Ended.reason(), "");
    }
}

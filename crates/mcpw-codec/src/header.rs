//! The 24-byte binary header and its three open code spaces: [`MessageType`], [`Flags`] and
//! [`Method`].
//!
//! Layout (all multi-byte fields big-endian, as the reference Go implementation writes them):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `4D 43 50 57` ("MCPW") |
//! | 4 | 1 | version (1) |
//! | 5 | 1 | [`MessageType`] |
//! | 6 | 2 | [`Flags`] |
//! | 8 | 8 | sequence id |
//! | 16 | 2 | [`Method`] |
//! | 18 | 2 | reserved (written 0) |
//! | 20 | 4 | data size (payload bytes after the header, as sent) |

use std::fmt;

use bytes::BufMut;

use crate::config::{Limits, ReservedPolicy};
pub use crate::error::HeaderError;

/// The header's length in bytes.
pub const HEADER_LEN: usize = 24;
/// The magic number, "MCPW" in ASCII.
pub const MAGIC: [u8; 4] = *b"MCPW";
/// The only protocol version there is.
pub const VERSION: u8 = 1;

/// The subprotocol that names protocol version `version`: `mcp.v<version>` (the crate's
/// spec decision 49: versions are negotiated as subprotocols).
pub fn subprotocol_of(version: u8) -> String {
    format!("mcp.v{version}")
}

/// The protocol version a subprotocol names (`mcp.v2` is 2), if it names one.
pub fn version_of(subprotocol: &str) -> Option<u8> {
    let digits = subprotocol.strip_prefix("mcp.v")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|v| *v > 0)
}

/// The decoded 24-byte header of a binary frame.
///
/// Every field is kept exactly as it was on the wire (the magic is implied), so
/// `Header::parse(&h.to_bytes(), ..) == Ok(h)` for every header the limits accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    /// Protocol version; [`Header::parse`] accepts only [`VERSION`].
    pub version: u8,
    /// What kind of message the frame carries.
    pub kind: MessageType,
    /// Control flags, unknown bits included.
    pub flags: Flags,
    /// Sequence id; a response echoes its request's.
    pub seq: u64,
    /// The method code (0: the name travels in the payload).
    pub method: Method,
    /// Reserved; written 0 by this crate. [`Limits::reserved`] decides whether a non-zero
    /// value is refused (the default) or kept and ignored.
    pub reserved: u16,
    /// The payload's length on the wire (compressed length when [`Flags::COMPRESSED`]).
    pub size: u32,
}

impl Header {
    /// A header with version 1, no flags, reserved 0 and size 0 (the encoder sets the size).
    pub fn new(kind: MessageType, seq: u64, method: Method) -> Self {
        Self {
            version: VERSION,
            kind,
            flags: Flags::NONE,
            seq,
            method,
            reserved: 0,
            size: 0,
        }
    }

    /// Parses and checks a header: magic, then version, then data size against
    /// [`Limits::max_payload`] (exactly the limit is allowed), then the reserved field.
    ///
    /// Nothing is allocated, so a frame's payload buffer is only sized after this passed.
    #[inline]
    pub fn parse(bytes: &[u8; HEADER_LEN], limits: &Limits) -> Result<Self, HeaderError> {
        let magic = [bytes[0], bytes[1], bytes[2], bytes[3]];
        if magic != MAGIC {
            return Err(HeaderError::BadMagic(magic));
        }
        let version = bytes[4];
        if version != VERSION {
            return Err(HeaderError::UnsupportedVersion(version));
        }
        let size = u32::from_be_bytes([bytes[20], bytes[21], bytes[22], bytes[23]]);
        if size > limits.max_payload {
            return Err(HeaderError::PayloadTooLarge {
                size,
                max: limits.max_payload,
            });
        }
        let reserved = u16::from_be_bytes([bytes[18], bytes[19]]);
        if reserved != 0 && limits.reserved == ReservedPolicy::Reject {
            return Err(HeaderError::ReservedNotZero(reserved));
        }
        Ok(Self {
            version,
            kind: MessageType(bytes[5]),
            flags: Flags(u16::from_be_bytes([bytes[6], bytes[7]])),
            seq: u64::from_be_bytes([
                bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14],
                bytes[15],
            ]),
            method: Method(u16::from_be_bytes([bytes[16], bytes[17]])),
            reserved,
            size,
        })
    }

    /// [`Header::parse`] on the first 24 bytes of `bytes`; fewer is [`HeaderError::Truncated`].
    #[inline]
    pub fn parse_slice(bytes: &[u8], limits: &Limits) -> Result<Self, HeaderError> {
        match bytes.first_chunk::<HEADER_LEN>() {
            Some(h) => Self::parse(h, limits),
            None => Err(HeaderError::Truncated(bytes.len())),
        }
    }

    /// The 24 wire bytes of this header.
    #[inline]
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..4].copy_from_slice(&MAGIC);
        b[4] = self.version;
        b[5] = self.kind.0;
        b[6..8].copy_from_slice(&self.flags.0.to_be_bytes());
        b[8..16].copy_from_slice(&self.seq.to_be_bytes());
        b[16..18].copy_from_slice(&self.method.0.to_be_bytes());
        b[18..20].copy_from_slice(&self.reserved.to_be_bytes());
        b[20..24].copy_from_slice(&self.size.to_be_bytes());
        b
    }

    /// Appends the 24 wire bytes to `out`.
    #[inline]
    pub fn write(&self, out: &mut impl BufMut) {
        out.put_slice(&self.to_bytes());
    }
}

agentwire_core::open_codes! {
    /// The message type byte: an open newtype, so unknown types survive a round trip.
    #[derive(Default)]
    pub struct MessageType(u8);
    /// A request (0); a response echoes its sequence id (binary) or id (JSON).
    REQUEST = 0;
    /// A response (1).
    RESPONSE = 1;
    /// A notification (2): no response expected.
    NOTIFICATION = 2;
    /// An error (3): the payload is an [`ErrorBody`](crate::ErrorBody).
    ERROR = 3;
    /// Keepalive ping (4).
    PING = 4;
    /// Keepalive pong (5).
    PONG = 5;
    /// A batch of messages (6).
    BATCH = 6;
    /// A progress update (7), e.g. `task.progress`.
    PROGRESS = 7;
}

/// The flags field: an open bit set, so unknown bits survive a round trip.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(pub u16);

impl Flags {
    /// No flag set.
    pub const NONE: Self = Self(0);
    /// The payload is a gzip member (bit 0).
    pub const COMPRESSED: Self = Self(1 << 0);
    /// The payload is encrypted (bit 1); the codec does not decrypt.
    pub const ENCRYPTED: Self = Self(1 << 1);
    /// The payload holds several messages (bit 2).
    pub const BATCH: Self = Self(1 << 2);
    /// High priority (bit 3; in the spec, not in the reference).
    pub const PRIORITY: Self = Self(1 << 3);
    /// Part of a streaming response (bit 4; in the spec, not in the reference).
    pub const STREAMING: Self = Self(1 << 4);
    /// Every named bit.
    pub const KNOWN: Self = Self(0x1f);

    const NAMES: [(Self, &'static str); 5] = [
        (Self::COMPRESSED, "COMPRESSED"),
        (Self::ENCRYPTED, "ENCRYPTED"),
        (Self::BATCH, "BATCH"),
        (Self::PRIORITY, "PRIORITY"),
        (Self::STREAMING, "STREAMING"),
    ];

    /// Whether every bit of `other` is set.
    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// These flags with the bits of `other` set.
    #[must_use]
    pub fn with(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// These flags with the bits of `other` cleared.
    #[must_use]
    pub fn without(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }

    /// The bits no constant names.
    pub fn unknown_bits(self) -> u16 {
        self.0 & !Self::KNOWN.0
    }
}

impl std::ops::BitOr for Flags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        self.with(rhs)
    }
}

impl fmt::Debug for Flags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("NONE");
        }
        let mut first = true;
        let mut sep = |f: &mut fmt::Formatter<'_>| {
            let s = if first { "" } else { " | " };
            first = false;
            f.write_str(s)
        };
        for (flag, name) in Self::NAMES {
            if self.contains(flag) {
                sep(f)?;
                f.write_str(name)?;
            }
        }
        if self.unknown_bits() != 0 {
            sep(f)?;
            write!(f, "{:#06x}", self.unknown_bits())?;
        }
        Ok(())
    }
}

agentwire_core::open_codes! {
    /// The method code: an open newtype, so unknown codes survive a round trip.
    ///
    /// 1-9 are the reference implementation's codes; 10-19 are ours for the spec's agent methods
    /// (the reference has none for them). 0 means "the name travels in the payload".
    #[derive(Default)]
    pub struct Method(u16), text fn as_str;
    /// 0: no code; the method name travels in the payload.
    UNKNOWN = 0, "unknown";
    /// 1 (reference): `initialize`.
    INITIALIZE = 1, "initialize";
    /// 2 (reference): `tool.list`.
    TOOL_LIST = 2, "tool.list";
    /// 3 (reference): `tool.execute`.
    TOOL_EXECUTE = 3, "tool.execute";
    /// 4 (reference): `context.get`.
    CONTEXT_GET = 4, "context.get";
    /// 5 (reference): `context.update`.
    CONTEXT_UPDATE = 5, "context.update";
    /// 6 (reference): `event.subscribe`.
    EVENT_SUBSCRIBE = 6, "event.subscribe";
    /// 7 (reference): `event.unsubscribe`.
    EVENT_UNSUBSCRIBE = 7, "event.unsubscribe";
    /// 8 (reference): `ping`.
    PING = 8, "ping";
    /// 9 (reference): `pong`.
    PONG = 9, "pong";
    /// 10 (ours): `agent.register`.
    AGENT_REGISTER = 10, "agent.register";
    /// 11 (ours): `registration.confirmed`.
    REGISTRATION_CONFIRMED = 11, "registration.confirmed";
    /// 12 (ours): `agent.heartbeat`.
    AGENT_HEARTBEAT = 12, "agent.heartbeat";
    /// 13 (ours): `task.assigned`.
    TASK_ASSIGNED = 13, "task.assigned";
    /// 14 (ours): `task.progress`.
    TASK_PROGRESS = 14, "task.progress";
    /// 15 (ours): `task.complete`.
    TASK_COMPLETE = 15, "task.complete";
    /// 16 (ours): `agent.capability.update`.
    AGENT_CAPABILITY_UPDATE = 16, "agent.capability.update";
    /// 17 (ours): `collaboration.request`.
    COLLABORATION_REQUEST = 17, "collaboration.request";
    /// 18 (ours): `state.sync`.
    STATE_SYNC = 18, "state.sync";
    /// 19 (ours): `agent.shutdown`.
    AGENT_SHUTDOWN = 19, "agent.shutdown";
}

impl Method {
    /// Every named method, by code.
    pub const KNOWN: &'static [(Self, &'static str)] = &[
        (Self::UNKNOWN, "unknown"),
        (Self::INITIALIZE, "initialize"),
        (Self::TOOL_LIST, "tool.list"),
        (Self::TOOL_EXECUTE, "tool.execute"),
        (Self::CONTEXT_GET, "context.get"),
        (Self::CONTEXT_UPDATE, "context.update"),
        (Self::EVENT_SUBSCRIBE, "event.subscribe"),
        (Self::EVENT_UNSUBSCRIBE, "event.unsubscribe"),
        (Self::PING, "ping"),
        (Self::PONG, "pong"),
        (Self::AGENT_REGISTER, "agent.register"),
        (Self::REGISTRATION_CONFIRMED, "registration.confirmed"),
        (Self::AGENT_HEARTBEAT, "agent.heartbeat"),
        (Self::TASK_ASSIGNED, "task.assigned"),
        (Self::TASK_PROGRESS, "task.progress"),
        (Self::TASK_COMPLETE, "task.complete"),
        (Self::AGENT_CAPABILITY_UPDATE, "agent.capability.update"),
        (Self::COLLABORATION_REQUEST, "collaboration.request"),
        (Self::STATE_SYNC, "state.sync"),
        (Self::AGENT_SHUTDOWN, "agent.shutdown"),
    ];

    /// The code of a wire method name; [`Method::UNKNOWN`] for names without one.
    pub fn from_name(name: &str) -> Self {
        match name {
            "unknown" => Self::UNKNOWN,
            "initialize" => Self::INITIALIZE,
            "tool.list" => Self::TOOL_LIST,
            "tool.execute" => Self::TOOL_EXECUTE,
            "context.get" => Self::CONTEXT_GET,
            "context.update" => Self::CONTEXT_UPDATE,
            "event.subscribe" => Self::EVENT_SUBSCRIBE,
            "event.unsubscribe" => Self::EVENT_UNSUBSCRIBE,
            "ping" => Self::PING,
            "pong" => Self::PONG,
            "agent.register" => Self::AGENT_REGISTER,
            "registration.confirmed" => Self::REGISTRATION_CONFIRMED,
            "agent.heartbeat" => Self::AGENT_HEARTBEAT,
            "task.assigned" => Self::TASK_ASSIGNED,
            "task.progress" => Self::TASK_PROGRESS,
            "task.complete" => Self::TASK_COMPLETE,
            "agent.capability.update" => Self::AGENT_CAPABILITY_UPDATE,
            "collaboration.request" => Self::COLLABORATION_REQUEST,
            "state.sync" => Self::STATE_SYNC,
            "agent.shutdown" => Self::AGENT_SHUTDOWN,
            _ => Self::UNKNOWN,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// INTEROP.md: Request, seq 12345, method 2 = tool.list, size 100.
    const GO_VECTOR: &str = "4d435057 01 00 0000 0000000000003039 0002 0000 00000064";

    fn go_vector() -> [u8; 24] {
        let hex: String = GO_VECTOR.split_whitespace().collect();
        assert_eq!(hex.len(), 48);
        let mut b = [0u8; 24];
        for (i, byte) in b.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
        }
        b
    }

    #[test]
    fn go_test_vector() {
        let bytes = go_vector();
        let h = Header::parse(&bytes, &Limits::default()).unwrap();
        assert_eq!(h.kind, MessageType::REQUEST);
        assert_eq!(h.flags, Flags::NONE);
        assert_eq!(h.seq, 12345);
        assert_eq!(h.method, Method::TOOL_LIST);
        assert_eq!(h.method.as_str(), Some("tool.list"));
        assert_eq!(h.reserved, 0);
        assert_eq!(h.size, 100);
        let mut h2 = Header::new(MessageType::REQUEST, 12345, Method::TOOL_LIST);
        h2.size = 100;
        assert_eq!(h2.to_bytes(), bytes);
    }

    fn with(f: impl FnOnce(&mut [u8; 24])) -> [u8; 24] {
        let mut b = go_vector();
        f(&mut b);
        b
    }

    #[test]
    fn bad_magic_version_99_and_2_mib_give_the_three_errors() {
        let l = Limits::default();
        let bad_magic = with(|b| b[..4].copy_from_slice(b"MCPX"));
        assert_eq!(
            Header::parse(&bad_magic, &l),
            Err(HeaderError::BadMagic(*b"MCPX"))
        );
        let v99 = with(|b| b[4] = 99);
        assert_eq!(
            Header::parse(&v99, &l),
            Err(HeaderError::UnsupportedVersion(99))
        );
        let two_mib = with(|b| b[20..].copy_from_slice(&(2u32 << 20).to_be_bytes()));
        assert_eq!(
            Header::parse(&two_mib, &l),
            Err(HeaderError::PayloadTooLarge {
                size: 2 << 20,
                max: 1 << 20
            })
        );
        // The reference's messages, word for word, lead ours.
        assert!(HeaderError::BadMagic(*b"MCPX")
            .to_string()
            .starts_with("invalid magic number"));
        assert!(HeaderError::UnsupportedVersion(99)
            .to_string()
            .starts_with("unsupported protocol version"));
        assert!(HeaderError::PayloadTooLarge { size: 1, max: 0 }
            .to_string()
            .starts_with("payload too large"));
    }

    #[test]
    fn checks_run_in_order_magic_version_size_reserved() {
        let l = Limits::default();
        let all_bad = with(|b| {
            b[0] = 0;
            b[4] = 2;
            b[18] = 1;
            b[20] = 0xff;
        });
        assert!(matches!(
            Header::parse(&all_bad, &l),
            Err(HeaderError::BadMagic(_))
        ));
        let mut b = all_bad;
        b[0] = b'M';
        assert_eq!(
            Header::parse(&b, &l),
            Err(HeaderError::UnsupportedVersion(2))
        );
        b[4] = 1;
        assert!(matches!(
            Header::parse(&b, &l),
            Err(HeaderError::PayloadTooLarge { .. })
        ));
        b[20] = 0;
        assert_eq!(
            Header::parse(&b, &l),
            Err(HeaderError::ReservedNotZero(0x0100))
        );
    }

    #[test]
    fn exactly_1_mib_is_allowed_one_more_is_not() {
        let l = Limits::default();
        let exact = with(|b| b[20..].copy_from_slice(&(1u32 << 20).to_be_bytes()));
        assert_eq!(Header::parse(&exact, &l).unwrap().size, 1 << 20);
        let over = with(|b| b[20..].copy_from_slice(&((1u32 << 20) + 1).to_be_bytes()));
        assert!(Header::parse(&over, &l).is_err());
    }

    #[test]
    fn reserved_is_rejected_by_default_and_kept_when_ignored() {
        let b = with(|b| b[18..20].copy_from_slice(&[0xbe, 0xef]));
        assert_eq!(
            Header::parse(&b, &Limits::default()),
            Err(HeaderError::ReservedNotZero(0xbeef))
        );
        let l = Limits {
            reserved: ReservedPolicy::Ignore,
            ..Limits::default()
        };
        let h = Header::parse(&b, &l).unwrap();
        assert_eq!(h.reserved, 0xbeef);
        assert_eq!(h.to_bytes(), b);
        assert_eq!(Header::new(MessageType::PING, 0, Method::PING).reserved, 0);
    }

    #[test]
    fn unknown_codes_survive_and_print() {
        let b = with(|b| {
            b[5] = 0xee;
            b[6..8].copy_from_slice(&0x8009u16.to_be_bytes());
            b[16..18].copy_from_slice(&4242u16.to_be_bytes());
        });
        let h = Header::parse(&b, &Limits::default()).unwrap();
        assert_eq!(h.to_bytes(), b);
        assert_eq!(format!("{:?}", h.kind), "MessageType(238)");
        assert_eq!(format!("{:?}", h.flags), "COMPRESSED | PRIORITY | 0x8000");
        assert_eq!(h.flags.unknown_bits(), 0x8000);
        assert_eq!(format!("{:?}", h.method), "Method(4242)");
        assert_eq!(format!("{:?}", Method::STATE_SYNC), "STATE_SYNC");
        assert_eq!(Method::from_name("state.sync"), Method::STATE_SYNC);
        assert_eq!(Method::from_name("no.such"), Method::UNKNOWN);
    }

    #[test]
    fn short_input_is_truncated() {
        assert_eq!(
            Header::parse_slice(&go_vector()[..23], &Limits::default()),
            Err(HeaderError::Truncated(23))
        );
    }
}

//! The 24-byte binary header. Its three open code spaces, [`MessageType`], [`Flags`] and
//! [`Method`], live in the crate's bottom module (`codes.rs`, which the errors and the
//! configuration import too) and are re-exported here.
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

use bytes::BufMut;

pub use crate::codes::{subprotocol_of, version_of, Flags, MessageType, Method};
use crate::config::{Limits, ReservedPolicy};
pub use crate::error::HeaderError;

/// The header's length in bytes.
pub const HEADER_LEN: usize = 24;
/// The magic number, "MCPW" in ASCII.
pub const MAGIC: [u8; 4] = *b"MCPW";
/// The only protocol version there is.
pub const VERSION: u8 = 1;

/// Every protocol version this crate speaks, offered and accepted as the subprotocols
/// `mcp.v<n>` (the crate's spec decision 49): the default of
/// [`AgentConfig::protocol_versions`](crate::AgentConfig::protocol_versions) and
/// [`UpgradeConfig::protocol_versions`](crate::orchestrator::UpgradeConfig::protocol_versions).
pub const VERSIONS: &[u8] = &[VERSION];

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

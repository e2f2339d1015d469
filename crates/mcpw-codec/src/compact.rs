//! The real server's 12-byte binary form (`INTEROP.md`, mcpw: what developer-mesh writes
//! after `protocol.set_binary`).
//!
//! ```text
//! byte 0      version, 1
//! byte 1      flags: bit 0 gzip, bit 1 encrypted
//! bytes 2-3   message type, u16 BE (above 255 refused)
//! bytes 4-7   payload length, u32 BE
//! bytes 8-11  reserved, written 0
//! payload     the whole message's JSON form (id, type, method, params / result / error),
//!             gzipped when longer than the threshold and smaller
//! ```
//!
//! The header's type overrides the type inside the JSON. A 12-byte frame starts with its
//! version (1) and a 24-byte frame with the magic `MCPW` (0x4D), so the first byte tells the
//! two forms apart ([`is_compact`]).

use crate::config::{Limits, ReservedPolicy};
pub use crate::error::CompactHeaderError;
use crate::header::MessageType;

/// Length of the 12-byte header.
pub const COMPACT_HEADER_LEN: usize = 12;
/// The only version of the 12-byte form (its first byte).
pub const COMPACT_VERSION: u8 = 1;
/// Flag bit 0: the payload is gzipped.
pub const COMPACT_COMPRESSED: u8 = 1 << 0;
/// Flag bit 1: the payload is encrypted (refused by the typed codec, as in the 24-byte form).
pub const COMPACT_ENCRYPTED: u8 = 1 << 1;

/// Whether a binary WebSocket message is in the 12-byte form (its first byte is the
/// version, 1) rather than the spec's 24-byte form (first byte `M` of the magic).
pub fn is_compact(frame: &[u8]) -> bool {
    frame.first() == Some(&COMPACT_VERSION)
}

/// The 12-byte header of the real server's binary form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompactHeader {
    /// Flags: [`COMPACT_COMPRESSED`] and [`COMPACT_ENCRYPTED`]; other bits are refused.
    pub flags: u8,
    /// The message type (overrides the JSON's `type`).
    pub kind: MessageType,
    /// Payload bytes on the wire.
    pub size: u32,
    /// Reserved, written 0.
    pub reserved: u32,
}

impl CompactHeader {
    /// A header of type `kind`, no flags, size 0.
    pub fn new(kind: MessageType) -> Self {
        Self {
            flags: 0,
            kind,
            size: 0,
            reserved: 0,
        }
    }

    /// Parses the first 12 bytes of `bytes`, in the order version, flags, type, size,
    /// reserved; nothing is allocated.
    pub fn parse(bytes: &[u8], limits: &Limits) -> Result<Self, CompactHeaderError> {
        let Some(b) = bytes.first_chunk::<COMPACT_HEADER_LEN>() else {
            return Err(CompactHeaderError::Truncated(bytes.len()));
        };
        if b[0] != COMPACT_VERSION {
            return Err(CompactHeaderError::UnsupportedVersion(b[0]));
        }
        let flags = b[1];
        if flags & !(COMPACT_COMPRESSED | COMPACT_ENCRYPTED) != 0 {
            return Err(CompactHeaderError::UnknownFlags(flags));
        }
        let kind = u16::from_be_bytes([b[2], b[3]]);
        let kind = u8::try_from(kind).map_err(|_| CompactHeaderError::TypeOutOfRange(kind))?;
        let size = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
        if size > limits.max_payload {
            return Err(CompactHeaderError::PayloadTooLarge {
                size,
                max: limits.max_payload,
            });
        }
        let reserved = u32::from_be_bytes([b[8], b[9], b[10], b[11]]);
        if reserved != 0 && limits.reserved == ReservedPolicy::Reject {
            return Err(CompactHeaderError::ReservedNotZero(reserved));
        }
        Ok(Self {
            flags,
            kind: MessageType(kind),
            size,
            reserved,
        })
    }

    /// The 12 bytes of this header.
    pub fn to_bytes(&self) -> [u8; COMPACT_HEADER_LEN] {
        let mut b = [0u8; COMPACT_HEADER_LEN];
        b[0] = COMPACT_VERSION;
        b[1] = self.flags;
        b[2..4].copy_from_slice(&u16::from(self.kind.0).to_be_bytes());
        b[4..8].copy_from_slice(&self.size.to_be_bytes());
        b[8..12].copy_from_slice(&self.reserved.to_be_bytes());
        b
    }

    /// Whether the payload is gzipped.
    pub fn is_compressed(&self) -> bool {
        self.flags & COMPACT_COMPRESSED != 0
    }

    /// Whether the payload is encrypted.
    pub fn is_encrypted(&self) -> bool {
        self.flags & COMPACT_ENCRYPTED != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_12_byte_header_reads_back_and_refuses_in_order() {
        let limits = Limits::default();
        let h = CompactHeader {
            flags: COMPACT_COMPRESSED,
            kind: MessageType::RESPONSE,
            size: 0x0102,
            reserved: 0,
        };
        let b = h.to_bytes();
        assert_eq!(b, [1, 1, 0, 1, 0, 0, 1, 2, 0, 0, 0, 0]);
        assert_eq!(CompactHeader::parse(&b, &limits), Ok(h));
        assert_eq!(
            CompactHeader::parse(&b[..11], &limits),
            Err(CompactHeaderError::Truncated(11))
        );
        let mut bad = b;
        bad[1] = 0x04;
        assert_eq!(
            CompactHeader::parse(&bad, &limits),
            Err(CompactHeaderError::UnknownFlags(4))
        );
        let mut bad = b;
        bad[2] = 1;
        assert_eq!(
            CompactHeader::parse(&bad, &limits),
            Err(CompactHeaderError::TypeOutOfRange(0x0101))
        );
        let mut bad = b;
        bad[4] = 0xff;
        assert!(matches!(
            CompactHeader::parse(&bad, &limits),
            Err(CompactHeaderError::PayloadTooLarge { .. })
        ));
        let mut bad = b;
        bad[11] = 9;
        assert_eq!(
            CompactHeader::parse(&bad, &limits),
            Err(CompactHeaderError::ReservedNotZero(9))
        );
        let lax = Limits {
            reserved: ReservedPolicy::Ignore,
            ..Limits::default()
        };
        assert_eq!(CompactHeader::parse(&bad, &lax).map(|h| h.reserved), Ok(9));
        assert!(is_compact(&b) && !is_compact(b"MCPW") && !is_compact(&[]));
    }
}

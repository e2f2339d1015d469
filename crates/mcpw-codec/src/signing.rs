//! HMAC-SHA256 message signing and constant-time verification (the spec's "Message
//! Authentication").
//!
//! The spec signs "the message" without saying which bytes or where the signature travels.
//! [`Signer::sign`] signs exactly the bytes given; [`Signer::seal`] and [`Signer::open`] are
//! where the orchestrator and the agent carry the tag (the crate's spec decision 37):
//!
//! - a **binary frame** (24-byte or 12-byte form) is followed by its 32-byte tag, over every
//!   byte before it (header and payload as sent), so the header's size still names the
//!   payload alone;
//! - a **text frame** starts with the member `"hmac":"<64 lowercase hex digits>",` and the
//!   tag covers every byte after that comma: `{"hmac":"…","id":…}` where the tag is over
//!   `"id":…}`. The frame stays one JSON object whose extra member decoders ignore, and
//!   both sides check it without copying the frame.

use agentwire_core::{Frame, FrameBuf};
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

pub use crate::error::SignatureError;

type HmacSha256 = Hmac<Sha256>;

/// Length of a signature (an HMAC-SHA256 tag) in bytes.
pub const SIGNATURE_LEN: usize = 32;

/// What a signed text frame starts with, before the tag's hex digits.
pub const TEXT_TAG_START: &str = "{\"hmac\":\"";
/// The length of a signed text frame's leading member: `{"hmac":"`, 64 hex digits, `",`.
pub const TEXT_TAG_LEN: usize = TEXT_TAG_START.len() + 2 * SIGNATURE_LEN + 2;

/// A signing key, keyed once and reused for every message.
///
/// Two signers are equal when their keys are (compared through the keys' tags of the empty
/// message, in constant time), so a configuration holding one can be compared.
#[derive(Clone)]
pub struct Signer {
    mac: HmacSha256,
    /// The tag of the empty message: tells keys apart without keeping one.
    fingerprint: [u8; SIGNATURE_LEN],
}

impl PartialEq for Signer {
    fn eq(&self, other: &Self) -> bool {
        bool::from(self.fingerprint.ct_eq(&other.fingerprint))
    }
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signer(..)") // never print key material
    }
}

impl Signer {
    /// A signer for `secret` (any length; HMAC hashes long keys).
    pub fn new(secret: &[u8]) -> Self {
        // HMAC accepts keys of every length, so the fallback (an all-zero key) never runs.
        let mac = <HmacSha256 as KeyInit>::new_from_slice(secret)
            .unwrap_or_else(|_| <HmacSha256 as KeyInit>::new(&Default::default()));
        let fingerprint = mac.clone().finalize().into_bytes().into();
        Self { mac, fingerprint }
    }

    /// The HMAC-SHA256 tag of `msg`.
    pub fn sign(&self, msg: &[u8]) -> [u8; SIGNATURE_LEN] {
        let mut mac = self.mac.clone();
        mac.update(msg);
        mac.finalize().into_bytes().into()
    }

    /// Whether `signature` is the tag of `msg`, compared in constant time (a wrong length
    /// is `false` without comparing).
    pub fn verify(&self, msg: &[u8], signature: &[u8]) -> bool {
        let expected = self.sign(msg);
        signature.len() == SIGNATURE_LEN && bool::from(expected.ct_eq(signature))
    }
}

impl Signer {
    /// `frame` with its tag where decision 37 puts it: after a binary frame; as the leading
    /// `"hmac"` member of a text frame (which must be a JSON object with at least one
    /// member, as every encoder of this crate writes; any other text goes unchanged and
    /// will not verify).
    pub fn seal(&self, frame: FrameBuf) -> FrameBuf {
        match frame {
            FrameBuf::Binary(b) => {
                let mut out = Vec::with_capacity(b.len() + SIGNATURE_LEN);
                out.extend_from_slice(&b);
                out.extend_from_slice(&self.sign(&b));
                FrameBuf::binary(out)
            }
            FrameBuf::Text(t) => {
                let text = t.as_str();
                let Some(rest) = text
                    .strip_prefix('{')
                    .filter(|r| !r.trim_start().starts_with('}'))
                else {
                    return FrameBuf::Text(t);
                };
                let tag = self.sign(rest.as_bytes());
                let mut out = String::with_capacity(TEXT_TAG_LEN + rest.len());
                out.push_str(TEXT_TAG_START);
                for b in tag {
                    out.push(char::from(HEX[usize::from(b >> 4)]));
                    out.push(char::from(HEX[usize::from(b & 15)]));
                }
                out.push_str("\",");
                out.push_str(rest);
                FrameBuf::text(out)
            }
        }
    }

    /// Checks `frame`'s tag (decision 37) and returns the frame to decode: a binary frame
    /// without its tag, a text frame as it is (its `"hmac"` member is ignored by the
    /// decoder). Compared in constant time.
    pub fn open<'a>(&self, frame: Frame<'a>) -> Result<Frame<'a>, SignatureError> {
        match frame {
            Frame::Binary(b) => {
                let Some(split) = b.len().checked_sub(SIGNATURE_LEN) else {
                    return Err(SignatureError::Missing);
                };
                let (body, tag) = b.split_at(split);
                if self.verify(body, tag) {
                    Ok(Frame::Binary(body))
                } else {
                    Err(SignatureError::Invalid)
                }
            }
            Frame::Text(t) => {
                let bytes = t.as_bytes();
                let well_formed = bytes.len() > TEXT_TAG_LEN
                    && bytes.starts_with(TEXT_TAG_START.as_bytes())
                    && bytes[TEXT_TAG_LEN - 2..TEXT_TAG_LEN] == *b"\",";
                if !well_formed {
                    return Err(SignatureError::Missing);
                }
                let mut tag = [0u8; SIGNATURE_LEN];
                let hex = &bytes[TEXT_TAG_START.len()..TEXT_TAG_LEN - 2];
                for (out, pair) in tag.iter_mut().zip(hex.chunks_exact(2)) {
                    match (nibble(pair[0]), nibble(pair[1])) {
                        (Some(hi), Some(lo)) => *out = hi << 4 | lo,
                        _ => return Err(SignatureError::Invalid),
                    }
                }
                if self.verify(&bytes[TEXT_TAG_LEN..], &tag) {
                    Ok(frame)
                } else {
                    Err(SignatureError::Invalid)
                }
            }
        }
    }
}

/// Lowercase hex digits.
const HEX: &[u8; 16] = b"0123456789abcdef";

/// The value of one hex digit (either case).
fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// The spec's `SignMessage`: the HMAC-SHA256 tag of `msg` under `secret`.
pub fn sign(msg: &[u8], secret: &[u8]) -> [u8; SIGNATURE_LEN] {
    Signer::new(secret).sign(msg)
}

/// The spec's `VerifyMessage`: whether `signature` is `msg`'s tag under `secret`, in constant
/// time.
pub fn verify(msg: &[u8], signature: &[u8], secret: &[u8]) -> bool {
    Signer::new(secret).verify(msg, signature)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// RFC 4231 test case 2.
    #[test]
    fn rfc4231_case_2() {
        let tag = sign(b"what do ya want for nothing?", b"Jefe");
        assert_eq!(
            hex(&tag),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn verify_accepts_the_tag_and_refuses_anything_else() {
        let s = Signer::new(b"secret");
        let tag = s.sign(b"frame");
        assert!(s.verify(b"frame", &tag));
        assert!(!s.verify(b"frame!", &tag));
        let mut bad = tag;
        bad[31] ^= 1;
        assert!(!s.verify(b"frame", &bad));
        assert!(!s.verify(b"frame", &tag[..31]));
        assert!(!Signer::new(b"other").verify(b"frame", &tag));
        assert!(verify(b"frame", &tag, b"secret"));
    }

    #[test]
    fn sealed_frames_open_and_tampered_or_bare_ones_do_not() {
        let s = Signer::new(b"secret");
        let text = s.seal(FrameBuf::text(r#"{"id":"a","type":0,"method":"ping"}"#));
        let t = text.as_text().unwrap();
        assert!(t.starts_with(r#"{"hmac":""#), "{t}");
        assert!(
            t.ends_with(r#"","id":"a","type":0,"method":"ping"}"#),
            "{t}"
        );
        assert_eq!(s.open(text.as_frame()), Ok(text.as_frame()));
        serde_json::from_str::<serde_json::Value>(t).unwrap();
        let tampered = t.replace("ping", "pong");
        assert_eq!(s.open(Frame::Text(&tampered)), Err(SignatureError::Invalid));
        let bare = r#"{"id":"a","type":0,"method":"ping"}"#;
        assert_eq!(s.open(Frame::Text(bare)), Err(SignatureError::Missing));
        assert_eq!(
            Signer::new(b"other").open(text.as_frame()),
            Err(SignatureError::Invalid)
        );

        let bin = s.seal(FrameBuf::binary(vec![1u8, 2, 3]));
        assert_eq!(bin.len(), 3 + SIGNATURE_LEN);
        assert_eq!(s.open(bin.as_frame()), Ok(Frame::Binary(&[1, 2, 3])));
        assert_eq!(s.open(Frame::Binary(&[1, 2])), Err(SignatureError::Missing));
        let mut flipped = bin.as_bytes().to_vec();
        flipped[0] ^= 1;
        assert_eq!(
            s.open(Frame::Binary(&flipped)),
            Err(SignatureError::Invalid)
        );
        assert!(Signer::new(b"secret") == s && Signer::new(b"x") != s);
    }
}

//! HMAC-SHA256 message signing and constant-time verification (the spec's "Message
//! Authentication").
//!
//! The spec signs "the message" without saying which bytes or where the signature travels.
//! We sign exactly the bytes given (for a binary frame: header and payload as sent; for a
//! text frame: its UTF-8 bytes) and leave carrying the 32-byte tag to the application.

use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

type HmacSha256 = Hmac<Sha256>;

/// Length of a signature (an HMAC-SHA256 tag) in bytes.
pub const SIGNATURE_LEN: usize = 32;

/// A signing key, keyed once and reused for every message.
#[derive(Clone)]
pub struct Signer {
    mac: HmacSha256,
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
        Self { mac }
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
}

//! Certificate pins: the SHA-256 of a leaf certificate, and its hex form.

use sha2::{Digest, Sha256};

use super::SecurityError;

/// The SHA-256 of `der` (a certificate's DER bytes: what `openssl x509 -noout -fingerprint
/// -sha256` prints).
pub fn sha256(der: &[u8]) -> [u8; 32] {
    Sha256::digest(der).into()
}

/// Lowercase hex of `bytes`, no separators.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses a pin written as 64 hex digits, in either case, optionally with `:` between the
/// bytes (openssl's `AB:CD:...` form).
pub fn parse_pin_sha256(text: &str) -> Result<[u8; 32], SecurityError> {
    let bad = || SecurityError::Pin(text.to_owned());
    let digits: Vec<u8> = text.trim().bytes().filter(|&b| b != b':').collect();
    if digits.len() != 64 {
        return Err(bad());
    }
    let mut pin = [0u8; 32];
    for (out, pair) in pin.iter_mut().zip(digits.chunks(2)) {
        let s = std::str::from_utf8(pair).map_err(|_| bad())?;
        *out = u8::from_str_radix(s, 16).map_err(|_| bad())?;
    }
    Ok(pin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_parse_in_plain_and_openssl_form() {
        let digest = sha256(b"abc");
        let plain = hex(&digest);
        assert_eq!(
            plain,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(parse_pin_sha256(&plain).unwrap(), digest);
        let openssl: Vec<String> = digest.iter().map(|b| format!("{b:02X}")).collect();
        assert_eq!(parse_pin_sha256(&openssl.join(":")).unwrap(), digest);
        for bad in [
            "",
            "ab",
            &plain[..62],
            &format!("{plain}00"),
            &plain.replace('b', "g"),
        ] {
            assert!(parse_pin_sha256(bad).is_err(), "{bad}");
        }
        // A multi-byte character never panics the parser.
        assert!(parse_pin_sha256(&"é".repeat(32)).is_err());
    }
}

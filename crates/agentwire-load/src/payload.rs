//! The payload every scenario sends: a JSON object `{"t":STAMP,"pad":"xxx…"}` padded to the
//! requested size, so the bus accepts it and every receiver can read the send stamp.

/// A payload of `size` bytes (at least the unpadded object) carrying `stamp_ns`.
pub fn payload(size: usize, stamp_ns: u64) -> String {
    let head = format!("{{\"t\":{stamp_ns},\"pad\":\"");
    let pad = size.saturating_sub(head.len() + 2);
    let mut s = String::with_capacity(head.len() + pad + 2);
    s.push_str(&head);
    s.extend(std::iter::repeat_n('x', pad));
    s.push_str("\"}");
    s
}

/// The send stamp of a payload (or of a frame that contains one): the digits after the
/// first `"t":`.
pub fn read_stamp(text: &[u8]) -> Option<u64> {
    let key = b"\"t\":";
    let at = text.windows(key.len()).position(|w| w == key)? + key.len();
    let digits = text[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&text[at..at + digits])
        .ok()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_has_the_size_and_the_stamp() {
        let p = payload(190, 123_456);
        assert_eq!(p.len(), 190);
        assert_eq!(read_stamp(p.as_bytes()), Some(123_456));
        let v: serde_json::Value = serde_json::from_str(&p).unwrap();
        assert!(v.is_object());
        assert_eq!(read_stamp(b"no stamp"), None);
    }
}

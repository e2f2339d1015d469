//! A nesting-depth bound for JSON text that a crate forwards or stores without parsing it.
//!
//! serde_json bounds the recursion of what it parses into a `Value` or a typed struct (127
//! levels), but a `RawValue` it only skips is not bounded: a 100,000-deep array passes through
//! a bus payload or a relay message untouched and then kills the receiver's parser. Every crate
//! that forwards, stores or re-serves raw JSON checks it with [`check_json_depth`] first.

use std::fmt;

/// The default nesting bound for raw JSON that is forwarded or stored: 128 levels.
///
/// Python's `json` and JavaScript's `JSON.parse` read far deeper (about a thousand levels and
/// more), so a receiver in those languages reads back whatever passes. serde_json stops at 127
/// levels for a whole document: a crate whose own records must parse again with serde_json
/// (counting the levels its envelope adds) passes a lower bound, as its docs say.
pub const DEFAULT_MAX_JSON_DEPTH: usize = 128;

/// JSON text nested deeper than the allowed bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonTooDeep {
    /// The bound that was passed.
    pub limit: usize,
}

impl fmt::Display for JsonTooDeep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JSON nested deeper than {} levels", self.limit)
    }
}

impl std::error::Error for JsonTooDeep {}

/// Checks that the JSON text `json` nests arrays and objects at most `limit` levels deep.
///
/// Depth counts open containers: `1` and `"a"` are depth 0, `{}` and `[1]` depth 1,
/// `{"a":[1]}` depth 2. Brackets inside strings (escapes included) do not count. The scan is
/// one pass over the bytes with no allocation and stops at the first level over `limit`; it
/// does not validate the JSON (the caller's parser already did, or will).
pub fn check_json_depth(json: &[u8], limit: usize) -> Result<(), JsonTooDeep> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < json.len() {
        match json[i] {
            b'"' => {
                // Skip the string: the next unescaped quote ends it.
                i += 1;
                while i < json.len() {
                    match json[i] {
                        b'\\' => i += 2,
                        b'"' => break,
                        _ => i += 1,
                    }
                }
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return Err(JsonTooDeep { limit });
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(n: usize) -> String {
        format!("{}{}", "[".repeat(n), "]".repeat(n))
    }

    #[test]
    fn depth_counts_open_containers() {
        assert_eq!(check_json_depth(b"1", 0), Ok(()));
        assert_eq!(check_json_depth(br#""[[[""#, 0), Ok(()));
        assert_eq!(check_json_depth(b"{}", 0), Err(JsonTooDeep { limit: 0 }));
        assert_eq!(check_json_depth(br#"{"a":[1]}"#, 2), Ok(()));
        assert_eq!(
            check_json_depth(br#"{"a":[1]}"#, 1),
            Err(JsonTooDeep { limit: 1 })
        );
        assert_eq!(check_json_depth(br#"[[],[],{"b":{}}]"#, 3), Ok(()));
    }

    #[test]
    fn the_default_admits_128_levels_and_refuses_129() {
        let at = nested(DEFAULT_MAX_JSON_DEPTH);
        let over = nested(DEFAULT_MAX_JSON_DEPTH + 1);
        assert!(check_json_depth(at.as_bytes(), DEFAULT_MAX_JSON_DEPTH).is_ok());
        assert!(check_json_depth(over.as_bytes(), DEFAULT_MAX_JSON_DEPTH).is_err());
        assert!(check_json_depth(nested(100_000).as_bytes(), DEFAULT_MAX_JSON_DEPTH).is_err());
    }

    #[test]
    fn brackets_in_strings_and_escapes_do_not_count() {
        let s = br#"{"k":"[[[{{{\"]]]\\","x":[]}"#;
        assert_eq!(check_json_depth(s, 2), Ok(()));
        assert!(check_json_depth(s, 1).is_err());
        // A truncated escape at the very end neither panics nor counts.
        assert_eq!(check_json_depth(br#"["\"#, 1), Ok(()));
    }
}

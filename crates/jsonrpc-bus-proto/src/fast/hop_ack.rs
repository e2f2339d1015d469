//! The one-pass reader of a subscriber's success reply to a hop, straight into the request
//! id and the `stopPropagation` answer.
//!
//! It is a small hand-written scanner for one narrow shape, not a JSON parser: it accepts a
//! reply only where every byte fits that shape, and returns `None` at the first byte that
//! does not, so whatever it accepts the general path reads the same way
//! (`fast_hop_ack_agrees_with_the_general_path`, the proptest beside it, and the
//! `bus_decode` fuzz target check this).

use agentwire_core::Id128;

use super::scan::{Key, Scan};
use crate::message::Ack;

/// The `result` object, whose members may only have `true`, `false`, `null` or a plain
/// string as their value: its `stopPropagation` (`None` when absent or `null`).
fn result(scan: &mut Scan<'_>) -> Option<Ack> {
    scan.eat(b'{')?;
    let (mut stop, mut seen_stop, mut first) = (None, false, true);
    loop {
        let key = match scan.key(&mut first, &["stopPropagation"])? {
            Key::End => break,
            key => key,
        };
        // `Some(bool or null)` for a literal, `None` for a string.
        let value = match scan.next()? {
            b'"' => scan.string_rest().map(|_| None)?,
            byte => Some(scan.literal_rest(byte)?),
        };
        if let Key::Known(_) = key {
            // A string or a second `stopPropagation` is the general path's error.
            if seen_stop {
                return None;
            }
            seen_stop = true;
            stop = value?;
        }
    }
    Some(Ack { stop })
}

/// Reads `text` in one pass if it is a subscriber's success reply for one of our request
/// ids: `{"jsonrpc":"2.0","result":{..},"id":"<uuid>"}`, exactly these three members in any
/// order, with any JSON whitespace, a `result` object whose members are `true`, `false`,
/// `null` or strings, and no escape in any string. Returns the request id and the answer.
///
/// Anything else is `None` and goes the general way (`classify`), which gives it its answer
/// or its violation: an error reply, an escaped or numeric id, a `result` that is not such an
/// object (a nested value, a number, a string `stopPropagation`), a duplicate or extra
/// member, a request (which fails here at its first member, before its params are read).
/// `text` starts at its `{` (`split_text` trims what comes before).
pub(super) fn fast_hop_ack(text: &str) -> Option<(Id128, Ack)> {
    const JSONRPC: usize = 0;
    const RESULT: usize = 1;
    const ID: usize = 2;
    let mut scan = Scan::object(text)?;
    let (mut version, mut ack, mut id, mut first) = (false, None, None, true);
    loop {
        match scan.key(&mut first, &["jsonrpc", "result", "id"])? {
            Key::End => break,
            Key::Known(JSONRPC) if !version => {
                scan.exact("2.0")?;
                version = true;
            }
            Key::Known(RESULT) if ack.is_none() => ack = Some(result(&mut scan)?),
            Key::Known(ID) if id.is_none() => id = Some(Id128::parse(scan.string()?)?),
            _ => return None,
        }
    }
    if !version || !scan.at_end() {
        return None;
    }
    Some((id?, ack?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{classify, Incoming};
    use crate::fast::scan::near;

    /// What the general path makes of a reply: the id and answer of a valid hop ack. `text`
    /// is as `on_body` hands it over (`split_text` trims leading whitespace).
    fn general_ack(text: &str) -> Option<(Id128, Option<bool>)> {
        let Ok(Incoming::Reply(reply)) = classify(text) else {
            return None;
        };
        let id = Id128::parse(&reply.id_str()?)?;
        let ack = serde_json::from_str::<Ack>(reply.outcome.ok()?.get()).ok()?;
        Some((id, ack.stop))
    }

    /// The one-pass decoder accepts only what the general path reads the same way, and
    /// everything else falls through to it.
    #[test]
    fn fast_hop_ack_agrees_with_the_general_path() {
        let id = "00000000-0000-4000-8000-00000000002a";
        let fast: &[String] = &[
            format!(
                r#"{{"jsonrpc":"2.0","result":{{"success":true,"stopPropagation":false}},"id":"{id}"}}"#
            ),
            format!(r#"{{"id":"{id}","result":{{"stopPropagation":true}},"jsonrpc":"2.0"}}"#),
            format!(r#"{{ "jsonrpc" : "2.0" , "result" : {{ }} , "id" : "{id}" }} "#),
            format!(
                "{{\"jsonrpc\":\"2.0\",\"result\":{{\"note\":\"d\u{e9}j\u{e0}\",\"stopPropagation\":null,\"x\":false}},\"id\":\"{id}\"}}\r\n\t"
            ),
            format!(r#"{{"result":{{"stopPropagation":true,"success":false}},"jsonrpc":"2.0","id":"{id}"}}"#),
            r#"{"jsonrpc":"2.0","result":{},"id":"000000000000400080000000000000ab"}"#.to_owned(),
        ];
        for text in fast {
            let got = fast_hop_ack(text).map(|(id, ack)| (id, ack.stop));
            assert!(got.is_some(), "{text}");
            assert_eq!(got, general_ack(text), "{text}");
        }
        let slow: &[String] = &[
            // Not trimmed: `split_text` hands bodies over from their `{`.
            format!(r#" {{"jsonrpc":"2.0","result":{{}},"id":"{id}"}}"#),
            format!(
                r#"{{"jsonrpc":"2.0","result":{{"x":[1,{{"y":null}}],"stopPropagation":null}},"id":"{id}"}}"#
            ),
            format!(r#"{{"jsonrpc":"2.0","result":{{"n":1}},"id":"{id}"}}"#),
            format!(r#"{{"jsonrpc":"2.0","result":{{"stopPropagation":1}},"id":"{id}"}}"#),
            format!(
                r#"{{"jsonrpc":"2.0","result":{{"stopPropagation":true,"stopPropagation":true}},"id":"{id}"}}"#
            ),
            format!(r#"{{"jsonrpc":"2.0","result":{{"s\u0074opPropagation":true}},"id":"{id}"}}"#),
            format!(r#"{{"jsonrpc":"2.0","result":{{"a":true,}},"id":"{id}"}}"#),
            format!(r#"{{"jsonrpc":"2.0","result":{{"a":tru}},"id":"{id}"}}"#),
            format!(r#"{{"jsonrpc":"2.0","result":{{"a":"x\"y"}},"id":"{id}"}}"#),
            format!(r#"{{"jsonrpc":"2.0","result":{{}},"id":"{id}"}} x"#),
            format!("{{\"jsonrpc\":\"2.0\",\"result\":{{}},\"id\":\"{id}\"}}\x0c"),
            format!(r#"{{"jsonrpc":"2.0","jsonrpc":"2.0","result":{{}},"id":"{id}"}}"#),
            format!(r#"{{"jsonrpc":"2.0","result":{{}},"id":"{id}",}}"#),
            format!(r#"{{"jsonrpc":"2.0","result":{{"stopPropagation":"yes"}},"id":"{id}"}}"#),
            format!(r#"{{"jsonrpc":"2.0","result":true,"id":"{id}"}}"#),
            format!(r#"{{"jsonrpc":"2.0","result":null,"id":"{id}"}}"#),
            format!(r#"{{"jsonrpc":"1.0","result":{{}},"id":"{id}"}}"#),
            format!(
                r#"{{"jsonrpc":"2.0","result":{{}},"id":"{id}","error":{{"code":1,"message":"m"}}}}"#
            ),
            format!(r#"{{"jsonrpc":"2.0","error":{{"code":1,"message":"m"}},"id":"{id}"}}"#),
            format!(r#"{{"jsonrpc":"2.0","result":{{}},"result":{{}},"id":"{id}"}}"#),
            format!(r#"{{"jsonrpc":"2.0","result":{{}},"id":"{id}","method":"x"}}"#),
            r#"{"jsonrpc":"2.0","result":{},"id":"00000000-0000-4000-8000-00000000002\u0061"}"#
                .to_owned(),
            r#"{"jsonrpc":"2.0","result":{},"id":42}"#.to_owned(),
            r#"{"jsonrpc":"2.0","result":{},"id":null}"#.to_owned(),
            r#"{"jsonrpc":"2.0","result":{},"id":"not-a-uuid"}"#.to_owned(),
            r#"{"jsonrpc":"2.0","result":{}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t"},"id":"x"}"#
                .to_owned(),
            format!(r#"{{"jsonrpc":"2.0","result":{{}},"id":"{id}""#),
        ];
        for text in slow {
            assert!(fast_hop_ack(text).is_none(), "{text}");
        }
    }

    const ID: &str = "\"00000000-0000-4000-8000-00000000002a\"";
    /// Member names: the three of a hop reply, then others.
    const KEYS: &[&str] = &[
        "\"jsonrpc\"",
        "\"result\"",
        "\"id\"",
        "\"error\"",
        "\"i\\u0064\"",
        "\"method\"",
    ];
    /// Values for each of the three members, the valid ones first and more than once.
    const VERSIONS: &[&str] = &[
        "\"2.0\"",
        "\"2.0\"",
        "\"1.0\"",
        "2.0",
        "\"2\\u002e0\"",
        "null",
    ];
    const RESULTS: &[&str] = &[
        "{~}",
        "{~\"success\"~:~true~,~\"stopPropagation\"~:~false~}",
        "{~\"stopPropagation\"~:~true~}",
        "{\"stopPropagation\":null,\"note\":\"d\u{e9}j\u{e0}\"}",
        "{\"stopPropagation\":\"yes\"}",
        "{\"stopPropagation\":1}",
        "{\"a\":\"x\",\"stopPropagation\":true,\"stopPropagation\":false}",
        "{\"x\":[1],\"stopPropagation\":true}",
        "{\"s\\u0074opPropagation\":true}",
        "{\"stopPropagation\":true,\"stopPropagation\\u0020\":false}",
        "{\"a\":true,}",
        "{\"stopPropagation\":false,\"b\":\"x\\\"y\"}",
        "{\"stopPropagation\":false,\"b\":\"\\\\\"}",
        "true",
        "null",
        "\"2.0\"",
    ];
    const IDS: &[&str] = &[
        ID,
        ID,
        "\"000000000000400080000000000000ab\"",
        "\"00000000-0000-4000-8000-00000000002\\u0061\"",
        "\"00000000-0000-4000-8000-00000000002a\\\"\"",
        "42",
        "null",
        "\"nope\"",
        "{}",
    ];

    /// One member of a generated reply: `(key, value)` as indexes into [`KEYS`] and the
    /// value list of that key (other keys take their value from [`RESULTS`]).
    fn member(&(k, v): &(usize, usize)) -> String {
        let value = match k {
            0 => VERSIONS[v % VERSIONS.len()],
            2 | 4 => IDS[v % IDS.len()],
            _ => RESULTS[v % RESULTS.len()],
        };
        format!("~{}~:~{}", KEYS[k], value)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

        /// Whatever the one-pass reader accepts, the general path reads the same way: over
        /// member orders, names, values, repeats, whitespace and one-character edits.
        #[test]
        fn fast_hop_ack_never_disagrees(
            members in near::members(3, KEYS.len()),
            spaces in near::spaces(),
            edit in near::edit(
                vec!['{', '}', '[', ',', ':', '"', '\\', ' ', '0', 't', 'n', '\u{1}', '\u{e9}'],
            ),
        ) {
            let text = near::render(&members, member, &spaces, edit);
            // As `on_body` hands it over: from the first `{`, if the body is an object.
            let from = text.trim_start_matches([' ', '\t', '\n', '\r']);
            if let Some((id, ack)) = fast_hop_ack(from) {
                proptest::prop_assert_eq!(Some((id, ack.stop)), general_ack(from), "{:?}", text);
            }
        }

        /// The plain shape, in any member order and with any JSON whitespace, takes the fast
        /// path.
        #[test]
        fn fast_hop_ack_takes_every_plain_reply(
            order in proptest::strategy::Strategy::prop_shuffle(
                proptest::strategy::Just(vec![0usize, 1, 2]),
            ),
            result in 0usize..4,
            spaces in near::json_spaces(),
        ) {
            let members: Vec<(usize, usize)> = order.iter().map(|&k| (k, [0, result, 0][k])).collect();
            let text = near::render(&members, member, &spaces, None);
            let from = text.trim_start_matches([' ', '\t', '\n', '\r']);
            let fast = fast_hop_ack(from).map(|(id, ack)| (id, ack.stop));
            proptest::prop_assert!(fast.is_some(), "{}", text);
            proptest::prop_assert_eq!(fast, general_ack(from), "{}", text);
        }
    }
}

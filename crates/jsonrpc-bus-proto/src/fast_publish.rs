//! The bus's fast path for a client's publish: a `sendMessage` request in its plain shape,
//! read in one pass straight into its id, topic and raw payload. Anything else goes the
//! general way ([`classify`](crate::jsonrpc::classify), then the params), which gives it
//! its answer or its error.
//!
//! The general path reads the payload twice (once inside the params it keeps raw, once
//! when it reads the params); this one skips it once, with serde_json, and reads the rest
//! with [`Scan`]. Whatever it accepts the general path reads the same way
//! (`fast_publish_agrees_with_the_general_path`, the proptest beside it, and the
//! `bus_decode` fuzz target check this).

use serde_json::value::RawValue;

use crate::jsonrpc::Id;
use crate::message::method;
use crate::scan::{Key, Scan};

/// A publish read by [`fast_publish`].
#[derive(Debug)]
pub(crate) struct Publish<'a> {
    /// The request id; `None` for a notification.
    pub(crate) id: Option<Id>,
    /// The topic: not empty (its length is the bus's to check).
    pub(crate) topic: &'a str,
    /// The payload as sent; `None` when absent.
    pub(crate) payload: Option<&'a RawValue>,
}

/// Reads `text` in one pass if it is a publish in the plain shape:
/// `{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"..","payload":..},"id":..}`,
/// members in any order and with any JSON whitespace, `id` optional and a plain string, a
/// plain integer (at most 19 digits) or `null`, a non-empty `topic` and an optional
/// `payload` of any JSON value, no escape in any string this reader reads itself, and no
/// other member at either level.
///
/// Anything else is `None` and goes the general way: another method, an escaped string, an
/// extra, duplicate or missing member, a negative or fractional id, an empty or missing
/// topic, malformed JSON. `text` starts at its `{` (`split_text` trims what comes before).
pub(crate) fn fast_publish(text: &str) -> Option<Publish<'_>> {
    const JSONRPC: usize = 0;
    const METHOD: usize = 1;
    const PARAMS: usize = 2;
    const ID: usize = 3;
    let mut scan = Scan::object(text)?;
    let (mut version, mut is_publish, mut params, mut id, mut first) =
        (false, false, None, None, true);
    loop {
        match scan.key(&mut first, &["jsonrpc", "method", "params", "id"])? {
            Key::End => break,
            Key::Known(JSONRPC) if !version => {
                scan.exact("2.0")?;
                version = true;
            }
            Key::Known(METHOD) if !is_publish => {
                scan.exact(method::SEND_MESSAGE)?;
                is_publish = true;
            }
            Key::Known(PARAMS) if params.is_none() => params = Some(topic_payload(&mut scan)?),
            Key::Known(ID) if id.is_none() => id = Some(plain_id(&mut scan)?),
            _ => return None,
        }
    }
    if !version || !is_publish || !scan.at_end() {
        return None;
    }
    let (topic, payload) = params?;
    Some(Publish { id, topic, payload })
}

/// `{"topic":"..","payload":..}` with a non-empty topic, in either order, nothing else.
fn topic_payload<'a>(scan: &mut Scan<'a>) -> Option<(&'a str, Option<&'a RawValue>)> {
    const TOPIC: usize = 0;
    const PAYLOAD: usize = 1;
    scan.eat(b'{')?;
    let (mut topic, mut payload, mut first) = (None, None, true);
    loop {
        match scan.key(&mut first, &["topic", "payload"])? {
            Key::End => break,
            Key::Known(TOPIC) if topic.is_none() => topic = Some(scan.string()?),
            Key::Known(PAYLOAD) if payload.is_none() => payload = Some(scan.raw_value()?),
            _ => return None,
        }
    }
    Some((topic.filter(|t| !t.is_empty())?, payload))
}

/// A plain string, a plain non-negative integer or `null`.
fn plain_id(scan: &mut Scan<'_>) -> Option<Id> {
    match scan.next()? {
        b'"' => scan.string_rest().map(|s| Id::Str(s.to_owned())),
        b'n' => scan.literal_rest(b'n').map(|_| Id::Null),
        b'0'..=b'9' => scan.integer_rest().map(|n| Id::Number(n.into())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::topic_params;
    use crate::jsonrpc::{classify, Incoming};
    use crate::scan::near;

    /// A publish as both paths give it: id, topic, payload (absent as `null`).
    type Read = (Option<Id>, String, String);

    fn fast(text: &str) -> Option<Read> {
        let p = fast_publish(text)?;
        Some((
            p.id,
            p.topic.to_owned(),
            p.payload.map_or("null", RawValue::get).to_owned(),
        ))
    }

    /// What the general path makes of `text`: a valid `sendMessage` call's id, topic and
    /// payload.
    fn general(text: &str) -> Option<Read> {
        let Ok(Incoming::Call(call)) = classify(text) else {
            return None;
        };
        if call.method != "sendMessage" {
            return None;
        }
        let (topic, payload) = topic_params(call.params).ok()?;
        Some((
            call.id,
            topic.into_owned(),
            payload.map_or("null", RawValue::get).to_owned(),
        ))
    }

    #[test]
    fn fast_publish_agrees_with_the_general_path() {
        let fast_ones = [
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"inbound:chat-1","payload":{"chat_id":"chat-1","text":"hello","from":"user-1"}},"id":4}"#,
            r#"{"id":"a-b","params":{"payload":[1,"x\"y",{"z":null}],"topic":"t"},"method":"sendMessage","jsonrpc":"2.0"}"#,
            "{\n\t\"jsonrpc\" : \"2.0\" , \"method\" : \"sendMessage\" , \"params\" : { \"topic\" : \"d\u{e9}j\u{e0}\" , \"payload\" : 1.5e3 } , \"id\" : null } \r\n",
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t"}}"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t","payload":null},"id":0}"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t","payload":"\ud83d\ude00"},"id":9999999999999999999}"#,
        ];
        for text in fast_ones {
            let got = fast(text);
            assert!(got.is_some(), "{text}");
            assert_eq!(got, general(text), "{text}");
        }
        let slow = [
            // Not trimmed: `split_text` hands bodies over from their `{`.
            r#" {"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t"}}"#,
            r#"{"jsonrpc":"2.0","method":"subscribe","params":{"topic":"t"},"id":1}"#,
            r#"{"jsonrpc":"2.0","method":"send\u004dessage","params":{"topic":"t"},"id":1}"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t\u0031"},"id":1}"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":""},"id":1}"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":null},"id":1}"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":7},"id":1}"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"payload":1},"id":1}"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t","extra":1},"id":1}"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t","topic":"u"},"id":1}"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":["t"],"id":1}"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t","payload":[1,]},"id":1}"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t"},"id":-1}"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t"},"id":1.0}"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t"},"id":01}"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t"},"id":18446744073709551615}"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t"},"id":true}"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t"},"id":1,"id":2}"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t"},"id":1,"x":2}"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","method":"sendMessage","params":{"topic":"t"}}"#,
            r#"{"jsonrpc":"2.0","jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t"}}"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t"},"params":{"topic":"t"}}"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t","payload":1,"payload":1}}"#,
            r#"{"jsonrpc":"1.0","method":"sendMessage","params":{"topic":"t"},"id":1}"#,
            r#"{"method":"sendMessage","params":{"topic":"t"},"id":1}"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","id":1}"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t"},"id":1} x"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t"},"id":1"#,
            r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t","payload":1x},"id":1}"#,
        ];
        for text in slow {
            assert!(fast(text).is_none(), "{text}");
        }
    }

    /// Member names: the four of a publish, then others.
    const KEYS: &[&str] = &[
        "\"jsonrpc\"",
        "\"method\"",
        "\"params\"",
        "\"id\"",
        "\"result\"",
        "\"i\\u0064\"",
    ];
    /// Values for each member, the valid ones first and more than once.
    const VERSIONS: &[&str] = &["\"2.0\"", "\"2.0\"", "\"2.1\"", "2.0", "\"2\\u002e0\""];
    const METHODS: &[&str] = &[
        "\"sendMessage\"",
        "\"sendMessage\"",
        "\"send\\u004dessage\"",
        "\"ping\"",
        "null",
    ];
    const PARAMS: &[&str] = &[
        "{~\"topic\"~:~\"inbound:chat-1\"~,~\"payload\"~:~{\"text\":\"hi\",\"n\":[1,2.5,-3e2]}~}",
        "{~\"payload\"~:~\"x\\\"y\"~,~\"topic\"~:~\"t\"~}",
        "{~\"topic\"~:~\"t\"~}",
        "{\"topic\":\"t\",\"payload\":null}",
        "{\"topic\":\"\"}",
        "{\"topic\":null}",
        "{\"topic\":\"t\\u0031\"}",
        "{\"topic\":\"t\",\"topic\":\"u\"}",
        "{\"topic\":\"t\",\"payload\":1,\"payload\":2}",
        "{\"topic\":\"t\",\"other\":1}",
        "{\"topic\":\"t\",\"payload\":{\"a\":}}",
        "{}",
        "[\"t\"]",
        "\"t\"",
    ];
    const IDS: &[&str] = &[
        "4",
        "4",
        "\"a-1\"",
        "null",
        "0",
        "00",
        "-1",
        "1.5",
        "1e2",
        "true",
        "\"x\\\"\"",
        "12345678901234567890",
        "{}",
    ];

    /// One member of a generated publish: `(key, value)` as indexes into [`KEYS`] and the
    /// value list of that key (other keys take theirs from [`PARAMS`]).
    fn member(&(k, v): &(usize, usize)) -> String {
        let value = match k {
            0 => VERSIONS[v % VERSIONS.len()],
            1 => METHODS[v % METHODS.len()],
            3 | 5 => IDS[v % IDS.len()],
            _ => PARAMS[v % PARAMS.len()],
        };
        format!("~{}~:~{}", KEYS[k], value)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

        /// Whatever the one-pass reader accepts, the general path reads the same way.
        #[test]
        fn fast_publish_never_disagrees(
            members in near::members(4, KEYS.len()),
            spaces in near::spaces(),
            edit in near::edit(
                vec!['{', '}', '[', ',', ':', '"', '\\', ' ', '0', '-', '.', 'e', '\u{1}'],
            ),
        ) {
            let text = near::render(&members, member, &spaces, edit);
            if let Some(read) = fast(&text) {
                proptest::prop_assert_eq!(Some(read), general(&text), "{:?}", text);
            }
        }

        /// The plain shape, in any member order and with any JSON whitespace, takes the fast
        /// path.
        #[test]
        fn fast_publish_takes_every_plain_publish(
            order in proptest::strategy::Strategy::prop_shuffle(
                proptest::strategy::Just(vec![0usize, 1, 2, 3]),
            ),
            params in 0usize..4,
            id in 0usize..5,
            spaces in near::json_spaces(),
        ) {
            let members: Vec<(usize, usize)> =
                order.iter().map(|&k| (k, [0, 0, params, id][k])).collect();
            let text = near::render(&members, member, &spaces, None);
            let read = fast(&text);
            proptest::prop_assert!(read.is_some(), "{}", text);
            proptest::prop_assert_eq!(read, general(&text), "{}", text);
        }
    }
}

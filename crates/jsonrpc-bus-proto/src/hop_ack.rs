//! The bus's fast path for the message it gets most: a subscriber's success reply to a hop,
//! decoded in one pass straight into the request id and the `stopPropagation` answer.
//! Anything else goes the general way ([`classify`](crate::jsonrpc::classify)).

use agentwire_core::Id128;
use serde::Deserialize;

use crate::event::HopOutcome;

/// A subscriber's `sendMessage` result: only `stopPropagation` matters (absent = false).
#[derive(Deserialize)]
pub(crate) struct Ack {
    #[serde(default, rename = "stopPropagation")]
    stop: Option<bool>,
}

impl Ack {
    pub(crate) fn outcome(&self) -> HopOutcome {
        match self.stop {
            Some(true) => HopOutcome::Stopped,
            _ => HopOutcome::Continued,
        }
    }
}

/// The message the bus gets most: a subscriber's success reply to a hop,
/// `{"jsonrpc":"2.0","result":{...},"id":"<uuid>"}` with exactly these members in any order.
///
/// Deserialized by hand so that anything else fails at its first unexpected member with an
/// empty error (serde's derived `deny_unknown_fields` formats a message listing the fields,
/// which costs more than the whole decode).
struct HopAck<'a> {
    jsonrpc: &'a str,
    result: Ack,
    id: &'a str,
}

/// A member name of [`HopAck`]; `Other` for any other.
enum HopField {
    Jsonrpc,
    Result,
    Id,
    Other,
}

impl<'de> Deserialize<'de> for HopField {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Names;
        impl serde::de::Visitor<'_> for Names {
            type Value = HopField;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a member name")
            }
            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<HopField, E> {
                Ok(match name {
                    "jsonrpc" => HopField::Jsonrpc,
                    "result" => HopField::Result,
                    "id" => HopField::Id,
                    _ => HopField::Other,
                })
            }
        }
        d.deserialize_identifier(Names)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for HopAck<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Members<'a> {
            type Value = HopAck<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a hop reply")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<HopAck<'a>, A::Error> {
                use serde::de::Error;
                let (mut jsonrpc, mut result, mut id) = (None, None, None);
                while let Some(field) = map.next_key::<HopField>()? {
                    match field {
                        HopField::Jsonrpc if jsonrpc.is_none() => {
                            jsonrpc = Some(map.next_value::<&'de str>()?);
                        }
                        HopField::Result if result.is_none() => {
                            result = Some(map.next_value::<Ack>()?);
                        }
                        HopField::Id if id.is_none() => id = Some(map.next_value::<&'de str>()?),
                        _ => return Err(A::Error::custom("")),
                    }
                }
                match (jsonrpc, result, id) {
                    (Some(jsonrpc), Some(result), Some(id)) => Ok(HopAck {
                        jsonrpc,
                        result,
                        id,
                    }),
                    _ => Err(A::Error::custom("")),
                }
            }
        }
        d.deserialize_map(Members(std::marker::PhantomData))
    }
}

/// Decodes `text` in one pass if it is a well-formed [`HopAck`] for an id of ours (the
/// request id and the `stopPropagation` answer). Anything else, including every malformed
/// or unusual reply (an escaped id, an error, a result that is not an object with a boolean
/// `stopPropagation`, a duplicate or extra member), is `None` and goes the general way
/// (`classify`), which gives it its answer or its violation; a request fails here at its
/// first member that is not one of the three, before its params are read.
pub(crate) fn fast_hop_ack(text: &str) -> Option<(Id128, Ack)> {
    let ack: HopAck<'_> = serde_json::from_str(text).ok()?;
    if ack.jsonrpc != "2.0" {
        return None;
    }
    Some((Id128::parse(ack.id)?, ack.result))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::{classify, Incoming};

    /// What the general path makes of a reply: the id and answer of a valid hop ack.
    fn general_ack(text: &str) -> Option<(Id128, Option<bool>)> {
        // As `on_body` hands it over: `split_text` trims leading whitespace.
        let Ok(Incoming::Reply(reply)) = classify(text.trim_start()) else {
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
            format!(r#" {{ "jsonrpc" : "2.0" , "result" : {{ }} , "id" : "{id}" }} "#),
            format!(
                r#"{{"jsonrpc":"2.0","result":{{"x":[1,{{"y":null}}],"stopPropagation":null}},"id":"{id}"}}"#
            ),
        ];
        for text in fast {
            let got = fast_hop_ack(text).map(|(id, ack)| (id, ack.stop));
            assert!(got.is_some(), "{text}");
            assert_eq!(got, general_ack(text), "{text}");
        }
        let slow: &[String] = &[
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
}

//! One-pass decoding of `{"type": ..., ...}` objects.
//!
//! serde's derived internally tagged enums buffer the whole object before choosing a
//! variant (and a buffered object cannot hold a `RawValue`). Every message the real peers
//! send puts `type` first, so the decoder here reads the first key; when it is `type` it
//! decodes the variant straight from the rest of the map, with no buffer. When `type` comes
//! later, [`probe`] skips every other value (no allocation) to find it and decodes the variant
//! in a second pass over the text; the [`Deserialize`] impl of [`Probe`], which has no text
//! to read twice, buffers the object instead. Field order never changes the result, only the
//! speed.

use std::borrow::Cow;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// A message enum decoded by [`probe`] (or through [`Probe`]'s `Deserialize`).
///
/// ```
/// use agentwire_core::json::{probe, Probe, Tagged};
/// use serde::{Deserialize, Deserializer};
///
/// #[derive(Debug, PartialEq, Deserialize)]
/// struct Ping { seq: u32 }
///
/// #[derive(Debug, PartialEq)]
/// enum Msg { Ping(Ping) }
///
/// impl<'de> Tagged<'de> for Msg {
///     fn decode_variant<D: Deserializer<'de>>(tag: &str, d: D) -> Result<Option<Self>, D::Error> {
///         Ok(Some(match tag {
///             "ping" => Self::Ping(Ping::deserialize(d)?),
///             _ => return Ok(None),
///         }))
///     }
/// }
///
/// let m = probe::<Msg>(r#"{"seq":7,"type":"ping"}"#).unwrap();
/// assert!(matches!(m, Probe::Message(Msg::Ping(Ping { seq: 7 }))));
/// ```
pub trait Tagged<'de>: Sized {
    /// Decodes the variant named by `tag` from `d`: the rest of an object whose `type` key
    /// was already read, or a whole object whose `type` key the variant must ignore (so
    /// variant structs must not deny unknown fields). `Ok(None)` for a type this sender does
    /// not send; `d` need not be consumed then.
    fn decode_variant<D: Deserializer<'de>>(tag: &str, d: D) -> Result<Option<Self>, D::Error>;
}

/// The result of looking at one JSON value that should be a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe<T> {
    /// A known message type that decoded.
    Message(T),
    /// An object whose string `type` this sender does not send (cut to [`MAX_TYPE_NAME`]
    /// bytes at a character boundary).
    UnknownType(String),
    /// An object without `type`, or whose `type` is not a string.
    MissingType,
    /// Valid JSON that is not an object.
    NotAnObject,
}

/// Longest unknown `type` name kept in [`Probe::UnknownType`] (longer ones are cut): 64 bytes.
pub const MAX_TYPE_NAME: usize = 64;

/// Decodes `text` as one message; `Err` for a syntax error, trailing characters, or a known
/// type with bad fields (`is_data()` on the error tells the last apart).
pub fn probe<'a, T: Tagged<'a>>(text: &'a str) -> Result<Probe<T>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let first = (&mut de).deserialize_any(ProbeVisitor::<T>::new(false))?;
    de.end()?;
    match first {
        First::Done(p) => Ok(p),
        First::Deferred(tag) => {
            let mut de = serde_json::Deserializer::from_str(text);
            match T::decode_variant(&tag, &mut de)? {
                Some(m) => {
                    de.end()?;
                    Ok(Probe::Message(m))
                }
                None => Ok(Probe::UnknownType(cut(&tag))),
            }
        }
    }
}

/// Decodes from any deserializer; when `type` is not the first key the object is buffered
/// into a `serde_json::Map` (use [`probe`] on text to avoid that).
impl<'de, T: Tagged<'de>> Deserialize<'de> for Probe<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match d.deserialize_any(ProbeVisitor::<T>::new(true))? {
            First::Done(p) => Ok(p),
            // The buffering visitor decodes every object itself.
            First::Deferred(_) => Err(de::Error::custom("message type found after other keys")),
        }
    }
}

fn cut(tag: &str) -> String {
    let mut end = tag.len().min(MAX_TYPE_NAME);
    while !tag.is_char_boundary(end) {
        end -= 1;
    }
    tag[..end].to_owned()
}

/// The first pass: done, or (not buffering) a `type` found after other keys.
enum First<T> {
    Done(Probe<T>),
    Deferred(String),
}

struct ProbeVisitor<T> {
    /// Buffer an object whose first key is not `type` (no second pass possible).
    buffer: bool,
    _t: PhantomData<T>,
}

impl<T> ProbeVisitor<T> {
    fn new(buffer: bool) -> Self {
        Self {
            buffer,
            _t: PhantomData,
        }
    }
}

/// A map key: `type`, or another key (kept only when buffering, so the fast and two-pass
/// paths never allocate for keys).
enum Key {
    Type,
    Other(Option<String>),
}

struct KeySeed {
    keep: bool,
}

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeySeed {
    type Value = Key;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an object key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
        Ok(if v == "type" {
            Key::Type
        } else {
            Key::Other(self.keep.then(|| v.to_owned()))
        })
    }
}

/// A `type` value: `Some` string, or `None` for any non-string value (consumed).
struct MaybeStr<'a>(Option<Cow<'a, str>>);

impl<'de> Deserialize<'de> for MaybeStr<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = MaybeStr<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a message type")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(MaybeStr(Some(v.to_owned().into())))
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(MaybeStr(Some(v.into())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(MaybeStr(Some(v.into())))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(MaybeStr(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(MaybeStr(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(MaybeStr(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(MaybeStr(None))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(MaybeStr(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(MaybeStr(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(MaybeStr(None))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de, T: Tagged<'de>> Visitor<'de> for ProbeVisitor<T> {
    type Value = First<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a message object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<First<T>, A::Error> {
        let keep = self.buffer;
        let first_key = match map.next_key_seed(KeySeed { keep })? {
            None => return Ok(First::Done(Probe::MissingType)),
            Some(Key::Type) => {
                // Fast path: `type` is the first key.
                let MaybeStr(tag) = map.next_value::<MaybeStr<'de>>()?;
                let Some(tag) = tag else {
                    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                    return Ok(First::Done(Probe::MissingType));
                };
                // `&mut map`: an unknown tag decodes nothing, and the rest of the object must
                // still be consumed, or the parser would see its next `,` as a syntax error.
                let decoded = T::decode_variant(&tag, MapAccessDeserializer::new(&mut map))?;
                return Ok(First::Done(match decoded {
                    Some(m) => Probe::Message(m),
                    None => {
                        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                        Probe::UnknownType(cut(&tag))
                    }
                }));
            }
            Some(Key::Other(name)) => name,
        };
        if let Some(first_key) = first_key {
            return buffered(first_key, map).map(First::Done);
        }
        // Two-pass path: skip values until `type`, then let `probe` decode a second time.
        map.next_value::<IgnoredAny>()?;
        let mut found: Option<Option<String>> = None;
        while let Some(key) = map.next_key_seed(KeySeed { keep: false })? {
            if matches!(key, Key::Type) && found.is_none() {
                let MaybeStr(tag) = map.next_value::<MaybeStr<'de>>()?;
                found = Some(tag.map(Cow::into_owned));
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(match found {
            Some(Some(tag)) => First::Deferred(tag),
            _ => First::Done(Probe::MissingType),
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<First<T>, A::Error> {
        while a.next_element::<IgnoredAny>()?.is_some() {}
        Ok(First::Done(Probe::NotAnObject))
    }
    fn visit_bool<E>(self, _: bool) -> Result<First<T>, E> {
        Ok(First::Done(Probe::NotAnObject))
    }
    fn visit_i64<E>(self, _: i64) -> Result<First<T>, E> {
        Ok(First::Done(Probe::NotAnObject))
    }
    fn visit_u64<E>(self, _: u64) -> Result<First<T>, E> {
        Ok(First::Done(Probe::NotAnObject))
    }
    fn visit_f64<E>(self, _: f64) -> Result<First<T>, E> {
        Ok(First::Done(Probe::NotAnObject))
    }
    fn visit_str<E>(self, _: &str) -> Result<First<T>, E> {
        Ok(First::Done(Probe::NotAnObject))
    }
    fn visit_unit<E>(self) -> Result<First<T>, E> {
        Ok(First::Done(Probe::NotAnObject))
    }
}

/// The buffering slow path: the whole object into a map, then `type` looked up anywhere.
fn buffered<'de, T: Tagged<'de>, A: MapAccess<'de>>(
    first_key: String,
    mut map: A,
) -> Result<Probe<T>, A::Error> {
    let mut obj = serde_json::Map::new();
    let first_val: serde_json::Value = map.next_value()?;
    obj.insert(first_key, first_val);
    while let Some((k, v)) = map.next_entry::<String, serde_json::Value>()? {
        obj.insert(k, v);
    }
    let tag = match obj.get("type") {
        Some(serde_json::Value::String(s)) => s.clone(),
        _ => return Ok(Probe::MissingType),
    };
    T::decode_variant(&tag, serde_json::Value::Object(obj))
        .map(|m| m.map_or_else(|| Probe::UnknownType(cut(&tag)), Probe::Message))
        .map_err(de::Error::custom)
}

#[cfg(test)]
mod tests {
    use serde::de::IntoDeserializer;

    use super::*;
    use crate::json::RawJson;

    #[derive(Debug, PartialEq, Deserialize)]
    struct Hello {
        name: String,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    struct Offer {
        sdp: RawJson,
    }

    #[derive(Debug, PartialEq)]
    enum Msg {
        Hello(Hello),
        Offer(Offer),
    }

    impl<'de> Tagged<'de> for Msg {
        fn decode_variant<D: Deserializer<'de>>(tag: &str, d: D) -> Result<Option<Self>, D::Error> {
            Ok(Some(match tag {
                "hello" => Self::Hello(Hello::deserialize(d)?),
                "offer" => Self::Offer(Offer::deserialize(d)?),
                _ => return Ok(None),
            }))
        }
    }

    fn hello(name: &str) -> Probe<Msg> {
        Probe::Message(Msg::Hello(Hello {
            name: name.to_owned(),
        }))
    }

    #[test]
    fn type_first_or_later_gives_the_same_message() {
        for text in [
            r#"{"type":"hello","name":"a"}"#,
            r#"{"name":"a","type":"hello"}"#,
            r#"{"name":"a","x":[{"type":"nope"}],"type":"hello"}"#,
        ] {
            assert_eq!(probe::<Msg>(text).expect(text), hello("a"), "{text}");
            let via_serde: Probe<Msg> = serde_json::from_str(text).expect(text);
            assert_eq!(via_serde, hello("a"), "{text}");
        }
    }

    #[test]
    fn a_raw_value_survives_the_two_pass_path() {
        let m = probe::<Msg>(r#"{"sdp": {"a": 1}, "type": "offer"}"#).expect("offer");
        let Probe::Message(Msg::Offer(o)) = m else {
            panic!("{m:?}");
        };
        assert_eq!(o.sdp.get(), r#"{"a": 1}"#);
    }

    #[test]
    fn unknown_missing_and_non_objects_are_told_apart() {
        type Decode = fn(&str) -> Result<Probe<Msg>, serde_json::Error>;
        let by_text: Decode = |t| probe::<Msg>(t);
        let by_serde: Decode = |t| serde_json::from_str::<Probe<Msg>>(t);
        for p in [by_text, by_serde] {
            assert_eq!(
                p(r#"{"type":"nope","x":1}"#).expect("json"),
                Probe::UnknownType("nope".into())
            );
            assert_eq!(
                p(r#"{"x":1,"type":"nope"}"#).expect("json"),
                Probe::UnknownType("nope".into())
            );
            assert_eq!(
                p(r#"{"type":7,"name":"a"}"#).expect("json"),
                Probe::MissingType
            );
            assert_eq!(p(r#"{"name":"a"}"#).expect("json"), Probe::MissingType);
            assert_eq!(p("{}").expect("json"), Probe::MissingType);
            for not_object in ["[1,{}]", "1", "-1", "1.5", "true", "\"s\"", "null"] {
                assert_eq!(
                    p(not_object).expect("json"),
                    Probe::NotAnObject,
                    "{not_object}"
                );
            }
            assert!(p("{").is_err());
            assert!(p(r#"{"type":"hello"}"#).expect_err("no name").is_data());
            assert!(p(r#"{"type":"hello","name":1}"#)
                .expect_err("bad")
                .is_data());
        }
        assert!(probe::<Msg>(r#"{"type":"hello","name":"a"} x"#).is_err());
    }

    #[test]
    fn long_unknown_types_are_cut_at_a_char_boundary() {
        let long = format!(r#"{{"type":"{}é"}}"#, "x".repeat(63));
        let Probe::UnknownType(t) = probe::<Msg>(&long).expect("json") else {
            panic!("unknown");
        };
        assert_eq!(t, "x".repeat(63));
        let Probe::UnknownType(t) =
            probe::<Msg>(&format!(r#"{{"a":0,"type":"{}"}}"#, "y".repeat(100))).expect("json")
        else {
            panic!("unknown");
        };
        assert_eq!(t.len(), MAX_TYPE_NAME);
    }

    #[test]
    fn decodes_from_a_value_too() {
        let v = serde_json::json!({"name": "b", "type": "hello"});
        let p = Probe::<Msg>::deserialize(v.into_deserializer()).expect("value");
        assert_eq!(p, hello("b"));
    }
}

//! One-pass decoding of `{"type": ..., ...}` objects.
//!
//! serde's derived internally tagged enums buffer the whole object before choosing a
//! variant (and a buffered object cannot hold a `RawValue`, which `offer.signal` is). Every
//! message the real peers send puts `type` first, so [`probe`] reads the first key; when it
//! is `type` it decodes the variant straight from the rest of the map, with no buffer. When
//! `type` comes later, a first pass skips every other value (no allocation) to find it, and
//! a second pass decodes the variant from the text: field order never changes the result,
//! only the speed. (Adapted from chopsticks-proto's `message/tagged.rs`.)

use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// What a message enum needs to be decoded by [`probe`].
pub(crate) trait Tagged<'de>: Sized {
    /// Decodes the variant named by `tag` from `d` (an object whose `type` key was already
    /// read, or a whole object whose `type` key the variant ignores); `Ok(None)` for a type
    /// this sender does not send.
    fn decode_variant<D: Deserializer<'de>>(tag: &str, d: D) -> Result<Option<Self>, D::Error>;
}

/// The result of looking at one JSON text that should be a message.
#[derive(Debug)]
pub(crate) enum Probe<T> {
    /// A known message type that decoded.
    Message(T),
    /// An object whose string `type` this sender does not send (capped at 64 bytes).
    UnknownType(String),
    /// An object without `type`, or whose `type` is not a string.
    MissingType,
    /// Valid JSON that is not an object.
    NotAnObject,
}

/// Longest unknown `type` name kept in [`Probe::UnknownType`] (longer ones are cut).
const MAX_TYPE_NAME: usize = 64;

/// Decodes `text` as one message; `Err` for a syntax error or a known type with bad fields.
pub(crate) fn probe<'a, T: Tagged<'a>>(text: &'a str) -> Result<Probe<T>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let first = de.deserialize_any(ProbeVisitor::<T>(PhantomData))?;
    de.end()?;
    match first {
        First::Done(p) => Ok(p),
        First::Deferred(tag) => {
            let mut de = serde_json::Deserializer::from_str(text);
            let m = T::decode_variant(&tag, &mut de)?;
            de.end()?;
            Ok(m.map_or_else(|| Probe::UnknownType(cut(&tag)), Probe::Message))
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

/// The first pass: done, or a `type` found after other keys.
enum First<T> {
    Done(Probe<T>),
    Deferred(String),
}

struct ProbeVisitor<T>(PhantomData<T>);

/// Reads a map key: whether it is `type` (no allocation).
struct IsType;

impl<'de> DeserializeSeed<'de> for IsType {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for IsType {
    type Value = bool;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an object key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        Ok(v == "type")
    }
}

/// A `type` value: `Some` string, or `None` for any non-string value (consumed).
struct MaybeStr<'a>(Option<std::borrow::Cow<'a, str>>);

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
        let Some(first_is_type) = map.next_key_seed(IsType)? else {
            return Ok(First::Done(Probe::MissingType));
        };
        if first_is_type {
            // Fast path: `type` is the first key.
            let MaybeStr(tag) = map.next_value::<MaybeStr<'de>>()?;
            let Some(tag) = tag else {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                return Ok(First::Done(Probe::MissingType));
            };
            // `&mut map`: an unknown tag decodes nothing, and the rest of the object must
            // still be consumed, or the parser would see its next `,` as a syntax error.
            return Ok(First::Done(
                match T::decode_variant(&tag, MapAccessDeserializer::new(&mut map))? {
                    Some(m) => Probe::Message(m),
                    None => {
                        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                        Probe::UnknownType(cut(&tag))
                    }
                },
            ));
        }
        // Slow path: skip values until `type`, then let the caller decode a second time.
        map.next_value::<IgnoredAny>()?;
        let mut found: Option<Option<String>> = None;
        while let Some(is_type) = map.next_key_seed(IsType)? {
            if is_type && found.is_none() {
                let MaybeStr(tag) = map.next_value::<MaybeStr<'de>>()?;
                found = Some(tag.map(std::borrow::Cow::into_owned));
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

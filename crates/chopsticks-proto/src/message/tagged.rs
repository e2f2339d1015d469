//! One-pass decoding of `{"type": ..., ...}` objects.
//!
//! serde's derived internally tagged enums buffer the whole object before choosing a
//! variant. Every message of the spec (and of the real peers) puts `type` first, so the
//! visitor here reads the first key; when it is `type` it decodes the variant straight from
//! the rest of the map, with no buffer. Otherwise it falls back to buffering the object
//! into a `serde_json::Map`, so field order never changes the result, only the speed.

use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// What a message enum needs to be decoded by [`Probe`].
pub(crate) trait Tagged<'de>: Sized {
    /// The known `type` values, plus one catch-all (`#[serde(other)]`) for the rest.
    type Tag: Deserialize<'de> + Copy;

    /// Decodes the variant named by `tag` from `d` (an object without its `type` key, or a
    /// whole buffered object); `Ok(None)` for the catch-all tag.
    fn decode_variant<D: Deserializer<'de>>(tag: Self::Tag, d: D)
        -> Result<Option<Self>, D::Error>;
}

/// The result of looking at one JSON value that should be a message.
#[derive(Debug)]
pub(crate) enum Probe<T> {
    /// A known message type that decoded.
    Message(T),
    /// An object whose `type` is missing, not a string, or not a type this sender sends.
    UnknownType,
    /// Valid JSON that is not an object.
    NotAnObject,
}

impl<'de, T: Tagged<'de>> Deserialize<'de> for Probe<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ProbeVisitor(PhantomData))
    }
}

struct ProbeVisitor<T>(PhantomData<T>);

/// Reads a map key: `Ok(None)` for `type` (no allocation), the key's name otherwise.
struct FirstKey;

impl<'de> DeserializeSeed<'de> for FirstKey {
    type Value = Option<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_str(Self)
    }
}

impl Visitor<'_> for FirstKey {
    type Value = Option<String>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an object key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<String>, E> {
        Ok((v != "type").then(|| v.to_owned()))
    }
}

/// A `type` value: `Some` known tag, or `None` for any other string or non-string value.
struct MaybeStr<Tag>(Option<Tag>);

impl<'de, Tag: Deserialize<'de>> Deserialize<'de> for MaybeStr<Tag> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<Tag>(PhantomData<Tag>);
        impl<'de, Tag: Deserialize<'de>> Visitor<'de> for V<Tag> {
            type Value = MaybeStr<Tag>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a message type")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                let d = de::value::StrDeserializer::<E>::new(v);
                Ok(MaybeStr(Tag::deserialize(d).ok()))
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                let d = de::value::BorrowedStrDeserializer::<E>::new(v);
                Ok(MaybeStr(Tag::deserialize(d).ok()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                self.visit_str(&v)
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
        d.deserialize_any(V(PhantomData))
    }
}

impl<'de, T: Tagged<'de>> Visitor<'de> for ProbeVisitor<T> {
    type Value = Probe<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a message object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Probe<T>, A::Error> {
        // Fast path: `type` is the first key.
        let Some(first_key) = map.next_key_seed(FirstKey)? else {
            return Ok(Probe::UnknownType);
        };
        let Some(first_key) = first_key else {
            let MaybeStr(tag) = map.next_value::<MaybeStr<T::Tag>>()?;
            let Some(tag) = tag else {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                return Ok(Probe::UnknownType);
            };
            // `&mut map`: a catch-all tag decodes nothing, and the rest of the object must
            // still be consumed, or the parser would see its next `,` as a syntax error.
            return Ok(
                match T::decode_variant(tag, MapAccessDeserializer::new(&mut map))? {
                    Some(m) => Probe::Message(m),
                    None => {
                        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                        Probe::UnknownType
                    }
                },
            );
        };
        // Slow path: buffer the object, then look for `type` anywhere.
        let mut obj = serde_json::Map::new();
        let first_val: serde_json::Value = map.next_value()?;
        obj.insert(first_key, first_val);
        while let Some((k, v)) = map.next_entry::<String, serde_json::Value>()? {
            obj.insert(k, v);
        }
        let tag = match obj.get("type") {
            Some(serde_json::Value::String(s)) => {
                let d = de::value::StrDeserializer::<serde_json::Error>::new(s);
                T::Tag::deserialize(d).ok()
            }
            _ => None,
        };
        let Some(tag) = tag else {
            return Ok(Probe::UnknownType);
        };
        T::decode_variant(tag, serde_json::Value::Object(obj))
            .map(|m| m.map_or(Probe::UnknownType, Probe::Message))
            .map_err(de::Error::custom)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Probe<T>, A::Error> {
        while a.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Probe::NotAnObject)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Probe<T>, E> {
        Ok(Probe::NotAnObject)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Probe<T>, E> {
        Ok(Probe::NotAnObject)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Probe<T>, E> {
        Ok(Probe::NotAnObject)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Probe<T>, E> {
        Ok(Probe::NotAnObject)
    }
    fn visit_str<E>(self, _: &str) -> Result<Probe<T>, E> {
        Ok(Probe::NotAnObject)
    }
    fn visit_unit<E>(self) -> Result<Probe<T>, E> {
        Ok(Probe::NotAnObject)
    }
}

//! Opaque JSON values kept as text until someone needs them.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// A JSON value kept as its text, never re-parsed to forward it (a request's `data`, a bus
/// payload, an SDP, a tool's `params`).
///
/// Serializes and deserializes transparently as the JSON value itself. Equality compares
/// the text, so `{"a":1}` and `{ "a": 1 }` differ; use [`to_value`](Self::to_value) to
/// compare meaning. `Debug` and `Display` print the text.
#[derive(Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RawJson(Box<RawValue>);

impl RawJson {
    /// `null`.
    pub fn null() -> Self {
        Self(RawValue::NULL.to_owned())
    }

    /// `{}`.
    pub fn empty_object() -> Self {
        Self::from_static("{}")
    }

    /// `[]`.
    pub fn empty_array() -> Self {
        Self::from_static("[]")
    }

    /// A constant text known to be JSON; `null` if it is not.
    fn from_static(text: &str) -> Self {
        Self::from_text(text).unwrap_or_else(|_| Self::null())
    }

    /// Encodes a [`serde_json::Value`] (infallible: a `Value` always encodes).
    pub fn from_value(v: &serde_json::Value) -> Self {
        serde_json::value::to_raw_value(v).map_or_else(|_| Self::null(), Self)
    }

    /// Encodes any serializable value; `Err` if its `Serialize` impl fails (for example a
    /// map with non-string keys).
    pub fn from_serialize<T: Serialize + ?Sized>(v: &T) -> Result<Self, serde_json::Error> {
        serde_json::value::to_raw_value(v).map(Self)
    }

    /// Checks that `text` is one JSON value and keeps it as is (copied).
    pub fn from_text(text: &str) -> Result<Self, serde_json::Error> {
        RawValue::from_string(text.to_owned()).map(Self)
    }

    /// Checks that `text` is one JSON value and keeps it as is (not copied).
    pub fn from_string(text: String) -> Result<Self, serde_json::Error> {
        RawValue::from_string(text).map(Self)
    }

    /// Copies a borrowed raw value (one decoded with `#[serde(borrow)] &RawValue`).
    pub fn from_raw(raw: &RawValue) -> Self {
        Self(raw.to_owned())
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// The JSON text (the same as [`get`](Self::get)).
    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The raw value.
    pub fn as_raw(&self) -> &RawValue {
        &self.0
    }

    /// The boxed raw value.
    pub fn into_raw(self) -> Box<RawValue> {
        self.0
    }

    /// Parses the text into a [`serde_json::Value`] (`Null` if it cannot, which a `RawJson`
    /// built by this type's constructors never hits).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_str(self.0.get()).unwrap_or(serde_json::Value::Null)
    }

    /// Parses the text into `T` (borrowing from it where `T` borrows).
    pub fn parse<'a, T: Deserialize<'a>>(&'a self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.0.get())
    }

    /// Whether the value is JSON `null`.
    pub fn is_null(&self) -> bool {
        self.0.get().trim() == "null"
    }
}

impl Default for RawJson {
    /// `null`.
    fn default() -> Self {
        Self::null()
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Eq for RawJson {}

impl std::hash::Hash for RawJson {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.get().hash(state);
    }
}

impl fmt::Debug for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

impl fmt::Display for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

impl From<serde_json::Value> for RawJson {
    fn from(v: serde_json::Value) -> Self {
        Self::from_value(&v)
    }
}

impl From<&serde_json::Value> for RawJson {
    fn from(v: &serde_json::Value) -> Self {
        Self::from_value(v)
    }
}

impl From<Box<RawValue>> for RawJson {
    fn from(raw: Box<RawValue>) -> Self {
        Self(raw)
    }
}

impl From<&RawValue> for RawJson {
    fn from(raw: &RawValue) -> Self {
        Self::from_raw(raw)
    }
}

impl From<RawJson> for Box<RawValue> {
    fn from(r: RawJson) -> Self {
        r.0
    }
}

impl TryFrom<String> for RawJson {
    type Error = serde_json::Error;
    fn try_from(text: String) -> Result<Self, serde_json::Error> {
        Self::from_string(text)
    }
}

impl TryFrom<&str> for RawJson {
    type Error = serde_json::Error;
    fn try_from(text: &str) -> Result<Self, serde_json::Error> {
        Self::from_text(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_text_and_parses_on_demand() {
        let r = RawJson::from_text(r#"{"a": [1, 2]}"#).expect("json");
        assert_eq!(r.get(), r#"{"a": [1, 2]}"#);
        assert_eq!(r.as_str(), r.get());
        assert_eq!(r.to_value(), serde_json::json!({"a":[1,2]}));
        assert!(RawJson::from_text("{").is_err());
        assert!(RawJson::from_string("1 2".to_owned()).is_err());
        assert!(RawJson::null().is_null());
        assert_eq!(RawJson::default().get(), "null");
        assert_eq!(RawJson::empty_object().get(), "{}");
        assert_eq!(RawJson::empty_array().get(), "[]");
    }

    #[test]
    fn equality_debug_and_display_are_the_text() {
        let a = RawJson::from_text(r#"{"a":1}"#).expect("json");
        let b = RawJson::from_text(r#"{ "a": 1 }"#).expect("json");
        assert_ne!(a, b);
        assert_eq!(a.to_value(), b.to_value());
        assert_eq!(format!("{a:?}"), r#"{"a":1}"#);
        assert_eq!(b.to_string(), r#"{ "a": 1 }"#);
    }

    #[test]
    fn serializes_transparently_and_converts() {
        #[derive(Serialize, Deserialize)]
        struct Msg {
            data: RawJson,
        }
        let m: Msg = serde_json::from_str(r#"{"data": {"x": [true]} }"#).expect("decode");
        assert_eq!(m.data.get(), r#"{"x": [true]}"#);
        assert_eq!(
            serde_json::to_string(&m).expect("encode"),
            r#"{"data":{"x": [true]}}"#
        );
        let v = serde_json::json!({"k": "v"});
        assert_eq!(RawJson::from(&v), RawJson::from_value(&v));
        assert_eq!(RawJson::from_serialize(&v).expect("encode").to_value(), v);
        let raw: Box<RawValue> = RawJson::from(v.clone()).into();
        assert_eq!(
            RawJson::from(raw)
                .parse::<serde_json::Value>()
                .expect("parse"),
            v
        );
        assert!(RawJson::try_from("[1]").is_ok());
        let bad: std::collections::BTreeMap<Vec<u8>, u8> = [(vec![1], 1)].into();
        assert!(RawJson::from_serialize(&bad).is_err());
    }
}

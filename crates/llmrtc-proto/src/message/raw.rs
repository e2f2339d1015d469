//! Opaque JSON values kept as text until someone needs them.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// A JSON value kept as its text (the SDP of `offer` and `signal`), never re-parsed to forward it.
///
/// Equality compares the text, so `{"a":1}` and `{ "a": 1 }` differ; use
/// [`to_value`](Self::to_value) to compare meaning.
#[derive(Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RawJson(Box<RawValue>);

impl RawJson {
    /// `null`.
    pub fn null() -> Self {
        Self(RawValue::NULL.to_owned())
    }

    /// Encodes a value.
    pub fn from_value(v: &serde_json::Value) -> Self {
        // Encoding a `Value` cannot fail and always yields valid JSON.
        serde_json::value::to_raw_value(v).map_or_else(|_| Self::null(), Self)
    }

    /// Encodes any serializable value.
    pub fn from_serialize<T: Serialize + ?Sized>(v: &T) -> Result<Self, serde_json::Error> {
        serde_json::value::to_raw_value(v).map(Self)
    }

    /// Checks that `text` is one JSON value and keeps it as is.
    pub fn from_text(text: &str) -> Result<Self, serde_json::Error> {
        RawValue::from_string(text.to_owned()).map(Self)
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// Parses the text into a [`serde_json::Value`].
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_str(self.0.get()).unwrap_or(serde_json::Value::Null)
    }

    /// Parses the text into `T`.
    pub fn parse<'a, T: Deserialize<'a>>(&'a self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.0.get())
    }

    /// Whether the value is JSON `null`.
    pub fn is_null(&self) -> bool {
        self.0.get().trim() == "null"
    }
}

impl Default for RawJson {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_text_and_parses_on_demand() {
        let r = RawJson::from_text(r#"{"a": [1, 2]}"#).expect("json");
        assert_eq!(r.get(), r#"{"a": [1, 2]}"#);
        assert_eq!(r.to_value(), serde_json::json!({"a":[1,2]}));
        assert!(RawJson::from_text("{").is_err());
        assert!(RawJson::null().is_null());
        assert_eq!(RawJson::default().get(), "null");
    }
}

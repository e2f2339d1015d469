//! [`RawJson`]: JSON kept as text.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// Raw JSON kept as text, compared by its text: `uiSpec`, `messageHistory`, tool `params`
/// and tool `parameters` schemas travel without being parsed into a tree.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RawJson(pub Box<RawValue>);

impl RawJson {
    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// Parses the JSON into `T`.
    pub fn parse<'a, T: Deserialize<'a>>(&'a self) -> serde_json::Result<T> {
        serde_json::from_str(self.0.get())
    }

    /// Wraps already-encoded JSON text; `None` if it is not valid JSON.
    pub fn from_text(text: &str) -> Option<Self> {
        RawValue::from_string(text.to_owned()).ok().map(Self)
    }

    /// Encodes `value`.
    pub fn from_value<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Self> {
        serde_json::value::to_raw_value(value).map(Self)
    }

    /// `{}`.
    pub fn empty_object() -> Self {
        Self::from_text("{}").unwrap_or_else(|| Self(Box::<RawValue>::default()))
    }

    /// `[]`.
    pub fn empty_array() -> Self {
        Self::from_text("[]").unwrap_or_else(|| Self(Box::<RawValue>::default()))
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl std::fmt::Display for RawJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.get())
    }
}

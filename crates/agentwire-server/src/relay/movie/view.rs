//! What an agent can change about a stage's screen without choosing anything: filters, a sort
//! order, highlights and notes (`filter`, `sort`, `highlight`, `augment`,
//! `clearModification`), and how they turn the stage's items into the visible list.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::data::Item;

/// Filters one stage may hold; one more is refused (memory stays bounded).
pub const MAX_FILTERS: usize = 16;

/// One `filter` call.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    /// The item field.
    pub field: String,
    /// `eq`, `neq`, `contains`, `gt`, `lt`, `gte`, `lte` or `in`.
    pub operator: String,
    /// What the field is compared with.
    pub value: Value,
}

impl Filter {
    /// Whether `item` passes.
    pub fn keeps(&self, item: &Item) -> bool {
        let Some(field) = item.get(&self.field) else {
            return false;
        };
        match self.operator.as_str() {
            "eq" => same(field, &self.value),
            "neq" => !same(field, &self.value),
            "contains" => match (field, &self.value) {
                (Value::String(f), Value::String(v)) => {
                    f.to_lowercase().contains(&v.to_lowercase())
                }
                (Value::Array(items), v) => items.iter().any(|i| same(i, v)),
                _ => false,
            },
            "in" => self
                .value
                .as_array()
                .is_some_and(|vs| vs.iter().any(|v| same(field, v))),
            op => match compare(field, &self.value) {
                Some(o) => match op {
                    "gt" => o == Ordering::Greater,
                    "lt" => o == Ordering::Less,
                    "gte" => o != Ordering::Less,
                    "lte" => o != Ordering::Greater,
                    _ => false,
                },
                None => false,
            },
        }
    }
}

/// JSON equality, numbers by value (`8` equals `8.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// Numbers by value, strings by their text (so times and ISO dates order correctly);
/// anything else does not compare.
pub fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

/// The modifications of one stage's screen.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct View {
    /// Filters, all of which an item must pass, in the order they were added.
    pub filters: Vec<Filter>,
    /// The sort order: field and `asc`/`desc`.
    pub sort: Option<(String, String)>,
    /// Highlighted item ids and their style.
    pub highlights: BTreeMap<String, String>,
    /// Notes beside items.
    pub augments: BTreeMap<String, String>,
}

impl View {
    /// Whether nothing is modified.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Clears `what` (`filter`, `sort`, `highlight`, `augment` or `all`); whether anything
    /// was there to clear.
    pub fn clear(&mut self, what: &str) -> bool {
        let before = self.clone();
        match what {
            "filter" => self.filters.clear(),
            "sort" => self.sort = None,
            "highlight" => self.highlights.clear(),
            "augment" => self.augments.clear(),
            _ => *self = Self::default(),
        }
        *self != before
    }

    /// The visible items: `items` through the filters, in the sort order (stable; items
    /// without the field last), each with its `highlight` and `note` if it has one.
    pub fn apply(&self, items: &[Item]) -> Vec<Item> {
        let mut shown: Vec<Item> = items
            .iter()
            .filter(|i| self.filters.iter().all(|f| f.keeps(i)))
            .cloned()
            .collect();
        if let Some((field, order)) = &self.sort {
            shown.sort_by(|a, b| {
                let o = match (a.get(field), b.get(field)) {
                    (Some(x), Some(y)) => compare(x, y).unwrap_or(Ordering::Equal),
                    (Some(_), None) => return Ordering::Less,
                    (None, Some(_)) => return Ordering::Greater,
                    (None, None) => Ordering::Equal,
                };
                if order == "desc" {
                    o.reverse()
                } else {
                    o
                }
            });
        }
        for item in &mut shown {
            let id = item.get("id").and_then(Value::as_str).unwrap_or_default();
            let highlight = self.highlights.get(id).cloned();
            let note = self.augments.get(id).cloned();
            if let Some(style) = highlight {
                item.insert("highlight".to_owned(), Value::String(style));
            }
            if let Some(note) = note {
                item.insert("note".to_owned(), Value::String(note));
            }
        }
        shown
    }

    /// The modifications as shown in `uiSpec.modifications`.
    pub fn to_json(&self) -> Value {
        json!({
            "filters": self.filters.iter()
                .map(|f| json!({"field": f.field, "operator": f.operator, "value": f.value}))
                .collect::<Vec<_>>(),
            "sort": self.sort.as_ref().map(|(field, order)| json!({"field": field, "order": order})),
            "highlights": self.highlights,
            "augments": self.augments,
        })
    }
}

//! The movie host's tools: their JSON Schemas (the `toolSchema` agents read) and which
//! stage offers which ([`STAGE_TOOLS`]).
//!
//! INTEROP.md lists the tools and their params as the reference frontend had them, but not
//! which stage offers which; this table is our choice (pinned by `tests/relay_movie.rs`):
//!
//! | stage | tools |
//! |---|---|
//! | movie | filter, sort, highlight, augment, clearModification, select, next, postMessage |
//! | theater, date, time | the same plus prev |
//! | seat | filter, highlight, augment, clearModification, select, next, prev, postMessage (a seat map keeps its layout: no sort) |
//! | ticket | highlight, augment, clearModification, setQuantity, next, prev, postMessage (a fixed list of ticket types: no filter, sort or select) |
//! | confirm | next (places the booking), prev, postMessage |
//! | confirm, once booked | postMessage |
//!
//! `prev` is not offered on the first stage and `setQuantity` only on the ticket stage, so
//! calling them elsewhere is UNKNOWN_TOOL, as for any tool the stage does not list.

use agentwire::agent_relay::{RawJson, ToolSchema};
use serde_json::{json, Value};

/// The stages, in order.
pub const STAGES: [&str; 7] = [
    "movie", "theater", "date", "time", "seat", "ticket", "confirm",
];

/// The tools of each stage of [`STAGES`], in the order agents see them.
pub const STAGE_TOOLS: [&[&str]; 7] = [
    &[
        "filter",
        "sort",
        "highlight",
        "augment",
        "clearModification",
        "select",
        "next",
        "postMessage",
    ],
    &[
        "filter",
        "sort",
        "highlight",
        "augment",
        "clearModification",
        "select",
        "next",
        "prev",
        "postMessage",
    ],
    &[
        "filter",
        "sort",
        "highlight",
        "augment",
        "clearModification",
        "select",
        "next",
        "prev",
        "postMessage",
    ],
    &[
        "filter",
        "sort",
        "highlight",
        "augment",
        "clearModification",
        "select",
        "next",
        "prev",
        "postMessage",
    ],
    &[
        "filter",
        "highlight",
        "augment",
        "clearModification",
        "select",
        "next",
        "prev",
        "postMessage",
    ],
    &[
        "highlight",
        "augment",
        "clearModification",
        "setQuantity",
        "next",
        "prev",
        "postMessage",
    ],
    &["next", "prev", "postMessage"],
];

/// The tools once the booking is placed (the confirm stage stays on screen).
pub const BOOKED_TOOLS: &[&str] = &["postMessage"];

/// Filter operators.
pub const OPERATORS: [&str; 8] = ["eq", "neq", "contains", "gt", "lt", "gte", "lte", "in"];

/// Highlight styles; the first is the default.
pub const STYLES: [&str; 3] = ["border", "glow", "badge"];

/// What `clearModification` can clear; `all` is the default.
pub const MODIFICATIONS: [&str; 5] = ["filter", "sort", "highlight", "augment", "all"];

/// The largest quantity of one ticket type.
pub const MAX_QUANTITY: u64 = 10;

/// The description and parameter schema of tool `name`, `None` for a name that is no tool.
pub fn definition(name: &str) -> Option<(&'static str, Value)> {
    let object = |props: Value, required: &[&str]| {
        json!({"type": "object", "properties": props, "required": required,
               "additionalProperties": false})
    };
    Some(match name {
        "filter" => (
            "Show only the items whose field compares true with value (filters add up). \
             `in` takes an array; gt/lt/gte/lte compare numbers, or strings such as times \
             and dates.",
            object(
                json!({
                    "field": {"type": "string", "description": "An item field, e.g. rating."},
                    "operator": {"type": "string", "enum": OPERATORS},
                    "value": {"description": "What the field is compared with."}
                }),
                &["field", "operator", "value"],
            ),
        ),
        "sort" => (
            "Order the items by one field.",
            object(
                json!({
                    "field": {"type": "string"},
                    "order": {"type": "string", "enum": ["asc", "desc"]}
                }),
                &["field", "order"],
            ),
        ),
        "highlight" => (
            "Mark items on screen for the participant.",
            object(
                json!({
                    "itemIds": {"type": "array", "items": {"type": "string"}},
                    "style": {"type": "string", "enum": STYLES}
                }),
                &["itemIds"],
            ),
        ),
        "augment" => (
            "Show a note beside items (e.g. a review score from elsewhere).",
            object(
                json!({
                    "items": {"type": "array", "items": {
                        "type": "object",
                        "properties": {"itemId": {"type": "string"}, "value": {"type": "string"}},
                        "required": ["itemId", "value"],
                        "additionalProperties": false
                    }}
                }),
                &["items"],
            ),
        ),
        "clearModification" => (
            "Remove the filters, the sort order, the highlights or the notes of this stage \
             (default: all).",
            object(
                json!({"type": {"type": "string", "enum": MODIFICATIONS}}),
                &[],
            ),
        ),
        "select" => (
            "Choose an item on screen. On the seat stage it toggles the seat.",
            object(json!({"itemId": {"type": "string"}}), &["itemId"]),
        ),
        "setQuantity" => (
            "Set how many tickets of one type to buy.",
            object(
                json!({
                    "typeId": {"type": "string"},
                    "quantity": {"type": "integer", "minimum": 0, "maximum": MAX_QUANTITY}
                }),
                &["typeId", "quantity"],
            ),
        ),
        "next" => (
            "Go to the next stage once this one is complete; on the confirm stage, place the \
             booking.",
            object(json!({}), &[]),
        ),
        "prev" => ("Go back one stage.", object(json!({}), &[])),
        "postMessage" => (
            "Write to the participant in the chat.",
            object(json!({"text": {"type": "string"}}), &["text"]),
        ),
        _ => return None,
    })
}

/// The schemas of `names`, in order.
pub fn schemas(names: &[&str]) -> Vec<ToolSchema> {
    names
        .iter()
        .filter_map(|name| {
            let (description, parameters) = definition(name)?;
            Some(ToolSchema {
                name: (*name).to_owned(),
                description: description.to_owned(),
                parameters: RawJson::from_value(&parameters),
            })
        })
        .collect()
}

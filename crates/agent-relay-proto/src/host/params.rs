//! A small JSON Schema subset for tool `parameters`: what the [`Host`](crate::Host) checks the
//! params of a `tool.call` against before it runs the tool.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use crate::error::ParamError;

/// Deeper schema levels are not checked (a guard against a runaway schema; tool schemas are
/// a few levels deep).
const MAX_DEPTH: usize = 32;

/// Checks `params` against a tool's `parameters` schema.
///
/// The subset: `type` (`object`, `array`, `string`, `integer`, `number`, `boolean`, `null`, or
/// a list of them), `properties`, `required`, `additionalProperties: false`, `enum`,
/// `minimum`, `maximum` and `items` (one schema for every element). Other keywords are
/// ignored, as are keywords whose value has the wrong shape (the schema is the host's own).
/// `integer` means a JSON number written without fraction or exponent (`2`, not `2.0`), so
/// that a tool can read it straight into an integer type. Checks run in this order at each
/// level: type, enum, bounds, required (in the schema's order), properties, unexpected
/// properties, items; the first failure is returned.
pub fn validate_params(schema: &Value, params: &Value) -> Result<(), ParamError> {
    check(schema, params, None, 0)
}

/// The name of the value at `path` (`None` = the params object itself).
fn name(path: Option<&str>) -> String {
    path.unwrap_or("params").to_owned()
}

fn child(path: Option<&str>, key: &str) -> String {
    match path {
        None => key.to_owned(),
        Some(p) => format!("{p}.{key}"),
    }
}

fn check(
    schema: &Value,
    value: &Value,
    path: Option<&str>,
    depth: usize,
) -> Result<(), ParamError> {
    let Some(s) = schema.as_object() else {
        return Ok(());
    };
    if depth >= MAX_DEPTH {
        return Ok(());
    }
    check_type(s, value, path)?;
    if let Some(Value::Array(allowed)) = s.get("enum") {
        if !allowed.contains(value) {
            return Err(ParamError::NotAllowed {
                param: name(path),
                allowed: list(allowed),
            });
        }
    }
    check_bounds(s, value, path)?;
    match value {
        Value::Object(obj) => check_object(s, obj, path, depth),
        Value::Array(items) => match s.get("items") {
            Some(item_schema @ Value::Object(_)) => {
                for (i, item) in items.iter().enumerate() {
                    let p = format!("{}[{i}]", name(path));
                    check(item_schema, item, Some(&p), depth + 1)?;
                }
                Ok(())
            }
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}

fn check_type(s: &Map<String, Value>, value: &Value, path: Option<&str>) -> Result<(), ParamError> {
    let types: Vec<&str> = match s.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => return Ok(()),
    };
    // An unknown type name constrains nothing (the subset does not know it).
    if types.is_empty() || types.iter().any(|t| is_type(value, t).unwrap_or(true)) {
        return Ok(());
    }
    let expected: Vec<&str> = types.iter().filter_map(|t| article(t)).collect();
    Err(ParamError::WrongType {
        param: name(path),
        expected: expected.join(" or "),
    })
}

/// Whether `value` is of JSON Schema type `t`; `None` for a type name outside the subset.
fn is_type(value: &Value, t: &str) -> Option<bool> {
    Some(match t {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        _ => return None,
    })
}

fn article(t: &str) -> Option<&'static str> {
    Some(match t {
        "object" => "an object",
        "array" => "an array",
        "string" => "a string",
        "boolean" => "a boolean",
        "null" => "null",
        "number" => "a number",
        "integer" => "an integer",
        _ => return None,
    })
}

fn list(values: &[Value]) -> String {
    let mut out = String::new();
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&v.to_string());
    }
    out
}

/// Compares two JSON numbers exactly when both are integers, else as `f64`.
fn cmp_numbers(a: &Value, b: &Value) -> Option<Ordering> {
    match (a.as_i64(), b.as_i64(), a.as_u64(), b.as_u64()) {
        (Some(x), Some(y), _, _) => Some(x.cmp(&y)),
        (_, _, Some(x), Some(y)) => Some(x.cmp(&y)),
        // One is a u64 beyond i64 and the other a negative i64.
        (Some(_), None, _, Some(_)) => Some(Ordering::Less),
        (None, Some(_), Some(_), _) => Some(Ordering::Greater),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

fn check_bounds(
    s: &Map<String, Value>,
    value: &Value,
    path: Option<&str>,
) -> Result<(), ParamError> {
    if !value.is_number() {
        return Ok(());
    }
    if let Some(min) = s.get("minimum").filter(|m| m.is_number()) {
        if cmp_numbers(value, min) == Some(Ordering::Less) {
            return Err(ParamError::BelowMinimum {
                param: name(path),
                minimum: min.to_string(),
            });
        }
    }
    if let Some(max) = s.get("maximum").filter(|m| m.is_number()) {
        if cmp_numbers(value, max) == Some(Ordering::Greater) {
            return Err(ParamError::AboveMaximum {
                param: name(path),
                maximum: max.to_string(),
            });
        }
    }
    Ok(())
}

fn check_object(
    s: &Map<String, Value>,
    obj: &Map<String, Value>,
    path: Option<&str>,
    depth: usize,
) -> Result<(), ParamError> {
    if let Some(Value::Array(required)) = s.get("required") {
        for key in required.iter().filter_map(Value::as_str) {
            if !obj.contains_key(key) {
                return Err(ParamError::Missing {
                    param: child(path, key),
                });
            }
        }
    }
    let props = s.get("properties").and_then(Value::as_object);
    if let Some(props) = props {
        for (key, prop_schema) in props {
            if let Some(v) = obj.get(key) {
                check(prop_schema, v, Some(&child(path, key)), depth + 1)?;
            }
        }
    }
    if s.get("additionalProperties") == Some(&Value::Bool(false)) {
        if let Some(key) = obj
            .keys()
            .find(|k| !props.is_some_and(|p| p.contains_key(*k)))
        {
            return Err(ParamError::Unexpected {
                param: child(path, key),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(schema: Value, params: Value) -> String {
        validate_params(&schema, &params).unwrap_err().to_string()
    }

    #[test]
    fn the_spec_example_message_comes_out_word_for_word() {
        let schema = json!({"type":"object","properties":{
            "typeId":{"type":"string"},"quantity":{"type":"integer","minimum":0}},
            "required":["typeId","quantity"]});
        assert_eq!(
            format!(
                "setQuantity {}",
                err(schema.clone(), json!({"typeId":"adult","quantity":-1}))
            ),
            "setQuantity requires quantity >= 0"
        );
        assert!(validate_params(&schema, &json!({"typeId":"adult","quantity":0})).is_ok());
        assert_eq!(
            err(schema.clone(), json!({"quantity":1})),
            "requires typeId"
        );
        assert_eq!(
            err(schema.clone(), json!({"typeId":"a","quantity":1.5})),
            "requires quantity to be an integer"
        );
        assert_eq!(
            err(schema.clone(), json!({"typeId":"a","quantity":2.0})),
            "requires quantity to be an integer"
        );
        assert_eq!(err(schema, json!([1])), "requires params to be an object");
    }

    #[test]
    fn enums_bounds_items_and_nesting_name_the_parameter() {
        let schema = json!({"type":"object","properties":{
            "order":{"type":"string","enum":["asc","desc"]},
            "n":{"type":"number","maximum":10},
            "items":{"type":"array","items":{"type":"object",
                "properties":{"itemId":{"type":"string"}},"required":["itemId"]}},
            "f":{"type":"object","properties":{"v":{"type":["string","null"]}}}
        }});
        assert_eq!(
            err(schema.clone(), json!({"order":"up"})),
            r#"requires order to be one of "asc", "desc""#
        );
        assert_eq!(err(schema.clone(), json!({"n":10.5})), "requires n <= 10");
        assert!(validate_params(&schema, &json!({"n":10})).is_ok());
        assert_eq!(
            err(schema.clone(), json!({"items":[{"itemId":"a"},{}]})),
            "requires items[1].itemId"
        );
        assert_eq!(
            err(schema.clone(), json!({"items":[{"itemId":3}]})),
            "requires items[0].itemId to be a string"
        );
        assert_eq!(
            err(schema.clone(), json!({"f":{"v":1}})),
            "requires f.v to be a string or null"
        );
        assert!(validate_params(&schema, &json!({"f":{"v":null},"extra":1})).is_ok());
    }

    #[test]
    fn additional_properties_false_rejects_unknown_keys() {
        let schema = json!({"type":"object","properties":{},"additionalProperties":false});
        assert!(validate_params(&schema, &json!({})).is_ok());
        assert_eq!(err(schema, json!({"x":1})), "does not take x");
    }

    #[test]
    fn unknown_or_malformed_keywords_constrain_nothing() {
        for schema in [
            json!(true),
            json!({"type":"decimal"}),
            json!({"type":5}),
            json!({"minimum":"0"}),
            json!({"required":"x"}),
            json!({"enum":"x"}),
            json!({"items":[{"type":"string"}]}),
        ] {
            assert!(
                validate_params(&schema, &json!({"a":[1]})).is_ok(),
                "{schema}"
            );
        }
    }

    #[test]
    fn big_integers_compare_exactly() {
        let schema = json!({"maximum": 9_007_199_254_740_993u64});
        assert!(validate_params(&schema, &json!(9_007_199_254_740_993u64)).is_ok());
        assert!(validate_params(&schema, &json!(9_007_199_254_740_994u64)).is_err());
        assert!(validate_params(&json!({"minimum": 0}), &json!(u64::MAX)).is_ok());
        assert!(validate_params(&json!({"maximum": -1}), &json!(u64::MAX)).is_err());
    }
}

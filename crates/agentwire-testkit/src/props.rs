//! proptest generators the crates' property tests share.

use proptest::prelude::*;
use serde_json::{Map, Value};

/// JSON trees grown from `leaf` values: arrays of up to three members and objects of up to
/// three members keyed by `key`, nested at most `depth` levels, about `size` nodes in all
/// (proptest's `prop_recursive`, 4 items expected per collection).
///
/// ```
/// use agentwire_testkit::props::json_tree;
/// use proptest::prelude::*;
/// use serde_json::Value;
///
/// let leaf = prop_oneof![Just(Value::Null), any::<i64>().prop_map(Value::from)];
/// let _values = json_tree(leaf, "[a-z]{1,6}", 3, 24);
/// ```
pub fn json_tree(
    leaf: impl Strategy<Value = Value> + 'static,
    key: impl Strategy<Value = String> + Clone + 'static,
    depth: u32,
    size: u32,
) -> impl Strategy<Value = Value> {
    leaf.prop_recursive(depth, size, 4, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(key.clone(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// The common JSON leaves: `null`, booleans, 64-bit integers and strings from `text`.
pub fn json_leaf(text: impl Strategy<Value = String> + 'static) -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        text.prop_map(Value::String),
    ]
}

#[cfg(test)]
mod tests {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    use super::*;

    fn depth(v: &Value) -> u32 {
        match v {
            Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
            Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
            _ => 0,
        }
    }

    #[test]
    fn trees_respect_depth_and_keys() {
        let strategy = json_tree(json_leaf("[a-z]{0,4}"), "[xy]", 2, 16);
        let mut runner = TestRunner::deterministic();
        let mut nested = false;
        for _ in 0..300 {
            let v = strategy.new_tree(&mut runner).expect("tree").current();
            assert!(depth(&v) <= 2, "{v}");
            nested |= depth(&v) == 2;
            if let Value::Object(o) = &v {
                assert!(o.keys().all(|k| k == "x" || k == "y"));
            }
        }
        assert!(nested, "some values nest");
    }
}

//! Deep merge of JSON objects, the way config layers combine.

use serde_json::{Map, Value};

/// Merges `over` into `base`: objects merge key by key (a present key keeps its position),
/// anything else is replaced.
pub fn merge_json(base: &mut Map<String, Value>, over: &Map<String, Value>) {
    for (key, value) in over {
        match (base.get_mut(key), value) {
            (Some(Value::Object(old)), Value::Object(new)) => merge_json(old, new),
            (Some(slot), _) => *slot = value.clone(),
            (None, _) => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_keep_their_first_position_and_later_values_win() {
        let mut a = json!({"z": 1, "a": {"x": 1, "y": 2}, "k": [1]});
        let b = json!({"a": {"y": 3, "w": 4}, "z": 9, "n": 0, "k": [2]});
        merge_json(a.as_object_mut().unwrap(), b.as_object().unwrap());
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            r#"{"z":9,"a":{"x":1,"y":3,"w":4},"k":[2],"n":0}"#
        );
    }
}

//! Helpers for the model's round-trip tests.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Parses a sample file holding one JSON value.
pub(crate) fn sample(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

/// Deserializes `json` into `T`, serializes it back, and asserts the JSON is unchanged.
pub(crate) fn round_trip<T: Serialize + DeserializeOwned>(json: &Value) -> T {
    let typed: T = serde_json::from_value(json.clone())
        .unwrap_or_else(|e| panic!("cannot deserialize {json}: {e}"));
    let back = serde_json::to_value(&typed).unwrap();
    assert_eq!(&back, json, "round trip changed the JSON");
    typed
}

/// The keys of a serialized JSON object, in order.
pub(crate) fn keys<T: Serialize>(value: &T) -> Vec<String> {
    match serde_json::to_value(value).unwrap() {
        Value::Object(map) => map.keys().cloned().collect(),
        other => panic!("expected an object, got {other}"),
    }
}

//! ToolInput: a tool call's input object, shared between the copies of its part.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::JsonObject;

/// A tool call's input: a JSON object that the copies of its part (the published event, the
/// store's queue, the next state, a parent's digest of the call) share instead of copying.
///
/// It reads as the object it dereferences to; a write copies it first when it is shared.
#[derive(Clone, Default, PartialEq)]
pub struct ToolInput(Arc<JsonObject>);

impl ToolInput {
    /// Whether `self` and `other` are the same shared object (not merely equal).
    pub fn shares(&self, other: &ToolInput) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl From<JsonObject> for ToolInput {
    fn from(object: JsonObject) -> Self {
        ToolInput(Arc::new(object))
    }
}

impl PartialEq<JsonObject> for ToolInput {
    fn eq(&self, other: &JsonObject) -> bool {
        *self.0 == *other
    }
}

impl Deref for ToolInput {
    type Target = JsonObject;

    fn deref(&self) -> &JsonObject {
        &self.0
    }
}

impl DerefMut for ToolInput {
    fn deref_mut(&mut self) -> &mut JsonObject {
        Arc::make_mut(&mut self.0)
    }
}

impl std::fmt::Debug for ToolInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl Serialize for ToolInput {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ToolInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        JsonObject::deserialize(deserializer).map(ToolInput::from)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn input() -> ToolInput {
        match json!({"path": "a.txt", "limit": 2}) {
            serde_json::Value::Object(m) => ToolInput::from(m),
            _ => ToolInput::default(),
        }
    }

    #[test]
    fn copies_share_one_object_until_one_is_written() {
        let first = input();
        let mut second = first.clone();
        assert!(second.shares(&first));
        second.insert("limit".into(), json!(3));
        assert!(!second.shares(&first));
        assert_eq!(first["limit"], json!(2));
        assert_eq!(second["limit"], json!(3));
    }

    #[test]
    fn serializes_as_the_object_it_holds() {
        let text = serde_json::to_string(&input()).unwrap();
        assert_eq!(text, r#"{"path":"a.txt","limit":2}"#);
        let back: ToolInput = serde_json::from_str(&text).unwrap();
        assert_eq!(back, input());
        assert!(serde_json::from_str::<ToolInput>("[1]").is_err());
    }
}

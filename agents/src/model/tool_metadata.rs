//! ToolMetadata: a tool call's metadata object, with a task call's result envelope kept typed.
//!
//! On the wire it is one JSON object (`{"sessionId": …, "details": {…}}`); in memory the
//! envelope under `details` stays a [`TaskEnvelope`] until it is serialized, so a task call's
//! end builds no JSON maps (a cancelled tree of 1,111 sessions ends 1,110 of them at once), and
//! embedders read it typed with [`ToolMetadata::details`].

use std::ops::{Deref, DerefMut};

use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::JsonObject;
use super::envelope::{DETAILS_KEY, TaskEnvelope};

/// A tool call's metadata: free JSON keys, and the task envelope (`details`) typed.
///
/// Reads and writes of the other keys go through the JSON object it dereferences to. A
/// `details` value that is a task envelope is always held typed (also when read back from
/// JSON); any other `details` value stays in the object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolMetadata {
    map: JsonObject,
    details: Option<Box<TaskEnvelope>>,
}

impl ToolMetadata {
    /// Empty metadata.
    pub fn new() -> Self {
        ToolMetadata::default()
    }

    /// The task envelope under `details`, if there is one.
    pub fn details(&self) -> Option<&TaskEnvelope> {
        self.details.as_deref()
    }

    /// Sets the task envelope under `details` (replacing any `details` value).
    pub fn set_details(&mut self, envelope: TaskEnvelope) {
        self.map.shift_remove(DETAILS_KEY);
        self.details = Some(Box::new(envelope));
    }

    /// Lays `other` over these: its keys overwrite equal ones (keeping their place) and new
    /// ones follow; its `details`, typed or not, replaces these.
    pub fn extend(&mut self, other: ToolMetadata) {
        if other.details.is_some() || other.map.contains_key(DETAILS_KEY) {
            self.details = None;
        }
        if self.map.is_empty() {
            self.map = other.map;
        } else {
            // One insert each (not `extend`): keys already here are replaced in place, and
            // the table grows only for new ones.
            for (key, value) in other.map {
                self.map.insert(key, value);
            }
        }
        if let Some(details) = other.details {
            self.map.shift_remove(DETAILS_KEY);
            self.details = Some(details);
        }
    }

    /// Whether there are no keys at all.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty() && self.details.is_none()
    }

    /// The metadata as one JSON object (the envelope serialized under `details`).
    pub fn to_json(&self) -> JsonObject {
        let mut map = self.map.clone();
        if let Some(details) = &self.details {
            map.insert(DETAILS_KEY.into(), details.to_value());
        }
        map
    }
}

impl From<JsonObject> for ToolMetadata {
    /// The object's `details`, when it is a task envelope, is taken out and held typed.
    fn from(mut map: JsonObject) -> Self {
        let details = map
            .get(DETAILS_KEY)
            .and_then(|v| TaskEnvelope::deserialize(v).ok())
            .map(Box::new);
        if details.is_some() {
            map.shift_remove(DETAILS_KEY);
        }
        ToolMetadata { map, details }
    }
}

impl Deref for ToolMetadata {
    type Target = JsonObject;

    fn deref(&self) -> &JsonObject {
        &self.map
    }
}

impl DerefMut for ToolMetadata {
    fn deref_mut(&mut self) -> &mut JsonObject {
        &mut self.map
    }
}

impl Serialize for ToolMetadata {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // A typed envelope wins over a `details` key written into the object afterwards.
        let shadowed = self.details.is_some() && self.map.contains_key(DETAILS_KEY);
        let len = self.map.len() + usize::from(self.details.is_some()) - usize::from(shadowed);
        let mut out = serializer.serialize_map(Some(len))?;
        for (key, value) in &self.map {
            if !(shadowed && key == DETAILS_KEY) {
                out.serialize_entry(key, value)?;
            }
        }
        if let Some(details) = &self.details {
            out.serialize_entry(DETAILS_KEY, details)?;
        }
        out.end()
    }
}

impl<'de> Deserialize<'de> for ToolMetadata {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        JsonObject::deserialize(deserializer).map(ToolMetadata::from)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::model::envelope::{TaskError, TaskErrorCode, TaskMode};

    fn object(value: Value) -> JsonObject {
        match value {
            Value::Object(m) => m,
            _ => JsonObject::new(),
        }
    }

    fn envelope() -> TaskEnvelope {
        let mut e = TaskEnvelope::new(TaskMode::Single);
        e.error = Some(TaskError::new(TaskErrorCode::SubagentCancelled, "stop"));
        e
    }

    #[test]
    fn serializes_as_one_object_with_the_envelope_under_details() {
        let mut m = ToolMetadata::from(object(json!({"sessionId": "ses_1"})));
        m.set_details(envelope());
        let v = serde_json::to_value(&m).unwrap();
        let details = serde_json::to_value(m.details()).unwrap();
        assert_eq!(v, json!({"sessionId": "ses_1", "details": details}));
        assert_eq!(v["details"]["error"]["code"], "SUBAGENT_CANCELLED");
        assert_eq!(Value::Object(m.to_json()), v);
    }

    #[test]
    fn an_envelope_read_back_is_typed_again() {
        let mut m = ToolMetadata::new();
        m.insert("summary".into(), json!([]));
        m.set_details(envelope());
        let text = serde_json::to_string(&m).unwrap();
        let back: ToolMetadata = serde_json::from_str(&text).unwrap();
        assert_eq!(back, m);
        assert!(back.get(DETAILS_KEY).is_none());
        assert_eq!(back.details(), m.details());
    }

    #[test]
    fn a_details_value_that_is_no_envelope_stays_json() {
        let m = ToolMetadata::from(object(json!({"details": {"x": 1}})));
        assert!(m.details().is_none());
        assert_eq!(m["details"], json!({"x": 1}));
        assert_eq!(
            serde_json::to_value(&m).unwrap(),
            json!({"details": {"x": 1}})
        );
    }

    #[test]
    fn a_details_value_with_fields_the_envelope_lacks_is_kept_as_written() {
        let mut details = serde_json::to_value(envelope()).unwrap();
        details["extra"] = json!(1);
        let m = ToolMetadata::from(object(json!({"details": details.clone()})));
        assert!(m.details().is_none());
        assert_eq!(
            serde_json::to_value(&m).unwrap(),
            json!({"details": details})
        );
        // Inside a result's display items too.
        let mut details = serde_json::to_value(envelope()).unwrap();
        details["results"] = json!([{
            "agent": "a", "task": "t", "exitCode": 0, "sessionId": "ses_1",
            "usage": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 1},
            "displayItems": [{"type": "text", "text": "x", "style": "bold"}]
        }]);
        let m = ToolMetadata::from(object(json!({"details": details.clone()})));
        assert!(m.details().is_none());
        assert_eq!(
            serde_json::to_value(&m).unwrap(),
            json!({"details": details})
        );
        details["results"][0]["displayItems"][0]
            .as_object_mut()
            .unwrap()
            .remove("style");
        let m = ToolMetadata::from(object(json!({"details": details.clone()})));
        assert!(
            m.details().is_some(),
            "the same without the extra field is an envelope"
        );
        assert_eq!(
            serde_json::to_value(&m).unwrap(),
            json!({"details": details})
        );
    }

    #[test]
    fn extending_lays_the_new_keys_and_envelope_over_the_old() {
        let mut running = ToolMetadata::from(object(json!({"sessionId": "a", "live": 1})));
        running.insert("details".into(), json!({"x": 1}));
        let mut out = ToolMetadata::from(object(json!({"summary": [1], "sessionId": "b"})));
        out.set_details(envelope());
        running.extend(out);
        let keys: Vec<&str> = running.keys().map(String::as_str).collect();
        assert_eq!(keys, ["sessionId", "live", "summary"]);
        assert_eq!(running["sessionId"], "b");
        assert_eq!(
            running.details().map(|d| d.error.clone()),
            Some(envelope().error)
        );
        // A plain `details` laid over a typed one replaces it.
        running.extend(ToolMetadata::from(object(json!({"details": {"y": 2}}))));
        assert!(running.details().is_none());
        assert_eq!(running["details"], json!({"y": 2}));
    }

    #[test]
    fn a_typed_envelope_shadows_a_details_key_written_after_it() {
        let mut m = ToolMetadata::new();
        m.set_details(envelope());
        m.insert("details".into(), json!("plain"));
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(v.as_object().map(|o| o.len()), Some(1));
        assert_eq!(v["details"]["mode"], "single");
    }
}

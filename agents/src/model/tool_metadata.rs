//! ToolMetadata: a tool call's metadata object, with a task call's result envelope and summary
//! kept typed.
//!
//! On the wire it is one JSON object (`{"sessionId": …, "summary": […], "details": {…}}`); in
//! memory the envelope under `details` and the child's calls under `summary` stay a
//! [`TaskEnvelope`] and [`SummaryItem`]s until they are serialized, so a task call's end builds
//! no JSON maps (a cancelled tree of 1,111 sessions ends 1,110 of them at once), and embedders
//! read them typed with [`ToolMetadata::details`] and [`ToolMetadata::summary`].

use std::ops::{Deref, DerefMut};

use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::JsonObject;
use super::envelope::{DETAILS_KEY, TaskEnvelope};
use super::tool_summary::{SUMMARY_KEY, SummaryItem};

/// A tool call's metadata: free JSON keys, and the task envelope (`details`) and the child's
/// calls (`summary`) typed.
///
/// Reads and writes of the other keys go through the JSON object it dereferences to (where
/// the typed keys are not found). A `details` value that is a task envelope, and a `summary`
/// value that is a list of summary items, are always held typed (also when read back from
/// JSON); any other value under those keys stays in the object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolMetadata {
    map: JsonObject,
    /// Boxed: most tools' metadata has neither (and a part stays small).
    typed: Option<Box<Typed>>,
}

/// The keys held typed.
#[derive(Debug, Clone, Default, PartialEq)]
struct Typed {
    summary: Option<Vec<SummaryItem>>,
    details: Option<TaskEnvelope>,
}

impl ToolMetadata {
    /// Empty metadata.
    pub fn new() -> Self {
        ToolMetadata::default()
    }

    /// The task envelope under `details`, if there is one.
    pub fn details(&self) -> Option<&TaskEnvelope> {
        self.typed.as_ref()?.details.as_ref()
    }

    /// Sets the task envelope under `details` (replacing any `details` value).
    pub fn set_details(&mut self, envelope: TaskEnvelope) {
        remove_key(&mut self.map, DETAILS_KEY);
        self.typed_mut().details = Some(envelope);
    }

    /// The child's tool calls under `summary`, if they are held typed.
    pub fn summary(&self) -> Option<&[SummaryItem]> {
        self.typed.as_ref()?.summary.as_deref()
    }

    /// Sets the child's tool calls under `summary` (replacing any `summary` value).
    pub fn set_summary(&mut self, items: Vec<SummaryItem>) {
        remove_key(&mut self.map, SUMMARY_KEY);
        self.typed_mut().summary = Some(items);
    }

    /// Lays `other` over these: its keys overwrite equal ones (keeping their place) and new
    /// ones follow; its `summary` and `details`, typed or not, replace these.
    pub fn extend(&mut self, other: ToolMetadata) {
        let ToolMetadata { map, typed } = other;
        if let Some(mine) = &mut self.typed {
            if has_key(&map, SUMMARY_KEY) || typed.as_ref().is_some_and(|t| t.summary.is_some()) {
                mine.summary = None;
            }
            if has_key(&map, DETAILS_KEY) || typed.as_ref().is_some_and(|t| t.details.is_some()) {
                mine.details = None;
            }
            // Nothing typed left: as metadata that never had any (equal to its read-back copy).
            if mine.summary.is_none() && mine.details.is_none() {
                self.typed = None;
            }
        }
        // Other's keys start with all of these, in order: it is the merged map as it is.
        if self.map.len() <= map.len() && self.map.keys().zip(map.keys()).all(|(a, b)| a == b) {
            self.map = map;
        } else {
            for (key, value) in map {
                insert(&mut self.map, key, value);
            }
        }
        if let Some(typed) = typed {
            let Typed { summary, details } = *typed;
            if let Some(summary) = summary {
                self.set_summary(summary);
            }
            if let Some(details) = details {
                self.set_details(details);
            }
        }
    }

    /// Whether there are no keys at all.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty() && self.summary().is_none() && self.details().is_none()
    }

    /// The metadata as one JSON object (the summary and envelope serialized under their keys).
    pub fn to_json(&self) -> JsonObject {
        let mut map = self.map.clone();
        if let Some(summary) = self.summary() {
            map.insert(
                SUMMARY_KEY.into(),
                serde_json::to_value(summary).unwrap_or_default(),
            );
        }
        if let Some(details) = self.details() {
            map.insert(DETAILS_KEY.into(), details.to_value());
        }
        map
    }

    fn typed_mut(&mut self) -> &mut Typed {
        self.typed.get_or_insert_with(Box::default)
    }

    /// Whether the object's `key` is hidden by a typed value (written into it afterwards).
    fn shadowed(&self, key: &str) -> bool {
        (key == SUMMARY_KEY && self.summary().is_some())
            || (key == DETAILS_KEY && self.details().is_some())
    }
}

/// How many keys a map may have for a key to be looked for by comparing it with each (cheaper
/// than hashing it, for the few keys tool metadata has).
const SCAN_LEN: usize = 8;

/// Whether `map` has `key`.
fn has_key(map: &JsonObject, key: &str) -> bool {
    if map.len() > SCAN_LEN {
        map.contains_key(key)
    } else {
        map.keys().any(|k| k == key)
    }
}

/// Removes `key` from `map`, if it is there.
fn remove_key(map: &mut JsonObject, key: &str) {
    if has_key(map, key) {
        map.shift_remove(key);
    }
}

/// Sets `key` to `value`: in its place when the key is there, else at the end.
fn insert(map: &mut JsonObject, key: String, value: Value) {
    if map.len() <= SCAN_LEN
        && let Some(slot) = map.iter_mut().find_map(|(k, v)| (*k == key).then_some(v))
    {
        *slot = value;
        return;
    }
    map.insert(key, value);
}

impl From<JsonObject> for ToolMetadata {
    /// The object's `details`, when it is a task envelope, and its `summary`, when it is a list
    /// of summary items, are taken out and held typed.
    fn from(mut map: JsonObject) -> Self {
        let details = map
            .get(DETAILS_KEY)
            .and_then(|v| TaskEnvelope::deserialize(v).ok());
        if details.is_some() {
            map.shift_remove(DETAILS_KEY);
        }
        let summary = map
            .get(SUMMARY_KEY)
            .and_then(|v| Vec::<SummaryItem>::deserialize(v).ok());
        if summary.is_some() {
            map.shift_remove(SUMMARY_KEY);
        }
        let typed =
            (summary.is_some() || details.is_some()).then(|| Box::new(Typed { summary, details }));
        ToolMetadata { map, typed }
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
        // A typed value wins over its key written into the object afterwards.
        let shadowed = self.map.keys().filter(|k| self.shadowed(k)).count();
        let (summary, details) = (self.summary(), self.details());
        let len = self.map.len() + usize::from(summary.is_some()) + usize::from(details.is_some())
            - shadowed;
        let mut out = serializer.serialize_map(Some(len))?;
        for (key, value) in &self.map {
            if shadowed == 0 || !self.shadowed(key) {
                out.serialize_entry(key, value)?;
            }
        }
        if let Some(summary) = summary {
            out.serialize_entry(SUMMARY_KEY, summary)?;
        }
        if let Some(details) = details {
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
    use crate::model::{ToolState, ToolStateRunning};

    fn object(value: Value) -> JsonObject {
        match value {
            Value::Object(m) => m,
            _ => JsonObject::new(),
        }
    }

    fn item(id: &str) -> SummaryItem {
        SummaryItem::of(
            id,
            "read",
            &ToolState::Running(ToolStateRunning::new(JsonObject::new(), 0)),
        )
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
        m.insert("sessionId".into(), json!("ses_1"));
        m.set_summary(vec![item("prt_1")]);
        m.set_details(envelope());
        let text = serde_json::to_string(&m).unwrap();
        let back: ToolMetadata = serde_json::from_str(&text).unwrap();
        assert_eq!(back, m);
        assert!(back.get(DETAILS_KEY).is_none());
        assert!(back.get(SUMMARY_KEY).is_none());
        assert_eq!(back.details(), m.details());
        assert_eq!(back.summary().map(|s| s[0].id.as_str()), Some("prt_1"));
        assert_eq!(back.to_json()["summary"][0]["state"]["status"], "running");
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
    fn a_summary_that_is_no_list_of_items_stays_json_and_a_typed_one_replaces_it() {
        let mut m = ToolMetadata::from(object(json!({"summary": [1], "n": 1})));
        assert!(m.summary().is_none());
        assert_eq!(m["summary"], json!([1]));
        let mut out = ToolMetadata::new();
        out.set_summary(vec![item("prt_2")]);
        m.extend(out);
        assert!(m.get("summary").is_none());
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(v["summary"][0]["id"], "prt_2");
        assert_eq!(v.as_object().map(|o| o.len()), Some(2));
        // A plain `summary` laid over a typed one replaces it.
        m.extend(ToolMetadata::from(object(json!({"summary": "none"}))));
        assert!(m.summary().is_none());
        assert_eq!(m["summary"], "none");
        assert!(!m.is_empty());
        // With nothing typed left it equals its copy read back from JSON.
        let back: ToolMetadata = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back, m);
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

//! The task envelope as a JSON value, built by moving its parts in: a task call's result is
//! made once per child (a cancelled tree of 1,111 sessions makes 1,110 of them at once), and
//! going through the serializer copies every string and tool argument.

use serde_json::{Map, Value};

use super::envelope::{DisplayItem, TaskEnvelope, TaskError, TaskMode, TaskResult, TaskUsage};

impl TaskEnvelope {
    /// The envelope as a JSON value, the same as [`TaskEnvelope::to_value`], its strings and
    /// tool arguments moved rather than copied.
    pub fn into_value(self) -> Value {
        let mut map = Map::with_capacity(4);
        map.insert("mode".into(), Value::from(mode_name(self.mode)));
        map.insert("runId".into(), Value::String(self.run_id));
        let results = self.results.into_iter().map(result_value).collect();
        map.insert("results".into(), Value::Array(results));
        if let Some(error) = self.error {
            map.insert("error".into(), error_value(error));
        }
        Value::Object(map)
    }
}

fn mode_name(mode: TaskMode) -> &'static str {
    match mode {
        TaskMode::Single => "single",
        TaskMode::Parallel => "parallel",
        TaskMode::Management => "management",
    }
}

fn result_value(r: TaskResult) -> Value {
    let mut map = Map::with_capacity(9);
    map.insert("agent".into(), Value::String(r.agent));
    map.insert("task".into(), Value::String(r.task));
    map.insert("exitCode".into(), Value::from(r.exit_code));
    map.insert("sessionId".into(), Value::String(r.session_id));
    map.insert("usage".into(), usage_value(&r.usage));
    if let Some(error) = r.error {
        map.insert("error".into(), Value::String(error));
    }
    if let Some(reason) = r.timeout_reason {
        map.insert("timeoutReason".into(), Value::from(reason.as_str()));
    }
    if let Some(output) = r.output {
        map.insert("output".into(), Value::String(output));
    }
    if let Some(items) = r.display_items {
        let items = items.into_iter().map(item_value).collect();
        map.insert("displayItems".into(), Value::Array(items));
    }
    Value::Object(map)
}

fn usage_value(u: &TaskUsage) -> Value {
    let mut map = Map::with_capacity(6);
    map.insert("input".into(), Value::from(u.input));
    map.insert("output".into(), Value::from(u.output));
    map.insert("cacheRead".into(), Value::from(u.cache_read));
    map.insert("cacheWrite".into(), Value::from(u.cache_write));
    map.insert("cost".into(), Value::from(u.cost));
    map.insert("turns".into(), Value::from(u.turns));
    Value::Object(map)
}

fn item_value(item: DisplayItem) -> Value {
    let mut map = Map::with_capacity(3);
    match item {
        DisplayItem::Text { text } => {
            map.insert("type".into(), Value::from("text"));
            map.insert("text".into(), Value::String(text));
        }
        DisplayItem::ToolCall { name, args } => {
            map.insert("type".into(), Value::from("toolCall"));
            map.insert("name".into(), Value::String(name));
            map.insert("args".into(), args);
        }
    }
    Value::Object(map)
}

fn error_value(e: TaskError) -> Value {
    let mut map = Map::with_capacity(2);
    map.insert("code".into(), Value::from(e.code.as_str()));
    map.insert("message".into(), Value::String(e.message));
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::envelope::{
        EXIT_CANCELLED, EXIT_OK, EXIT_TIMEOUT, TaskErrorCode, TimeoutReason,
    };
    use serde_json::json;

    fn result(exit_code: i32, items: Option<Vec<DisplayItem>>) -> TaskResult {
        TaskResult {
            agent: "general".into(),
            task: "look around".into(),
            exit_code,
            session_id: "ses_1".into(),
            usage: TaskUsage {
                input: 10,
                output: 20,
                cache_read: 3,
                cache_write: 4,
                cost: 0.25,
                turns: 2,
            },
            error: None,
            timeout_reason: None,
            output: None,
            display_items: items,
        }
    }

    #[test]
    fn into_value_equals_the_serialized_envelope_for_every_field() {
        let call = |i: u32| DisplayItem::ToolCall {
            name: format!("tool{i}"),
            args: json!({"n": i, "nested": {"list": [i, i + 1]}}),
        };
        let mut envelope = TaskEnvelope::new(TaskMode::Parallel);
        let mut first = result(
            EXIT_OK,
            Some(vec![
                call(0),
                DisplayItem::Text { text: "x".into() },
                call(1),
            ]),
        );
        first.output = Some("done".into());
        let mut second = result(EXIT_TIMEOUT, Some(Vec::new()));
        second.error = Some("too slow".into());
        second.timeout_reason = Some(TimeoutReason::Idle);
        second.usage.cost = f64::NAN;
        let mut third = result(EXIT_CANCELLED, None);
        third.error = Some("cancelled".into());
        envelope.results = vec![first, second, third];
        envelope.error = Some(TaskError::new(TaskErrorCode::SubagentCancelled, "stop"));
        assert_eq!(envelope.clone().into_value(), envelope.to_value());
        for mode in [TaskMode::Single, TaskMode::Management] {
            let plain = TaskEnvelope::new(mode);
            assert_eq!(plain.clone().into_value(), plain.to_value());
        }
    }
}

//! The end of a tool call: the state a call ends in, from the state it ran in and its outcome.

use std::sync::Arc;

use serde_json::{Map, Value};
use taskforce_agents::id::now_ms;
use taskforce_agents::model::{
    Part, PartKind, StartTime, ToolMetadata, ToolPart, ToolState, ToolStatePending,
    ToolStateRunning,
};
use taskforce_agents::tool::{ToolError, ToolOutput};

use super::part::SharedPart;

/// Records a call's result on its part; returns the ended state (not written yet).
pub(super) fn end_tool(part: &SharedPart, outcome: Result<ToolOutput, ToolError>) -> Arc<Part> {
    let now = now_ms();
    // The running state is moved into the ended one when nothing else holds it; otherwise
    // only what the ended state keeps of it is copied.
    part.change_or_copy(|p| match p {
        Ok(owned) => {
            if let PartKind::Tool(tool) = &mut owned.kind {
                let running = std::mem::replace(
                    &mut tool.state,
                    ToolState::Pending(ToolStatePending::default()),
                );
                tool.state = ended_owned(running, outcome, now);
            }
            None
        }
        Err(p) => {
            let PartKind::Tool(tool) = &p.kind else {
                return None;
            };
            Some(Part {
                id: p.id.clone(),
                session_id: p.session_id.clone(),
                message_id: p.message_id.clone(),
                kind: PartKind::Tool(ToolPart {
                    call_id: tool.call_id.clone(),
                    tool: tool.tool.clone(),
                    metadata: tool.metadata.clone(),
                    state: ended(&tool.state, outcome, now),
                }),
            })
        }
    })
}

/// The state a call ends in at `now`, from the state it is in (only read: what the ended state
/// keeps of it is copied, not the published metadata the outcome replaces — a task's is large
/// and all replaced) and its outcome.
fn ended(state: &ToolState, outcome: Result<ToolOutput, ToolError>, now: u64) -> ToolState {
    let own = match &outcome {
        Ok(out) => Some(&out.metadata),
        Err(e) => e.metadata(),
    };
    let kept = match state {
        ToolState::Running(r) => ToolState::Running(ToolStateRunning {
            input: r.input.clone(),
            title: r.title.clone(),
            metadata: r.metadata.as_ref().map(|published| {
                let mut kept: ToolMetadata = published
                    .iter()
                    .map(|(key, value)| {
                        let replaced = own.is_some_and(|own| own.contains_key(key));
                        let value = if replaced { Value::Null } else { value.clone() };
                        (key.clone(), value)
                    })
                    .collect::<Map<String, Value>>()
                    .into();
                if let Some(details) = published.details()
                    && own.is_none_or(|own| own.details().is_none())
                {
                    kept.set_details(details.clone());
                }
                kept
            }),
            time: r.time,
        }),
        other => other.clone(),
    };
    ended_owned(kept, outcome, now)
}

/// What the model reads of a failed call: a coded task failure as `CODE: message`, built in
/// one allocation (a cancelled tree ends 1,110 task calls at once), any other error as it
/// displays.
fn error_text(error: &ToolError) -> String {
    match error {
        ToolError::Task(failure) => failure.error.text(),
        other => other.to_string(),
    }
}

/// [`ended`] for a state the caller owns: its input, title and published metadata are moved.
fn ended_owned(state: ToolState, outcome: Result<ToolOutput, ToolError>, now: u64) -> ToolState {
    let running = match state {
        ToolState::Running(r) => r,
        other => ToolStateRunning {
            input: other.input().clone(),
            title: None,
            metadata: None,
            time: StartTime { start: now },
        },
    };
    end_running(running, outcome, error_text, now)
}

/// How a running call ends at `now`: completed with the output, or failed with `text` of the
/// error; the outcome's own metadata (a task's envelope) is laid over what the tool published
/// while it ran (published keys keep their place, new ones follow, the outcome's values win).
pub(crate) fn end_running(
    running: ToolStateRunning,
    outcome: Result<ToolOutput, ToolError>,
    text: impl FnOnce(&ToolError) -> String,
    now: u64,
) -> ToolState {
    match outcome {
        Ok(out) => {
            let mut completed = running.complete(out.output, out.title, now);
            completed.metadata.extend(out.metadata);
            if !out.attachments.is_empty() {
                completed.attachments = Some(out.attachments);
            }
            ToolState::Completed(completed)
        }
        Err(mut error) => {
            let mut failed = running.fail(text(&error), now);
            if let Some(own) = error.take_metadata() {
                failed
                    .metadata
                    .get_or_insert_with(ToolMetadata::new)
                    .extend(own);
            }
            ToolState::Error(failed)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use taskforce_agents::id::{MessageId, SessionId};

    use super::*;

    fn map(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    fn meta(value: Value) -> ToolMetadata {
        map(value).into()
    }

    fn json_of(metadata: &ToolMetadata) -> Value {
        serde_json::to_value(metadata).unwrap()
    }

    #[test]
    fn the_outcome_metadata_is_laid_over_what_the_tool_published() {
        let mut running = ToolStateRunning::new(Map::new(), 1);
        running.metadata = Some(meta(json!({"sessionId": "a", "live": 1, "summary": [1]})));
        let out = ToolOutput {
            title: "t".into(),
            output: "o".into(),
            metadata: meta(json!({"summary": [1, 2], "details": {"x": 1}, "sessionId": "a"})),
            attachments: Vec::new(),
        };
        let ToolState::Completed(done) = end_running(running, Ok(out), |_| String::new(), 2) else {
            panic!("not completed");
        };
        assert_eq!(
            done.metadata.keys().collect::<Vec<_>>(),
            ["sessionId", "live", "summary", "details"]
        );
        assert_eq!(
            json_of(&done.metadata),
            json!({"sessionId": "a", "live": 1, "summary": [1, 2], "details": {"x": 1}})
        );
    }

    #[test]
    fn a_call_ends_from_its_running_state_without_changing_it() {
        let mut running = ToolStateRunning::new(map(json!({"p": 1})), 5);
        running.title = Some("working".into());
        running.metadata = Some(meta(json!({"live": true})));
        let state = ToolState::Running(running);
        let out = ToolOutput {
            title: "done".into(),
            output: "ok".into(),
            metadata: meta(json!({"n": 2})),
            attachments: Vec::new(),
        };
        let ToolState::Completed(done) = ended(&state, Ok(out), 9) else {
            panic!("not completed");
        };
        assert_eq!(done.input, map(json!({"p": 1})));
        assert_eq!(done.title, "done");
        assert_eq!(done.time.start, 5);
        assert_eq!(done.time.end, 9);
        assert_eq!(json_of(&done.metadata), json!({"live": true, "n": 2}));

        let ToolState::Error(failed) = ended(&state, Err(ToolError::Aborted), 9) else {
            panic!("not an error");
        };
        assert_eq!(failed.metadata, Some(meta(json!({"live": true}))));
        assert_eq!(failed.time.start, 5);
        let pending = ToolState::Pending(Default::default());
        let ToolState::Error(failed) = ended(&pending, Err(ToolError::Aborted), 9) else {
            panic!("not an error");
        };
        assert_eq!(failed.metadata, None);
        assert!(matches!(state, ToolState::Running(_)));
    }

    #[test]
    fn a_typed_envelope_survives_the_copy_path_unless_the_outcome_brings_one() {
        use taskforce_agents::tool::{TaskEnvelope, TaskMode};
        let mut published = meta(json!({"sessionId": "a"}));
        published.set_details(TaskEnvelope::new(TaskMode::Single));
        let mut running = ToolStateRunning::new(Map::new(), 1);
        running.metadata = Some(published);
        let state = ToolState::Running(running);
        let ToolState::Error(kept) = ended(&state, Err(ToolError::Aborted), 2) else {
            panic!("not an error");
        };
        let kept = kept.metadata.unwrap();
        assert_eq!(kept.details().map(|d| d.mode), Some(TaskMode::Single));
        let mut own = meta(json!({}));
        own.set_details(TaskEnvelope::new(TaskMode::Parallel));
        let out = ToolOutput {
            title: "t".into(),
            output: "o".into(),
            metadata: own,
            attachments: Vec::new(),
        };
        let ToolState::Completed(done) = ended(&state, Ok(out), 2) else {
            panic!("not completed");
        };
        assert_eq!(
            done.metadata.details().map(|d| d.mode),
            Some(TaskMode::Parallel)
        );
        assert_eq!(done.metadata["sessionId"], "a");
    }

    #[test]
    fn a_call_owned_by_nobody_else_ends_the_same_when_moved() {
        let mut running = ToolStateRunning::new(map(json!({"p": 1})), 5);
        running.title = Some("working".into());
        running.metadata = Some(meta(
            json!({"sessionId": "a", "live": true, "summary": [1]}),
        ));
        let out = || ToolOutput {
            title: "done".into(),
            output: "ok".into(),
            metadata: meta(json!({"summary": [1, 2], "n": 2})),
            attachments: Vec::new(),
        };
        let outcomes: [fn() -> Result<ToolOutput, ToolError>; 2] = [
            || Err(ToolError::Aborted),
            || Err(ToolError::Failed("no".into())),
        ];
        let states = [
            ToolState::Running(running),
            ToolState::Pending(Default::default()),
        ];
        for state in &states {
            let by_ref = ended(state, Ok(out()), 9);
            assert_eq!(ended_owned(state.clone(), Ok(out()), 9), by_ref);
            if let (ToolState::Running(_), ToolState::Completed(c)) = (state, &by_ref) {
                assert_eq!(
                    c.metadata.keys().collect::<Vec<_>>(),
                    ["sessionId", "live", "summary", "n"]
                );
            }
            for outcome in outcomes {
                assert_eq!(
                    ended_owned(state.clone(), outcome(), 9),
                    ended(state, outcome(), 9)
                );
            }
        }
        let shared = SharedPart::new(Part::new(
            SessionId::new(),
            MessageId::new(),
            PartKind::Tool(ToolPart::pending(String::from("c1"), String::from("read"))),
        ));
        let held = shared.lock();
        // Held elsewhere: copied, the held state is left as it was.
        let copied = shared.change_or_copy(|p| match p {
            Ok(_) => panic!("the state is shared"),
            Err(p) => Some(p.clone()),
        });
        assert!(!Arc::ptr_eq(&copied, &held));
        drop((held, copied));
        // Held by nobody else: changed in place.
        let before = Arc::as_ptr(&shared.lock());
        let changed = shared.change_or_copy(|p| match p {
            Ok(_) => None,
            Err(_) => panic!("nobody else holds it"),
        });
        assert_eq!(Arc::as_ptr(&changed), before);
    }
}

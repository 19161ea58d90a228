//! Repairing what a runtime that died left mid-run: its answers stay unfinished on disk and its
//! tool calls `running`, with nobody left to end them.
//!
//! Every unfinished answer names the runtime writing it (see `Store::set_runtime`). A runtime
//! that starts, and a session loaded from the store, look for unfinished answers of runtimes
//! that are gone (their lock is free, see `runtime::owner`, or the shared store says so); answers of live runtimes are left
//! alone, since those runtimes still run them. Answers of a runtime that is gone are first taken
//! over in the store (`Store::claim_unfinished`), so that of several runtimes starting at once
//! only one repairs each: its tool calls left pending or running end in an error, its text ends,
//! the answer gets an error and its completion time, and a `session.error` says why. The
//! session is then idle and takes prompts as usual; the model reads the interrupted calls as
//! failed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use taskforce_agents::id::{MessageId, SessionId, now_ms};
use taskforce_agents::model::{
    AssistantError, Message, Part, PartKind, TimeSpan, ToolState, ToolStateError,
};

use super::writer::{Item, Writer};
use crate::bus::{Event, SessionStatus};
use crate::core::Core;
use crate::owner::is_running;
use crate::store::{MessageWithParts, StoreError, Unfinished};

/// What a tool call or an answer that a runtime left unfinished when it died records.
pub const STOPPED: &str = "interrupted: the runtime stopped";

/// Repairs the unfinished answers of runtimes that are gone, in `session` only when given;
/// answers the sessions it repaired. Failures are logged: the answers stay as they are, for the
/// next look.
pub(crate) async fn repair_dead_runs(
    core: &Arc<Core>,
    session: Option<&SessionId>,
) -> Vec<SessionId> {
    match repair(core, session).await {
        Ok(repaired) => repaired,
        Err(e) => {
            tracing::warn!("repairing the runs of a runtime that died failed: {e}");
            Vec::new()
        }
    }
}

/// Whether `messages` hold an answer that is not finished (one a dead runtime may have left).
pub(crate) fn has_unfinished(messages: &[MessageWithParts]) -> bool {
    messages.iter().any(|m| {
        m.info
            .as_assistant()
            .is_some_and(|a| a.time.completed.is_none())
    })
}

async fn repair(
    core: &Arc<Core>,
    session: Option<&SessionId>,
) -> Result<Vec<SessionId>, StoreError> {
    let me = core.owner.id.as_str();
    let unfinished = core.store.unfinished_answers(session).await?;
    let owners: BTreeSet<&str> = unfinished
        .iter()
        .map(|u| u.owner.as_str())
        .filter(|&owner| owner != me)
        .collect();
    let mut taken: BTreeMap<SessionId, BTreeSet<MessageId>> = BTreeMap::new();
    for owner in owners {
        if is_running(&*core.store, &core.paths.data_dir, owner).await {
            continue;
        }
        for Unfinished {
            session, message, ..
        } in core.store.claim_unfinished(owner, me, session).await?
        {
            taken.entry(session).or_default().insert(message);
        }
    }
    let mut repaired = Vec::new();
    for (session, messages) in taken {
        match repair_session(core, &session, &messages).await {
            Ok(()) => repaired.push(session),
            Err(e) => tracing::warn!(%session, "repairing an interrupted run failed: {e}"),
        }
    }
    Ok(repaired)
}

/// Ends the answers `taken` of `id` (taken over from a runtime that died), stores them, and
/// announces it.
async fn repair_session(
    core: &Arc<Core>,
    id: &SessionId,
    taken: &BTreeSet<MessageId>,
) -> Result<(), StoreError> {
    let Some(session) = core.store.session(id).await? else {
        return Ok(());
    };
    let now = now_ms();
    let mut messages: Vec<Arc<Message>> = Vec::new();
    let mut parts: Vec<Arc<Part>> = Vec::new();
    for stored in core.store.messages(id).await? {
        let Some(answer) = stored.info.as_assistant() else {
            continue;
        };
        if answer.time.completed.is_some() || !taken.contains(&answer.id) {
            continue;
        }
        parts.extend(
            stored
                .parts
                .iter()
                .filter_map(|p| end_part(p, answer.time.created, now))
                .map(Arc::new),
        );
        let mut answer = answer.clone();
        answer.error = Some(AssistantError::aborted(STOPPED));
        answer.time.completed = Some(now);
        messages.push(Arc::new(Message::Assistant(answer)));
    }
    if messages.is_empty() {
        return Ok(());
    }
    let writer = Writer::new(core.clone());
    let mut items: Vec<Item<'_>> = parts.iter().map(Item::Part).collect();
    items.extend(messages.iter().map(Item::Message));
    writer.save(&items).await?;
    tracing::info!(session = %id, answers = messages.len(), "repaired a run interrupted by the death of its runtime");
    core.bus.publish(Event::SessionError {
        session_id: Some(id.clone()),
        error: Some(Box::new(AssistantError::aborted(STOPPED))),
    });
    writer.status(&session, SessionStatus::Idle);
    Ok(())
}

/// `part` as it ends when its runtime died (`None`: it has ended already): a tool call left
/// pending or running fails with [`STOPPED`], streaming text and reasoning end at `now`.
fn end_part(part: &Part, started: u64, now: u64) -> Option<Part> {
    let mut part = part.clone();
    match &mut part.kind {
        PartKind::Tool(tool) => {
            let failed = match &tool.state {
                ToolState::Pending(pending) => ToolStateError {
                    input: pending.input.clone(),
                    error: STOPPED.into(),
                    metadata: None,
                    time: TimeSpan {
                        start: started,
                        end: now,
                    },
                },
                ToolState::Running(running) => running.clone().fail(STOPPED, now),
                ToolState::Completed(_) | ToolState::Error(_) => return None,
            };
            tool.state = ToolState::Error(failed);
        }
        PartKind::Text(text) => match &mut text.time {
            Some(time) if time.end.is_none() => time.end = Some(now),
            _ => return None,
        },
        PartKind::Reasoning(reasoning) if reasoning.time.end.is_none() => {
            reasoning.time.end = Some(now);
        }
        _ => return None,
    }
    Some(part)
}

#[cfg(test)]
mod tests {
    use taskforce_agents::id::MessageId;
    use taskforce_agents::model::{ReasoningPart, TextPart, ToolPart};

    use super::*;

    fn part(kind: impl Into<PartKind>) -> Part {
        Part::new(SessionId::new(), MessageId::new(), kind)
    }

    #[test]
    fn running_and_pending_calls_fail_and_open_text_ends() {
        let mut call = ToolPart::pending("call_1", "bash");
        call.state = ToolState::running(serde_json::Map::new(), 5);
        let ended = end_part(&part(call), 1, 9).unwrap();
        let Some(ToolState::Error(e)) = ended.as_tool().map(|t| &t.state) else {
            panic!("{ended:?}")
        };
        assert_eq!(e.error, STOPPED);
        assert_eq!((e.time.start, e.time.end), (5, 9));

        let pending = ToolPart::pending("call_2", "read");
        let ended = end_part(&part(pending), 1, 9).unwrap();
        let Some(ToolState::Error(e)) = ended.as_tool().map(|t| &t.state) else {
            panic!("{ended:?}")
        };
        assert_eq!((e.error.as_str(), e.time.start), (STOPPED, 1));

        let mut text = TextPart::new("half an ans");
        text.time = Some(taskforce_agents::model::PartTime {
            start: 2,
            end: None,
        });
        let ended = end_part(&part(text), 1, 9).unwrap();
        assert_eq!(ended.as_text().unwrap().time.unwrap().end, Some(9));
        let ended = end_part(&part(ReasoningPart::new(String::new(), 3)), 1, 9).unwrap();
        let PartKind::Reasoning(r) = &ended.kind else {
            panic!("{ended:?}")
        };
        assert_eq!(r.time.end, Some(9));
    }

    #[test]
    fn ended_parts_are_left_as_they_are() {
        let mut call = ToolPart::pending("call_1", "bash");
        call.state = ToolState::running(serde_json::Map::new(), 5);
        let done = end_part(&part(call), 1, 9).unwrap();
        assert!(end_part(&done, 1, 10).is_none());
        let mut text = TextPart::new("done");
        text.time = Some(taskforce_agents::model::PartTime {
            start: 2,
            end: Some(4),
        });
        assert!(end_part(&part(text), 1, 9).is_none());
        assert!(end_part(&part(TextPart::new("no times")), 1, 9).is_none());
    }
}

//! What a task call's result takes from its child's answers: text, summary, usage, display
//! items.

use taskforce_agents::id::SessionId;
use taskforce_agents::model::{Message, Part, PartKind, SummaryItem};
use taskforce_agents::tool::{DisplayItem, TaskUsage, ToolError};

use super::call::failed;
use crate::RuntimeError;
use crate::session::AnswerBook;
use crate::store::{MessageWithParts, Store};

/// The text of the last text part among `parts`.
pub(super) fn last_text<'a>(parts: impl DoubleEndedIterator<Item = &'a Part>) -> Option<String> {
    parts
        .rev()
        .find_map(|p| p.as_text().map(|t| t.text.clone()))
}

/// The child's latest answer since `since` (its last turn's, after the turns its background
/// results started).
pub(super) async fn latest_answer(
    store: &dyn Store,
    child: &SessionId,
    since: u64,
) -> Result<MessageWithParts, ToolError> {
    let history = store.messages(child).await.map_err(failed)?;
    history
        .into_iter()
        .rev()
        .find(|m| m.is_answer_since(since))
        .ok_or_else(|| ToolError::Failed(format!("subagent session {child} has no answer")))
}

/// What the child wrote since `since`: read in its actor's memory when it has it (no wait for
/// the disk, no message, nothing copied but what the result keeps), else in the store.
pub(super) async fn child_digest(
    store: &dyn Store,
    book: &AnswerBook,
    child: &SessionId,
    since: u64,
) -> Digest {
    if let Some(digest) = book.read(since, Digest::of) {
        return digest;
    }
    match store.messages(child).await {
        Ok(history) => Digest::of(
            history
                .iter()
                .filter(|m| m.is_answer_since(since))
                .collect(),
        ),
        Err(e) => {
            tracing::warn!(session = %child, "reading the child's messages failed: {e}");
            Digest::of(Vec::new())
        }
    }
}

/// What a task's result takes from the child's answers of one run.
pub(super) struct Digest {
    /// The text of the last answer with text.
    pub text: Option<String>,
    /// The child's tool calls.
    pub summary: Vec<SummaryItem>,
    /// The child's tokens and cost.
    pub usage: TaskUsage,
    /// The child's texts and tool calls, in order.
    pub display_items: Vec<DisplayItem>,
}

impl Digest {
    fn of(answers: Vec<&MessageWithParts>) -> Digest {
        Digest {
            text: answers
                .iter()
                .rev()
                .find_map(|a| last_text(a.parts.iter().map(|p| &**p))),
            summary: child_summary(&answers),
            usage: usage_of(&answers),
            display_items: display_items(&answers),
        }
    }
}

/// A child's reply as the task call's result: its final message, or why there is none.
pub(super) fn reply_of(
    reply: Result<Result<MessageWithParts, RuntimeError>, tokio::sync::oneshot::error::RecvError>,
    child: &SessionId,
) -> Result<MessageWithParts, ToolError> {
    match reply {
        Ok(Ok(message)) => Ok(message),
        Ok(Err(RuntimeError::Cancelled)) => Err(ToolError::Aborted),
        Ok(Err(e)) => Err(ToolError::Failed(format!(
            "subagent session {child} failed: {e}"
        ))),
        Err(_) => Err(ToolError::Failed(format!(
            "subagent session {child} stopped unexpectedly"
        ))),
    }
}

/// The summary of the child's tool parts in `answers`.
fn child_summary(answers: &[&MessageWithParts]) -> Vec<SummaryItem> {
    answers
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| {
            let t = p.as_tool()?;
            Some(SummaryItem::of(p.id.as_str(), &t.tool, &t.state))
        })
        .collect()
}

/// The child's own tokens and cost summed over `answers`; turns = how many there are.
pub(super) fn usage_of(answers: &[&MessageWithParts]) -> TaskUsage {
    let mut usage = TaskUsage::default();
    for answer in answers {
        if let Message::Assistant(a) = &*answer.info {
            usage.add_turn(a);
        }
    }
    usage
}

/// The texts and tool calls of `answers`, in order.
fn display_items(answers: &[&MessageWithParts]) -> Vec<DisplayItem> {
    answers
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match &p.kind {
            PartKind::Text(t) if !t.text.is_empty() => Some(DisplayItem::Text {
                text: t.text.clone(),
            }),
            PartKind::Tool(t) => Some(DisplayItem::ToolCall {
                name: t.tool.clone(),
                args: t.state.input().clone(),
            }),
            _ => None,
        })
        .collect()
}

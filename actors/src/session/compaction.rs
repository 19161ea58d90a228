//! Compaction: when a step overflows the model's context, or on request, the hidden
//! `compaction` agent summarizes the conversation; the model then sees the history from that
//! summary on. Pruning clears the output of old tool calls.

use taskforce_agents::id::now_ms;
use taskforce_agents::model::{Message, ModelRef, PartKind, Tokens, ToolState};

use crate::core::Core;
use crate::store::MessageWithParts;

/// The hidden agent that writes summaries.
pub(crate) const COMPACTION_AGENT: &str = "compaction";

/// The user message that follows an automatic summary.
pub(crate) const CONTINUE: &str = "Continue if you have next steps, or stop and ask for clarification if you are unsure how to proceed.";

/// The most output tokens set aside when the model's output limit is larger.
const OUTPUT_TOKEN_MAX: u64 = 32_000;

/// Tool output tokens (newest first) that pruning never clears.
const PRUNE_PROTECT: u64 = 40_000;

/// Pruning only happens when it clears at least this many tokens.
const PRUNE_MINIMUM: u64 = 20_000;

/// Whether a step that used `tokens` overflowed a model with `context` and `output` limits
/// (room for the reply is kept): usable = context − min(output, 32,000); overflow at or above it. No context limit:
/// never.
pub(crate) fn overflows(tokens: &Tokens, context: Option<u64>, output: Option<u64>) -> bool {
    let Some(context) = context.filter(|c| *c > 0) else {
        return false;
    };
    let reserved = output
        .filter(|o| *o > 0)
        .map_or(OUTPUT_TOKEN_MAX, |o| o.min(OUTPUT_TOKEN_MAX));
    let usable = context.saturating_sub(reserved);
    let total = tokens
        .total
        .unwrap_or(tokens.input + tokens.output + tokens.cache.read + tokens.cache.write);
    total >= usable
}

/// Whether `answer` (a finished step on `model`) calls for an automatic compaction.
pub(crate) fn needs_compaction(core: &Core, answer: &MessageWithParts, model: &ModelRef) -> bool {
    if !core.config.compaction.auto {
        return false;
    }
    let Message::Assistant(a) = &*answer.info else {
        return false;
    };
    if a.summary == Some(true) || a.error.is_some() {
        return false;
    }
    let limits = core.providers.model_config(model);
    overflows(
        &a.tokens,
        limits.and_then(|m| m.context),
        limits.and_then(|m| m.output),
    )
}

/// The history the model sees: from the newest compaction request whose summary finished.
pub(crate) fn filter_compacted(messages: &[MessageWithParts]) -> &[MessageWithParts] {
    let start = messages.iter().enumerate().rev().find_map(|(i, m)| {
        let Message::User(u) = &*m.info else {
            return None;
        };
        let requested = m
            .parts
            .iter()
            .any(|p| matches!(p.kind, PartKind::Compaction(_)));
        let summarized = messages[i + 1..].iter().any(|later| {
            matches!(&*later.info, Message::Assistant(a)
                if a.summary == Some(true) && a.parent_id == u.id && a.is_finished() && a.error.is_none())
        });
        (requested && summarized).then_some(i)
    });
    &messages[start.unwrap_or(0)..]
}

/// The compaction request waiting for its summary: `Some(auto)` when the newest user message
/// asks for one and no summary answers it yet.
pub(crate) fn pending_compaction(messages: &[MessageWithParts]) -> Option<bool> {
    let last_user = messages
        .iter()
        .rposition(|m| matches!(*m.info, Message::User(_)))?;
    let user = &messages[last_user];
    let auto = user.parts.iter().find_map(|p| match &p.kind {
        PartKind::Compaction(c) => Some(c.auto),
        _ => None,
    })?;
    let answered = messages[last_user + 1..]
        .iter()
        .any(|m| matches!(&*m.info, Message::Assistant(a) if a.summary == Some(true)));
    (!answered).then_some(auto)
}

/// Marks the output of old completed tool calls as cleared: walking back from the newest and
/// skipping the last two user turns, once 40,000 tokens of tool output are kept, older outputs
/// are cleared — if that clears at least 20,000 tokens. Stops at the last summary. Answers the
/// `(message, part)` positions changed in place in `messages`.
pub(crate) fn prune(messages: &mut [MessageWithParts]) -> Vec<(usize, usize)> {
    let mut kept = 0u64;
    let mut cleared = 0u64;
    let mut victims: Vec<(usize, usize)> = Vec::new();
    let mut turns = 0;
    'scan: for (mi, m) in messages.iter().enumerate().rev() {
        match &*m.info {
            Message::User(_) => {
                turns += 1;
                continue;
            }
            Message::Assistant(a) if a.summary == Some(true) => break 'scan,
            Message::Assistant(_) => {}
        }
        if turns < 2 {
            continue;
        }
        for (pi, p) in m.parts.iter().enumerate().rev() {
            let PartKind::Tool(tool) = &p.kind else {
                continue;
            };
            let ToolState::Completed(done) = &tool.state else {
                continue;
            };
            if done.time.compacted.is_some() {
                break 'scan; // cleared before: everything older is too
            }
            let estimate = (done.output.len() as u64).div_ceil(4);
            kept += estimate;
            if kept > PRUNE_PROTECT {
                cleared += estimate;
                victims.push((mi, pi));
            }
        }
    }
    if cleared < PRUNE_MINIMUM {
        return Vec::new();
    }
    let now = now_ms();
    for &(mi, pi) in &victims {
        if let PartKind::Tool(tool) =
            &mut std::sync::Arc::make_mut(&mut messages[mi].parts[pi]).kind
            && let ToolState::Completed(done) = &mut tool.state
        {
            done.time.compacted = Some(now);
        }
    }
    victims
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use taskforce_agents::id::{MessageId, SessionId};
    use taskforce_agents::model::{
        AssistantMessage, CacheTokens, MessagePath, Part, TextPart, ToolInput, ToolPart,
        ToolStateRunning, UserMessage,
    };

    fn user(s: &SessionId) -> MessageWithParts {
        let info = UserMessage::new(s.clone(), "build", ModelRef::new("p", "m"), 1);
        let part = Part::new(s.clone(), info.id.clone(), TextPart::new("go"));
        MessageWithParts {
            info: Arc::new(Message::User(info)),
            parts: vec![part.into()],
        }
    }

    /// An assistant message with one completed read per output size (in characters).
    fn reads(s: &SessionId, sizes: &[usize]) -> MessageWithParts {
        let info = AssistantMessage::new(
            s.clone(),
            MessageId::new(),
            "build",
            &ModelRef::new("p", "m"),
            MessagePath {
                cwd: "/".into(),
                root: "/".into(),
            },
            2,
        );
        let parts = sizes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let mut tool = ToolPart::pending(format!("call_{i}"), "read");
                tool.state =
                    ToolState::Completed(ToolStateRunning::new(ToolInput::default(), 1).complete(
                        "x".repeat(*n),
                        "read",
                        2,
                    ));
                Part::new(s.clone(), info.id.clone(), tool).into()
            })
            .collect();
        MessageWithParts {
            info: Arc::new(Message::Assistant(info)),
            parts,
        }
    }

    fn cleared(messages: &[MessageWithParts]) -> Vec<bool> {
        messages
            .iter()
            .flat_map(|m| &m.parts)
            .filter_map(|p| match &p.kind {
                PartKind::Tool(t) => match &t.state {
                    ToolState::Completed(c) => Some(c.time.compacted.is_some()),
                    _ => None,
                },
                _ => None,
            })
            .collect()
    }

    #[test]
    fn prune_keeps_the_newest_40k_tokens_and_the_last_two_turns() {
        let s = SessionId::new();
        // 4 chars per token: each read below is 30,000 tokens.
        let mut messages = vec![
            user(&s),
            reads(&s, &[120_000, 120_000, 120_000]),
            user(&s),
            reads(&s, &[120_000]),
            user(&s),
            reads(&s, &[120_000]),
        ];
        let changed = prune(&mut messages);
        // The last two turns are never touched; of the oldest turn, the newest read is kept
        // (30k ≤ 40k), the two before it go (60k, 90k > 40k).
        assert_eq!(changed, vec![(1, 1), (1, 0)]);
        assert_eq!(cleared(&messages), [true, true, false, false, false]);
        // Pruning again clears nothing more.
        assert!(prune(&mut messages).is_empty());
    }

    #[test]
    fn prune_skips_small_gains() {
        let s = SessionId::new();
        // 45k tokens in old turns: only 5k above the protected 40k, below the 20k minimum.
        let mut messages = vec![user(&s), reads(&s, &[20_000, 160_000]), user(&s), user(&s)];
        assert!(prune(&mut messages).is_empty());
        assert_eq!(cleared(&messages), [false, false]);
    }

    #[test]
    fn the_history_starts_at_the_last_finished_summary() {
        let s = SessionId::new();
        let first = user(&s);
        let mut request = user(&s);
        request.parts = vec![std::sync::Arc::new(Part::new(
            s.clone(),
            request.info.id().clone(),
            taskforce_agents::model::CompactionPart { auto: true },
        ))];
        let mut summary = reads(&s, &[]);
        if let Message::Assistant(a) = Arc::make_mut(&mut summary.info) {
            a.summary = Some(true);
            a.parent_id = request.info.id().clone();
            a.finish = Some("stop".into());
            a.time.completed = Some(3);
        }
        let after = user(&s);
        let all = vec![first.clone(), request.clone(), summary.clone(), after];
        assert_eq!(filter_compacted(&all).len(), 3);
        assert_eq!(filter_compacted(&all)[0].info.id(), request.info.id());
        // An unfinished summary does not cut the history, and is pending.
        let pending = vec![first, request];
        assert_eq!(filter_compacted(&pending).len(), 2);
        assert_eq!(pending_compaction(&pending), Some(true));
        assert_eq!(pending_compaction(&all), None);
    }

    fn tokens(input: u64, output: u64, read: u64) -> Tokens {
        Tokens {
            total: None,
            input,
            output,
            reasoning: 0,
            cache: CacheTokens { read, write: 0 },
        }
    }

    #[test]
    fn overflow_follows_s12() {
        // 200k context, 64k output: usable = 200,000 − 32,000 = 168,000.
        assert!(!overflows(
            &tokens(160_000, 7_999, 0),
            Some(200_000),
            Some(64_000)
        ));
        assert!(overflows(
            &tokens(160_000, 7_000, 1_000),
            Some(200_000),
            Some(64_000)
        ));
        // A small output limit reserves only itself.
        assert!(overflows(&tokens(900, 0, 0), Some(1_000), Some(100)));
        assert!(!overflows(&tokens(899, 0, 0), Some(1_000), Some(100)));
        // No (or zero) context limit: never.
        assert!(!overflows(&tokens(10_000_000, 0, 0), None, Some(100)));
        assert!(!overflows(&tokens(10_000_000, 0, 0), Some(0), None));
        // The provider's total wins when given.
        let mut t = tokens(1, 1, 1);
        t.total = Some(168_000);
        assert!(overflows(&t, Some(200_000), None));
    }
}

//! Session titles: after the first real user message of a root session
//! whose title is still the default, the hidden `title` agent names it on the small model.

use std::sync::Arc;

use taskforce_agents::model::{Message, ModelRef, PartKind, Session};

use crate::bus::Event;
use crate::complete::complete_text;
use crate::core::Core;
use crate::store::MessageWithParts;

/// What the title agent is given before the conversation's start.
pub(crate) const TITLE_REQUEST: &str = "Generate a title for this conversation:\n";

/// The longest title kept; longer ones are cut to 97 characters and `...`.
const MAX_TITLE: usize = 100;

/// Whether `title` is the one a root session gets when created without a title.
pub(crate) fn is_default_title(title: &str) -> bool {
    title
        .strip_prefix("New session - ")
        .is_some_and(is_iso_millis)
}

/// `2026-11-22T04:05:06.789Z`.
fn is_iso_millis(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 24
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'.',
            23 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

/// The model's answer as a title: `<think>` blocks removed, the first non-empty line, at most
/// 100 characters. `None` when nothing is left.
pub(crate) fn clean_title(raw: &str) -> Option<String> {
    let mut text = raw.to_string();
    while let Some(start) = text.find("<think>") {
        match text[start..].find("</think>") {
            Some(end) => text.replace_range(start..start + end + "</think>".len(), ""),
            None => text.truncate(start),
        }
    }
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    if line.chars().count() > MAX_TITLE {
        let cut: String = line.chars().take(MAX_TITLE - 3).collect();
        Some(format!("{cut}..."))
    } else {
        Some(line.to_string())
    }
}

/// What the title agent reads of a user message: its own text, else its subtask prompts.
/// `None` when the message is only synthetic (not a real user message).
fn title_input(message: &MessageWithParts) -> Option<String> {
    let texts: Vec<&str> = message
        .parts
        .iter()
        .filter_map(|p| match &p.kind {
            PartKind::Text(t) if t.synthetic != Some(true) && t.ignored != Some(true) => {
                Some(t.text.as_str())
            }
            _ => None,
        })
        .collect();
    if !texts.is_empty() {
        return Some(texts.join("\n"));
    }
    let tasks: Vec<&str> = message
        .parts
        .iter()
        .filter_map(|p| match &p.kind {
            PartKind::Subtask(s) => Some(s.prompt.as_str()),
            _ => None,
        })
        .collect();
    (!tasks.is_empty()).then(|| tasks.join("\n"))
}

/// What the title agent is asked with (the first real user message's text) and the model that
/// message used, when `session` is a root with the default title and `messages` hold exactly
/// one real user message; `None` otherwise (a named session, a child, a later message).
fn title_job(session: &Session, messages: &[MessageWithParts]) -> Option<(String, ModelRef)> {
    if session.is_child() || !is_default_title(&session.title) {
        return None;
    }
    let mut real = messages
        .iter()
        .filter(|m| matches!(*m.info, Message::User(_)))
        .filter_map(|m| title_input(m).map(|input| (m, input)));
    let (first, input) = real.next()?;
    if real.next().is_some() {
        return None; // not the first real message: the title was tried already
    }
    let user_model = first.info.as_user().map(|u| u.model.clone())?;
    Some((input, user_model))
}

/// Starts naming `session` in the background when `messages` hold its first real user
/// message and its title is still the default. Never delays the loop; failures are logged.
pub(crate) fn ensure_title(core: &Arc<Core>, session: &Session, messages: &[MessageWithParts]) {
    let Some((input, user_model)) = title_job(session, messages) else {
        return;
    };
    let core = core.clone();
    let id = session.id.clone();
    tokio::spawn(async move {
        if let Err(e) = name_session(&core, &id, input, user_model).await {
            // The session keeps its default title; the error, when the provider is down, is
            // the answer's too, and shown there.
            tracing::debug!(session = %id, "no title: {e}");
        }
    });
}

async fn name_session(
    core: &Core,
    id: &taskforce_agents::id::SessionId,
    input: String,
    user_model: ModelRef,
) -> Result<(), crate::RuntimeError> {
    let agent = core.registry.get("title").cloned();
    let model = agent
        .as_ref()
        .and_then(|a| a.model.clone())
        .or_else(|| core.config.small_model.clone())
        .unwrap_or(user_model);
    let system: Vec<String> = agent
        .as_ref()
        .and_then(|a| a.prompt.clone())
        .into_iter()
        .collect();
    let temperature = agent.as_ref().and_then(|a| a.temperature);
    let prompt = format!("{TITLE_REQUEST}{input}");
    // Two retries, as OpenCode's title call has.
    let mut last = None;
    for _ in 0..3 {
        match complete_text(
            core,
            &model,
            "title",
            system.clone(),
            prompt.clone(),
            temperature,
        )
        .await
        {
            Ok(answer) => {
                last = None;
                if let Some(title) = clean_title(&answer) {
                    store_title(core, id, title).await?;
                }
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    last.map_or(Ok(()), Err)
}

/// Saves `title` unless someone renamed the session meanwhile; `time.updated` stays. A session
/// deleted meanwhile stays deleted.
async fn store_title(
    core: &Core,
    id: &taskforce_agents::id::SessionId,
    title: String,
) -> Result<(), crate::RuntimeError> {
    let ours = title.clone();
    let edit = Box::new(move |session: &mut Session| {
        let default = is_default_title(&session.title);
        if default {
            session.title = title;
        }
        default
    });
    // As stored: a newer time.updated written meanwhile stays.
    let stored = core.store.update_session(id, edit).await?;
    if let Some(stored) = stored.filter(|s| s.title == ours) {
        core.bus.publish(Event::SessionUpdated {
            info: Arc::new(stored),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user_message(session: &Session, n: u32, text: &str, synthetic: bool) -> MessageWithParts {
        let message: Message = serde_json::from_value(serde_json::json!({
            "id": format!("msg_01JCX8ZR00000000000000000{n}"),
            "sessionID": session.id,
            "role": "user",
            "time": {"created": 1736935201000u64},
            "agent": "build",
            "model": {"providerID": "fake", "modelID": "gpt-test"}
        }))
        .unwrap();
        let part: taskforce_agents::model::Part = serde_json::from_value(serde_json::json!({
            "id": format!("prt_01JCX8ZS00000000000000000{n}"),
            "sessionID": session.id,
            "messageID": format!("msg_01JCX8ZR00000000000000000{n}"),
            "type": "text",
            "text": text,
            "synthetic": synthetic
        }))
        .unwrap();
        MessageWithParts {
            info: Arc::new(message),
            parts: vec![Arc::new(part)],
        }
    }

    fn session(title: &str, parent: Option<&str>) -> Session {
        serde_json::from_value(serde_json::json!({
            "id": "ses_01JCX8ZQ4M7T9V2W3Y5A6B8C0D",
            "slug": "s",
            "projectID": "p",
            "directory": "/p",
            "parentID": parent,
            "title": title,
            "version": "1",
            "time": {"created": 1736935201000u64, "updated": 1736935201000u64}
        }))
        .unwrap()
    }

    #[test]
    fn only_a_default_titled_roots_first_real_message_asks_for_a_title() {
        let root = session("New session - 2026-11-22T04:05:06.789Z", None);
        let first = user_message(&root, 1, "Fix the login bug please", false);
        let (input, model) = title_job(&root, std::slice::from_ref(&first)).unwrap();
        assert_eq!(input, "Fix the login bug please");
        assert_eq!(model.to_string(), "fake/gpt-test");
        // A second real message does not ask again; a synthetic one does not count.
        let second = user_message(&root, 2, "and the logout one", false);
        assert!(title_job(&root, &[first.clone(), second]).is_none());
        let reminder = user_message(&root, 3, "<task_result>", true);
        assert!(title_job(&root, &[first.clone(), reminder]).is_some());
        // A named root and a child never ask.
        let named = session("My own title", None);
        assert!(title_job(&named, std::slice::from_ref(&first)).is_none());
        let child = session(
            "New session - 2026-11-22T04:05:06.789Z",
            Some("ses_01JCX8ZQ4M7T9V2W3Y5A6B8C0E"),
        );
        assert!(title_job(&child, &[first]).is_none());
    }

    #[test]
    fn only_the_generated_default_title_counts_as_default() {
        assert!(is_default_title("New session - 2026-11-22T04:05:06.789Z"));
        assert!(!is_default_title("New session - 2026-11-22T04:05:06Z"));
        assert!(!is_default_title("New session - yesterday"));
        assert!(!is_default_title(
            "Child session - 2026-11-22T04:05:06.789Z"
        ));
        assert!(!is_default_title("Fix the login bug"));
    }

    #[test]
    fn titles_lose_thinking_keep_the_first_line_and_stay_short() {
        assert_eq!(
            clean_title("<think>the user wants\na title</think>\n\n  Fix login bug  \nmore"),
            Some("Fix login bug".into())
        );
        assert_eq!(clean_title("<think>never closed"), None);
        assert_eq!(clean_title(" \n\n"), None);
        let long = "x".repeat(150);
        let cut = clean_title(&long).unwrap();
        assert_eq!(cut.chars().count(), 100);
        assert!(cut.ends_with("..."));
        assert_eq!(clean_title(&"é".repeat(100)), Some("é".repeat(100)));
    }
}

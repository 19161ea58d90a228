//! Changing sessions from outside their loop: patching, forking, a user's shell command.

use std::sync::Arc;

use taskforce_agents::id::{MessageId, PartId, SessionId, now_ms};
use taskforce_agents::model::{Message, Part, Session, Todo};
use taskforce_agents::permission::Rule;

use super::Runtime;
use crate::RuntimeError;
use crate::bus::Event;
use crate::session::{Exclusive, Job, Seed, ShellInput};
use crate::store::MessageWithParts;

/// Changes to a session's title or archive time (`PATCH /session/:id`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionPatch {
    /// A new title.
    pub title: Option<String>,
    /// When the session was archived (epoch ms).
    pub archived: Option<u64>,
}

impl Runtime {
    /// Creates a root session (or a child of `parent`).
    pub async fn create_session(
        &self,
        parent: Option<&SessionId>,
        title: Option<String>,
    ) -> Result<Session, RuntimeError> {
        self.create_session_with(parent, title, None).await
    }

    /// Creates a session as [`Runtime::create_session`] does, with session-level permission
    /// rules (they come after the agent's, so they win).
    pub async fn create_session_with(
        &self,
        parent: Option<&SessionId>,
        title: Option<String>,
        permission: Option<Vec<Rule>>,
    ) -> Result<Session, RuntimeError> {
        let now = now_ms();
        let session = match parent {
            Some(p) => {
                let parent = self.session(p).await?;
                let title = title.unwrap_or_else(|| format!("Child session - {}", iso(now)));
                Session::child_of(&parent, title, now)
            }
            None => Session::new(
                self.core.project_id.clone(),
                self.core.directory(),
                title.unwrap_or_else(|| format!("New session - {}", iso(now))),
                now,
            ),
        };
        let mut session = session;
        session.permission = permission;
        if let Some(p) = &session.parent_id {
            self.core.bus.register_parent(&session.id, p);
        }
        self.core.store.put_session(&session).await?;
        // A new root has no descendants: its first task call need not count them in the store.
        if session.parent_id.is_none() {
            self.subagents.new_tree(&session.id);
        }
        let shared = Arc::new(session.clone());
        self.core.bus.publish(Event::SessionCreated {
            info: shared.clone(),
        });
        self.core
            .bus
            .publish(Event::SessionUpdated { info: shared });
        // Its actor starts knowing it is empty, so the first prompt reads nothing.
        self.activate(
            &session.id,
            Some(Seed {
                session: session.clone(),
                empty: true,
                unsaved: false,
            }),
        )
        .await?;
        Ok(session)
    }

    /// Applies `patch` to a session and publishes `session.updated`; `time.updated` stays.
    pub async fn update_session(
        &self,
        id: &SessionId,
        patch: SessionPatch,
    ) -> Result<Session, RuntimeError> {
        let edit = Box::new(move |session: &mut Session| {
            if let Some(title) = patch.title {
                session.title = title;
            }
            if let Some(archived) = patch.archived {
                session.time.archived = Some(archived);
            }
            true
        });
        // As stored: a newer time.updated written meanwhile stays; a session deleted meanwhile
        // is not brought back.
        let session = self
            .core
            .store
            .update_session(id, edit)
            .await?
            .ok_or_else(|| RuntimeError::SessionNotFound(id.to_string()))?;
        self.core.bus.publish(Event::SessionUpdated {
            info: Arc::new(session.clone()),
        });
        Ok(session)
    }

    /// A new root session holding copies of the messages before `before` (all when absent), with
    /// new ids, the same rules and the title `<title> (fork #n)`.
    pub async fn fork_session(
        &self,
        id: &SessionId,
        before: Option<&MessageId>,
    ) -> Result<Session, RuntimeError> {
        let original = self.session(id).await?;
        let messages = self.core.store.messages(id).await?;
        let mut fork = Session::new(
            self.core.project_id.clone(),
            self.core.directory(),
            forked_title(&original.title),
            now_ms(),
        );
        fork.permission = original.permission.clone();
        let mut renamed: Vec<(MessageId, MessageId)> = Vec::new();
        let mut copies: Vec<Message> = Vec::new();
        let mut parts: Vec<Part> = Vec::new();
        let end = match before {
            Some(b) => messages
                .iter()
                .position(|m| m.info.id() == b)
                .ok_or_else(|| RuntimeError::MessageNotFound(b.to_string()))?,
            None => messages.len(),
        };
        for m in messages.into_iter().take(end) {
            let new_id = MessageId::new();
            renamed.push((m.info.id().clone(), new_id.clone()));
            let info = match Arc::unwrap_or_clone(m.info) {
                Message::User(mut u) => {
                    u.id = new_id.clone();
                    u.session_id = fork.id.clone();
                    Message::User(u)
                }
                Message::Assistant(mut a) => {
                    if let Some((_, to)) = renamed.iter().find(|(from, _)| from == &a.parent_id) {
                        a.parent_id = to.clone();
                    }
                    a.id = new_id.clone();
                    a.session_id = fork.id.clone();
                    Message::Assistant(a)
                }
            };
            copies.push(info);
            parts.extend(m.parts.into_iter().map(|p| Part {
                id: PartId::new(),
                session_id: fork.id.clone(),
                message_id: new_id.clone(),
                kind: Arc::unwrap_or_clone(p).kind,
            }));
        }
        let message_refs: Vec<&Message> = copies.iter().collect();
        let part_refs: Vec<&Part> = parts.iter().collect();
        self.core
            .store
            .put_many(&[&fork], &message_refs, &part_refs)
            .await?;
        let shared = Arc::new(fork.clone());
        self.core.bus.publish(Event::SessionCreated {
            info: shared.clone(),
        });
        self.core
            .bus
            .publish(Event::SessionUpdated { info: shared });
        Ok(fork)
    }

    /// The session's todo list.
    pub async fn todos(&self, id: &SessionId) -> Result<Vec<Todo>, RuntimeError> {
        self.session(id).await?;
        Ok(self.core.store.todos(id).await?)
    }

    /// One message of a session with its parts.
    pub async fn message(
        &self,
        id: &SessionId,
        message: &MessageId,
    ) -> Result<MessageWithParts, RuntimeError> {
        self.session(id).await?;
        self.core
            .store
            .message(id, message)
            .await?
            .ok_or_else(|| RuntimeError::MessageNotFound(message.to_string()))
    }

    /// Summarizes the session's conversation with the hidden `compaction` agent (on `model`, else
    /// its own, else the session's); from then on the model sees the history from the summary.
    /// Answers the summary message.
    pub async fn summarize(
        &self,
        id: &SessionId,
        model: Option<taskforce_agents::model::ModelRef>,
    ) -> Result<MessageWithParts, RuntimeError> {
        let messages = self.messages(id).await?;
        let last = messages.iter().rev().find_map(|m| m.info.as_user());
        let Some(last) = last else {
            return Err(RuntimeError::InvalidInput(
                "the session has no messages to summarize".into(),
            ));
        };
        let input = crate::PromptInput {
            parts: vec![crate::PartInput::Compaction { auto: false }],
            agent: Some(last.agent.clone()),
            model: Some(model.unwrap_or_else(|| last.model.clone())),
            ..Default::default()
        };
        self.prompt(id, input).await
    }

    /// Runs a shell command for the user in the session (no permission ask), recorded as a
    /// `bash` tool call; `Busy` while the session's loop runs. Answers the assistant message.
    pub async fn shell(
        &self,
        id: &SessionId,
        input: ShellInput,
    ) -> Result<MessageWithParts, RuntimeError> {
        self.core.registry.require(&input.agent)?;
        self.send_to_actor(id, || Exclusive(Job::Shell(input.clone())))
            .await?
            .await
            .map_err(|_| RuntimeError::Crashed(id.to_string()))?
    }
}

/// `Title (fork #1)`, or the next number for a fork of a fork.
fn forked_title(title: &str) -> String {
    if let Some(open) = title.rfind(" (fork #")
        && let Some(number) = title[open + 8..].strip_suffix(')')
        && let Ok(n) = number.parse::<u32>()
    {
        return format!("{} (fork #{})", &title[..open], n.saturating_add(1));
    }
    format!("{title} (fork #1)")
}

/// `2026-11-22T04:05:06.789Z` for epoch milliseconds.
fn iso(ms: u64) -> String {
    let secs = ms / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    let (y, m, d) = crate::session::civil_date(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::forked_title;

    #[test]
    fn fork_titles_count_up() {
        assert_eq!(forked_title("Plan"), "Plan (fork #1)");
        assert_eq!(forked_title("Plan (fork #1)"), "Plan (fork #2)");
        assert_eq!(forked_title("Plan (fork #x)"), "Plan (fork #x) (fork #1)");
    }
}

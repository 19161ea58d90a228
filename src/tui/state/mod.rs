//! What the TUI knows of the server: sessions, their messages and parts, their activity and the
//! pending asks, kept current by the server's events. Pure data: no I/O, no drawing.

mod tree;

use std::collections::HashMap;
use std::sync::Arc;

use taskforce_actors::bus::{Event, SessionStatus};
use taskforce_actors::permission::PermissionRequest;
use taskforce_actors::question::QuestionRequest;
use taskforce_actors::store::MessageWithParts;
use taskforce_agents::model::{Message, Part, PartKind, Session, ToolState};

pub use tree::TreeNode;

/// One session as the TUI shows it.
#[derive(Debug, Clone)]
pub struct SessionView {
    /// The session.
    pub info: Session,
    /// Its messages with their parts, oldest first (empty until loaded).
    pub messages: Vec<MessageWithParts>,
    /// Whether `messages` holds what the server has (loaded once, then kept by events).
    pub loaded: bool,
    /// Its activity.
    pub status: SessionStatus,
    /// The last error the session's run ended with, until the next prompt.
    pub error: Option<String>,
}

impl SessionView {
    fn new(info: Session) -> SessionView {
        SessionView {
            info,
            messages: Vec::new(),
            loaded: false,
            status: SessionStatus::Idle,
            error: None,
        }
    }

    /// Whether the session's loop runs (or waits to retry).
    pub fn busy(&self) -> bool {
        !matches!(self.status, SessionStatus::Idle)
    }

    /// The session's own cost so far, in dollars.
    pub fn cost(&self) -> f64 {
        self.messages
            .iter()
            .filter_map(|m| match m.info.as_ref() {
                Message::Assistant(a) => Some(a.cost),
                Message::User(_) => None,
            })
            .sum()
    }

    /// The session's own tokens so far (input, output and reasoning, as billed).
    pub fn tokens(&self) -> u64 {
        self.messages
            .iter()
            .filter_map(|m| match m.info.as_ref() {
                Message::Assistant(a) => {
                    Some(a.tokens.input + a.tokens.output + a.tokens.reasoning)
                }
                Message::User(_) => None,
            })
            .sum()
    }

    /// The input tokens of the newest answer: how full the model's context is.
    pub fn context_tokens(&self) -> u64 {
        self.messages
            .iter()
            .rev()
            .find_map(|m| match m.info.as_ref() {
                Message::Assistant(a) if a.tokens.input > 0 => {
                    Some(a.tokens.input + a.tokens.cache.read)
                }
                _ => None,
            })
            .unwrap_or(0)
    }

    /// The agent of the newest answer, else the agent the session was started for.
    pub fn agent(&self) -> Option<&str> {
        self.messages
            .iter()
            .rev()
            .map(|m| match m.info.as_ref() {
                Message::Assistant(a) => a.agent.as_str(),
                Message::User(u) => u.agent.as_str(),
            })
            .next()
            .or(self.info.agent.as_deref())
    }

    /// The tool the session is running now, if any (its newest running tool part).
    pub fn running_tool(&self) -> Option<&str> {
        let last = self.messages.last()?;
        last.parts.iter().rev().find_map(|p| match &p.kind {
            PartKind::Tool(t) if matches!(t.state, ToolState::Running(_)) => Some(t.tool.as_str()),
            _ => None,
        })
    }

    fn upsert_message(&mut self, info: Arc<Message>) {
        let id = info.id();
        match self.messages.iter().position(|m| m.info.id() == id) {
            Some(at) => self.messages[at].info = info,
            None => {
                let at = self.messages.partition_point(|m| m.info.id() < id);
                self.messages.insert(
                    at,
                    MessageWithParts {
                        info,
                        parts: Vec::new(),
                    },
                );
            }
        }
    }

    fn upsert_part(&mut self, part: Arc<Part>) {
        let Some(message) = self
            .messages
            .iter_mut()
            .find(|m| m.info.id() == &part.message_id)
        else {
            // A part of a message not seen yet: the message's own event comes first on the
            // server's stream, so this only happens before the session is loaded.
            return;
        };
        match message.parts.iter().position(|p| p.id == part.id) {
            Some(at) => message.parts[at] = part,
            None => {
                let at = message.parts.partition_point(|p| p.id < part.id);
                message.parts.insert(at, part);
            }
        }
    }

    fn append_delta(&mut self, message_id: &str, part_id: &str, delta: &str) {
        let part = self
            .messages
            .iter_mut()
            .filter(|m| m.info.id().as_str() == message_id)
            .flat_map(|m| m.parts.iter_mut())
            .find(|p| p.id.as_str() == part_id);
        if let Some(part) = part {
            match &mut Arc::make_mut(part).kind {
                PartKind::Text(t) => t.text.push_str(delta),
                PartKind::Reasoning(r) => r.text.push_str(delta),
                _ => {}
            }
        }
    }
}

/// The length of a text or reasoning part's text (0 for other parts).
fn text_len(part: &Part) -> usize {
    match &part.kind {
        PartKind::Text(t) => t.text.len(),
        PartKind::Reasoning(r) => r.text.len(),
        _ => 0,
    }
}

/// The server's state as far as the TUI follows it.
#[derive(Debug, Default)]
pub struct Mirror {
    sessions: HashMap<String, SessionView>,
    /// The ids of each session's children, so that walking a tree of thousands of sessions
    /// does not scan them all at every node.
    children_of: HashMap<String, Vec<String>>,
    asks: Vec<PermissionRequest>,
    questions: Vec<QuestionRequest>,
}

impl Mirror {
    /// A session, if known.
    pub fn session(&self, id: &str) -> Option<&SessionView> {
        self.sessions.get(id)
    }

    /// Root sessions, newest first.
    pub fn roots(&self) -> Vec<&SessionView> {
        let mut roots: Vec<&SessionView> = self
            .sessions
            .values()
            .filter(|s| s.info.parent_id.is_none())
            .collect();
        roots.sort_by(|a, b| {
            b.info
                .time
                .updated
                .cmp(&a.info.time.updated)
                .then_with(|| b.info.id.cmp(&a.info.id))
        });
        roots
    }

    /// The children of `id`, oldest first.
    pub fn children(&self, id: &str) -> Vec<&SessionView> {
        let mut children: Vec<&SessionView> = self
            .children_of
            .get(id)
            .into_iter()
            .flatten()
            .filter_map(|c| self.sessions.get(c))
            .collect();
        // By creation: session ids descend (the newest first), as OpenCode's do.
        children.sort_by(|a, b| {
            a.info
                .time
                .created
                .cmp(&b.info.time.created)
                .then_with(|| b.info.id.cmp(&a.info.id))
        });
        children
    }

    /// The root of `id`'s tree (`id` itself for a root).
    pub fn root_of<'a>(&'a self, id: &'a str) -> &'a str {
        let mut at = id;
        // The depth is bounded by the number of sessions, so a broken parent chain ends.
        for _ in 0..=self.sessions.len() {
            match self
                .sessions
                .get(at)
                .and_then(|s| s.info.parent_id.as_ref())
            {
                Some(parent) if self.sessions.contains_key(parent.as_str()) => {
                    at = self.sessions[parent.as_str()].info.id.as_str();
                }
                _ => break,
            }
        }
        at
    }

    /// The agents from the root down to `id` (`build › general › explore`).
    pub fn agent_path(&self, id: &str) -> Vec<String> {
        let mut path = Vec::new();
        let mut at = Some(id.to_string());
        while let Some(current) = at.take() {
            let Some(session) = self.sessions.get(&current) else {
                break;
            };
            path.push(session.agent().unwrap_or("?").to_string());
            at = session.info.parent_id.as_ref().map(ToString::to_string);
            if path.len() > self.sessions.len() {
                break;
            }
        }
        path.reverse();
        path
    }

    /// The pending permission asks, oldest first.
    pub fn asks(&self) -> &[PermissionRequest] {
        &self.asks
    }

    /// Adds or replaces a session from a listing.
    pub fn put_session(&mut self, info: Session) {
        let id = info.id.to_string();
        let parent = info.parent_id.as_ref().map(ToString::to_string);
        let before = match self.sessions.get_mut(&id) {
            Some(view) => {
                let before = view.info.parent_id.as_ref().map(ToString::to_string);
                view.info = info;
                before
            }
            None => {
                self.sessions.insert(id.clone(), SessionView::new(info));
                None
            }
        };
        if before != parent {
            self.unlink(&id, before.as_deref());
        }
        if let Some(parent) = parent {
            let children = self.children_of.entry(parent).or_default();
            if !children.contains(&id) {
                children.push(id);
            }
        }
    }

    /// Forgets that `id` is a child of `parent`.
    fn unlink(&mut self, id: &str, parent: Option<&str>) {
        if let Some(children) = parent.and_then(|p| self.children_of.get_mut(p)) {
            children.retain(|c| c != id);
        }
    }

    /// Sets a session's messages from a load. What events brought meanwhile stays: messages
    /// and parts the load does not have yet, and text that grew past the loaded text.
    pub fn put_messages(&mut self, id: &str, messages: Vec<MessageWithParts>) {
        let Some(view) = self.sessions.get_mut(id) else {
            return;
        };
        let live = std::mem::replace(&mut view.messages, messages);
        view.loaded = true;
        for message in live {
            if !view
                .messages
                .iter()
                .any(|m| m.info.id() == message.info.id())
            {
                view.upsert_message(Arc::clone(&message.info));
            }
            for part in message.parts {
                let longer = view
                    .messages
                    .iter()
                    .flat_map(|m| m.parts.iter())
                    .find(|p| p.id == part.id)
                    .is_none_or(|loaded| text_len(&part) > text_len(loaded));
                if longer {
                    view.upsert_part(part);
                }
            }
        }
    }

    /// Sets the pending asks from a listing.
    pub fn put_asks(&mut self, asks: Vec<PermissionRequest>) {
        self.asks = asks;
    }

    /// The questions waiting for the user, oldest first.
    pub fn questions(&self) -> &[QuestionRequest] {
        &self.questions
    }

    /// Sets the pending questions from a listing.
    pub fn put_questions(&mut self, questions: Vec<QuestionRequest>) {
        self.questions = questions;
    }

    /// Follows one event.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::SessionCreated { info } | Event::SessionUpdated { info } => {
                self.put_session(info.as_ref().clone());
            }
            Event::SessionDeleted { info } => {
                let parent = info.parent_id.as_ref().map(ToString::to_string);
                self.unlink(info.id.as_str(), parent.as_deref());
                self.sessions.remove(info.id.as_str());
            }
            Event::SessionStatus { session_id, status } => {
                if let Some(view) = self.sessions.get_mut(session_id.as_str()) {
                    if matches!(status, SessionStatus::Busy) && !view.busy() {
                        view.error = None;
                    }
                    view.status = status.clone();
                }
            }
            Event::SessionIdle { session_id } => {
                if let Some(view) = self.sessions.get_mut(session_id.as_str()) {
                    view.status = SessionStatus::Idle;
                }
            }
            Event::SessionError { session_id, error } => {
                if let (Some(id), Some(error)) = (session_id, error)
                    && let Some(view) = self.sessions.get_mut(id.as_str())
                {
                    view.error = Some(error.to_string());
                }
            }
            Event::MessageUpdated { info } => {
                if let Some(view) = self.sessions.get_mut(info.session_id().as_str()) {
                    view.upsert_message(Arc::clone(info));
                }
            }
            Event::MessageRemoved {
                session_id,
                message_id,
            } => {
                if let Some(view) = self.sessions.get_mut(session_id.as_str()) {
                    view.messages.retain(|m| m.info.id() != message_id);
                }
            }
            Event::PartUpdated { part } => {
                if let Some(view) = self.sessions.get_mut(part.session_id.as_str()) {
                    view.upsert_part(Arc::clone(part));
                }
            }
            Event::PartDelta {
                session_id,
                message_id,
                part_id,
                delta,
                ..
            } => {
                if let Some(view) = self.sessions.get_mut(session_id.as_str()) {
                    view.append_delta(message_id.as_str(), part_id.as_str(), delta);
                }
            }
            Event::PartRemoved {
                session_id,
                message_id,
                part_id,
            } => {
                if let Some(view) = self.sessions.get_mut(session_id.as_str())
                    && let Some(message) =
                        view.messages.iter_mut().find(|m| m.info.id() == message_id)
                {
                    message.parts.retain(|p| &p.id != part_id);
                }
            }
            Event::PermissionAsked(request) if !self.asks.iter().any(|a| a.id == request.id) => {
                self.asks.push(request.as_ref().clone());
            }
            Event::PermissionReplied { request_id, .. } => {
                self.asks.retain(|a| &a.id != request_id);
            }
            Event::QuestionAsked(request) if !self.questions.iter().any(|q| q.id == request.id) => {
                self.questions.push(request.as_ref().clone());
            }
            Event::QuestionReplied { request_id, .. }
            | Event::QuestionRejected { request_id, .. } => {
                self.questions.retain(|q| &q.id != request_id);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;

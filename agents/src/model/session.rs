//! Session: the info of one conversation, root or child (a subagent's session).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::FileDiff;
use crate::id::{MessageId, PartId, SessionId};
use crate::permission::Rule;

/// A session's info, as `Session.Info` in OpenCode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Session {
    /// The session's id.
    pub id: SessionId,
    /// A short human-friendly name, used in plan file names.
    pub slug: String,
    /// The project the session belongs to.
    #[serde(rename = "projectID")]
    pub project_id: String,
    /// The directory the session works in.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub directory: PathBuf,
    /// The session that spawned this one; absent for a root session.
    #[serde(rename = "parentID", default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<SessionId>,
    /// What the session changed, in total.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<SessionSummary>,
    /// The public share link, when shared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<SessionShare>,
    /// The title.
    pub title: String,
    /// The version of the program that created the session.
    pub version: String,
    /// When the session was created, updated, compacted, archived.
    pub time: SessionTime,
    /// Session-level permission rules, evaluated after the agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission: Option<Vec<Rule>>,
    /// The agent a child session was started for (its task's subagent): a prompt that names
    /// no agent runs it, never the default primary agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The effective rules of the callers above a child session, nearest caller first: each
    /// caller's agent rules merged with its session rules, as they were when it delegated. An
    /// ask is decided by each of these and the session's own rules separately, and the
    /// strictest answer holds, so a child never does what a caller above it may not.
    #[serde(
        rename = "callerPermission",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub caller_permission: Vec<Vec<Rule>>,
    /// The point the session was reverted to, while a revert is pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revert: Option<SessionRevert>,
}

/// The times of a session, in epoch milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionTime {
    /// When the session was created.
    pub created: u64,
    /// When the session last changed.
    pub updated: u64,
    /// When a compaction started, while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compacting: Option<u64>,
    /// When the session was archived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived: Option<u64>,
}

/// What a session changed: line and file counts, and optionally the diffs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionSummary {
    /// Lines added.
    pub additions: u64,
    /// Lines deleted.
    pub deletions: u64,
    /// Files changed.
    pub files: u64,
    /// The per-file diffs (stored separately since OpenCode's second migration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diffs: Option<Vec<FileDiff>>,
}

/// A session's share link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionShare {
    /// The public URL.
    pub url: String,
}

/// Where a session was reverted to: messages from `messageID` (or from `partID`) on are undone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionRevert {
    /// The first undone message.
    #[serde(rename = "messageID")]
    pub message_id: MessageId,
    /// The first undone part, when the revert is inside a message.
    #[serde(rename = "partID", default, skip_serializing_if = "Option::is_none")]
    pub part_id: Option<PartId>,
    /// The worktree snapshot taken before reverting, for unrevert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// The diff the revert undid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
}

impl Session {
    /// A root session with a fresh id, created (and updated) at `now` ms.
    ///
    /// The slug is the lowercased tail of the id and `version` is this crate's version.
    pub fn new(
        project_id: impl Into<String>,
        directory: impl Into<PathBuf>,
        title: impl Into<String>,
        now: u64,
    ) -> Self {
        let id = SessionId::new();
        let slug = slug_for(&id);
        Session {
            id,
            slug,
            project_id: project_id.into(),
            directory: directory.into(),
            parent_id: None,
            summary: None,
            share: None,
            title: title.into(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            time: SessionTime {
                created: now,
                updated: now,
                compacting: None,
                archived: None,
            },
            permission: None,
            agent: None,
            caller_permission: Vec::new(),
            revert: None,
        }
    }

    /// A child session of `parent` (same project and directory), created at `now` ms. It is
    /// bounded by what bounds its parent (`caller_permission`); the delegating caller's own
    /// layer is added by [`Session::delegated_by`].
    pub fn child_of(parent: &Session, title: impl Into<String>, now: u64) -> Self {
        Session {
            parent_id: Some(parent.id.clone()),
            caller_permission: parent.caller_permission.clone(),
            ..Session::new(
                parent.project_id.clone(),
                parent.directory.clone(),
                title,
                now,
            )
        }
    }

    /// The same session with session-level permission rules.
    pub fn with_permission(mut self, rules: Vec<Rule>) -> Self {
        self.permission = Some(rules);
        self
    }

    /// The same session started for `agent` by a caller whose effective rules are `caller`
    /// (its agent's rules merged with its session rules): that layer bounds it from now on.
    pub fn delegated_by(mut self, agent: impl Into<String>, caller: Vec<Rule>) -> Self {
        self.agent = Some(agent.into());
        self.caller_permission.insert(0, caller);
        self
    }

    /// Adds the layers of `callers` this session is not yet bounded by (a continuation by
    /// another caller: it is bounded by both); answers whether any was added.
    pub fn bound_by(&mut self, callers: &[Vec<Rule>]) -> bool {
        let mut added = false;
        for layer in callers {
            if !self.caller_permission.contains(layer) {
                self.caller_permission.push(layer.clone());
                added = true;
            }
        }
        added
    }

    /// Whether the session is bounded by every layer of `callers` already (so that
    /// [`bound_by`](Self::bound_by) would add none).
    pub fn is_bound_by(&self, callers: &[Vec<Rule>]) -> bool {
        callers
            .iter()
            .all(|layer| self.caller_permission.contains(layer))
    }

    /// Whether the session has no parent.
    pub fn is_root(&self) -> bool {
        self.parent_id.is_none()
    }

    /// Whether the session was spawned by another (a subagent's session).
    pub fn is_child(&self) -> bool {
        self.parent_id.is_some()
    }

    /// The session-level rules, empty when there are none.
    pub fn rules(&self) -> &[Rule] {
        self.permission.as_deref().unwrap_or_default()
    }

    /// Records a change at `now` ms (never moves `updated` backwards).
    pub fn touch(&mut self, now: u64) {
        self.time.updated = self.time.updated.max(now);
    }
}

/// A short slug from an id: the last 8 characters of its body, lowercased.
fn slug_for(id: &SessionId) -> String {
    let body = id.body();
    let tail = body.get(body.len().saturating_sub(8)..).unwrap_or(body);
    tail.to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::testing::{keys, round_trip, sample};
    use crate::permission::Action;

    #[test]
    fn root_sample_round_trips() {
        let json = sample(include_str!("../../tests/samples/session_root.json"));
        let session: Session = round_trip(&json);
        assert!(session.is_root());
        assert!(session.rules().is_empty());
    }

    #[test]
    fn child_sample_round_trips() {
        let json = sample(include_str!("../../tests/samples/session_child.json"));
        let session: Session = round_trip(&json);
        assert!(session.is_child());
        assert_eq!(session.rules().len(), 3);
        assert_eq!(
            session.rules()[0],
            Rule::new("todowrite", "*", Action::Deny)
        );
        assert_eq!(session.revert.as_ref().unwrap().part_id, None);
    }

    #[test]
    fn new_sessions_omit_absent_optionals() {
        let root = Session::new("proj", "/srv/p", "New session", 1_000);
        assert_eq!(
            keys(&root),
            [
                "id",
                "slug",
                "projectID",
                "directory",
                "title",
                "version",
                "time"
            ]
        );
        assert_eq!(root.slug.len(), 8);
        let child = Session::child_of(&root, "Child session", 2_000)
            .with_permission(vec![Rule::new("task", "*", Action::Deny)]);
        assert_eq!(child.parent_id.as_ref(), Some(&root.id));
        assert_eq!(child.project_id, "proj");
        assert!(child.id < root.id, "session ids descend, as OpenCode's do");
        let v = serde_json::to_value(&child).unwrap();
        assert_eq!(v["parentID"], root.id.as_str());
        assert_eq!(
            v["permission"],
            serde_json::json!([{"permission": "task", "pattern": "*", "action": "deny"}])
        );
        assert_eq!(
            v["time"],
            serde_json::json!({"created": 2000, "updated": 2000})
        );
    }

    #[test]
    fn a_session_is_bound_by_each_callers_layer_once() {
        let mut s = Session::new("proj", "/srv/p", "t", 1);
        let one = vec![Rule::new("bash", "*", Action::Deny)];
        let two = vec![Rule::new("edit", "*", Action::Ask)];
        assert!(s.is_bound_by(&[]));
        assert!(!s.is_bound_by(std::slice::from_ref(&one)));
        assert!(s.bound_by(std::slice::from_ref(&one)));
        assert!(s.is_bound_by(std::slice::from_ref(&one)));
        // Only the missing layer is added.
        let both = [one.clone(), two.clone()];
        assert!(!s.is_bound_by(&both));
        assert!(s.bound_by(&both));
        assert!(!s.bound_by(&both));
        assert!(s.is_bound_by(&both));
        assert_eq!(s.caller_permission, both);
    }

    #[test]
    fn touch_never_goes_back() {
        let mut s = Session::new("proj", "/p", "t", 10);
        s.touch(5);
        assert_eq!(s.time.updated, 10);
        s.touch(20);
        assert_eq!(s.time.updated, 20);
        assert_eq!(s.time.created, 10);
    }

    #[test]
    fn parent_must_be_a_session_id() {
        let mut json = sample(include_str!("../../tests/samples/session_child.json"));
        json["parentID"] = serde_json::json!("msg_01JABC");
        let err = serde_json::from_value::<Session>(json)
            .unwrap_err()
            .to_string();
        assert!(err.contains("ses_"), "{err}");
    }
}

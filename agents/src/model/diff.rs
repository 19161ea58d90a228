//! FileDiff: what a session or a turn changed in one file.

use serde::{Deserialize, Serialize};

/// The change to one file: its contents before and after, and line counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FileDiff {
    /// The file's path, relative to the project.
    pub file: String,
    /// The contents before the change.
    pub before: String,
    /// The contents after the change.
    pub after: String,
    /// Lines added.
    pub additions: u64,
    /// Lines deleted.
    pub deletions: u64,
    /// Whether the file was added, deleted or modified, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<FileDiffStatus>,
}

/// How a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum FileDiffStatus {
    /// The file is new.
    Added,
    /// The file was removed.
    Deleted,
    /// The file existed and still does.
    Modified,
}

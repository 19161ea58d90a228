//! Todo: one item of a session's todo list (todowrite/todoread).

use serde::{Deserialize, Serialize};

/// One todo item: `{content, status, priority, id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Todo {
    /// What to do.
    pub content: String,
    /// Where the item is.
    pub status: TodoStatus,
    /// How important the item is.
    pub priority: TodoPriority,
    /// The item's id, chosen by the model.
    pub id: String,
}

/// The status of a todo item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
    /// Dropped.
    Cancelled,
}

/// The priority of a todo item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum TodoPriority {
    /// Do first.
    High,
    /// Normal.
    Medium,
    /// Do last.
    Low,
}

impl Todo {
    /// A pending item.
    pub fn new(id: impl Into<String>, content: impl Into<String>, priority: TodoPriority) -> Self {
        Todo {
            content: content.into(),
            status: TodoStatus::Pending,
            priority,
            id: id.into(),
        }
    }

    /// Whether the item still needs work (pending or in progress).
    pub fn is_open(&self) -> bool {
        matches!(self.status, TodoStatus::Pending | TodoStatus::InProgress)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::testing::{round_trip, sample};

    #[test]
    fn sample_todos_round_trip() {
        let json = sample(include_str!("../../tests/samples/todos.json"));
        let todos: Vec<Todo> = round_trip(&json);
        assert_eq!(todos.len(), 4);
        assert_eq!(todos[1].status, TodoStatus::InProgress);
        assert_eq!(todos.iter().filter(|t| t.is_open()).count(), 2);
    }

    #[test]
    fn new_todo_is_pending() {
        let t = Todo::new("1", "write tests", TodoPriority::High);
        assert_eq!(
            serde_json::to_value(&t).unwrap(),
            json!({"content": "write tests", "status": "pending", "priority": "high", "id": "1"})
        );
    }

    #[test]
    fn unknown_status_is_rejected() {
        let err = serde_json::from_value::<Todo>(
            json!({"content": "x", "status": "done", "priority": "low", "id": "1"}),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("done") && err.contains("in_progress"), "{err}");
    }
}

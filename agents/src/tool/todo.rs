//! `todowrite {todos}` and `todoread {}`: the session's todo list.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::run::parse_args;
use super::{Tool, ToolContext, ToolError, ToolOutput};
use crate::agent::{AgentInfo, Registry};
use crate::model::{Todo, TodoStatus};
use crate::permission::PermissionAsk;

/// The todowrite tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct TodoWriteTool;

/// The todoread tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct TodoReadTool;

#[derive(Debug, Deserialize)]
struct WriteArgs {
    todos: Vec<Todo>,
}

/// Asks `permission` with pattern and always `*`.
async fn ask(ctx: &ToolContext, permission: &str) -> Result<(), ToolError> {
    ctx.ask(PermissionAsk {
        permission: permission.into(),
        patterns: vec!["*".into()],
        always: vec!["*".into()],
        force_ask: false,
        metadata: Map::new(),
    })
    .await
}

/// The output for a todo list: title `<n not completed> todos`, the JSON, `{todos}` metadata.
fn todo_output(todos: &[Todo]) -> ToolOutput {
    let open = todos
        .iter()
        .filter(|t| t.status != TodoStatus::Completed)
        .count();
    let mut metadata = Map::new();
    metadata.insert("todos".into(), json!(todos));
    ToolOutput {
        title: format!("{open} todos"),
        output: serde_json::to_string_pretty(todos).unwrap_or_else(|_| "[]".into()),
        metadata: metadata.into(),
        attachments: Vec::new(),
    }
}

fn todo_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "content": {"type": "string", "description": "Brief description of the task"},
            "status": {"type": "string", "enum": ["pending", "in_progress", "completed", "cancelled"], "description": "Current status of the task"},
            "priority": {"type": "string", "enum": ["high", "medium", "low"], "description": "Priority level of the task"},
            "id": {"type": "string", "description": "Unique identifier for the todo item"}
        },
        "required": ["content", "status", "priority", "id"]
    })
}

#[async_trait]
impl Tool for TodoWriteTool {
    fn id(&self) -> &'static str {
        "todowrite"
    }

    fn description(&self, _caller: &AgentInfo, _registry: &Registry) -> String {
        include_str!("descriptions/todowrite.txt").to_string()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "todos": {"type": "array", "items": todo_schema(), "description": "The updated todo list"}
            },
            "required": ["todos"]
        })
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: WriteArgs = parse_args(self.id(), args)?;
        ask(ctx, self.id()).await?;
        ctx.host
            .set_todos(&ctx.session_id, args.todos.clone())
            .await?;
        Ok(todo_output(&args.todos))
    }

    fn changes_files(&self) -> bool {
        false
    }
}

#[async_trait]
impl Tool for TodoReadTool {
    fn id(&self) -> &'static str {
        "todoread"
    }

    fn description(&self, _caller: &AgentInfo, _registry: &Registry) -> String {
        include_str!("descriptions/todoread.txt").to_string()
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let _: Map<String, Value> = parse_args(self.id(), args)?;
        ask(ctx, self.id()).await?;
        let todos = ctx.host.todos(&ctx.session_id).await?;
        Ok(todo_output(&todos))
    }

    fn only_reads(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tool::testing::Project;

    #[tokio::test]
    async fn write_then_read() {
        let p = Project::new();
        let ctx = p.ctx();
        let todos = json!([
            {"content": "a", "status": "completed", "priority": "high", "id": "1"},
            {"content": "b", "status": "in_progress", "priority": "low", "id": "2"},
            {"content": "c", "status": "pending", "priority": "medium", "id": "3"}
        ]);
        let out = TodoWriteTool
            .execute(json!({"todos": todos}), &ctx)
            .await
            .unwrap();
        assert_eq!(out.title, "2 todos");
        assert_eq!(serde_json::from_str::<Value>(&out.output).unwrap(), todos);
        let out = TodoReadTool.execute(json!({}), &ctx).await.unwrap();
        assert_eq!(out.metadata["todos"], todos);
        let asks = p.asks();
        assert_eq!(asks[0].permission, "todowrite");
        assert_eq!(asks[1].permission, "todoread");
        assert_eq!(asks[1].patterns, vec!["*"]);
        let err = TodoWriteTool
            .execute(json!({"todos": [{"content": "x", "status": "done", "priority": "low", "id": "1"}]}), &ctx)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("todos[0].status"), "{err}");
    }
}

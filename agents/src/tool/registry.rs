//! The built-in tool set.

use std::sync::Arc;

use super::{
    BUILTIN_TOOLS, BashTool, EditTool, GlobTool, GrepTool, ListTool, ReadTool, TaskChildTool,
    TaskTool, TodoReadTool, TodoWriteTool, Tool, WriteTool,
};

/// Every built-in tool, in [`BUILTIN_TOOLS`] order.
pub fn builtin_tools() -> Vec<Arc<dyn Tool>> {
    BUILTIN_TOOLS.iter().filter_map(|id| tool(id)).collect()
}

/// The built-in tool with this id.
pub fn tool(id: &str) -> Option<Arc<dyn Tool>> {
    let tool: Arc<dyn Tool> = match id {
        "bash" => Arc::new(BashTool),
        "read" => Arc::new(ReadTool),
        "write" => Arc::new(WriteTool),
        "edit" => Arc::new(EditTool),
        "list" => Arc::new(ListTool),
        "glob" => Arc::new(GlobTool),
        "grep" => Arc::new(GrepTool),
        "todowrite" => Arc::new(TodoWriteTool),
        "todoread" => Arc::new(TodoReadTool),
        "task" => Arc::new(TaskTool),
        "task_status" => Arc::new(TaskChildTool::STATUS),
        "task_cancel" => Arc::new(TaskChildTool::CANCEL),
        _ => return None,
    };
    Some(tool)
}

/// The tool of `tools` a model's `name` refers to (exact id, else lower-cased; see
/// [`resolve_tool_name`](super::resolve_tool_name)).
pub fn find_tool(name: &str, tools: &[Arc<dyn Tool>]) -> Option<Arc<dyn Tool>> {
    let id = super::resolve_tool_name(name, tools.iter().map(|t| t.id()))?;
    tools.iter().find(|t| t.id() == id).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_follow_the_id_list() {
        let tools = builtin_tools();
        let ids: Vec<&str> = tools.iter().map(|t| t.id()).collect();
        assert_eq!(ids, BUILTIN_TOOLS);
        assert!(tool("nope").is_none());
        assert_eq!(find_tool("Grep", &tools).unwrap().id(), "grep");
        assert!(find_tool("Nope", &tools).is_none());
    }

    #[test]
    fn every_schema_is_an_object_with_properties() {
        for t in builtin_tools() {
            let p = t.parameters();
            assert_eq!(p["type"], "object", "{}", t.id());
            assert!(p["properties"].is_object(), "{}", t.id());
        }
    }
}

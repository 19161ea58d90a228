//! The built-in tool list, how tool names resolve, and the message for invalid arguments.

use serde_json::json;
use taskforce_agents::tool::{
    self, BUILTIN_TOOLS, ToolError, builtin_tools, resolve_tool_name, run_tool,
};

use super::{Env, err_text};

#[test]
fn builtin_tools_and_name_resolution() {
    let tools = builtin_tools();
    let ids: Vec<&str> = tools.iter().map(|t| t.id()).collect();
    let unconfigured = BUILTIN_TOOLS
        .iter()
        .filter(|id| !tool::SEARCH_TOOLS.contains(id));
    assert!(ids.iter().eq(unconfigured), "{ids:?}");
    assert_eq!(resolve_tool_name("Bash", ids.iter().copied()), Some("bash"));
    assert_eq!(
        resolve_tool_name("todowrite", ids.iter().copied()),
        Some("todowrite")
    );
    assert_eq!(resolve_tool_name("apply_patch", ids.iter().copied()), None);
}

#[tokio::test]
async fn invalid_arguments_get_the_schema_message() {
    let env = Env::new();
    let read = tool::tool("read").unwrap();
    let err = run_tool(read.as_ref(), "{\"offset\": 1}", &env.ctx())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "The read tool was called with invalid arguments: missing field `filePath`.\nPlease rewrite the input so it satisfies the expected schema."
    );
    let err = run_tool(read.as_ref(), "not json", &env.ctx())
        .await
        .unwrap_err();
    assert!(
        matches!(err, ToolError::InvalidArguments { ref tool, .. } if tool == "read"),
        "{err}"
    );
    let err = err_text(
        env.run(
            "edit",
            json!({"filePath": "a", "oldString": 1, "newString": "b"}),
        )
        .await,
    );
    assert!(
        err.starts_with("The edit tool was called with invalid arguments: oldString: invalid type"),
        "{err}"
    );
    // No permission was asked for any of them.
    assert!(env.asks().is_empty());
}

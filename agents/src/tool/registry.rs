//! The built-in tool set.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{
    BUILTIN_TOOLS, BashTool, EditTool, GlobTool, GrepTool, ListTool, QuestionTool, ReadTool,
    SearchBackend, SkillTool, TaskChildTool, TaskTool, TodoReadTool, TodoWriteTool, Tool,
    WebFetchTool, WriteTool,
};
use crate::config::Config;

/// Every built-in tool that needs no configuration, in [`BUILTIN_TOOLS`] order (all but the
/// [`SEARCH_TOOLS`](super::SEARCH_TOOLS)).
pub fn builtin_tools() -> Vec<Arc<dyn Tool>> {
    BUILTIN_TOOLS.iter().filter_map(|id| tool(id)).collect()
}

/// The built-in tools `config` provides, in [`BUILTIN_TOOLS`] order: those of
/// [`builtin_tools`], and `websearch` and `codesearch` when `[search]` names a backend (its key
/// read from `env`).
pub fn configured_tools(config: &Config, env: &BTreeMap<String, String>) -> Vec<Arc<dyn Tool>> {
    let mut tools = builtin_tools();
    if let Some(backend) = SearchBackend::from_config(&config.search, env) {
        tools.extend(Arc::new(backend).tools());
    }
    let place = |t: &Arc<dyn Tool>| BUILTIN_TOOLS.iter().position(|id| *id == t.id());
    tools.sort_by_key(place);
    tools
}

/// The built-in tool with this id (the search tools need a backend: see [`configured_tools`]).
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
        "question" => Arc::new(QuestionTool),
        "skill" => Arc::new(SkillTool),
        "webfetch" => Arc::new(WebFetchTool),
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

    fn ids(tools: &[Arc<dyn Tool>]) -> Vec<String> {
        tools.iter().map(|t| t.id().to_string()).collect()
    }

    #[test]
    fn builtins_follow_the_id_list() {
        let unconfigured: Vec<String> = BUILTIN_TOOLS
            .iter()
            .copied()
            .filter(|id| !crate::tool::SEARCH_TOOLS.contains(id))
            .map(str::to_string)
            .collect();
        assert_eq!(ids(&builtin_tools()), unconfigured);
        let config = Config::default();
        assert_eq!(
            ids(&configured_tools(&config, &BTreeMap::new())),
            unconfigured
        );
        let mut config = Config::default();
        config.search.engine = Some(crate::config::SearchEngine::Exa);
        assert_eq!(
            ids(&configured_tools(&config, &BTreeMap::new())),
            BUILTIN_TOOLS
        );
        assert!(tool("nope").is_none());
        let tools = builtin_tools();
        assert_eq!(find_tool("Grep", &tools).unwrap().id(), "grep");
        assert!(find_tool("Nope", &tools).is_none());
    }

    #[test]
    fn every_schema_is_an_object_with_properties() {
        let mut config = Config::default();
        config.search.engine = Some(crate::config::SearchEngine::Searxng);
        for t in configured_tools(&config, &BTreeMap::new()) {
            let p = t.parameters();
            assert_eq!(p["type"], "object", "{}", t.id());
            assert!(p["properties"].is_object(), "{}", t.id());
        }
    }
}

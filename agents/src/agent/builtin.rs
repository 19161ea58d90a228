//! The built-in agents, written as markdown like user agents and embedded in the binary.

use std::path::Path;
use std::sync::OnceLock;

use super::{AgentConfig, AgentError};
use crate::markdown;

/// The built-in agents' names and markdown, in listing order.
pub const BUILTIN_AGENTS: &[(&str, &str)] = &[
    ("build", include_str!("../../builtin/build.md")),
    ("plan", include_str!("../../builtin/plan.md")),
    ("general", include_str!("../../builtin/general.md")),
    ("explore", include_str!("../../builtin/explore.md")),
    ("compaction", include_str!("../../builtin/compaction.md")),
    ("title", include_str!("../../builtin/title.md")),
    ("summary", include_str!("../../builtin/summary.md")),
];

/// The built-in agents parsed once: name and config form.
pub(crate) fn builtins() -> Result<&'static [(String, AgentConfig)], AgentError> {
    static PARSED: OnceLock<Result<Vec<(String, AgentConfig)>, AgentError>> = OnceLock::new();
    PARSED
        .get_or_init(|| BUILTIN_AGENTS.iter().map(|(n, t)| parse(n, t)).collect())
        .as_ref()
        .map(Vec::as_slice)
        .map_err(Clone::clone)
}

fn parse(name: &str, text: &str) -> Result<(String, AgentConfig), AgentError> {
    let err = |message: String| AgentError::Builtin {
        name: name.to_string(),
        message,
    };
    let path = Path::new("builtin").join(format!("{name}.md"));
    let front = markdown::parse(text, &path).map_err(|e| err(e.to_string()))?;
    let mut data = front.data;
    data.insert("prompt".into(), serde_json::Value::String(front.body));
    let config: AgentConfig =
        serde_json::from_value(serde_json::Value::Object(data)).map_err(|e| err(e.to_string()))?;
    Ok((name.to_string(), config))
}

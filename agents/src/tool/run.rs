//! Running a tool call: argument parsing, prompt abort, and output truncation around
//! [`Tool::execute`] (OpenCode's `Tool.define` wrapper).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::{Tool, ToolContext, ToolError, ToolOutput, truncate};

/// A tool call's arguments as the provider delivered them: raw JSON text or a parsed value.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolArgs {
    /// JSON text; an empty or blank string means `{}`.
    Raw(String),
    /// An already parsed value; `null` means `{}`.
    Json(Value),
}

impl From<&str> for ToolArgs {
    fn from(raw: &str) -> Self {
        ToolArgs::Raw(raw.to_string())
    }
}

impl From<String> for ToolArgs {
    fn from(raw: String) -> Self {
        ToolArgs::Raw(raw)
    }
}

impl From<Value> for ToolArgs {
    fn from(value: Value) -> Self {
        ToolArgs::Json(value)
    }
}

impl ToolArgs {
    /// The arguments as a JSON object, or the invalid-arguments error for `tool`.
    pub fn into_object(self, tool: &str) -> Result<Value, ToolError> {
        let invalid = |message: String| ToolError::InvalidArguments {
            tool: tool.to_string(),
            message,
        };
        let value = match self {
            ToolArgs::Raw(raw) if raw.trim().is_empty() => Value::Object(Map::new()),
            ToolArgs::Raw(raw) => serde_json::from_str(&raw)
                .map_err(|e| invalid(format!("the arguments are not valid JSON ({e})")))?,
            ToolArgs::Json(value) => value,
        };
        match value {
            Value::Null => Ok(Value::Object(Map::new())),
            Value::Object(_) => Ok(value),
            other => Err(invalid(format!(
                "expected a JSON object, got {}",
                json_kind(&other)
            ))),
        }
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Runs one call of `tool`: parses `args`, executes, stops with [`ToolError::Aborted`] as soon
/// as `ctx.abort` is cancelled (dropping the execution, unless the tool
/// [handles the abort](Tool::handles_abort) itself), then truncates the output (see
/// [`truncate`](super::truncate)) unless the tool already set `truncated` in its metadata.
pub async fn run_tool(
    tool: &dyn Tool,
    args: impl Into<ToolArgs>,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    let args = args.into().into_object(tool.id())?;
    if ctx.abort.is_cancelled() {
        return Err(ToolError::Aborted);
    }
    let output = if tool.handles_abort() {
        tool.execute(args, ctx).await?
    } else {
        tokio::select! {
            biased;
            () = ctx.abort.cancelled() => return Err(ToolError::Aborted),
            result = tool.execute(args, ctx) => result?,
        }
    };
    if output.metadata.contains_key("truncated") {
        return Ok(output);
    }
    Ok(truncate::apply(output, ctx).await)
}

/// The tool id a model's `name` refers to: the exact id, else its lower-cased form when that
/// exists (models sometimes call `Read` for `read`), else `None` (an unknown tool).
pub fn resolve_tool_name<'a>(
    name: &str,
    ids: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let lower = name.to_lowercase();
    let mut folded = None;
    for id in ids {
        if id == name {
            return Some(id);
        }
        if folded.is_none() && id == lower {
            folded = Some(id);
        }
    }
    folded
}

/// Parses a tool's arguments into `T`; errors name the offending field.
pub(crate) fn parse_args<T: DeserializeOwned>(tool: &str, args: Value) -> Result<T, ToolError> {
    serde_path_to_error::deserialize(args).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        ToolError::InvalidArguments {
            tool: tool.to_string(),
            message: if path == "." {
                inner
            } else {
                format!("{path}: {inner}")
            },
        }
    })
}

/// Deserializes an optional non-negative integer that models may send as a number, an
/// integral float or a numeric string.
pub(crate) fn lenient_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    use serde::de::Error;
    let value = Option::<Value>::deserialize(d)?;
    let bad = |v: &Value| Error::custom(format!("expected a non-negative integer, got {v}"));
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match (n.as_u64(), n.as_f64()) {
            (Some(u), _) => Ok(Some(u)),
            (None, Some(f)) if f >= 0.0 && f.fract() == 0.0 && f <= u64::MAX as f64 => {
                Ok(Some(f as u64))
            }
            _ => Err(bad(&Value::Number(n))),
        },
        Some(Value::String(s)) => s
            .trim()
            .parse::<u64>()
            .map(Some)
            .map_err(|_| bad(&Value::String(s))),
        Some(other) => Err(bad(&other)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn raw_args_parse_and_blank_means_empty() {
        assert_eq!(ToolArgs::from("").into_object("x").unwrap(), json!({}));
        assert_eq!(
            ToolArgs::from(" {\"a\":1} ").into_object("x").unwrap(),
            json!({"a": 1})
        );
        assert_eq!(
            ToolArgs::from(Value::Null).into_object("x").unwrap(),
            json!({})
        );
    }

    #[test]
    fn bad_json_is_invalid_arguments() {
        let err = ToolArgs::from("{oops").into_object("read").unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with(
                "The read tool was called with invalid arguments: the arguments are not valid JSON"
            ),
            "{text}"
        );
        assert!(text.ends_with(".\nPlease rewrite the input so it satisfies the expected schema."));
        let err = ToolArgs::from(json!([1])).into_object("read").unwrap_err();
        assert!(
            err.to_string()
                .contains("expected a JSON object, got an array")
        );
    }

    #[test]
    fn names_resolve_exactly_then_lower_cased() {
        let ids = ["read", "Weird", "bash"];
        assert_eq!(resolve_tool_name("read", ids), Some("read"));
        assert_eq!(resolve_tool_name("Read", ids), Some("read"));
        assert_eq!(resolve_tool_name("BASH", ids), Some("bash"));
        assert_eq!(resolve_tool_name("Weird", ids), Some("Weird"));
        assert_eq!(resolve_tool_name("weird", ids), None);
        assert_eq!(resolve_tool_name("nope", ids), None);
    }

    #[derive(Debug, Deserialize)]
    struct Args {
        #[serde(default, deserialize_with = "lenient_u64")]
        n: Option<u64>,
        #[allow(dead_code)]
        name: String,
    }

    #[test]
    fn parse_args_names_the_field() {
        let err = parse_args::<Args>("t", json!({"n": 1})).unwrap_err();
        assert!(err.to_string().contains("missing field `name`"), "{err}");
        let err = parse_args::<Args>("t", json!({"name": "x", "n": -1})).unwrap_err();
        assert!(
            err.to_string()
                .contains("n: expected a non-negative integer, got -1"),
            "{err}"
        );
        let ok: Args = parse_args("t", json!({"name": "x", "n": "12"})).unwrap();
        assert_eq!(ok.n, Some(12));
        let ok: Args = parse_args("t", json!({"name": "x", "n": 3.0})).unwrap();
        assert_eq!(ok.n, Some(3));
        let ok: Args = parse_args("t", json!({"name": "x"})).unwrap();
        assert_eq!(ok.n, None);
    }
}

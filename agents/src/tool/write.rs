//! `write {filePath, content}`: creates or replaces a whole file.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::access;
use super::edit::{read_text, unified_diff, write_file};
use super::paths::{self, PathKind};
use super::run::parse_args;
use super::{Tool, ToolContext, ToolError, ToolOutput};
use crate::agent::{AgentInfo, Registry};

const ID: &str = "write";

/// The write tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteTool;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Args {
    file_path: String,
    content: String,
}

#[async_trait]
impl Tool for WriteTool {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self, _caller: &AgentInfo, _registry: &Registry) -> String {
        include_str!("descriptions/write.txt").to_string()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "filePath": {"type": "string", "description": "The path of the file to write (absolute, or relative to the working directory)"},
                "content": {"type": "string", "description": "The whole new content of the file"}
            },
            "required": ["filePath", "content"]
        })
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(ID, args)?;
        let path = paths::resolve(&ctx.directory, &args.file_path);
        paths::ask_external_directory(ctx, &path, PathKind::File).await?;
        let rel = paths::relative_to_project(ctx, &path);

        let before = match tokio::fs::metadata(&path).await {
            Ok(meta) if meta.is_dir() => {
                return Err(ToolError::Failed(format!(
                    "Path is a directory, not a file: {}",
                    path.display()
                )));
            }
            // A file that is not UTF-8 text is replaced all the same; the diff shows it as empty.
            Ok(_) => Some(read_text(&path).await.unwrap_or_default()),
            Err(_) => None,
        };
        let exists = before.is_some();
        let diff = unified_diff(&rel, before.as_deref().unwrap_or(""), &args.content);
        let mut ask_metadata = Map::new();
        ask_metadata.insert("filepath".into(), Value::String(path.display().to_string()));
        ask_metadata.insert("diff".into(), Value::String(diff.text.clone()));
        access::ask_edit(ctx, &path, ask_metadata).await?;

        write_file(&path, &args.content).await?;

        let mut metadata = Map::new();
        metadata.insert("filepath".into(), Value::String(path.display().to_string()));
        metadata.insert("exists".into(), Value::Bool(exists));
        metadata.insert("diff".into(), Value::String(diff.text));
        Ok(ToolOutput {
            title: rel,
            output: "Wrote file successfully.".into(),
            metadata: metadata.into(),
            attachments: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::permission::{Action, Rule};
    use crate::tool::testing::Project;

    #[tokio::test]
    async fn writes_new_and_existing_files() {
        let p = Project::new();
        let ctx = p.ctx();
        let out = WriteTool
            .execute(json!({"filePath": "d/new.txt", "content": "a\n"}), &ctx)
            .await
            .unwrap();
        assert_eq!(out.output, "Wrote file successfully.");
        assert_eq!(out.title, "d/new.txt");
        assert_eq!(out.metadata["exists"], false);
        let out = WriteTool
            .execute(json!({"filePath": "d/new.txt", "content": "b\n"}), &ctx)
            .await
            .unwrap();
        assert_eq!(out.metadata["exists"], true);
        assert!(out.metadata["diff"].as_str().unwrap().contains("-a\n+b\n"));
        assert_eq!(
            std::fs::read_to_string(p.root.join("d/new.txt")).unwrap(),
            "b\n"
        );
        assert_eq!(p.asks()[0].patterns, vec!["d/new.txt"]);
    }

    #[tokio::test]
    async fn a_denied_edit_writes_nothing() {
        let p = Project::with_rules(vec![
            Rule::new("*", "*", Action::Allow),
            Rule::new("edit", "*.lock", Action::Deny),
        ]);
        let err = WriteTool
            .execute(json!({"filePath": "Cargo.lock", "content": "x"}), &p.ctx())
            .await
            .unwrap_err();
        assert!(
            err.to_string().starts_with("The user has specified a rule"),
            "{err}"
        );
        assert!(!p.root.join("Cargo.lock").exists());
    }
}

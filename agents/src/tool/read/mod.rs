//! `read {filePath, offset?, limit?}`: a window of a text file with numbered lines.

mod window;

use std::path::Path;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::access;
use super::paths::{self, PathKind};
use super::run::{lenient_u64, parse_args};
use super::truncate::MAX_BYTES;
use super::{Tool, ToolContext, ToolError, ToolOutput};
use crate::agent::{AgentInfo, Registry};

pub use window::looks_binary;
use window::{Window, cannot_read, is_binary, read_window, window_of};

const ID: &str = "read";

/// The largest file read on the calling thread; a larger one is read on the blocking pool.
const READ_HERE: u64 = 16 * 1024;

/// Lines shown when the model gives no `limit`.
pub(crate) const DEFAULT_LIMIT: u64 = 2000;

/// The read tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadTool;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Args {
    file_path: String,
    #[serde(default, deserialize_with = "lenient_u64")]
    offset: Option<u64>,
    #[serde(default, deserialize_with = "lenient_u64")]
    limit: Option<u64>,
}

#[async_trait]
impl Tool for ReadTool {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self, _caller: &AgentInfo, _registry: &Registry) -> String {
        include_str!("../descriptions/read.txt").to_string()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "filePath": {"type": "string", "description": "The path of the file to read (absolute, or relative to the working directory)"},
                "offset": {"type": "integer", "minimum": 0, "description": "The line number to start reading from (0-based)"},
                "limit": {"type": "integer", "minimum": 1, "description": "The number of lines to read (defaults to 2000)"}
            },
            "required": ["filePath"]
        })
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(ID, args)?;
        let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
        if limit == 0 {
            return Err(ToolError::InvalidArguments {
                tool: ID.into(),
                message: "limit: must be at least 1".into(),
            });
        }
        let offset = usize::try_from(args.offset.unwrap_or(0)).unwrap_or(usize::MAX);
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let path = paths::resolve(&ctx.directory, &args.file_path);
        let real = paths::real(&path);
        paths::ask_external_directory_of(ctx, &path, &real, PathKind::File).await?;
        access::ask_read(ctx, &path, &real).await?;

        // A small file is read here: reading a few KiB takes less than handing the read to
        // the blocking pool and waking up again. Anything else (a large file, a folder, a pipe
        // that would block) is opened and read there.
        let small = std::fs::metadata(&path)
            .ok()
            .filter(|m| m.is_file() && m.len() <= READ_HERE);
        let window = match small {
            Some(metadata) => std::fs::File::open(&path)
                .map_err(|e| cannot_read(&path, &e))
                .and_then(|file| window_of(&path, file, metadata.len(), offset, limit)),
            None => {
                let file = path.clone();
                tokio::task::spawn_blocking(move || read_window(&file, offset, limit))
                    .await
                    .map_err(|e| {
                        ToolError::Failed(format!("reading {} failed: {e}", path.display()))
                    })?
            }
        }
        .map_err(ToolError::Failed)?;

        let more = window.total > offset + window.lines.len();
        let output = render(&window, offset);

        let mut metadata = Map::new();
        let preview: Vec<&str> = window.lines.iter().take(20).map(String::as_str).collect();
        metadata.insert("preview".into(), Value::String(preview.join("\n")));
        metadata.insert("truncated".into(), Value::Bool(more || window.cut_by_bytes));
        Ok(ToolOutput {
            title: paths::relative_to_project(ctx, &path),
            output,
            metadata: metadata.into(),
            attachments: Vec::new(),
        })
    }

    fn only_reads(&self) -> bool {
        true
    }
}

impl ReadTool {
    /// The tool's output for `path` read whole (no offset or limit), without permission asks,
    /// for a file attached to a prompt; `Ok(None)` for a binary file. Blocking.
    pub(crate) fn read_for_prompt(path: &Path) -> Result<Option<String>, String> {
        if path.is_file() && is_binary(path).unwrap_or(false) {
            return Ok(None);
        }
        let limit = usize::try_from(DEFAULT_LIMIT).unwrap_or(usize::MAX);
        read_window(path, 0, limit).map(|window| Some(render(&window, 0)))
    }
}

/// The tool's output for a window read from line `offset` (0-based): numbered lines in
/// `<file>` tags and a note on where the file goes on.
fn render(window: &Window, offset: usize) -> String {
    let last = offset + window.lines.len();
    let more = window.total > last;
    let room = window.lines.iter().map(|l| l.len() + 8).sum::<usize>() + 96;
    let mut output = String::with_capacity(room);
    output.push_str("<file>\n");
    for (i, line) in window.lines.iter().enumerate() {
        push_line_number(&mut output, offset + i + 1);
        output.push_str("| ");
        output.push_str(line);
        output.push('\n');
    }
    if window.cut_by_bytes {
        output.push_str(&format!(
            "\n(Output truncated at {MAX_BYTES} bytes. Use 'offset' parameter to read beyond line {last})"
        ));
    } else if more {
        output.push_str(&format!(
            "\n(File has more lines. Use 'offset' parameter to read beyond line {last})"
        ));
    } else {
        output.push_str(&format!("\n(End of file - total {} lines)", window.total));
    }
    output.push_str("\n</file>");
    output
}

/// Writes `n` with at least five digits, zero-padded (as `{:05}` does).
fn push_line_number(output: &mut String, n: usize) {
    let mut digits = [b'0'; 20];
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        // A remainder of 10 is below 10: the cast keeps it whole.
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let from = at.min(digits.len() - 5);
    output.extend(digits[from..].iter().map(|&d| char::from(d)));
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tool::testing::Project;

    async fn read(p: &Project, args: Value) -> Result<ToolOutput, ToolError> {
        ReadTool.execute(args, &p.ctx()).await
    }

    #[test]
    fn line_numbers_have_at_least_five_digits() {
        for n in [0, 1, 9, 10, 12_345, 99_999, 100_000, 1_234_567, usize::MAX] {
            let mut written = String::new();
            push_line_number(&mut written, n);
            assert_eq!(written, format!("{n:05}"));
        }
    }

    #[tokio::test]
    async fn numbers_lines_and_reports_the_end() {
        let p = Project::new();
        p.file("a.txt", "one\ntwo\r\nthree\n");
        let out = read(&p, json!({"filePath": "a.txt"})).await.unwrap();
        assert_eq!(
            out.output,
            "<file>\n00001| one\n00002| two\n00003| three\n\n(End of file - total 3 lines)\n</file>"
        );
        assert_eq!(out.title, "a.txt");
        assert_eq!(out.metadata["truncated"], false);
    }

    #[tokio::test]
    async fn offset_and_limit_pick_a_window() {
        let p = Project::new();
        let text: String = (1..=10).map(|i| format!("l{i}\n")).collect();
        p.file("a.txt", &text);
        let out = read(&p, json!({"filePath": "a.txt", "offset": 2, "limit": 3}))
            .await
            .unwrap();
        assert!(
            out.output.contains("00003| l3\n00004| l4\n00005| l5\n"),
            "{}",
            out.output
        );
        assert!(!out.output.contains("l2\n"));
        assert!(
            out.output
                .contains("(File has more lines. Use 'offset' parameter to read beyond line 5)")
        );
        assert_eq!(out.metadata["truncated"], true);
        let err = read(&p, json!({"filePath": "a.txt", "offset": 10}))
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("Offset 10 is beyond the end"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn long_lines_are_cut() {
        let p = Project::new();
        p.file("a.txt", &"x".repeat(2500));
        let out = read(&p, json!({"filePath": "a.txt"})).await.unwrap();
        assert!(
            out.output
                .contains(&format!("00001| {}...\n", "x".repeat(2000)))
        );
    }

    #[tokio::test]
    async fn a_file_longer_than_its_first_look_reads_whole() {
        let p = Project::new();
        // Lines of 7 bytes: one straddles the first 4 KB that tell text from binary.
        let text: String = (1..=1000).map(|i| format!("l{i:05}\n")).collect();
        p.file("a.txt", &text);
        let out = read(&p, json!({"filePath": "a.txt"})).await.unwrap();
        assert!(
            out.output
                .contains("00585| l00585\n00586| l00586\n00587| l00587\n"),
            "{}",
            out.output
        );
        assert!(out.output.contains("(End of file - total 1000 lines)"));
        // A NUL byte after the first 4 KB does not make it binary; an extension does.
        let mut late_nul = "a\n".repeat(3000).into_bytes();
        late_nul.push(0);
        std::fs::write(p.root.join("late.txt"), &late_nul).unwrap();
        assert!(read(&p, json!({"filePath": "late.txt"})).await.is_ok());
        p.file("image.png", "just text");
        let err = read(&p, json!({"filePath": "image.png"}))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("Cannot read binary file: "), "{err}");
    }

    #[tokio::test]
    async fn small_and_large_files_read_alike() {
        let p = Project::new();
        // One file read where the tool runs, one read on the blocking pool.
        let small: String = (1..=100).map(|i| format!("line {i:06}\n")).collect();
        let large: String = (1..=20_000).map(|i| format!("line {i:06}\n")).collect();
        assert!(small.len() as u64 <= READ_HERE && large.len() as u64 > READ_HERE);
        p.file("small.txt", &small);
        p.file("large.txt", &large);
        for (name, total) in [("small.txt", 100), ("large.txt", 20_000)] {
            let out = read(&p, json!({"filePath": name, "offset": 49, "limit": 2}))
                .await
                .unwrap();
            assert!(
                out.output
                    .contains("00050| line 000050\n00051| line 000051\n"),
                "{name}: {}",
                out.output
            );
            assert!(!out.output.contains("line 000052"), "{name}");
            assert!(
                out.output.contains("beyond line 51"),
                "{name} has {total} lines: {}",
                out.output
            );
        }
        // A large binary file is refused as a small one is.
        let mut binary = vec![0u8; 100 * 1024];
        binary[0] = 0x7f;
        std::fs::write(p.root.join("big.raw"), &binary).unwrap();
        let err = read(&p, json!({"filePath": "big.raw"}))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("Cannot read binary file: "), "{err}");
    }

    #[tokio::test]
    async fn missing_directory_and_binary_are_errors() {
        let p = Project::new();
        p.file("notes.txt", "x");
        let err = read(&p, json!({"filePath": "note.txt"}))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("File not found: "), "{err}");
        assert!(
            err.contains("Did you mean one of these?") && err.contains("notes.txt"),
            "{err}"
        );
        std::fs::create_dir(p.root.join("d")).unwrap();
        let err = read(&p, json!({"filePath": "d"}))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("Path is a directory, not a file"), "{err}");
        std::fs::write(p.root.join("b.dat2"), [0u8, 1, 2, 3]).unwrap();
        let err = read(&p, json!({"filePath": "b.dat2"}))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("Cannot read binary file: "), "{err}");
    }

    #[tokio::test]
    async fn asks_read_with_the_absolute_path() {
        let p = Project::new();
        let path = p.file("src/a.rs", "fn main() {}\n");
        read(&p, json!({"filePath": "src/a.rs"})).await.unwrap();
        let asks = p.asks();
        assert_eq!(asks.len(), 1);
        assert_eq!(asks[0].permission, "read");
        assert_eq!(asks[0].patterns, vec![path.display().to_string()]);
        assert_eq!(asks[0].always, vec!["*"]);
    }
}

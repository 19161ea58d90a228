//! `read {filePath, offset?, limit?}`: a window of a text file with numbered lines.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::access;
use super::paths::{self, PathKind};
use super::run::{lenient_u64, parse_args};
use super::truncate::MAX_BYTES;
use super::{Tool, ToolContext, ToolError, ToolOutput};
use crate::agent::{AgentInfo, Registry};

const ID: &str = "read";

/// The largest file read on the calling thread; a larger one is read on the blocking pool.
const READ_HERE: u64 = 16 * 1024;

/// Lines shown when the model gives no `limit`.
pub(crate) const DEFAULT_LIMIT: u64 = 2000;

/// Longer lines are cut and end with `...`.
pub(crate) const MAX_LINE_LENGTH: usize = 2000;

/// Extensions always treated as binary.
const BINARY_EXTENSIONS: &[&str] = &[
    "zip", "tar", "gz", "tgz", "bz2", "xz", "zst", "7z", "rar", "exe", "dll", "so", "dylib",
    "class", "jar", "war", "doc", "docx", "xls", "xlsx", "ppt", "pptx", "odt", "ods", "odp", "bin",
    "dat", "obj", "o", "a", "lib", "wasm", "pyc", "pyo", "png", "jpg", "jpeg", "gif", "bmp", "ico",
    "webp", "pdf", "mp3", "mp4", "mov", "avi", "ttf", "otf", "woff", "woff2", "sqlite", "db",
];

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

/// The lines of one read.
struct Window {
    /// Raw lines (cut to [`MAX_LINE_LENGTH`]) from `offset`.
    lines: Vec<String>,
    /// Lines in the whole file.
    total: usize,
    /// Whether the byte budget stopped the read early.
    cut_by_bytes: bool,
}

#[async_trait]
impl Tool for ReadTool {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self, _caller: &AgentInfo, _registry: &Registry) -> String {
        include_str!("descriptions/read.txt").to_string()
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

/// Reads lines `offset..offset + limit` of `path`, counting every line of the file.
fn read_window(path: &Path, offset: usize, limit: usize) -> Result<Window, String> {
    let (file, size) = open_file(path)?;
    window_of(path, file, size, offset, limit)
}

/// The error of a file that could not be opened or read.
fn cannot_read(path: &Path, e: &std::io::Error) -> String {
    format!("Cannot read {}: {e}", path.display())
}

/// Opens `path` to read it: the file and its size, or why it cannot be read (missing, a
/// folder, unreadable).
fn open_file(path: &Path) -> Result<(std::fs::File, u64), String> {
    let cannot = |e: std::io::Error| cannot_read(path, &e);
    let is_dir = || {
        format!(
            "Path is a directory, not a file: {}. Use the list tool to see what it holds.",
            path.display()
        )
    };
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(not_found(path)),
        Err(_) if path.is_dir() => return Err(is_dir()),
        Err(e) => return Err(cannot(e)),
    };
    let metadata = file.metadata().map_err(cannot)?;
    if metadata.is_dir() {
        return Err(is_dir());
    }
    Ok((file, metadata.len()))
}

/// Lines `offset..offset + limit` of `file` (opened from `path`, `size` bytes long when it
/// was opened), counting every line of the file.
fn window_of(
    path: &Path,
    mut file: std::fs::File,
    size: u64,
    offset: usize,
    limit: usize,
) -> Result<Window, String> {
    let cannot = |e: std::io::Error| cannot_read(path, &e);
    // The first bytes (is it text?); a file that fits in them is read whole with no read past
    // its end. A size of 0 may be a file whose size is not known ahead (`/proc`): read on.
    // No more room than the file needs (a small file's few bytes, not a whole head to clear).
    let room = match usize::try_from(size) {
        Ok(known) if known > 0 => known.min(HEAD_BYTES),
        _ => HEAD_BYTES,
    };
    let mut head = vec![0; room];
    let mut filled = 0;
    let mut whole = false;
    while filled < room {
        match file.read(&mut head[filled..]) {
            Ok(0) => {
                whole = true;
                break;
            }
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(cannot(e)),
        }
        if size > 0 && filled as u64 >= size {
            whole = true;
            break;
        }
    }
    head.truncate(filled);
    if has_binary_extension(path) || looks_binary(&head) {
        return Err(format!("Cannot read binary file: {}", path.display()));
    }
    let mut gathered = Gathering::new(offset, limit);
    if whole {
        // All of it is in hand: its lines are taken from there, with no reader around it.
        for raw in head.split_inclusive(|&b| b == b'\n') {
            gathered.take(raw);
        }
    } else {
        let mut reader = BufReader::new(std::io::Cursor::new(head).chain(file));
        let mut buf = Vec::new();
        loop {
            buf.clear();
            let n = reader
                .read_until(b'\n', &mut buf)
                .map_err(|e| cannot_read(path, &e))?;
            if n == 0 {
                break;
            }
            gathered.take(&buf);
        }
    }
    let Window {
        lines,
        total,
        cut_by_bytes,
    } = gathered.window;
    if offset > 0 && offset >= total {
        return Err(format!(
            "Offset {offset} is beyond the end of {} ({total} lines)",
            path.display()
        ));
    }
    Ok(Window {
        lines,
        total,
        cut_by_bytes,
    })
}

/// The lines of a window being read, one raw line (with its newline, if any) at a time.
struct Gathering {
    window: Window,
    /// The bytes the window's lines take (with a newline between two).
    bytes: usize,
    offset: usize,
    limit: usize,
}

impl Gathering {
    fn new(offset: usize, limit: usize) -> Self {
        Gathering {
            window: Window {
                lines: Vec::new(),
                total: 0,
                cut_by_bytes: false,
            },
            bytes: 0,
            offset,
            limit,
        }
    }

    /// Counts the file's next line and keeps it when it falls in the window and the byte
    /// budget: cut to [`MAX_LINE_LENGTH`] characters, without its line ending.
    fn take(&mut self, raw: &[u8]) {
        let window = &mut self.window;
        let index = window.total;
        window.total += 1;
        if index < self.offset || window.lines.len() >= self.limit || window.cut_by_bytes {
            return;
        }
        let text = String::from_utf8_lossy(raw);
        let text = text.strip_suffix('\n').unwrap_or(&text);
        let text = text.strip_suffix('\r').unwrap_or(text);
        let line = if text.chars().count() > MAX_LINE_LENGTH {
            let end = text
                .char_indices()
                .nth(MAX_LINE_LENGTH)
                .map_or(text.len(), |(i, _)| i);
            format!("{}...", &text[..end])
        } else {
            text.to_string()
        };
        let size = line.len() + usize::from(!window.lines.is_empty());
        if self.bytes + size > MAX_BYTES {
            window.cut_by_bytes = true;
            return;
        }
        self.bytes += size;
        window.lines.push(line);
    }
}

/// The message for a missing file, with up to three similar names from its folder.
fn not_found(path: &Path) -> String {
    let mut message = format!("File not found: {}", path.display());
    let (Some(dir), Some(base)) = (path.parent(), path.file_name()) else {
        return message;
    };
    let base = base.to_string_lossy().to_lowercase();
    let stem = Path::new(&base)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| s.len() >= 3);
    let mut similar: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| {
            let name = entry.file_name().to_string_lossy().to_lowercase();
            name.contains(&base)
                || base.contains(&name)
                || stem.as_ref().is_some_and(|s| name.contains(s.as_str()))
        })
        .map(|entry| entry.path())
        .collect();
    similar.sort();
    similar.truncate(3);
    if !similar.is_empty() {
        message.push_str("\n\nDid you mean one of these?");
        for s in similar {
            message.push('\n');
            message.push_str(&s.display().to_string());
        }
    }
    message
}

/// Whether `path` looks binary: a known binary extension, a NUL byte in its first 4 KB, or
/// more than 30% control characters there.
pub(crate) fn is_binary(path: &Path) -> std::io::Result<bool> {
    if has_binary_extension(path) {
        return Ok(true);
    }
    let mut head = Vec::with_capacity(HEAD_BYTES);
    std::fs::File::open(path)?
        .take(HEAD_BYTES as u64)
        .read_to_end(&mut head)?;
    Ok(looks_binary(&head))
}

/// How many of a file's first bytes tell whether it is binary.
const HEAD_BYTES: usize = 4096;

/// Whether `path`'s extension is one of a binary format.
fn has_binary_extension(path: &Path) -> bool {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    BINARY_EXTENSIONS.contains(&ext.as_str())
}

/// Whether a file's first bytes look binary (a NUL byte, or over 30% control characters).
pub fn looks_binary(head: &[u8]) -> bool {
    if head.is_empty() {
        return false;
    }
    if head.contains(&0) {
        return true;
    }
    let control = head
        .iter()
        .filter(|&&b| b < 9 || (b > 13 && b < 32))
        .count();
    control * 10 > head.len() * 3
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

    #[test]
    fn a_file_read_whole_and_one_read_on_give_the_same_lines() {
        let p = Project::new();
        let text = "one\r\ntwo\n\nfour without an end";
        let path = p.file("lines.txt", text);
        let whole = |offset, limit| {
            let file = std::fs::File::open(&path).unwrap();
            window_of(&path, file, text.len() as u64, offset, limit).unwrap()
        };
        // A size of 0 (unknown) reads on past the head, through the reader.
        let read_on = |offset, limit| {
            let file = std::fs::File::open(&path).unwrap();
            window_of(&path, file, 0, offset, limit).unwrap()
        };
        for (offset, limit) in [(0, 10), (1, 2), (3, 1)] {
            let (a, b) = (whole(offset, limit), read_on(offset, limit));
            assert_eq!((&a.lines, a.total), (&b.lines, b.total));
        }
        assert_eq!(
            whole(0, 10).lines,
            ["one", "two", "", "four without an end"]
        );
        assert_eq!(whole(1, 2).lines, ["two", ""]);
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

    #[test]
    fn files_around_the_first_look_and_of_unknown_size_read_whole() {
        let p = Project::new();
        for len in [HEAD_BYTES - 1, HEAD_BYTES, HEAD_BYTES + 1, 3 * HEAD_BYTES] {
            // Lines of 8 bytes, the last one cut where the length ends.
            let text: String = "line ab\n".repeat(len / 8 + 1)[..len].to_string();
            let path = p.file(&format!("f{len}.txt"), &text);
            let lines = text.lines().count();
            let window = read_window(&path, 0, usize::MAX).unwrap();
            assert_eq!(window.total, lines, "{len} bytes");
            // A size of 0 is what `/proc` answers for files that are not empty: read on.
            let file = std::fs::File::open(&path).unwrap();
            let window = window_of(&path, file, 0, 0, usize::MAX).unwrap();
            assert_eq!(window.total, lines, "{len} bytes of unknown size");
        }
    }

    #[test]
    fn binary_heuristic() {
        assert!(!looks_binary(b"hello\tworld\n"));
        assert!(looks_binary(b"a\0b"));
        assert!(looks_binary(&[1, 2, 3, 4, b'a']));
        assert!(!looks_binary(b""));
    }
}

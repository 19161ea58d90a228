//! Markdown files with YAML frontmatter: the format of agent and command files.
//!
//! A file may start with a `---` line, YAML up to the next `---` line, then the body. Keys keep
//! their written order (permission maps depend on it). As OpenCode does, a frontmatter that does
//! not parse is retried once with unquoted `key: value: with colons` lines turned into block
//! scalars, the most common mistake in hand-written agent files.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// A parsed markdown file: its frontmatter keys in written order, and its body.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Frontmatter {
    /// The YAML frontmatter as a JSON object (empty when the file has none).
    pub data: Map<String, Value>,
    /// Everything after the frontmatter, trimmed.
    pub body: String,
}

/// Why a markdown file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MarkdownError {
    /// The file could not be read from disk.
    #[error("{path}: cannot read file: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O failure.
        source: std::io::Error,
    },
    /// The frontmatter is not valid YAML, or not a mapping; `line` is the file's line (1-based).
    #[error("{path}{}: invalid YAML frontmatter: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Yaml {
        /// The file.
        path: PathBuf,
        /// The line of the file where the YAML error is, when known.
        line: Option<usize>,
        /// What the YAML parser said.
        message: String,
    },
    /// A `---` line opens the frontmatter but none closes it.
    #[error("{path}: frontmatter opened with `---` on line 1 is never closed")]
    Unclosed {
        /// The file.
        path: PathBuf,
    },
}

impl MarkdownError {
    /// The same error naming the file as `shown` (for example relative to the working directory).
    pub fn shown_as(mut self, shown: PathBuf) -> Self {
        match &mut self {
            MarkdownError::Io { path, .. }
            | MarkdownError::Yaml { path, .. }
            | MarkdownError::Unclosed { path } => *path = shown,
        }
        self
    }
}

/// Reads and parses a markdown file with optional frontmatter.
pub fn read(path: &Path) -> Result<Frontmatter, MarkdownError> {
    let text = std::fs::read_to_string(path).map_err(|source| MarkdownError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, path)
}

/// Parses markdown text; `path` only names the file in errors.
pub fn parse(text: &str, path: &Path) -> Result<Frontmatter, MarkdownError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or("");
    if first.trim_end() != "---" {
        return Ok(Frontmatter {
            data: Map::new(),
            body: text.trim().to_string(),
        });
    }
    let mut yaml = String::new();
    let mut closed = false;
    let mut consumed = first.len();
    for line in lines {
        consumed += line.len();
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        yaml.push_str(line);
    }
    if !closed {
        return Err(MarkdownError::Unclosed {
            path: path.to_path_buf(),
        });
    }
    let body = text[consumed..].trim().to_string();
    let data = parse_yaml(&yaml).or_else(|first_err| {
        let sanitized = sanitize(&yaml);
        if sanitized == yaml {
            return Err(first_err);
        }
        parse_yaml(&sanitized).map_err(|_| first_err)
    });
    match data {
        Ok(data) => Ok(Frontmatter { data, body }),
        Err((line, message)) => Err(MarkdownError::Yaml {
            path: path.to_path_buf(),
            // The YAML starts on the file's second line.
            line: line.map(|l| l + 1),
            message,
        }),
    }
}

/// Parses the YAML block into an ordered JSON object; errors carry the YAML's 1-based line.
fn parse_yaml(yaml: &str) -> Result<Map<String, Value>, (Option<usize>, String)> {
    if yaml.trim().is_empty() {
        return Ok(Map::new());
    }
    let value: Value = serde_yaml_ng::from_str(yaml).map_err(|e| {
        let line = e.location().map(|l| l.line());
        let message = e.to_string();
        // The location is already given as the file line; drop the parser's own suffix.
        let message = match message.find(" at line ") {
            Some(i) => message[..i].to_string(),
            None => message,
        };
        (line, message)
    })?;
    match value {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(Map::new()),
        other => Err((
            Some(1),
            format!(
                "expected a mapping of keys to values, found {}",
                kind(&other)
            ),
        )),
    }
}

/// The JSON kind of a value, for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Turns top-level `key: value: more` lines whose value is unquoted into block scalars.
fn sanitize(yaml: &str) -> String {
    let mut out = String::with_capacity(yaml.len() + 16);
    for line in yaml.lines() {
        match split_plain_key(line) {
            Some((key, value)) if value.contains(": ") || value.ends_with(':') => {
                out.push_str(key);
                out.push_str(": |-\n  ");
                out.push_str(value);
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// `key: value` at column 0 with a plain (unquoted, non-block, non-flow) value.
fn split_plain_key(line: &str) -> Option<(&str, &str)> {
    let (key, value) = line.split_once(": ")?;
    let key_ok = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let value = value.trim();
    let plain = !value.is_empty()
        && !value.starts_with(['"', '\'', '|', '>', '[', '{', '&', '*', '!', '#']);
    (key_ok && plain).then_some((key, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Result<Frontmatter, MarkdownError> {
        parse(text, Path::new("a.md"))
    }

    #[test]
    fn no_frontmatter_is_all_body() {
        let f = p("Just a prompt.\n").unwrap();
        assert!(f.data.is_empty());
        assert_eq!(f.body, "Just a prompt.");
    }

    #[test]
    fn frontmatter_keys_keep_their_order() {
        let f = p("---\nzeta: 1\nalpha: 2\npermission:\n  bash:\n    \"*\": ask\n    \"git *\": allow\n---\nBody\n").unwrap();
        let keys: Vec<_> = f.data.keys().cloned().collect();
        assert_eq!(keys, ["zeta", "alpha", "permission"]);
        let bash = &f.data["permission"]["bash"];
        let keys: Vec<_> = bash.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["*", "git *"]);
        assert_eq!(f.body, "Body");
    }

    #[test]
    fn crlf_and_bom_are_accepted() {
        let f = p("\u{feff}---\r\ndescription: x\r\n---\r\nHello\r\n").unwrap();
        assert_eq!(f.data["description"], "x");
        assert_eq!(f.body, "Hello");
    }

    #[test]
    fn colon_in_value_is_rescued() {
        let f = p("---\ndescription: Use this: for reviews\nmode: subagent\n---\nx").unwrap();
        assert_eq!(f.data["description"], "Use this: for reviews");
        assert_eq!(f.data["mode"], "subagent");
    }

    #[test]
    fn bad_yaml_names_file_and_line() {
        let err = p("---\ndescription: ok\nmode: [unclosed\n---\nx").unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("a.md:"), "{msg}");
        match err {
            MarkdownError::Yaml { line, .. } => assert!(matches!(line, Some(3..=5)), "{line:?}"),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn unclosed_frontmatter_is_an_error() {
        assert!(matches!(
            p("---\ndescription: x\n"),
            Err(MarkdownError::Unclosed { .. })
        ));
    }

    #[test]
    fn non_mapping_frontmatter_is_an_error() {
        let err = p("---\n- a\n- b\n---\n").unwrap_err();
        assert!(err.to_string().contains("expected a mapping"), "{err}");
    }

    #[test]
    fn empty_frontmatter_is_empty_data() {
        let f = p("---\n---\nbody").unwrap();
        assert!(f.data.is_empty());
        assert_eq!(f.body, "body");
    }
}

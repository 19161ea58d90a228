//! Words of a parsed command line: their literal value (quotes and escapes removed) when the
//! shell would not expand anything in them, and quoting a value back for display or for a shell.

use tree_sitter::Node;

/// One word of a command as the parser saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Word {
    /// The source text, as written.
    pub raw: String,
    /// The value the shell passes on, when it is known before running anything (no expansion,
    /// substitution or unquoted glob).
    pub value: Option<String>,
    /// Whether an unquoted part holds a glob or brace character (`*`, `?`, `[`, `{`): as a
    /// program name, the shell could turn it into another word.
    pub glob: bool,
}

impl Word {
    /// A word with a known value (for words made up by the peeler).
    #[cfg(test)]
    pub fn literal(value: &str) -> Word {
        Word {
            raw: value.to_string(),
            value: Some(value.to_string()),
            glob: false,
        }
    }

    /// The value if known, else the source text: how the word shows in a pattern.
    pub fn shown(&self) -> String {
        match &self.value {
            Some(value) => quote_for_display(value),
            None => self.raw.clone(),
        }
    }
}

/// The word `node` of `src`.
pub(super) fn word(node: Node<'_>, src: &str) -> Word {
    let mut glob = false;
    let value = literal(node, src, &mut glob);
    Word {
        raw: text(node, src).to_string(),
        value,
        glob,
    }
}

/// The source text of `node` (empty when its range does not fall on character boundaries).
pub(super) fn text<'a>(node: Node<'_>, src: &'a str) -> &'a str {
    src.get(node.byte_range()).unwrap_or_default()
}

/// The literal value of a word node, or `None` when the shell would expand something in it.
fn literal(node: Node<'_>, src: &str, glob: &mut bool) -> Option<String> {
    let raw = text(node, src);
    match node.kind() {
        "word" | "command_name" if node.named_child_count() == 0 => {
            if raw.contains(['*', '?', '[', '{']) {
                *glob = true;
            }
            Some(unescape_unquoted(raw))
        }
        "command_name" => node.named_child(0).and_then(|c| literal(c, src, glob)),
        "number" => Some(raw.to_string()),
        "raw_string" => raw
            .strip_prefix('\'')
            .and_then(|r| r.strip_suffix('\''))
            .map(str::to_string),
        "string" | "translated_string" => {
            let mut cursor = node.walk();
            let expands = node
                .named_children(&mut cursor)
                .any(|c| c.kind() != "string_content");
            if expands {
                return None;
            }
            let inner = raw.strip_prefix('$').unwrap_or(raw);
            let inner = inner.strip_prefix('"')?.strip_suffix('"')?;
            Some(unescape_double_quoted(inner))
        }
        "ansi_c_string" => {
            let inner = raw.strip_prefix("$'")?.strip_suffix('\'')?;
            unescape_ansi_c(inner)
        }
        "concatenation" => {
            let mut out = String::new();
            let mut cursor = node.walk();
            for child in node.children(&mut cursor) {
                out.push_str(&literal(child, src, glob)?);
            }
            Some(out)
        }
        _ => None,
    }
}

/// An unquoted word with its backslashes applied (`\r\m` → `rm`, a backslash-newline vanishes).
fn unescape_unquoted(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('\n') | None => {}
                Some(next) => out.push(next),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The inside of `"…"` with its backslashes applied (only before `$`, `` ` ``, `"`, `\` and a
/// newline does a backslash escape).
fn unescape_double_quoted(inner: &str) -> String {
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('$' | '`' | '"' | '\\') => {
                    if let Some(next) = chars.next() {
                        out.push(next);
                    }
                }
                Some('\n') => {
                    chars.next();
                }
                _ => out.push(c),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The inside of `$'…'` with its escapes applied; `None` for an escape not handled here.
fn unescape_ansi_c(inner: &str) -> Option<String> {
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let escaped = chars.next()?;
        let plain = match escaped {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            'a' => '\u{7}',
            'b' => '\u{8}',
            'e' | 'E' => '\u{1b}',
            'f' => '\u{c}',
            'v' => '\u{b}',
            '\\' | '\'' | '"' | '?' => escaped,
            'x' => {
                let mut code = 0u32;
                let mut digits = 0;
                while digits < 2
                    && let Some(d) = chars.peek().and_then(|c| c.to_digit(16))
                {
                    code = code * 16 + d;
                    chars.next();
                    digits += 1;
                }
                if digits == 0 {
                    return None;
                }
                char::from_u32(code)?
            }
            '0'..='7' => {
                let mut code = escaped.to_digit(8)?;
                let mut digits = 1;
                while digits < 3
                    && let Some(d) = chars.peek().and_then(|c| c.to_digit(8))
                {
                    code = code * 8 + d;
                    chars.next();
                    digits += 1;
                }
                char::from_u32(code)?
            }
            _ => return None,
        };
        out.push(plain);
    }
    Some(out)
}

/// `value` as one shell word in single quotes (`'` written as `'\''`); the shell passes it on
/// unchanged, whatever it holds.
pub fn shell_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

/// `value` as written in a pattern: as is when it holds nothing the shell treats specially,
/// else single-quoted (`cd 'a b'`, `echo 'x;y'`).
pub(super) fn quote_for_display(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_alphanumeric() || "-_./:=+,@%^~*?[]{}!#".contains(c) || !c.is_ascii());
    if plain {
        value.to_string()
    } else {
        shell_quote(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_keeps_plain_words_and_wraps_the_rest() {
        assert_eq!(quote_for_display("rm"), "rm");
        assert_eq!(quote_for_display("src/a.rs"), "src/a.rs");
        assert_eq!(quote_for_display("a b"), "'a b'");
        assert_eq!(quote_for_display("x;y"), "'x;y'");
        assert_eq!(quote_for_display(""), "''");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn escapes_are_applied() {
        assert_eq!(unescape_unquoted(r"\r\m"), "rm");
        assert_eq!(unescape_unquoted("a\\\nb"), "ab");
        assert_eq!(unescape_double_quoted(r#"a\"b\$c\n"#), r#"a"b$c\n"#);
        assert_eq!(unescape_ansi_c(r"r\x6d\n").as_deref(), Some("rm\n"));
        assert_eq!(unescape_ansi_c(r"\162m").as_deref(), Some("rm"));
        assert_eq!(unescape_ansi_c(r"\u0041"), None);
        assert_eq!(unescape_ansi_c(r"\x"), None);
        assert_eq!(unescape_ansi_c("\\"), None);
    }
}

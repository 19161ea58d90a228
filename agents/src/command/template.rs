//! Command template expansion: `$1..$n`, `$ARGUMENTS`, and argument splitting.
//!
//! Follows OpenCode's `SessionPrompt.command` and `Command.hints`: arguments are split on
//! whitespace with quoted groups kept together, `$n` takes the nth argument, the highest `$n` in
//! the template also takes every argument after it, `$ARGUMENTS` takes the raw argument string,
//! and a template with no placeholder gets the arguments appended on a new line. The result is
//! trimmed. Deliberate differences from OpenCode's JavaScript: `$0` is not a placeholder (it
//! is left as written instead of becoming `undefined`), substituted values are inserted
//! verbatim (a value containing `$ARGUMENTS` or `$&` is not expanded again), and inside a
//! `` !`cmd` `` of the template each argument is inserted as one single-quoted shell word
//! (`'` written as `'\''`), so an argument is never run as code. Only the template's own
//! `` !`cmd` `` are commands: one that an argument brings along stays text ([`expand_pieces`]).

/// A `$n` (n ≥ 1) or `$ARGUMENTS` occurrence in a template, as a byte range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Placeholder {
    /// Byte offset of the `$`.
    start: usize,
    /// Byte offset just past the placeholder.
    end: usize,
    /// What the placeholder stands for.
    kind: Kind,
}

/// The two kinds of placeholder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `$n`, 1-based; `usize::MAX` when the written number does not fit.
    Numbered(usize),
    /// `$ARGUMENTS`.
    Arguments,
}

/// The `$ARGUMENTS` placeholder.
const ARGUMENTS: &str = "$ARGUMENTS";

/// Finds every placeholder in `template`, left to right; digits after `$` are read greedily.
fn placeholders(template: &str) -> Vec<Placeholder> {
    let bytes = template.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'$' {
            i += 1;
            continue;
        }
        if template[i..].starts_with(ARGUMENTS) {
            let end = i + ARGUMENTS.len();
            found.push(Placeholder {
                start: i,
                end,
                kind: Kind::Arguments,
            });
            i = end;
            continue;
        }
        let digits = bytes[i + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits == 0 {
            i += 1;
            continue;
        }
        let end = i + 1 + digits;
        // Leading zeros are allowed (`$01` is `$1`), as JavaScript's `Number("01")` reads it.
        let number = template[i + 1..end].parse::<usize>().unwrap_or(usize::MAX);
        if number > 0 {
            found.push(Placeholder {
                start: i,
                end,
                kind: Kind::Numbered(number),
            });
        }
        i = end;
    }
    found
}

/// A piece of an expanded template: text, or a `` !`cmd` `` command to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Text, arguments inserted as they are.
    Text(String),
    /// The command of a `` !`cmd` `` in the template, arguments inserted shell-quoted.
    Shell(String),
}

/// The `` !`cmd` `` spans of `text`: byte ranges of the whole `` !`…` `` and of the command.
/// A span is a non-empty run without backticks between `` !` `` and the next backtick.
pub(crate) fn shell_spans(text: &str) -> Vec<(std::ops::Range<usize>, std::ops::Range<usize>)> {
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(found) = text[from..].find("!`") {
        let open = from + found;
        let body = open + 2;
        match text[body..].find('`') {
            // `` !`` `` (empty) is no command; look again after the first backtick.
            Some(0) => from = body,
            Some(close) => {
                spans.push((open..body + close + 1, body..body + close));
                from = body + close + 1;
            }
            None => break,
        }
    }
    spans
}

/// Splits command arguments on whitespace, keeping `"…"` and `'…'` groups together without quotes.
pub fn split_arguments(arguments: &str) -> Vec<String> {
    // Mirrors OpenCode's /(?:"[^"]*"|'[^']*'|[^\s"']+)/g: an unmatched quote is skipped.
    let mut args = Vec::new();
    let mut rest = arguments;
    while let Some(c) = rest.chars().next() {
        if c.is_whitespace() {
            rest = &rest[c.len_utf8()..];
        } else if c == '"' || c == '\'' {
            let inner = &rest[1..];
            match inner.find(c) {
                Some(close) => {
                    args.push(inner[..close].to_string());
                    rest = &inner[close + 1..];
                }
                None => rest = inner,
            }
        } else {
            let len = rest
                .find(|c: char| c.is_whitespace() || c == '"' || c == '\'')
                .unwrap_or(rest.len());
            args.push(rest[..len].to_string());
            rest = &rest[len..];
        }
    }
    args
}

/// Expands a command template with the user's argument string, as OpenCode does; the
/// template's `` !`cmd` `` stay in the text (arguments inside them shell-quoted).
pub fn expand(template: &str, arguments: &str) -> String {
    let mut out = String::new();
    for piece in expand_pieces(template, arguments) {
        match piece {
            Piece::Text(text) => out.push_str(&text),
            Piece::Shell(command) => {
                out.push_str("!`");
                out.push_str(&command);
                out.push('`');
            }
        }
    }
    out
}

/// Expands a command template into text and the commands of its `` !`cmd` ``: arguments are
/// inserted as they are in text and as single-quoted shell words in commands (a swallowing
/// `$n` and `$ARGUMENTS` give one quoted word per argument). The whole is trimmed.
pub fn expand_pieces(template: &str, arguments: &str) -> Vec<Piece> {
    let args = split_arguments(arguments);
    let found = placeholders(template);
    let spans = shell_spans(template);
    let last = found
        .iter()
        .filter_map(|p| match p.kind {
            Kind::Numbered(n) => Some(n),
            Kind::Arguments => None,
        })
        .max();
    let quoted = |values: &[String]| -> String {
        values
            .iter()
            .map(|v| crate::permission::bash::shell_quote(v))
            .collect::<Vec<_>>()
            .join(" ")
    };
    // The replacement of a placeholder, inside a command or not.
    let replace = |p: &Placeholder, in_shell: bool| -> String {
        match p.kind {
            Kind::Arguments if in_shell => quoted(&args),
            Kind::Arguments => arguments.to_string(),
            Kind::Numbered(n) => {
                let index = n - 1;
                let values = if index >= args.len() {
                    &args[..0]
                } else if Some(n) == last {
                    // The final placeholder swallows the remaining arguments.
                    &args[index..]
                } else {
                    &args[index..=index]
                };
                if in_shell {
                    quoted(values)
                } else {
                    values.join(" ")
                }
            }
        }
    };
    // Expands `template[range]`, whose placeholders are those of `found` inside it.
    let expand_range = |range: std::ops::Range<usize>, in_shell: bool| -> String {
        let mut out = String::with_capacity(range.len());
        let mut pos = range.start;
        for p in found
            .iter()
            .filter(|p| p.start >= range.start && p.end <= range.end)
        {
            out.push_str(&template[pos..p.start]);
            out.push_str(&replace(p, in_shell));
            pos = p.end;
        }
        out.push_str(&template[pos..range.end]);
        out
    };

    let mut pieces = Vec::new();
    let mut pos = 0;
    for (whole, command) in &spans {
        pieces.push(Piece::Text(expand_range(pos..whole.start, false)));
        pieces.push(Piece::Shell(expand_range(command.clone(), true)));
        pos = whole.end;
    }
    let mut tail = expand_range(pos..template.len(), false);
    if found.is_empty() && !arguments.trim().is_empty() {
        tail.push('\n');
        tail.push_str(arguments);
    }
    pieces.push(Piece::Text(tail));
    trim(pieces)
}

/// `pieces` with the text at both ends trimmed and empty text dropped.
fn trim(mut pieces: Vec<Piece>) -> Vec<Piece> {
    // Leading text up to the first command or non-blank text.
    for piece in pieces.iter_mut() {
        match piece {
            Piece::Text(text) => {
                *text = text.trim_start().to_string();
                if !text.is_empty() {
                    break;
                }
            }
            Piece::Shell(_) => break,
        }
    }
    for piece in pieces.iter_mut().rev() {
        match piece {
            Piece::Text(text) => {
                *text = text.trim_end().to_string();
                if !text.is_empty() {
                    break;
                }
            }
            Piece::Shell(_) => break,
        }
    }
    pieces.retain(|p| !matches!(p, Piece::Text(t) if t.is_empty()));
    pieces
}

/// The placeholders a template uses: `$1`, `$2`, … in numeric order, then `$ARGUMENTS`, each once.
pub fn hints(template: &str) -> Vec<String> {
    let found = placeholders(template);
    let mut numbers: Vec<usize> = found
        .iter()
        .filter_map(|p| match p.kind {
            Kind::Numbered(n) => Some(n),
            Kind::Arguments => None,
        })
        .collect();
    numbers.sort_unstable();
    numbers.dedup();
    let mut result: Vec<String> = numbers.into_iter().map(|n| format!("${n}")).collect();
    if found.iter().any(|p| p.kind == Kind::Arguments) {
        result.push(ARGUMENTS.to_string());
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn s(items: &[&str]) -> Vec<String> {
        items.iter().map(|i| i.to_string()).collect()
    }

    // --- placeholders and arguments ---

    #[test]
    fn the_highest_placeholder_takes_the_remaining_arguments() {
        assert_eq!(
            expand("Review $1 then $2", "a b c d"),
            "Review a then b c d"
        );
    }

    #[test]
    fn a_missing_argument_becomes_empty_and_the_result_is_trimmed() {
        assert_eq!(expand("A $1 B $3", "one"), "A one B");
    }

    #[test]
    fn without_placeholders_the_arguments_follow_on_a_new_line() {
        assert_eq!(expand("Do it", "extra words"), "Do it\nextra words");
    }

    #[test]
    fn the_arguments_placeholder_takes_the_raw_string() {
        assert_eq!(expand("Fix $ARGUMENTS now", "x  y"), "Fix x  y now");
    }

    #[test]
    fn a_quoted_argument_is_one_argument_without_its_quotes() {
        assert_eq!(expand("Q $1", "\"hello world\" z"), "Q hello world z");
    }

    // --- expand edge cases ---

    #[test]
    fn multi_digit_placeholder_is_one_number() {
        assert_eq!(expand("A $10", "one"), "A");
        let ten = "a b c d e f g h i j";
        assert_eq!(expand("$1 $10", ten), "a j");
        assert_eq!(expand("$1 $10 $2", ten), "a j b");
        assert_eq!(expand("[$10]", "1 2 3 4 5 6 7 8 9 10 11"), "[10 11]");
    }

    #[test]
    fn only_the_highest_placeholder_swallows() {
        assert_eq!(expand("$2 then $1", "a b c"), "b c then a");
        assert_eq!(expand("$1 and $1", "a b"), "a b and a b");
        assert_eq!(expand("$1 $2 $3", "a b c"), "a b c");
    }

    #[test]
    fn placeholders_beyond_the_arguments_are_empty() {
        assert_eq!(expand("<$1|$2|$3>", "a"), "<a||>");
        assert_eq!(expand("Review $1", ""), "Review");
        assert_eq!(expand("$1", ""), "");
    }

    #[test]
    fn arguments_placeholder_repeats_and_mixes_with_numbered() {
        assert_eq!(expand("$ARGUMENTS / $ARGUMENTS", " a b "), "a b  /  a b");
        assert_eq!(expand("$1 / $ARGUMENTS", "a b"), "a b / a b");
        assert_eq!(expand("Fix $ARGUMENTS", ""), "Fix");
    }

    #[test]
    fn no_placeholder_and_blank_arguments_leave_the_template() {
        assert_eq!(expand("Do it", ""), "Do it");
        assert_eq!(expand("Do it", "  \t "), "Do it");
        assert_eq!(expand("  Do it \n", ""), "Do it");
    }

    #[test]
    fn appended_arguments_are_raw() {
        assert_eq!(expand("Do it", "\"a b\"  c"), "Do it\n\"a b\"  c");
    }

    #[test]
    fn dollar_zero_and_bare_dollars_are_literal() {
        assert_eq!(expand("cost $ and $0", "x"), "cost $ and $0\nx");
        assert_eq!(expand("$$1", "x"), "$x");
        assert_eq!(expand("$arguments $1", "x"), "$arguments x");
    }

    #[test]
    fn leading_zeros_name_the_same_placeholder() {
        assert_eq!(expand("$01-$2", "a b c"), "a-b c");
    }

    #[test]
    fn huge_placeholder_number_is_empty() {
        assert_eq!(expand("x $99999999999999999999999 y", "a"), "x  y");
    }

    #[test]
    fn substituted_values_are_not_expanded_again() {
        assert_eq!(expand("$1 $2", "$2 b"), "$2 b");
        assert_eq!(
            expand("$1 $ARGUMENTS", "'$ARGUMENTS'"),
            "$ARGUMENTS '$ARGUMENTS'"
        );
        assert_eq!(expand("$ARGUMENTS", "$& $1"), "$& $1");
    }

    #[test]
    fn multibyte_text_around_placeholders() {
        assert_eq!(expand("é $1 ü", "ñ"), "é ñ ü");
        assert_eq!(expand("日本 $ARGUMENTS", "語"), "日本 語");
    }

    #[test]
    fn single_quotes_group_too() {
        assert_eq!(expand("Q $1 / $2", "'a b' 'c'"), "Q a b / c");
    }

    // --- commands in templates ---

    #[test]
    fn arguments_inside_commands_are_shell_quoted() {
        assert_eq!(
            expand_pieces("Log: !`git log $1` for $1", "x; rm y"),
            vec![
                Piece::Text("Log: ".into()),
                Piece::Shell("git log 'x;' 'rm' 'y'".into()),
                Piece::Text(" for x; rm y".into()),
            ]
        );
        assert_eq!(
            expand_pieces("!`echo $ARGUMENTS`", "\"$(rm y)\" 'it''s'"),
            vec![Piece::Shell("echo '$(rm y)' 'it' 's'".into())]
        );
        assert_eq!(
            expand_pieces("!`echo $2 $1`", "\"`rm y`\" b c"),
            vec![Piece::Shell("echo 'b' 'c' '`rm y`'".into())]
        );
        assert_eq!(expand("!`cat $1`", "\"it's\""), "!`cat 'it'\\''s'`");
    }

    #[test]
    fn a_command_brought_by_an_argument_stays_text() {
        assert_eq!(
            expand_pieces("Review $1", "!`rm y`"),
            vec![Piece::Text("Review !`rm y`".into())]
        );
        assert_eq!(
            expand_pieces("Do it", "!`rm y`"),
            vec![Piece::Text("Do it\n!`rm y`".into())]
        );
    }

    #[test]
    fn pieces_are_trimmed_at_both_ends_only() {
        assert_eq!(
            expand_pieces("  a !`x` b  ", ""),
            vec![
                Piece::Text("a ".into()),
                Piece::Shell("x".into()),
                Piece::Text(" b".into())
            ]
        );
        assert_eq!(expand_pieces(" !`x` ", ""), vec![Piece::Shell("x".into())]);
        assert!(expand_pieces("   ", "").is_empty());
    }

    // --- split_arguments ---

    #[test]
    fn split_on_any_whitespace() {
        assert_eq!(split_arguments("a  b\tc\nd"), s(&["a", "b", "c", "d"]));
        assert!(split_arguments("").is_empty());
        assert!(split_arguments("   ").is_empty());
    }

    #[test]
    fn split_keeps_quoted_groups() {
        assert_eq!(
            split_arguments("\"hello world\" z"),
            s(&["hello world", "z"])
        );
        assert_eq!(split_arguments("'it is' \"x 'y'\""), s(&["it is", "x 'y'"]));
        assert_eq!(split_arguments("\"\" x"), s(&["", "x"]));
    }

    #[test]
    fn split_quotes_end_a_bare_word() {
        assert_eq!(split_arguments("a\"b c\"d"), s(&["a", "b c", "d"]));
    }

    #[test]
    fn split_skips_an_unmatched_quote() {
        assert_eq!(split_arguments("\"hello world"), s(&["hello", "world"]));
        assert_eq!(split_arguments("it's"), s(&["it", "s"]));
    }

    // --- hints ---

    #[test]
    fn hints_list_numbered_then_arguments_once_each() {
        assert_eq!(
            hints("$2 $ARGUMENTS $1 $2 $ARGUMENTS"),
            s(&["$1", "$2", "$ARGUMENTS"])
        );
        assert_eq!(hints("$10 $2"), s(&["$2", "$10"]));
        assert_eq!(hints("$ARGUMENTS"), s(&["$ARGUMENTS"]));
        assert!(hints("Do it $0 $ x").is_empty());
    }

    proptest! {
        #[test]
        fn template_without_placeholders_gets_arguments_appended(
            template in "[a-z$.]([a-z $.\n]{0,30}[a-z.])?",
            args in "[a-z\"'$0-9]([a-z \"'$0-9]{0,20}[a-z\"'$0-9])?",
        ) {
            prop_assert!(hints(&template).is_empty());
            prop_assert_eq!(expand(&template, &args), format!("{template}\n{args}"));
        }

        #[test]
        fn template_without_placeholders_and_blank_arguments_is_unchanged(
            template in "[a-z$.]([a-z $.\n]{0,30}[a-z.])?",
            args in "[ \t\n]{0,5}",
        ) {
            prop_assert_eq!(expand(&template, &args), template);
        }
    }
}

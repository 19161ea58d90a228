//! A command line parsed with tree-sitter's bash grammar into the simple commands it runs.
//!
//! Every `command` node anywhere in the tree is one simple command: at the top, in pipelines
//! and lists, in subshells and groups, in loops and conditions, in function bodies, in
//! command and process substitutions (also inside strings and heredocs). Declarations
//! (`export`, `local`, `unset`…) and `[[ … ]]` tests count as commands too. Redirections go
//! with the command they apply to; where the grammar hangs them on a whole list
//! (`a && b 2>&1`), they go to its last command, as the shell binds them, and words the grammar
//! took for extra redirection targets (`rm 2>/dev/null x`) go back to that command's arguments.
//! ERROR and MISSING nodes are reported, never skipped silently.

use std::cell::RefCell;
use std::collections::HashMap;

use tree_sitter::{Node, Parser, Tree};

use super::words::{Word, text, word};

/// A redirection of a command: how it reads in a pattern, and the file it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Redirect {
    /// The operator and its target as written (`2>&1`, `> out.txt`).
    pub shown: String,
    /// The file it opens, when it opens one (not for `>&2`, `<&-`, heredocs).
    pub target: Option<Word>,
}

/// One simple command of a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Simple {
    /// The command's source text.
    pub text: String,
    /// The program name first (when the command has one), then its arguments.
    pub words: Vec<Word>,
    /// Whether `words` starts with a program name (`> f` and `FOO=1 >f` have none).
    pub has_name: bool,
    /// A declaration or a `[[ … ]]` test: builtins whose words are not a program and operands.
    pub builtin: bool,
    /// The redirections that apply to it.
    pub redirects: Vec<Redirect>,
}

/// What the parser found in a line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Parsed {
    /// The simple commands, in source order.
    pub commands: Vec<Simple>,
    /// Redirections of groups and subshells (`(a; b) > out`), which belong to no one command.
    pub loose: Vec<Redirect>,
    /// The text of every part the grammar could not read (ERROR nodes, missing tokens).
    pub errors: Vec<String>,
}

thread_local! {
    /// One parser per thread (a parser is not `Sync`; making one costs more than a parse).
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

/// The syntax tree of `line`; `None` only if the grammar cannot be loaded.
fn tree(line: &str) -> Option<Tree> {
    PARSER.with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        if slot.is_none() {
            let mut parser = Parser::new();
            parser
                .set_language(&tree_sitter_bash::LANGUAGE.into())
                .ok()?;
            *slot = Some(parser);
        }
        slot.as_mut()?.parse(line, None)
    })
}

/// The simple commands of `line`, the redirections of groups, and what could not be read.
pub(super) fn parse(line: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let Some(tree) = tree(line) else {
        parsed.errors.push(line.to_string());
        return parsed;
    };
    // Redirections (and stray words) the grammar hung on a list, by the command they go to.
    let mut handed: HashMap<usize, Vec<Node<'_>>> = HashMap::new();
    let mut cursor = tree.walk();
    // Pre-order walk without recursion: deep nesting cannot overflow the stack.
    loop {
        let node = cursor.node();
        visit(node, line, &mut parsed, &mut handed);
        if cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return parsed;
            }
        }
    }
}

/// Records what `node` contributes.
fn visit<'t>(
    node: Node<'t>,
    src: &str,
    parsed: &mut Parsed,
    handed: &mut HashMap<usize, Vec<Node<'t>>>,
) {
    if node.is_error() {
        parsed.errors.push(text(node, src).to_string());
        return;
    }
    if node.is_missing() {
        parsed.errors.push(format!("missing `{}`", node.kind()));
        return;
    }
    match node.kind() {
        "command" => {
            let extra = handed.remove(&node.id()).unwrap_or_default();
            parsed.commands.push(command(node, src, &extra));
        }
        "declaration_command" | "unset_command" | "test_command" => {
            let mut cursor = node.walk();
            let words = node.children(&mut cursor).map(|c| word(c, src)).collect();
            parsed.commands.push(Simple {
                text: text(node, src).to_string(),
                words,
                has_name: true,
                builtin: true,
                redirects: Vec::new(),
            });
        }
        "redirected_statement" => {
            let mut cursor = node.walk();
            let redirects: Vec<Node<'t>> = node
                .children_by_field_name("redirect", &mut cursor)
                .collect();
            match node.child_by_field_name("body").and_then(last_command) {
                Some(target) => handed.entry(target.id()).or_default().extend(redirects),
                None => {
                    for redirect in redirects {
                        let (found, stray) = redirections(redirect, src);
                        parsed.loose.extend(found);
                        // Words after a group's redirection: the shell rejects the line.
                        if !stray.is_empty() {
                            parsed.errors.push(text(redirect, src).to_string());
                        }
                    }
                }
            }
        }
        _ => {}
    }
}

/// The command a redirection after `body` binds to: `body` itself, or the last command of a
/// list or pipeline; `None` for groups, subshells and compound statements.
fn last_command(body: Node<'_>) -> Option<Node<'_>> {
    let mut node = body;
    loop {
        match node.kind() {
            "command" => return Some(node),
            "list" | "pipeline" | "negated_command" | "redirected_statement" => {
                let last = u32::try_from(node.named_child_count().checked_sub(1)?).ok()?;
                node = node.named_child(last)?;
            }
            _ => return None,
        }
    }
}

/// The simple command `node`, with the redirections handed to it from an enclosing list.
fn command(node: Node<'_>, src: &str, handed: &[Node<'_>]) -> Simple {
    let mut words = Vec::new();
    let mut redirects = Vec::new();
    let mut stray = Vec::new();
    let mut has_name = false;
    let (mut start, mut end) = (node.start_byte(), node.end_byte());
    let mut cursor = node.walk();
    for (i, child) in node.children(&mut cursor).enumerate() {
        let field = u32::try_from(i)
            .ok()
            .and_then(|i| node.field_name_for_child(i));
        match (field, child.kind()) {
            (Some("name"), _) => {
                has_name = true;
                words.insert(0, word(child, src));
            }
            (Some("argument"), _) => words.push(word(child, src)),
            (_, "file_redirect" | "heredoc_redirect" | "herestring_redirect") => {
                let (found, more) = redirections(child, src);
                redirects.extend(found);
                stray.extend(more);
            }
            _ => {}
        }
    }
    for redirect in handed {
        let (found, more) = redirections(*redirect, src);
        redirects.extend(found);
        stray.extend(more);
        start = start.min(redirect.start_byte());
        end = end.max(redirect_end(*redirect));
    }
    words.extend(stray);
    Simple {
        text: src.get(start..end).unwrap_or_default().trim().to_string(),
        words,
        has_name,
        builtin: false,
        redirects,
    }
}

/// Where the part of a redirection that is really a redirection ends (before stray words).
fn redirect_end(node: Node<'_>) -> usize {
    node.child_by_field_name("destination")
        .map_or(node.end_byte(), |d| d.end_byte())
}

/// The redirections `node` makes (a heredoc may carry a file redirection of its own), and the
/// words after a target that the grammar took for more targets (they are arguments of the
/// command).
fn redirections(node: Node<'_>, src: &str) -> (Vec<Redirect>, Vec<Word>) {
    let end = redirect_end(node);
    let shown = src
        .get(node.start_byte()..end)
        .unwrap_or_default()
        .to_string();
    if node.kind() != "file_redirect" {
        // Heredocs and here-strings feed text, not a file; show only the operator line.
        let shown = shown.lines().next().unwrap_or_default().trim().to_string();
        let mut found = vec![Redirect {
            shown,
            target: None,
        }];
        let mut stray = Vec::new();
        let mut cursor = node.walk();
        for inner in node.children_by_field_name("redirect", &mut cursor) {
            if inner.kind() == "file_redirect" {
                let (more, words) = redirections(inner, src);
                found.extend(more);
                stray.extend(words);
            }
        }
        return (found, stray);
    }
    let mut cursor = node.walk();
    let mut destinations = node
        .children_by_field_name("destination", &mut cursor)
        .map(|d| word(d, src));
    let first = destinations.next();
    let stray: Vec<Word> = destinations.collect();
    // `>&2`, `2>&1`, `<&-`: duplicating or closing a descriptor opens no file.
    let duplicates = {
        let mut cursor = node.walk();
        node.children(&mut cursor)
            .any(|c| matches!(c.kind(), ">&" | "<&" | ">&-" | "<&-"))
    };
    let target = first.filter(|w| {
        !(duplicates
            && w.value
                .as_deref()
                .is_some_and(|v| v == "-" || v.chars().all(|c| c.is_ascii_digit())))
    });
    (vec![Redirect { shown, target }], stray)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(line: &str) -> Vec<Vec<String>> {
        parse(line)
            .commands
            .iter()
            .map(|c| c.words.iter().map(|w| w.shown()).collect())
            .collect()
    }

    #[test]
    fn finds_commands_everywhere() {
        assert_eq!(
            names("a 1 && (b; { c; }) | d $(e) `f` <(g)"),
            vec![
                vec!["a", "1"],
                vec!["b"],
                vec!["c"],
                vec!["d", "$(e)", "`f`", "<(g)"],
                vec!["e"],
                vec!["f"],
                vec!["g"]
            ]
        );
        assert_eq!(
            names("for f in *; do rm \"$f\"; done; x=$(h); echo \"$(i)\""),
            vec![
                vec!["rm", "\"$f\""],
                vec!["h"],
                vec!["echo", "\"$(i)\""],
                vec!["i"]
            ]
        );
    }

    #[test]
    fn redirections_bind_to_their_command() {
        let parsed = parse("git status && cargo test 2>&1 | tail -n 5");
        let texts: Vec<&str> = parsed.commands.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(texts, ["git status", "cargo test 2>&1", "tail -n 5"]);
        assert_eq!(parsed.commands[1].redirects[0].shown, "2>&1");
        assert_eq!(parsed.commands[1].redirects[0].target, None);

        assert_eq!(
            names("true && sudo 2>/dev/null rm x"),
            vec![vec!["true"], vec!["sudo", "rm", "x"]]
        );
        let parsed = parse("rm >out x");
        assert_eq!(parsed.commands[0].words.len(), 2);
        let target = parsed.commands[0].redirects[0].target.clone().unwrap();
        assert_eq!(target.value.as_deref(), Some("out"));
        let parsed = parse("(ls) > o; > f");
        assert_eq!(parsed.loose.len(), 2);
    }

    #[test]
    fn broken_lines_report_errors() {
        assert_eq!(parse("echo (").errors, ["("]);
        assert!(!parse("if true; then rm x").errors.is_empty());
        assert!(parse("echo ok").errors.is_empty());
        assert!(parse("").commands.is_empty());
    }
}

//! What a bash command line runs, for the `bash` permission: every simple command the shell
//! would run, wrappers peeled, each checked by the rules.
//!
//! The line is parsed with tree-sitter's bash grammar ([`parse`]); each simple command found
//! anywhere in it (pipelines, lists, subshells, groups, command and process substitutions) is
//! peeled of its wrappers ([`peel`]: `sudo`, `env`, `timeout`, `xargs`, `find -exec`…), and
//! the code run by `bash|sh|zsh -c '…'`, `eval …` and `env -S` is parsed in turn, up to
//! [`MAX_DEPTH`] levels. Each step is a [`Part`] whose `pattern` (the program's basename and
//! its words: `/bin/rm -f x` → `rm -f x`) the rules match; the strictest decision of all parts
//! wins. What cannot be known before running (a syntax error, a program name that is an
//! expansion, code that is not a literal string) is an unreadable part: at least `ask`.
//!
//! [`analyze`] also lists the words that may name files (arguments, redirection targets, `cd`
//! targets) for the path checks of the bash tool, which touch the file system. Everything here
//! is pure: no I/O, no panics, whatever the input.

mod arity;
mod parse;
mod peel;
#[cfg(test)]
mod tests;
mod words;

use std::fmt;

use serde::Serialize;

pub use arity::{ARITY, command_prefix};
pub use words::shell_quote;

use super::{Action, Evaluation, Rule, evaluate};
use parse::Simple;
use words::Word;

/// How many times code inside code (`bash -c "eval '…'"`) is parsed before giving up (`ask`).
pub const MAX_DEPTH: usize = 8;

/// Why a part of a command line cannot be checked before it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "text", rename_all = "snake_case")]
pub enum Unreadable {
    /// The grammar cannot read this text (a syntax error or a missing token).
    Syntax(String),
    /// The program name is not a literal word (`$CMD x`, `$(echo rm) x`, `r?`).
    Program(String),
    /// Code for a shell or `eval` that is not a literal string (`bash -c "$x"`).
    Code(String),
    /// A shell reads its commands from its input (`curl … | sh`).
    Stdin,
    /// Code nested deeper than [`MAX_DEPTH`].
    TooDeep,
}

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unreadable::Syntax(text) => write!(f, "the shell grammar cannot read {text:?}"),
            Unreadable::Program(text) => {
                write!(f, "the program {text:?} is only known when the line runs")
            }
            Unreadable::Code(text) => {
                write!(f, "the code {text:?} is only known when the line runs")
            }
            Unreadable::Stdin => f.write_str("a shell reads its commands from its input"),
            Unreadable::TooDeep => write!(f, "code is nested more than {MAX_DEPTH} levels deep"),
        }
    }
}

/// One command a line runs, as the `bash` permission sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Part {
    /// The simple command as written in the line.
    pub text: String,
    /// The value the rules match: the program's basename and its words, then the redirections
    /// (`sudo rm -f x` gives `sudo rm -f x` and `rm -f x`); the text itself when unreadable.
    pub pattern: String,
    /// The program and its words (quoted where needed); empty when unreadable.
    pub words: Vec<String>,
    /// Why this part cannot be checked; such a part is at least `ask`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<Unreadable>,
}

/// What a word that may name a file is to the command that has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PathRole {
    /// An argument: a file only if it looks like a path or exists.
    Argument,
    /// A redirection target: always a file.
    Redirect,
    /// The directory `cd` or `pushd` moves to; later relative paths start there.
    Directory,
}

/// A word of the line that may name a file, in the order the line runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathWord {
    /// The word's value (quotes removed, nothing expanded); `None` for a `cd` whose target is
    /// only known when the line runs (later relative paths cannot be placed).
    pub word: Option<String>,
    /// What the word is to its command.
    pub role: PathRole,
}

/// A command line taken apart: the commands it runs and the words that may name files.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Analysis {
    /// Every command, outermost wrapper first, in the order of the line.
    pub parts: Vec<Part>,
    /// Words that may name files, in order.
    pub paths: Vec<PathWord>,
}

/// The commands `line` runs (see the module documentation); pure, never panics.
pub fn commands(line: &str) -> Vec<Part> {
    analyze(line).parts
}

/// The commands `line` runs and the words in it that may name files.
pub fn analyze(line: &str) -> Analysis {
    let mut analysis = Analysis::default();
    analyze_at(line, 0, &mut analysis);
    analysis
}

fn analyze_at(line: &str, depth: usize, out: &mut Analysis) {
    let parsed = parse::parse(line);
    for error in parsed.errors {
        out.parts
            .push(unreadable(&error, Unreadable::Syntax(error.clone())));
    }
    for simple in &parsed.commands {
        command(simple, depth, out);
    }
    for redirect in parsed.loose {
        push_redirect(redirect.target.as_ref(), out);
    }
}

/// The parts and paths of one simple command.
fn command(simple: &Simple, depth: usize, out: &mut Analysis) {
    let redirects: Vec<&str> = simple.redirects.iter().map(|r| r.shown.as_str()).collect();
    let part = |words: Vec<String>| {
        let mut pattern = words.join(" ");
        for redirect in &redirects {
            pattern.push(' ');
            pattern.push_str(redirect);
        }
        Part {
            text: simple.text.clone(),
            pattern,
            words,
            unreadable: None,
        }
    };
    if simple.builtin {
        out.parts
            .push(part(simple.words.iter().map(|w| w.raw.clone()).collect()));
    } else if simple.has_name {
        let peeled = peel::peel(&simple.words);
        for form in peeled.forms.into_iter().chain(peeled.spelled) {
            out.parts.push(part(form));
        }
        if let Some(reason) = peeled.unreadable {
            out.parts.push(unreadable(&simple.text, reason));
        }
        paths(&simple.words, peeled.innermost, out);
        for code in peeled.code {
            if depth + 1 >= MAX_DEPTH {
                out.parts.push(unreadable(&code, Unreadable::TooDeep));
            } else {
                analyze_at(&code, depth + 1, out);
            }
        }
    }
    for redirect in &simple.redirects {
        push_redirect(redirect.target.as_ref(), out);
    }
}

fn unreadable(text: &str, reason: Unreadable) -> Part {
    Part {
        text: text.to_string(),
        pattern: text.trim().to_string(),
        words: Vec::new(),
        unreadable: Some(reason),
    }
}

fn push_redirect(target: Option<&Word>, out: &mut Analysis) {
    if let Some(value) = target.and_then(|w| w.value.clone()) {
        out.paths.push(PathWord {
            word: Some(value),
            role: PathRole::Redirect,
        });
    }
}

/// The words of a command that may name files; `innermost` is where the command that the
/// wrappers run starts (a `cd` there moves the line's directory).
fn paths(words: &[Word], innermost: usize, out: &mut Analysis) {
    let program = words
        .get(innermost)
        .and_then(|w| w.value.as_deref())
        .map(|p| p.rsplit('/').next().unwrap_or(p));
    let mut directory_at = None;
    match program {
        Some("cd" | "pushd") => {
            let target = words.iter().enumerate().skip(innermost + 1).find(|(_, w)| {
                !w.value
                    .as_deref()
                    .is_some_and(|v| v.starts_with('-') && v != "-")
            });
            let word = match target {
                None => Some("~".to_string()),
                Some((at, w)) => {
                    directory_at = Some(at);
                    w.value.clone().filter(|v| v != "-")
                }
            };
            out.paths.push(PathWord {
                word,
                role: PathRole::Directory,
            });
        }
        Some("popd") => out.paths.push(PathWord {
            word: None,
            role: PathRole::Directory,
        }),
        _ => {}
    }
    for (at, word) in words.iter().enumerate().skip(1) {
        if Some(at) == directory_at || at == innermost {
            continue;
        }
        let Some(value) = word.value.as_deref() else {
            continue;
        };
        let path = if value.starts_with("--") {
            value.split_once('=').map(|(_, v)| v)
        } else if value.starts_with('-') {
            None
        } else {
            Some(value)
        };
        if let Some(path) = path.filter(|p| !p.is_empty()) {
            out.paths.push(PathWord {
                word: Some(path.to_string()),
                role: PathRole::Argument,
            });
        }
    }
}

impl Analysis {
    /// The patterns of a `bash` ask: every part's pattern, each once, in order; the line itself
    /// when it runs no command (`FOO=1`).
    pub fn patterns(&self, line: &str) -> Vec<String> {
        let mut patterns = Vec::new();
        for part in &self.parts {
            push_unique(&mut patterns, part.pattern.clone());
        }
        if patterns.is_empty() && !line.trim().is_empty() {
            patterns.push(line.trim().to_string());
        }
        patterns
    }

    /// The patterns an "always" reply approves: each readable part's [`command_prefix`] and
    /// `" *"` (`git status --short` → `git status *`); never an unreadable part.
    pub fn always(&self, line: &str) -> Vec<String> {
        let mut always = Vec::new();
        for part in self.parts.iter().filter(|p| p.unreadable.is_none()) {
            push_unique(
                &mut always,
                format!("{} *", command_prefix(&part.words).join(" ")),
            );
        }
        if self.parts.is_empty()
            && let Some(first) = line.split_whitespace().next()
        {
            always.push(format!("{first} *"));
        }
        always
    }

    /// Whether some part cannot be checked (the ask is then at least `ask`).
    pub fn unreadable(&self) -> bool {
        self.parts.iter().any(|p| p.unreadable.is_some())
    }
}

fn push_unique(list: &mut Vec<String>, item: String) {
    if !list.contains(&item) {
        list.push(item);
    }
}

/// One part of a line and what the rules say about it.
#[derive(Debug, Clone, PartialEq)]
pub struct PartDecision<'a> {
    /// The part.
    pub part: Part,
    /// Its action: the matching rule's (default `ask`), and at least `ask` when unreadable.
    pub action: Action,
    /// The rule that matched its pattern, if any.
    pub rule: Option<&'a Rule>,
}

/// Each part of `line` decided by `rulesets` (last match wins), for explaining a decision;
/// the line's decision is the strictest of them ([`Action::strictest`]).
pub fn explain<'a>(line: &str, rulesets: &[&'a [Rule]]) -> Vec<PartDecision<'a>> {
    let analysis = analyze(line);
    let mut parts = analysis.parts;
    if parts.is_empty() {
        parts.push(Part {
            text: line.to_string(),
            pattern: line.trim().to_string(),
            words: line.split_whitespace().map(str::to_string).collect(),
            unreadable: None,
        });
    }
    parts
        .into_iter()
        .map(|part| {
            let Evaluation { action, rule } = evaluate("bash", &part.pattern, rulesets);
            let action = match &part.unreadable {
                Some(_) => Action::strictest([action, Action::Ask]),
                None => action,
            };
            PartDecision { part, action, rule }
        })
        .collect()
}

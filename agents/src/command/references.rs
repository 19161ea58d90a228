//! `@path` and `@agent` references in a prompt text.
//!
//! A reference is `@` followed by a run of characters that are not whitespace, a backtick or a
//! comma. The `@` must start the text or follow a character that is not alphanumeric, `_` or a
//! backtick, so e-mail addresses (`me@x.com`) and code (`` `@x` ``) are left alone. Trailing
//! sentence punctuation is not part of the name (`see @src/a.rs.` names `src/a.rs`). Like
//! OpenCode's global regular expression, a match consumes its whole run: `@@x` is one candidate,
//! `@x`.

use std::path::{Path, PathBuf};

use crate::tool::paths::normalize;

/// Punctuation trimmed from the end of a reference.
const TRAILING: &[char] = &['.', ',', ')', ':', ';', '!', '?'];

/// What an `@` reference in a prompt names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Reference {
    /// An existing file, as an absolute path.
    File(PathBuf),
    /// An existing directory, as an absolute path.
    Directory(PathBuf),
    /// An agent, by name (a mention that is no path on disk).
    Agent(String),
}

/// Whether an `@` right after `previous` may start a reference.
fn may_precede(previous: Option<char>) -> bool {
    previous.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '`'))
}

/// Whether `c` ends the name of a reference.
fn ends_name(c: char) -> bool {
    c.is_whitespace() || c == '`' || c == ','
}

/// The raw names of the references in `text`, in order, trailing punctuation trimmed.
fn candidates(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut previous: Option<char> = None;
    let mut i = 0;
    while let Some(c) = text[i..].chars().next() {
        if c != '@' || !may_precede(previous) {
            previous = Some(c);
            i += c.len_utf8();
            continue;
        }
        let start = i + 1;
        let rest = &text[start..];
        let len = rest.find(ends_name).unwrap_or(rest.len());
        let name = rest[..len].trim_end_matches(TRAILING);
        if !name.is_empty() {
            found.push(name);
        }
        // The run is consumed; scanning resumes at the character that ended it.
        i = start + len;
        previous = text[..i].chars().next_back();
    }
    found
}

/// Where `name` points: `~/x` below `home`, a relative path below `cwd`, an absolute one as is.
fn resolve(name: &str, cwd: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let path = if name == "~" {
        home?.to_path_buf()
    } else if let Some(rest) = name.strip_prefix("~/") {
        home?.join(rest)
    } else {
        let path = Path::new(name);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            cwd.join(path)
        }
    };
    Some(normalize(&path))
}

/// The references in `text`, in order of appearance and without repeats: existing files and
/// directories (as absolute paths), else names `is_agent` accepts; anything else is skipped.
pub fn find_references(
    text: &str,
    cwd: &Path,
    home: Option<&Path>,
    is_agent: impl Fn(&str) -> bool,
) -> Vec<Reference> {
    let mut references = Vec::new();
    for name in candidates(text) {
        let path = resolve(name, cwd, home);
        let reference = match path.as_deref().map(std::fs::metadata) {
            Some(Ok(meta)) if meta.is_dir() => path.map(Reference::Directory),
            Some(Ok(_)) => path.map(Reference::File),
            _ if is_agent(name) => Some(Reference::Agent(name.to_string())),
            _ => None,
        };
        if let Some(reference) = reference
            && !references.contains(&reference)
        {
            references.push(reference);
        }
    }
    references
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Tree {
        dir: tempfile::TempDir,
    }

    impl Tree {
        fn new() -> Tree {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(dir.path().join("src/sub")).unwrap();
            std::fs::write(dir.path().join("src/a.rs"), "fn a() {}\n").unwrap();
            std::fs::write(dir.path().join("notes.md"), "notes\n").unwrap();
            Tree { dir }
        }

        fn root(&self) -> &Path {
            self.dir.path()
        }

        fn find(&self, text: &str) -> Vec<Reference> {
            find_references(text, self.root(), None, |n| {
                n == "general" || n == "explore"
            })
        }
    }

    #[test]
    fn candidates_follow_the_rules() {
        assert_eq!(candidates("@a b @c"), ["a", "c"]);
        assert_eq!(candidates("me@x.com"), Vec::<&str>::new());
        assert_eq!(candidates("`@x` and _@y and é@z"), Vec::<&str>::new());
        assert_eq!(candidates("(@a) [@b], @c:"), ["a", "b]", "c"]);
        assert_eq!(candidates("@a,@b"), ["a", "b"]);
        assert_eq!(candidates("@@x @"), ["@x"]);
        assert_eq!(candidates("x@a@b @c.d.!?"), ["c.d"]);
        assert_eq!(candidates("日本@x 日本 @y"), ["y"]);
    }

    #[test]
    fn an_existing_file_is_a_file_reference() {
        let t = Tree::new();
        assert_eq!(
            t.find("look at @src/a.rs please"),
            [Reference::File(t.root().join("src/a.rs"))]
        );
    }

    #[test]
    fn an_existing_directory_is_a_directory_reference() {
        let t = Tree::new();
        assert_eq!(
            t.find("@src/sub and @src/"),
            [
                Reference::Directory(t.root().join("src/sub")),
                Reference::Directory(t.root().join("src")),
            ]
        );
    }

    #[test]
    fn an_agent_name_is_an_agent_reference() {
        let t = Tree::new();
        assert_eq!(
            t.find("ask @general, then @explore!"),
            [
                Reference::Agent("general".into()),
                Reference::Agent("explore".into())
            ]
        );
    }

    #[test]
    fn a_path_wins_over_an_agent_of_the_same_name() {
        let t = Tree::new();
        std::fs::write(t.root().join("general"), "").unwrap();
        assert_eq!(
            t.find("@general"),
            [Reference::File(t.root().join("general"))]
        );
    }

    #[test]
    fn email_addresses_are_not_references() {
        let t = Tree::new();
        std::fs::write(t.root().join("x.com"), "").unwrap();
        assert!(t.find("write to me@x.com or general@x.com").is_empty());
    }

    #[test]
    fn backticked_mentions_are_not_references() {
        let t = Tree::new();
        assert!(t.find("use `@notes.md` and `@general`").is_empty());
    }

    #[test]
    fn trailing_punctuation_is_trimmed() {
        let t = Tree::new();
        let file = Reference::File(t.root().join("src/a.rs"));
        assert_eq!(t.find("see @src/a.rs."), std::slice::from_ref(&file));
        assert_eq!(t.find("(see @src/a.rs)"), std::slice::from_ref(&file));
        assert_eq!(t.find("@src/a.rs: @src/a.rs; @src/a.rs?!"), [file]);
    }

    #[test]
    fn home_paths_resolve_below_home() {
        let t = Tree::new();
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("todo.txt"), "").unwrap();
        let found = find_references("@~/todo.txt and @~", t.root(), Some(home.path()), |_| false);
        assert_eq!(
            found,
            [
                Reference::File(home.path().join("todo.txt")),
                Reference::Directory(home.path().to_path_buf()),
            ]
        );
        // Without a home directory, `~/` names nothing.
        assert!(find_references("@~/todo.txt", t.root(), None, |_| false).is_empty());
    }

    #[test]
    fn absolute_and_dotted_paths_are_normalized_and_deduplicated() {
        let t = Tree::new();
        let abs = t.root().join("notes.md");
        let text = format!("@{} @./notes.md @src/../notes.md", abs.display());
        assert_eq!(t.find(&text), [Reference::File(abs)]);
    }

    #[test]
    fn a_missing_path_that_is_no_agent_is_nothing() {
        let t = Tree::new();
        assert!(t.find("@src/missing.rs @nobody @").is_empty());
    }

    #[test]
    fn references_keep_their_order_without_repeats() {
        let t = Tree::new();
        assert_eq!(
            t.find("@general @notes.md @general @src"),
            [
                Reference::Agent("general".into()),
                Reference::File(t.root().join("notes.md")),
                Reference::Directory(t.root().join("src")),
            ]
        );
    }
}

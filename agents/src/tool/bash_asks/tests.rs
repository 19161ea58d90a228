//! Paths of bash command lines on a real directory tree with symbolic links.

use std::path::PathBuf;

use super::*;
use crate::agent::default_rules;

/// `<tmp>/project` (with `.env`, `.env.example`, `src/a.rs`), `<tmp>/outside/secret`, and
/// `<tmp>/home`.
struct Tree {
    _dir: tempfile::TempDir,
    base: PathBuf,
    project: PathBuf,
    rules: Vec<Rule>,
}

impl Tree {
    fn new() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let project = base.join("project");
        for sub in ["project/src", "outside", "home"] {
            std::fs::create_dir_all(base.join(sub)).unwrap();
        }
        for file in [
            "project/.env",
            "project/.env.example",
            "project/src/a.rs",
            "outside/secret",
        ] {
            std::fs::write(base.join(file), "x").unwrap();
        }
        let rules = default_rules(&base.join("data"));
        Tree {
            _dir: dir,
            base,
            project,
            rules,
        }
    }

    fn asks(&self, command: &str) -> Vec<PermissionAsk> {
        let home = self.base.join("home");
        let scope = BashScope {
            directory: &self.project,
            project_root: &self.project,
            home: Some(&home),
            rules: &self.rules,
        };
        bash_asks(command, &scope, Map::new())
    }

    /// The asks other than `bash`, as `(permission, patterns)`.
    fn path_asks(&self, command: &str) -> Vec<(String, Vec<String>)> {
        self.asks(command)
            .into_iter()
            .filter(|a| a.permission != "bash")
            .map(|a| (a.permission, a.patterns))
            .collect()
    }

    fn outside(&self) -> String {
        format!("{}/*", self.base.join("outside").display())
    }
}

fn external(glob: &str) -> (String, Vec<String>) {
    ("external_directory".into(), vec![glob.to_string()])
}

#[test]
fn paths_outside_the_project_ask_external_directory() {
    let t = Tree::new();
    assert_eq!(t.path_asks("head /etc/passwd"), [external("/etc/*")]);
    let out = t.base.join("outside/new.txt");
    assert_eq!(
        t.path_asks(&format!("echo x > {}", out.display())),
        [external(&t.outside())]
    );
    assert_eq!(
        t.path_asks("cat ../outside/secret"),
        [external(&t.outside())]
    );
    assert_eq!(
        t.path_asks("ls ~"),
        [external(&format!("{}/*", t.base.join("home").display()))]
    );
    // `cd` moves the line: a relative path after it is placed there.
    assert_eq!(
        t.path_asks("cd ../outside && cat secret"),
        [external(&t.outside())]
    );
    assert_eq!(t.path_asks("cd /etc; cat hosts"), [external("/etc/*")]);
}

#[test]
fn paths_inside_and_words_that_are_not_paths_ask_nothing() {
    let t = Tree::new();
    for line in [
        "cat src/a.rs > out.txt 2>/dev/null",
        "git commit -m 'fix a/b' && echo hello",
        "ls src; cd src && cat a.rs",
        "cat $FILE > \"$OUT\"",
        "echo x >&2 2>&1",
        "cat .env.example",
        "cargo test --manifest-path=Cargo.toml",
    ] {
        assert_eq!(t.path_asks(line), [], "{line}");
        let bash = t.asks(line).pop().unwrap();
        assert!(!bash.force_ask, "{line}");
    }
}

#[cfg(unix)]
#[test]
fn links_are_followed_to_their_real_paths() {
    let t = Tree::new();
    std::os::unix::fs::symlink("../outside/secret", t.project.join("link")).unwrap();
    assert_eq!(t.path_asks("cat link"), [external(&t.outside())]);
    std::os::unix::fs::symlink(".env", t.project.join("innocent")).unwrap();
    let env = t.project.join(".env").display().to_string();
    assert_eq!(
        t.path_asks("cat innocent"),
        [("read".to_string(), vec![env.clone()])]
    );
    // A dangling link is where a write through it lands.
    std::os::unix::fs::symlink(t.base.join("outside/made"), t.project.join("dangling")).unwrap();
    assert_eq!(t.path_asks("echo x > dangling"), [external(&t.outside())]);
    std::os::unix::fs::symlink(t.base.join("outside"), t.project.join("dir")).unwrap();
    assert_eq!(
        t.path_asks("cd dir && cat secret"),
        [external(&t.outside())]
    );
}

#[test]
fn secret_files_ask_read_as_the_read_tool_does() {
    let t = Tree::new();
    let env = t.project.join(".env").display().to_string();
    let asks = t.asks("cat .env | grep KEY");
    assert_eq!(asks[0].permission, "read");
    assert_eq!(asks[0].patterns, std::slice::from_ref(&env));
    assert_eq!(asks[0].always, ["*"]);
    assert_eq!(asks[1].permission, "bash");
    assert_eq!(
        t.path_asks("cp x.txt .env"),
        [("read".to_string(), vec![env])]
    );
}

#[test]
fn a_relative_path_after_an_unknown_cd_forces_the_question() {
    let t = Tree::new();
    let bash = t.asks("cd \"$DIR\" && cat ./notes").pop().unwrap();
    assert!(bash.force_ask);
    assert!(
        bash.metadata["unreadable"][0]
            .as_str()
            .unwrap()
            .contains("./notes")
    );
    let bash = t.asks("cd \"$DIR\" && cargo test").pop().unwrap();
    assert!(!bash.force_ask);
}

#[test]
fn the_bash_ask_lists_every_command_and_forces_unreadable_ones() {
    let t = Tree::new();
    let bash = t.asks("sudo /bin/rm -f x && $CMD y").pop().unwrap();
    assert_eq!(
        bash.patterns,
        ["sudo /bin/rm -f x", "rm -f x", "/bin/rm -f x", "$CMD y"]
    );
    assert_eq!(bash.always, ["sudo *", "rm *", "/bin/rm *"]);
    assert!(bash.force_ask);
    assert!(
        bash.metadata["unreadable"][0]
            .as_str()
            .unwrap()
            .contains("$CMD")
    );
}

//! Configuration mistakes at the command line: the CLI names them, exits with status 2, and
//! touches nothing stored; variables that match no key are warned about.

use super::support::Sandbox;

/// The data directory the sandbox's runs are pointed at (never created by a refused run).
pub(super) fn data_dir(s: &Sandbox) -> std::path::PathBuf {
    s.project.with_file_name("data")
}

#[test]
fn a_bad_config_exits_2_naming_the_mistake_and_leaves_the_data_directory_alone() {
    let mut s = Sandbox::new();
    let data = data_dir(&s);
    s.env("TASKFORCE_DATA_DIR", data.to_str().unwrap());
    s.file(
        "taskforce.toml",
        "model = \"scripted/echo\"\n[subagent]\nmax_concurent = 4\n",
    );
    let err = s.usage_error(&["run", "hello"]);
    assert_eq!(
        err.trim(),
        "error: unknown key \"max_concurent\" in [subagent] of taskforce.toml; did you mean \"max_concurrent\"?"
    );
    assert!(!data.exists(), "nothing stored is touched");

    s.file("taskforce.toml", "model = \"nowhere/m\"\n");
    let err = s.usage_error(&["run", "hello"]);
    assert!(
        err.contains("model \"nowhere/m\" needs provider \"nowhere\", which is unknown; configure [provider.nowhere] with type and base_url (known providers: openai, "),
        "{err}"
    );
    assert!(!data.exists(), "nothing stored is touched");

    s.file("taskforce.toml", "");
    let err = s.usage_error(&["run", "--model", "nowhere/m", "hello"]);
    assert!(
        err.contains("unknown provider \"nowhere\": configure [provider.nowhere]"),
        "{err}"
    );
    assert!(!data.exists(), "nothing stored is touched");
}

#[test]
fn environment_variables_matching_no_key_are_warned_about() {
    let mut s = Sandbox::new();
    s.env("TASKFORCE_MODLE", "scripted/echo");
    let out = s.ok(&["run", "--model", "scripted/echo", "hi"]);
    assert!(
        out.stderr.contains(
            "warning: environment variable TASKFORCE_MODLE matches no configuration key and is ignored; did you mean TASKFORCE_MODEL?"
        ),
        "{}",
        out.stderr
    );
    assert_eq!(out.stdout.trim(), "hi");
}

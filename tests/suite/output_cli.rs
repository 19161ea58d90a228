//! What the command line prints beyond runs: output into a pipe closed early, the session
//! list of this project or of all, where files are (`paths`), the merged configuration
//! (`config`) and shell completions.

use std::path::Path;

use super::support::Sandbox;

/// The session id a text run names on stderr.
fn session_of(out: &super::support::Output) -> String {
    out.stderr
        .lines()
        .find_map(|l| l.strip_prefix("session: "))
        .unwrap_or_else(|| panic!("no session line: {}", out.stderr))
        .to_string()
}

/// Runs `args` in `dir` with stdout a pipe whose reading end is already closed.
fn run_into_closed_pipe(s: &Sandbox, dir: &Path, args: &[&str]) -> (i32, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = s
        .command(args)
        .current_dir(dir)
        .stdout(writer)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn no_command_panics_when_stdout_is_closed() {
    let s = Sandbox::new();
    s.ok(&["run", "--model", "scripted/echo", "hello"]);
    for args in [
        &["sessions", "list"][..],
        &["sessions", "list", "--json"],
        &["agents", "list"],
        &["commands", "list"],
        &["permission", "explain", "bash", "git push"],
        &["paths"],
        &["config"],
        &["completion", "bash"],
        &["run", "--model", "scripted/echo", "hello"],
        &["demo"],
    ] {
        let (status, stderr) = run_into_closed_pipe(&s, &s.project, args);
        assert_eq!(status, 0, "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("error:"), "{args:?}: {stderr}");
    }
}

#[test]
fn sessions_list_shows_this_projects_sessions_newest_first_and_all_with_a_flag() {
    let s = Sandbox::new();
    let other = s.project.with_file_name("other");
    std::fs::create_dir_all(other.join(".git")).unwrap();
    let run_in = |dir: &Path, args: &[&str]| {
        let out = s.command(args).current_dir(dir).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        super::support::Output {
            status: 0,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    };
    let first = session_of(&run_in(
        &s.project,
        &["run", "--model", "scripted/echo", "one"],
    ));
    let second = session_of(&run_in(
        &s.project,
        &["run", "--model", "scripted/echo", "two"],
    ));
    let elsewhere = session_of(&run_in(
        &other,
        &["run", "--model", "scripted/echo", "three"],
    ));
    let ids = |out: super::support::Output| -> Vec<String> {
        serde_json::from_str::<Vec<serde_json::Value>>(&out.stdout)
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_string())
            .collect()
    };
    let list = |dir: &Path, args: &[&str]| ids(run_in(dir, args));
    assert_eq!(
        list(&s.project, &["sessions", "list", "--json"]),
        [second.clone(), first.clone()]
    );
    assert_eq!(
        list(&other, &["sessions", "list", "--json"]),
        vec![elsewhere.clone()]
    );
    assert_eq!(
        list(&s.project, &["sessions", "list", "--all", "--json"]),
        [elsewhere.clone(), second.clone(), first.clone()]
    );
    let text = run_in(&other, &["sessions", "list", "--all"]).stdout;
    assert!(
        text.contains(&format!("[{}]", s.project.display())),
        "{text}"
    );
    let text = run_in(&other, &["sessions", "list"]).stdout;
    assert!(text.starts_with(&elsewhere), "{text}");
    assert!(!text.contains(&first), "{text}");
}

#[test]
fn paths_names_the_config_files_and_where_data_lives() {
    let s = Sandbox::new();
    s.file("taskforce.toml", "model = \"scripted/echo\"\n");
    let out = s.ok(&["paths"]).stdout;
    let global = s.home.join(".config/taskforce/config.toml");
    let project = s.project.join("taskforce.toml");
    let data = s.home.join(".local/share/taskforce");
    let expected = [
        "config files (lowest precedence first; environment variables come last):".to_string(),
        format!("  missing  {}", global.display()),
        format!("  missing  {}", global.with_extension("json").display()),
        format!("  found    {}", project.display()),
        format!("  missing  {}", project.with_extension("json").display()),
        format!("data directory: {}", data.display()),
        format!("database:       {}", data.join("taskforce.db").display()),
    ];
    assert_eq!(out.lines().collect::<Vec<_>>(), expected);
    assert!(!data.exists(), "paths creates nothing");

    let custom = s.project.with_file_name("elsewhere");
    let json = s
        .ok(&["paths", "--json", "--data-dir", custom.to_str().unwrap()])
        .json();
    assert_eq!(json["data_dir"], custom.display().to_string());
    assert_eq!(
        json["database"],
        custom.join("taskforce.db").display().to_string()
    );
    assert_eq!(json["config_files"][2]["exists"], true);
    assert_eq!(json["config_files"][0]["exists"], false);
}

#[test]
fn paths_and_config_show_a_postgresql_store_without_its_password() {
    let s = Sandbox::new();
    s.file(
        "taskforce.toml",
        "[store]\nurl = \"postgres://ann:s3cret@db.example/tf\"\n",
    );
    let out = s.ok(&["paths"]).stdout;
    assert!(
        out.contains("database:       postgres://ann@db.example:5432/tf"),
        "{out}"
    );
    let config = s.ok(&["config"]).stdout;
    assert!(config.contains("db.example/tf"), "{config}");
    for text in [&out, &config] {
        assert!(!text.contains("s3cret"), "{text}");
    }
}

#[test]
fn config_prints_the_merged_configuration_without_secrets() {
    let mut s = Sandbox::new();
    s.home_file(
        ".config/taskforce/config.toml",
        "model = \"scripted/echo\"\n[subagent]\nmax_depth = 3\n",
    );
    s.file(
        "taskforce.toml",
        r#"
default_agent = "plan"
[provider.proxy]
type = "openai"
base_url = "https://user:hunter22@proxy.example/v1"
api_key = "sk-written-in-the-file"
headers = { Authorization = "Bearer tok-in-a-header", "X-Team" = "blue-team-id" }
[agent.build.options]
apiKey = "sk-in-agent-options"
temperature = 0.5
"#,
    );
    s.env("TASKFORCE_SUBAGENT__MAX_CONCURRENT", "5");
    let toml = s.ok(&["config"]).stdout;
    for secret in [
        "sk-written-in-the-file",
        "tok-in-a-header",
        "blue-team-id",
        "hunter22",
        "sk-in-agent-options",
    ] {
        assert!(!toml.contains(secret), "{secret} shown:\n{toml}");
    }
    for shown in [
        "model = \"scripted/echo\"",
        "default_agent = \"plan\"",
        "max_depth = 3",
        "max_concurrent = 5",
        "api_key = \"[redacted]\"",
        "base_url = \"https://[redacted]@proxy.example/v1\"",
        "temperature = 0.5",
    ] {
        assert!(toml.contains(shown), "{shown} missing:\n{toml}");
    }

    let json = s.ok(&["config", "--json"]).json();
    assert_eq!(json["subagent"]["max_depth"], 3);
    assert_eq!(json["provider"]["proxy"]["api_key"], "[redacted]");
    assert_eq!(
        json["provider"]["proxy"]["headers"]["Authorization"],
        "[redacted]"
    );
    assert_eq!(json["agent"]["build"]["options"]["apiKey"], "[redacted]");
    assert!(!json.to_string().contains("sk-"), "{json}");
}

#[test]
fn completion_scripts_name_the_subcommands() {
    let s = Sandbox::new();
    for shell in ["bash", "zsh", "fish"] {
        let script = s.ok(&["completion", shell]).stdout;
        for sub in ["run", "sessions", "serve", "paths", "config", "completion"] {
            assert!(script.contains(sub), "{shell}: no {sub}");
        }
    }
    assert!(
        s.ok(&["completion", "bash"])
            .stdout
            .contains("complete -F _taskforce")
    );
    assert!(
        s.ok(&["completion", "zsh"])
            .stdout
            .starts_with("#compdef taskforce")
    );
    assert!(
        s.ok(&["completion", "fish"])
            .stdout
            .contains("complete -c taskforce")
    );
    // A broken configuration does not stop completions.
    s.file("taskforce.toml", "nonsense = 1\n");
    s.ok(&["completion", "bash"]);
    let err = s.usage_error(&["completion", "tcsh"]);
    assert!(err.contains("tcsh"), "{err}");
}

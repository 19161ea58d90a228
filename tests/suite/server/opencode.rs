//! The routes OpenCode's TUI calls as it starts and works: providers and models, project and
//! paths, the services taskforce runs none of, text and symbol search, files, sharing, init,
//! client logs, and the keybinds in `/config`.

use serde_json::{Value, json};
use taskforce_testkit::fake_openai::{RecordedRequest, Response};

use super::{answers, array, harness};

/// The keys of `value`, sorted.
fn keys(value: &Value) -> Vec<String> {
    let mut keys: Vec<String> = value
        .as_object()
        .unwrap_or_else(|| panic!("an object: {value}"))
        .keys()
        .cloned()
        .collect();
    keys.sort();
    keys
}

fn sorted(names: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    names.sort();
    names
}

const FAKE_MODELS: &str = "[provider.fake.models.gpt-test]\nname = \"GPT Test\"\ncontext = 128000\noutput = 4096\ncost = { input = 1.5, output = 6.0 }\n";

#[tokio::test(flavor = "multi_thread")]
async fn providers_list_the_configured_models_with_their_limits_and_prices() {
    let h = harness().config(FAKE_MODELS).start(answers("unused")).await;

    let config = h.get("/config/providers").await.ok();
    assert_eq!(keys(&config), ["default", "providers"]);
    assert_eq!(
        config["default"],
        json!({"fake": "gpt-test", "scripted": "echo"})
    );
    let providers = array(config["providers"].clone());
    let ids: Vec<&str> = providers
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["fake", "scripted"],
        "only providers that can make models and have some"
    );
    let fake = &providers[0];
    assert_eq!(
        keys(fake),
        sorted(&["id", "name", "source", "env", "options", "models"])
    );
    assert_eq!(fake["source"], "config");
    let model = &fake["models"]["gpt-test"];
    assert_eq!(
        keys(model),
        sorted(&[
            "id",
            "providerID",
            "api",
            "name",
            "capabilities",
            "cost",
            "limit",
            "status",
            "options",
            "headers",
            "release_date"
        ])
    );
    assert_eq!(model["providerID"], "fake");
    assert_eq!(model["name"], "GPT Test");
    assert_eq!(model["api"]["id"], "gpt-test");
    assert_eq!(model["api"]["npm"], "@ai-sdk/openai-compatible");
    assert!(
        model["api"]["url"]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:")
    );
    assert_eq!(model["limit"], json!({"context": 128000, "output": 4096}));
    assert_eq!(
        model["cost"],
        json!({"input": 1.5, "output": 6.0, "cache": {"read": 0.0, "write": 0.0}})
    );
    assert_eq!(model["capabilities"]["toolcall"], true);
    assert_eq!(model["capabilities"]["input"]["text"], true);
    assert_eq!(model["status"], "active");
    let scripted = &providers[1];
    assert_eq!(scripted["source"], "custom");
    assert_eq!(keys(&scripted["models"]), ["demo", "echo"]);
    // Nothing secret shows.
    assert!(!config.to_string().contains("sk-test-secret"));

    let listed = h.get("/provider").await.ok();
    assert_eq!(keys(&listed), ["all", "connected", "default"]);
    // Local servers need no key, so they count as connected; openai's key is not set.
    assert_eq!(
        listed["connected"],
        json!(["fake", "ollama", "lmstudio", "scripted"])
    );
    let all = array(listed["all"].clone());
    let ids: Vec<&str> = all.iter().map(|p| p["id"].as_str().unwrap()).collect();
    for id in ["fake", "openai", "anthropic", "ollama", "scripted"] {
        assert!(ids.contains(&id), "{id} is listed: {ids:?}");
    }
    let openai = all.iter().find(|p| p["id"] == "openai").unwrap();
    assert_eq!(openai["name"], "OpenAI");
    assert_eq!(openai["env"], json!(["OPENAI_API_KEY"]));
    assert_eq!(openai["api"], "https://api.openai.com/v1");
    let fake = all.iter().find(|p| p["id"] == "fake").unwrap();
    let model = &fake["models"]["gpt-test"];
    assert_eq!(model["tool_call"], true);
    assert_eq!(model["release_date"], "");
    assert_eq!(
        model["cost"],
        json!({"input": 1.5, "output": 6.0, "cache_read": 0.0, "cache_write": 0.0})
    );
    assert_eq!(model["limit"], json!({"context": 128000, "output": 4096}));
    assert_eq!(listed["default"]["fake"], "gpt-test");
    assert!(!listed.to_string().contains("sk-test-secret"));
}

#[tokio::test(flavor = "multi_thread")]
async fn sign_in_flows_are_refused_and_empty_services_answer_their_empty_values() {
    let h = harness().start(answers("unused")).await;
    assert_eq!(h.get("/provider/auth").await.ok(), json!({}));
    let refused = h
        .post("/provider/openai/oauth/authorize", json!({"method": 0}))
        .await
        .error(400, "BadRequest");
    assert!(
        refused.contains("`openai`") && refused.contains("not supported"),
        "{refused}"
    );
    h.post("/provider/openai/oauth/callback", json!({"method": 0}))
        .await
        .error(400, "BadRequest");

    assert_eq!(h.get("/mcp").await.ok(), json!({}));
    assert_eq!(h.get("/experimental/resource").await.ok(), json!({}));
    assert_eq!(h.get("/lsp").await.ok(), json!([]));
    assert_eq!(h.get("/formatter").await.ok(), json!([]));
    assert_eq!(h.get("/find/symbol?query=main").await.ok(), json!([]));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_project_its_paths_and_its_branch() {
    let h = harness()
        .file(".git/HEAD", "ref: refs/heads/main\n")
        .start(answers("unused"))
        .await;
    let project = h.project.display().to_string();

    let paths = h.get("/path").await.ok();
    assert_eq!(
        keys(&paths),
        sorted(&["home", "state", "config", "worktree", "directory"])
    );
    assert_eq!(paths["worktree"], project.as_str());
    assert_eq!(paths["directory"], project.as_str());
    assert_eq!(
        paths["state"],
        h.runtime.paths().data_dir.display().to_string()
    );

    assert_eq!(h.get("/vcs").await.ok(), json!({"branch": "main"}));

    let session = h.session_id().await;
    let projects = array(h.get("/project").await.ok());
    assert_eq!(projects.len(), 1);
    let current = h.get("/project/current").await.ok();
    assert_eq!(projects[0], current);
    assert_eq!(current["id"], h.runtime.project_id());
    assert_eq!(current["worktree"], project.as_str());
    assert_eq!(current["vcs"], "git");
    assert_eq!(current["sandboxes"], json!([]));
    let created = h.get(&format!("/session/{session}")).await.ok()["time"]["created"].clone();
    assert_eq!(current["time"]["created"], created);
    assert!(current["time"]["updated"].as_u64().unwrap() >= created.as_u64().unwrap());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_folder_that_is_not_a_git_repository_has_no_branch() {
    let h = harness().start(answers("unused")).await;
    // The sandbox's `.git` is an empty folder: no HEAD, so no branch.
    assert_eq!(h.get("/vcs").await.ok(), json!({}));
    assert_eq!(h.get("/file/status").await.ok(), json!([]));
}

#[tokio::test(flavor = "multi_thread")]
async fn sharing_is_refused_with_a_bad_request_that_says_why() {
    let h = harness().start(answers("unused")).await;
    let session = h.session_id().await;
    for answer in [
        h.post(&format!("/session/{session}/share"), json!({}))
            .await,
        h.delete(&format!("/session/{session}/share")).await,
    ] {
        let message = answer.error(400, "BadRequest");
        assert!(
            message.contains("sharing is not supported by taskforce"),
            "{message}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn text_search_answers_ripgrep_matches() {
    let h = harness()
        .file(
            "src/lib.rs",
            "pub fn hello() {}\n// say hello twice: hello\n",
        )
        .start(answers("unused"))
        .await;
    let found = array(h.get("/find?pattern=hel%2Bo").await.ok());
    let paths: Vec<&str> = found
        .iter()
        .map(|m| m["path"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["notes.txt", "src/lib.rs", "src/lib.rs"]);
    let second = &found[2];
    assert_eq!(
        keys(second),
        sorted(&[
            "path",
            "lines",
            "line_number",
            "absolute_offset",
            "submatches"
        ])
    );
    assert_eq!(second["lines"]["text"], "// say hello twice: hello\n");
    assert_eq!(second["line_number"], 2);
    assert_eq!(second["absolute_offset"], 18);
    assert_eq!(
        second["submatches"],
        json!([{"match": {"text": "hello"}, "start": 7, "end": 12},
               {"match": {"text": "hello"}, "start": 20, "end": 25}])
    );
    let bad = h
        .get("/find?pattern=(unclosed")
        .await
        .error(400, "BadRequest");
    assert!(bad.contains("pattern"), "{bad}");
    h.get("/find").await.error(400, "BadRequest");
}

#[tokio::test(flavor = "multi_thread")]
async fn files_are_listed_and_read_inside_the_project_only() {
    let h = harness()
        .file(".gitignore", "build/\n")
        .file("build/out.txt", "generated\n")
        .file("src/main.rs", "fn main() {}\n")
        .start(answers("unused"))
        .await;
    let root = array(h.get("/file?path=").await.ok());
    let names: Vec<&str> = root.iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["build", "src", ".gitignore", "notes.txt", "taskforce.toml"]
    );
    let build = &root[0];
    assert_eq!(
        keys(build),
        sorted(&["name", "path", "absolute", "type", "ignored"])
    );
    assert_eq!(build["type"], "directory");
    assert_eq!(build["ignored"], true);
    assert_eq!(root[1]["ignored"], false);
    assert_eq!(root[3]["type"], "file");
    assert_eq!(
        root[3]["absolute"],
        h.project.join("notes.txt").display().to_string()
    );
    let src = array(h.get("/file?path=src").await.ok());
    assert_eq!(src[0]["path"], "src/main.rs");

    assert_eq!(
        h.get("/file/content?path=src/main.rs").await.ok(),
        json!({"type": "text", "content": "fn main() {}\n"})
    );
    std::fs::write(h.project.join("logo.png"), b"\x89PNG\r\n\x1a\n\0\0\0").unwrap();
    let binary = h.get("/file/content?path=logo.png").await.ok();
    assert_eq!(binary["type"], "binary");
    assert_eq!(binary["encoding"], "base64");
    assert_eq!(binary["mimeType"], "image/png");

    for escape in ["../outside.txt", "/etc/hostname", "src/../../outside.txt"] {
        let message = h
            .get(&format!("/file/content?path={escape}"))
            .await
            .error(400, "BadRequest");
        assert!(
            message.contains(escape) && message.contains("outside the project"),
            "{message}"
        );
    }
    h.get("/file?path=..").await.error(400, "BadRequest");
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink("/etc", h.project.join("etc-link")).unwrap();
        let message = h
            .get("/file/content?path=etc-link/hostname")
            .await
            .error(400, "BadRequest");
        assert!(message.contains("etc-link/hostname"), "{message}");
        h.get("/file?path=etc-link").await.error(400, "BadRequest");
    }
    h.get("/file/content?path=missing.txt")
        .await
        .error(404, "NotFoundError");
    h.get("/file/content?path=src")
        .await
        .error(400, "BadRequest");
}

fn git(dir: &std::path::Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(status.status.success(), "git {args:?}: {status:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn file_status_lists_what_git_sees_changed() {
    let h = harness()
        .file("keep.txt", "one\ntwo\nthree\n")
        .file("gone.txt", "bye\n")
        .start(answers("unused"))
        .await;
    std::fs::remove_dir_all(h.project.join(".git")).unwrap();
    git(&h.project, &["init", "-q", "-b", "trunk"]);
    git(&h.project, &["add", "keep.txt", "gone.txt"]);
    git(&h.project, &["commit", "-q", "-m", "start"]);
    std::fs::write(h.project.join("keep.txt"), "one\n2\nthree\nfour\n").unwrap();
    std::fs::remove_file(h.project.join("gone.txt")).unwrap();
    std::fs::write(h.project.join("new.txt"), "a\nb\n").unwrap();

    let mut changed = array(h.get("/file/status").await.ok());
    changed.retain(|c| c["path"] != "notes.txt" && c["path"] != "taskforce.toml");
    changed.sort_by_key(|c| c["path"].as_str().unwrap().to_string());
    assert_eq!(
        changed,
        [
            json!({"path": "gone.txt", "added": 0, "removed": 1, "status": "deleted"}),
            json!({"path": "keep.txt", "added": 2, "removed": 1, "status": "modified"}),
            json!({"path": "new.txt", "added": 2, "removed": 0, "status": "added"}),
        ]
    );
    assert_eq!(h.get("/vcs").await.ok(), json!({"branch": "trunk"}));
}

#[tokio::test(flavor = "multi_thread")]
async fn client_log_lines_are_taken_and_bad_levels_named() {
    let h = harness().start(answers("unused")).await;
    let body =
        json!({"service": "tui", "level": "warn", "message": "slow frame", "extra": {"ms": 40}});
    assert_eq!(h.post("/log", body).await.ok(), json!(true));
    let message = h
        .post(
            "/log",
            json!({"service": "tui", "level": "loud", "message": "x"}),
        )
        .await
        .error(400, "BadRequest");
    assert!(message.contains("level"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn config_carries_every_keybind_with_the_configured_ones_laid_over() {
    let h = harness()
        .config("[keybinds]\nsession_parent = \"ctrl+up\"\n")
        .start(answers("unused"))
        .await;
    let config = h.get("/config").await.ok();
    let keybinds = config["keybinds"].as_object().unwrap();
    assert_eq!(keybinds.len(), 95, "OpenCode's 94 actions and session_tree");
    assert_eq!(keybinds["session_parent"], "ctrl+up");
    assert_eq!(keybinds["leader"], "ctrl+x");
    assert_eq!(keybinds["session_child_cycle"], "<leader>right");
    assert_eq!(keybinds["session_tree"], "<leader>t");
}

/// The model writes AGENTS.md when asked to, then says it did.
fn writes_agents_md(req: &RecordedRequest) -> Response {
    if req.last_role() == Some("tool") {
        Response::text("AGENTS.md written")
    } else if req.contains("AGENTS.md") {
        Response::tool_calls(&[(
            "call_write_1",
            "write",
            r##"{"filePath":"AGENTS.md","content":"# Agents\n\nRun `cargo test`.\n"}"##,
        )])
    } else {
        Response::text("not asked for AGENTS.md")
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn init_runs_the_init_command_which_writes_agents_md() {
    let h = harness().start(writes_agents_md).await;
    let session = h.session_id().await;
    let answer = h
        .post(
            &format!("/session/{session}/init"),
            json!({"providerID": "fake", "modelID": "gpt-test", "messageID": "msg_client"}),
        )
        .await
        .ok();
    assert_eq!(answer, json!(true));
    assert_eq!(
        std::fs::read_to_string(h.project.join("AGENTS.md")).unwrap(),
        "# Agents\n\nRun `cargo test`.\n"
    );
    let messages = h.messages(&session).await;
    let last = messages.last().unwrap();
    assert_eq!(last["info"]["role"], "assistant");
    assert_eq!(super::text_of(last), "AGENTS.md written");
    let half = h
        .post(
            &format!("/session/{session}/init"),
            json!({"providerID": "fake"}),
        )
        .await
        .error(400, "BadRequest");
    assert!(half.contains("modelID"), "{half}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tools_are_listed_with_their_descriptions_and_schemas() {
    let h = harness().start(answers("unused")).await;
    let ids = array(h.get("/experimental/tool/ids").await.ok());
    for id in ["bash", "read", "edit", "task", "question"] {
        assert!(ids.contains(&json!(id)), "{id} in {ids:?}");
    }
    let tools = array(
        h.get("/experimental/tool?provider=fake&model=gpt-test")
            .await
            .ok(),
    );
    assert_eq!(tools.len(), ids.len());
    let read = tools.iter().find(|t| t["id"] == "read").unwrap();
    assert_eq!(keys(read), ["description", "id", "parameters"]);
    assert_eq!(read["parameters"]["type"], "object");
    assert!(!read["description"].as_str().unwrap().is_empty());
    let unknown = h
        .get("/experimental/tool?provider=nobody&model=nope")
        .await
        .error(400, "ProviderModelNotFoundError");
    assert!(unknown.contains("nobody"), "{unknown}");
}

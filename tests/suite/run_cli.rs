//! `taskforce run`, `taskforce sessions` and `taskforce demo` as a user runs them.

use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::script::last_content;

use super::support::{Sandbox, interrupt};

/// Writes a `taskforce.toml` whose model is `fake/gpt-test` at `base_url`.
pub(super) fn configure(s: &Sandbox, base_url: &str) {
    s.file(
        "taskforce.toml",
        &format!(
            "model = \"fake/gpt-test\"\nsmall_model = \"scripted/echo\"\n[provider.fake]\ntype = \"openai\"\nbase_url = \"{base_url}\"\napi_key = \"sk-test\"\nmodels = {{ \"gpt-test\" = {{ cost = {{ input = 1000000.0, output = 2000000.0 }} }} }}\n"
        ),
    );
}

/// The parent (offered the task tool) delegates a `Peek` task to a `general` child, then
/// answers `answer`; the child answers what `child` gives.
pub(super) fn peek_via_general(
    req: &RecordedRequest,
    answer: &str,
    child: impl FnOnce() -> Response,
) -> Response {
    if req.tool_names().contains(&"task") && req.last_role() == Some("user") {
        Response::tool_calls(&[(
            "call_1",
            "task",
            r#"{"description":"Peek","prompt":"peek","subagent_type":"general"}"#,
        )])
    } else if req.tool_names().contains(&"task") {
        Response::text(answer)
    } else {
        child()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_prints_the_answer_and_sessions_show_it() {
    let fake = FakeOpenAi::start(|req| {
        peek_via_general(req, "All good.", || Response::text("child saw things"))
    })
    .await
    .unwrap();
    let s = Sandbox::new();
    configure(&s, &fake.base_url());
    let out = tokio::task::spawn_blocking(move || {
        let out = s.run(&["run", "check", "the", "project"]);
        (s, out)
    })
    .await
    .unwrap();
    let (s, out) = out;
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    assert_eq!(out.stdout.trim(), "All good.");
    assert!(
        out.stderr.contains("@general · Peek"),
        "live view: {}",
        out.stderr
    );
    assert!(out.stderr.contains("done"), "{}", out.stderr);
    // The last line counts the child too: three turns of 10 input tokens (and 10 output
    // tokens in all) at $1 and $2 a token.
    assert_eq!(
        out.stderr.lines().last(),
        Some(
            "usage: 30 input, 10 output, 0 cache read, 0 cache write tokens · $50.0000 (including 1 subagent session)"
        ),
        "{}",
        out.stderr
    );
    let session = out
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("session: "))
        .unwrap()
        .to_string();

    let list = s.ok(&["sessions", "list", "--json"]).json();
    assert_eq!(list.as_array().unwrap().len(), 2);
    let shown = s.ok(&["sessions", "show", &session, "--json"]).json();
    assert_eq!(shown["info"]["id"], session.as_str());
    assert_eq!(shown["messages"].as_array().unwrap().len(), 3);
    assert_eq!(shown["messages"][0]["info"]["role"], "user");
    let tree = s.ok(&["sessions", "tree", &session, "--json"]).json();
    assert_eq!(tree["children"].as_array().unwrap().len(), 1);
    // Own and subtree totals per node: the root's own two turns, its total with the child's.
    let (own, child) = (&tree["usage"], &tree["children"][0]["usage"]);
    assert_eq!(own["input"], 20, "{tree}");
    assert_eq!(child["input"], 10, "{tree}");
    assert_eq!(tree["totalUsage"]["input"], 30, "{tree}");
    assert_eq!(tree["totalUsage"]["cost"], 50.0, "{tree}");
    let (own_cost, child_cost) = (
        own["cost"].as_f64().unwrap(),
        child["cost"].as_f64().unwrap(),
    );
    assert_eq!(own_cost + child_cost, 50.0, "{tree}");
    let text = s.ok(&["sessions", "tree", &session]).stdout;
    assert!(text.contains("Peek (@general subagent)"), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].ends_with(&format!("${own_cost:.4} own, $50.0000 total, 2 turn(s)")),
        "{text}"
    );
    assert!(
        lines[1].starts_with("  ")
            && lines[1].ends_with(&format!(
                "${child_cost:.4} own, ${child_cost:.4} total, 1 turn(s)"
            )),
        "{text}"
    );
    let err = s.usage_error(&["sessions", "show", "ses_doesnotexist"]);
    assert!(err.contains("session not found"), "{err}");
    let deleted = s.ok(&["sessions", "delete", &session]).stdout;
    assert!(deleted.contains("deleted 2 session(s)"), "{deleted}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_exits_non_zero_on_a_provider_error() {
    let fake = FakeOpenAi::start(|_| Response::error(500, "upstream exploded"))
        .await
        .unwrap();
    let s = Sandbox::new();
    configure(&s, &fake.base_url());
    // No retries: the error is reported at once.
    let config = std::fs::read_to_string(s.project.join("taskforce.toml")).unwrap();
    s.file("taskforce.toml", &format!("{config}max_retries = 0\n"));
    let out = tokio::task::spawn_blocking(move || s.run(&["run", "hello"]))
        .await
        .unwrap();
    assert_eq!(
        out.status, 1,
        "stdout: {} stderr: {}",
        out.stdout, out.stderr
    );
    assert!(out.stderr.contains("APIError"), "{}", out.stderr);
    assert!(out.stderr.contains("upstream exploded"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_json_prints_one_event_per_line() {
    let fake = FakeOpenAi::start(|_| Response::text("hi there"))
        .await
        .unwrap();
    let s = Sandbox::new();
    configure(&s, &fake.base_url());
    let out = tokio::task::spawn_blocking(move || s.run(&["run", "--format", "json", "hello"]))
        .await
        .unwrap();
    assert_eq!(out.status, 0, "{}", out.stderr);
    let types: Vec<String> = out
        .stdout
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["type"].as_str().unwrap().to_string()
        })
        .collect();
    assert!(
        types.contains(&"message.part.updated".to_string()),
        "{types:?}"
    );
    // The run ends with the session idle; only the title, named in the background, may
    // arrive after it.
    let idle = types.iter().position(|t| t == "session.idle");
    assert!(idle.is_some(), "{types:?}");
    assert!(
        types[idle.unwrap_or_default() + 1..]
            .iter()
            .all(|t| t == "session.updated"),
        "{types:?}"
    );
    // The answer's text: in its deltas, and whole in its part's last state.
    let events: Vec<serde_json::Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let streamed: String = events
        .iter()
        .filter(|e| e["type"] == "message.part.delta")
        .map(|e| e["properties"]["delta"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, "hi there");
    let last_text = events
        .iter()
        .rev()
        .find(|e| e["type"] == "message.part.updated" && e["properties"]["part"]["type"] == "text")
        .unwrap();
    assert_eq!(last_text["properties"]["part"]["text"], "hi there");
}

#[test]
fn run_rejects_bad_usage_with_status_2() {
    let s = Sandbox::new();
    let err = s.usage_error(&["run", "--model", "nonsense", "hi"]);
    assert!(err.contains("<provider>/<model>"), "{err}");
    let err = s.usage_error(&["run", "--agent", "ghost", "hi"]);
    assert!(err.contains("unknown agent \"ghost\""), "{err}");
    let err = s.usage_error(&["run", "--session", "not-an-id", "hi"]);
    assert!(err.contains("ses_"), "{err}");
}

#[test]
fn demo_runs_offline_and_fans_out_to_three_explorers() {
    let s = Sandbox::new();
    let dir = s.project.join("demo");
    let out = s.ok(&["demo", "--dir", dir.to_str().unwrap()]);
    let explorers = out.stderr.matches("├─ @explore").count();
    assert_eq!(explorers, 3, "{}", out.stderr);
    for tool in ["glob", "grep", "read"] {
        assert!(
            out.stderr.contains(&format!("→ {tool}")),
            "{tool}: {}",
            out.stderr
        );
    }
    assert!(out.stdout.contains("src/server.py"), "{}", out.stdout);
    // The summary quotes the explorers' findings, not the task results' bookkeeping.
    assert!(!out.stdout.contains("<task_metadata>"), "{}", out.stdout);
    // Each explorer made three calls, each counted once.
    assert_eq!(
        out.stderr.matches("done (3 tool calls)").count(),
        3,
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("sessions stored in"), "{}", out.stderr);
    assert!(dir.join("data/taskforce.db").is_file());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_cancels_the_tree_and_exits_130() {
    use std::time::Duration;

    let fake = FakeOpenAi::start(|_| Response::text("this never ends").stall_after(2))
        .await
        .unwrap();
    let s = Sandbox::new();
    configure(&s, &fake.base_url());
    let child = s
        .command(&["run", "wait", "forever"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The run listens for signals before it sends its first request.
    assert!(fake.wait_for_requests(1, Duration::from_secs(20)).await);
    let out = interrupt(child).await;
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(fake.wait_for_disconnects(1, Duration::from_secs(5)).await);
}

#[test]
fn run_without_any_model_is_a_configuration_error() {
    let s = Sandbox::new();
    let err = s.usage_error(&["run", "hello"]);
    assert!(err.contains("no model configured"), "{err}");
    assert!(err.contains("--model"), "{err}");
}

#[test]
fn run_offline_with_the_scripted_echo_model() {
    let s = Sandbox::new();
    let out = s.ok(&["run", "--model", "scripted/echo", "hello", "there"]);
    assert_eq!(out.stdout.trim(), "hello there");
}

#[test]
fn commands_list_shows_built_in_and_markdown_commands() {
    let s = Sandbox::new();
    s.file(
        ".taskforce/command/greet.md",
        "---\ndescription: Greets someone\nagent: plan\n---\nSay hello to $1",
    );
    let json = s.ok(&["commands", "list", "--json"]).json();
    let all = json.as_array().unwrap();
    assert_eq!(all[0]["name"], "review");
    assert_eq!(all[0]["subtask"], true);
    let greet = all.iter().find(|c| c["name"] == "greet").unwrap();
    assert_eq!(greet["description"], "Greets someone");
    assert_eq!(greet["agent"], "plan");
    assert_eq!(greet["template"], "Say hello to $1");
    assert_eq!(greet["hints"], serde_json::json!(["$1"]));
    let text = s.ok(&["commands", "list"]).stdout;
    assert!(
        text.contains("/greet") && text.contains("Greets someone"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_slash_command_from_a_markdown_file() {
    let fake = FakeOpenAi::start(|req| {
        let last = req
            .messages()
            .last()
            .map(|m| m["content"].to_string())
            .unwrap_or_default();
        Response::text(if last.contains("Say hello to Ada") {
            "Hello, Ada!"
        } else {
            "?"
        })
    })
    .await
    .unwrap();
    let s = Sandbox::new();
    configure(&s, &fake.base_url());
    s.file(
        ".taskforce/command/greet.md",
        "---\ndescription: Greets\n---\nSay hello to $1",
    );
    let out = tokio::task::spawn_blocking(move || {
        let ok = s.run(&["run", "/greet", "Ada"]);
        let bad = s.run(&["run", "/nope"]);
        (ok, bad)
    })
    .await
    .unwrap();
    assert_eq!(out.0.status, 0, "{}", out.0.stderr);
    assert_eq!(out.0.stdout.trim(), "Hello, Ada!");
    assert_eq!(out.1.status, 2, "{}", out.1.stderr);
    assert!(
        out.1
            .stderr
            .contains("unknown command \"/nope\"; known commands: review, init, greet"),
        "{}",
        out.1.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_slash_command_as_a_subtask() {
    let fake = FakeOpenAi::start(|req| {
        if !req.tool_names().contains(&"task") {
            Response::text("the child checked the parser")
        } else {
            Response::text("Summary: the parser was checked.")
        }
    })
    .await
    .unwrap();
    let s = Sandbox::new();
    configure(&s, &fake.base_url());
    s.file(
        ".taskforce/command/check.md",
        "---\ndescription: Check a part\nagent: general\nsubtask: true\n---\nCheck $ARGUMENTS",
    );
    let out = tokio::task::spawn_blocking(move || s.run(&["run", "/check", "the parser"]))
        .await
        .unwrap();
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "Summary: the parser was checked.");
    assert!(
        out.stderr.contains("@general · Check a part"),
        "{}",
        out.stderr
    );
    let child = fake
        .requests()
        .into_iter()
        .find(|r| !r.tool_names().contains(&"task"))
        .unwrap();
    assert!(child.contains("Check the parser"));
}

/// A model that runs `echo from-bash`, then says "bash ran", or "bash was refused" when the
/// call was rejected.
pub(super) async fn bash_asker() -> FakeOpenAi {
    FakeOpenAi::start(|req| {
        if req.last_role() == Some("user") {
            Response::tool_calls(&[("c1", "bash", r#"{"command":"echo from-bash"}"#)])
        } else if req.contains("from-bash") && !req.contains("rejected") {
            Response::text("bash ran")
        } else {
            Response::text("bash was refused")
        }
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_runs_never_hang_on_permission_asks() {
    let fake = bash_asker().await;
    let s = Sandbox::new();
    configure(&s, &fake.base_url());
    let config = std::fs::read_to_string(s.project.join("taskforce.toml")).unwrap();
    s.file(
        "taskforce.toml",
        &format!("{config}[permission]\nbash = \"ask\"\n"),
    );
    let (refused, allowed) = tokio::task::spawn_blocking(move || {
        let refused = s.run(&["run", "list files"]);
        let allowed = s.run(&["run", "--yes", "list files"]);
        (refused, allowed)
    })
    .await
    .unwrap();
    assert_eq!(refused.status, 0, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("pass --yes to allow"),
        "{}",
        refused.stderr
    );
    assert_eq!(allowed.status, 0, "{}", allowed.stderr);
    assert_eq!(allowed.stdout.trim(), "bash ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_headless_run_names_the_agents_behind_a_childs_ask() {
    let fake = FakeOpenAi::start(|req| {
        let child = !req.tool_names().contains(&"task");
        match (child, req.last_role()) {
            (true, Some("user")) => {
                Response::tool_calls(&[("c1", "bash", r#"{"command":"echo from-child"}"#)])
            }
            (true, _) => Response::text("the child was refused"),
            (false, Some("user")) => Response::tool_calls(&[(
                "t1",
                "task",
                r#"{"description":"Look","prompt":"look around","subagent_type":"explore"}"#,
            )]),
            (false, _) => Response::text("parent done"),
        }
    })
    .await
    .unwrap();
    let s = Sandbox::new();
    configure(&s, &fake.base_url());
    let config = std::fs::read_to_string(s.project.join("taskforce.toml")).unwrap();
    s.file(
        "taskforce.toml",
        &format!("{config}[permission]\nbash = \"ask\"\n"),
    );
    let out = tokio::task::spawn_blocking(move || s.run(&["run", "look around"]))
        .await
        .unwrap();
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains(r#"denied: build › explore asks: bash "echo from-child" (not interactive; pass --yes to allow)"#),
        "{}",
        out.stderr
    );
    assert_eq!(out.stdout.trim(), "parent done");
}

/// A `taskforce run` killed (SIGKILL) while its background child runs leaves the child's record
/// running; the next runtime on the same data directory sees that its runtime is gone, records
/// the child as interrupted with its output so far, and delivers that into the parent, which
/// answers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_child_of_a_killed_run_is_reported_interrupted_on_the_next_start() {
    use std::time::Duration;

    use taskforce_actors::store::{SqliteStore, Store};
    use taskforce_actors::{Runtime, RuntimeOptions};
    use taskforce_agents::config::{LoadOptions, load};
    use taskforce_testkit::fake_openai::Chunk;

    let fake = FakeOpenAi::start(|req| {
        let last = last_content(req);
        if !req.tool_names().contains(&"task") {
            // The child: two pieces of text far enough apart to be written, then nothing.
            Response::Stream(vec![
                Chunk::role(),
                Chunk::text("partial "),
                Chunk::Sleep(Duration::from_millis(300)),
                Chunk::text("finding"),
                Chunk::Stall,
            ])
        } else if last.contains("<task_result ") {
            Response::text("resumed after the crash")
        } else if req.last_role() == Some("user") {
            background_dig()
        } else {
            // The parent keeps its turn open, so the run is still going when it is killed.
            Response::text("waiting for the digger").stall_after(1)
        }
    })
    .await
    .unwrap();
    let s = Sandbox::new();
    configure(&s, &fake.base_url());
    let data = s.home.join(".local/share/taskforce");
    let mut run = s
        .command(&["run", "dig"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();

    // Wait until the child's partial text is on disk.
    let found = std::sync::Mutex::new(None);
    let (found_ref, data_ref) = (&found, &data);
    taskforce_testkit::eventually_async("the child's partial text on disk", || async move {
        if !data_ref.join("taskforce.db").is_file() {
            return false;
        }
        let store = SqliteStore::open(data_ref).await.unwrap();
        let records = store.undelivered_background().await.unwrap();
        if let Some(record) = records.first() {
            let messages = store.messages(&record.child_id).await.unwrap();
            let text = messages
                .iter()
                .flat_map(|m| m.parts.iter())
                .filter_map(|p| p.as_text())
                .any(|t| t.text.contains("finding"));
            if text {
                *found_ref.lock().unwrap() =
                    Some((record.parent_id.clone(), record.child_id.clone()));
            }
        }
        store.close().await;
        found_ref.lock().unwrap().is_some()
    })
    .await;
    let (parent, child) = found.into_inner().unwrap().unwrap();
    run.kill().unwrap();
    run.wait().unwrap();

    // A command that only reads sessions leaves the orphan to a runtime that stays.
    s.ok(&["sessions", "list"]);
    let store = SqliteStore::open(&data).await.unwrap();
    let records = store.undelivered_background().await.unwrap();
    store.close().await;
    assert_eq!(records.len(), 1);
    assert!(records[0].result.is_none(), "{:?}", records[0].result);

    // The next runtime on that data directory.
    let mut env = std::collections::BTreeMap::new();
    env.insert("HOME".to_string(), s.home.display().to_string());
    let loaded = load(&LoadOptions {
        cwd: s.project.clone(),
        config_file: None,
        data_dir: None,
        env: env.clone(),
    })
    .unwrap();
    assert_eq!(loaded.paths.data_dir, data);
    let mut options = RuntimeOptions::new(loaded);
    options.env = env;
    let rt = tokio::task::spawn_blocking(move || Runtime::spawn_dedicated(options))
        .await
        .unwrap()
        .unwrap();
    let delivered = std::sync::Mutex::new(String::new());
    let (delivered_ref, rt_ref, parent_ref) = (&delivered, &rt, &parent);
    taskforce_testkit::eventually_async(
        "the interrupted result delivered and answered",
        || async move {
            let messages = rt_ref.messages(parent_ref).await.unwrap();
            let answered = messages.iter().any(|m| {
                m.parts
                    .iter()
                    .filter_map(|p| p.as_text())
                    .any(|t| t.text == "resumed after the crash")
            });
            let delivery = messages
                .iter()
                .flat_map(|m| m.parts.iter())
                .filter_map(|p| p.as_text())
                .find(|t| t.text.starts_with("<task_result "))
                .map(|t| t.text.clone());
            match delivery {
                Some(delivery) if answered => {
                    *delivered_ref.lock().unwrap() = delivery;
                    true
                }
                _ => false,
            }
        },
    )
    .await;
    let delivered = delivered.into_inner().unwrap();
    assert!(
        delivered.contains(&format!("session_id=\"{child}\" status=\"error\"")),
        "{delivered}"
    );
    assert!(delivered.contains("partial finding"), "{delivered}");
    assert!(
        delivered.contains("interrupted: the runtime running subagent session"),
        "{delivered}"
    );
    // The record is settled: delivered, and no longer running.
    let store = SqliteStore::open(&data).await.unwrap();
    let store = &store;
    taskforce_testkit::eventually_async("the record marked delivered", || async move {
        store.undelivered_background().await.unwrap().is_empty()
    })
    .await;
}

/// A run whose agent starts a background child waits for the child's result to be delivered
/// and answered, and prints that last answer, instead of exiting (and killing the child) as
/// soon as the first turn ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_waits_for_its_background_children_and_prints_the_last_answer() {
    use std::time::Duration;

    let fake = FakeOpenAi::start(|req| {
        let last = last_content(req);
        if !req.tool_names().contains(&"task") {
            Response::text("the digger found gold").with_delay(Duration::from_millis(100))
        } else if last.contains("<task_result ") {
            Response::text("Final: gold was found.")
        } else if req.last_role() == Some("user") {
            background_dig()
        } else {
            Response::text("A digger is on it.")
        }
    })
    .await
    .unwrap();
    let s = Sandbox::new();
    configure(&s, &fake.base_url());
    let out = tokio::task::spawn_blocking(move || s.run(&["run", "dig"]))
        .await
        .unwrap();
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    // Each answer of the session streams as it comes; the last one ends the output.
    assert_eq!(
        out.stdout, "A digger is on it.\nFinal: gold was found.\n",
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("waiting for 1 background subagent(s)"),
        "{}",
        out.stderr
    );
    let answered = fake.requests().iter().any(|r| {
        r.messages()
            .last()
            .and_then(|m| m["content"].as_str())
            .is_some_and(|c| c.contains("status=\"completed\"") && c.contains("found gold"))
    });
    assert!(answered, "the parent saw the child's result");
}

/// A `task` call starting a `general` child in the background.
fn background_dig() -> Response {
    Response::tool_calls(&[(
        "call_bg",
        "task",
        r#"{"description":"Dig","prompt":"dig deep","subagent_type":"general","background":true}"#,
    )])
}

//! The runtime end to end: real SQLite, real HTTP to a fake OpenAI-compatible server.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use taskforce_actors::store::{
    Approval, MessageWithParts, SessionFilter, SqliteStore, Store, StoreError,
};
use taskforce_actors::{PromptInput, Runtime, RuntimeError, RuntimeOptions};
use taskforce_agents::config::{LoadOptions, load};
use taskforce_agents::id::{MessageId, PartId, SessionId};
use taskforce_agents::model::{Message, PartKind, ToolState, ToolStatus};
use taskforce_agents::model::{Part, Session, Todo};
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};

use taskforce_testkit::Sandbox;
use taskforce_testkit::runtime::{until, until_first_child_runs, until_idle};
use taskforce_testkit::script::{delegating, is_child, task_call};

/// A sandboxed project configured for the runtime.
pub struct Env {
    sandbox: Sandbox,
}

impl Env {
    pub fn new(base_url: &str, extra: &str) -> Env {
        Env::with_config(&format!(
            "model = \"fake/gpt-test\"\nsmall_model = \"scripted/echo\"\n\n[provider.fake]\ntype = \"openai\"\nbase_url = \"{base_url}\"\napi_key = \"sk-test\"\n{extra}"
        ))
    }

    /// A project whose `taskforce.toml` is `config`.
    pub fn with_config(config: &str) -> Env {
        let sandbox = Sandbox::new();
        sandbox.file("notes.txt", "hello from the project\n");
        sandbox.config(config);
        Env { sandbox }
    }

    /// Writes `text` to `rel` below the project.
    pub fn file(&self, rel: &str, text: &str) {
        self.sandbox.file(rel, text);
    }

    /// The project directory.
    pub fn project(&self) -> PathBuf {
        self.sandbox.project.clone()
    }

    /// The environment the runtime sees: only `HOME`, pointing into the sandbox.
    pub fn hermetic_env(&self) -> BTreeMap<String, String> {
        self.sandbox.hermetic_env()
    }

    /// Runtime options for this project, with a hermetic environment.
    pub fn options(&self) -> RuntimeOptions {
        self.options_in(&self.sandbox.project)
    }

    /// Runtime options for another project with the same configuration beside this one,
    /// sharing its data directory.
    pub fn neighbour_options(&self) -> RuntimeOptions {
        let neighbour = self.sandbox.project.with_file_name("neighbour");
        std::fs::create_dir_all(neighbour.join(".git")).unwrap();
        std::fs::copy(
            self.sandbox.project.join("taskforce.toml"),
            neighbour.join("taskforce.toml"),
        )
        .unwrap();
        self.options_in(&neighbour)
    }

    fn options_in(&self, project: &std::path::Path) -> RuntimeOptions {
        options_at(project, &self.sandbox.data, &self.sandbox.home)
    }

    /// The data directory.
    pub fn data(&self) -> PathBuf {
        self.sandbox.data.clone()
    }

    /// The home directory the runtime sees.
    pub fn home(&self) -> PathBuf {
        self.sandbox.home.clone()
    }

    pub async fn runtime(&self) -> Runtime {
        Runtime::start(self.options()).await.unwrap()
    }
}

/// Runtime options for the project at `project` with data in `data` and `HOME` at `home`, as
/// [`Env::options`] makes them (for a runtime in another process of the same test).
pub fn options_at(
    project: &std::path::Path,
    data: &std::path::Path,
    home: &std::path::Path,
) -> RuntimeOptions {
    let mut env = BTreeMap::new();
    env.insert("HOME".to_string(), home.display().to_string());
    let loaded = load(&LoadOptions {
        cwd: project.to_path_buf(),
        config_file: None,
        data_dir: Some(data.to_path_buf()),
        env: env.clone(),
    })
    .unwrap();
    let mut options = RuntimeOptions::new(loaded);
    options.env = env;
    options.arbiters = 2;
    options.retry_base = Duration::from_millis(10);
    options
}

/// Prompts session `id` with `text` in a task of its own, for tests that act while it runs.
pub fn prompt_in_background(
    rt: &Runtime,
    id: &SessionId,
    text: &str,
) -> tokio::task::JoinHandle<Result<MessageWithParts, RuntimeError>> {
    let (rt, id, input) = (rt.clone(), id.clone(), PromptInput::text(text));
    tokio::spawn(async move { rt.prompt(&id, input).await })
}

/// Waits at most `within` for a prompt started with [`prompt_in_background`] and checks that
/// it answered `Cancelled`; `what` names the wait in the failure.
pub async fn expect_cancelled(
    running: tokio::task::JoinHandle<Result<MessageWithParts, RuntimeError>>,
    within: Duration,
    what: &str,
) {
    let result = tokio::time::timeout(within, running)
        .await
        .expect(what)
        .unwrap();
    assert!(matches!(result, Err(RuntimeError::Cancelled)), "{result:?}");
}

fn text_of(message: &MessageWithParts) -> String {
    message
        .parts
        .iter()
        .filter_map(|p| p.as_text().map(|t| t.text.clone()))
        .collect()
}

/// Every tool part of a session's messages.
pub async fn tool_parts(rt: &Runtime, id: &SessionId) -> Vec<(String, ToolState)> {
    rt.messages(id)
        .await
        .unwrap()
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| p.as_tool().map(|t| (t.tool.clone(), t.state.clone())))
        .collect()
}

/// The child session id named in a task output's `<task_metadata>`.
pub fn child_id_in(body: &str) -> Option<String> {
    let at = body.find("session_id: ses_")? + "session_id: ".len();
    Some(
        body[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect(),
    )
}

#[actix_rt::test]
async fn one_arbiter_per_core_pins_each_to_its_own_core() {
    let fake = FakeOpenAi::start(|_: &RecordedRequest| Response::text("hi"))
        .await
        .unwrap();
    let env = Env::new(&fake.base_url(), "");
    // Unpinned, every arbiter may run on every core the process may use.
    let mut options = env.options();
    options.pin_arbiters = false;
    let free = Runtime::start(options).await.unwrap();
    let cores = free.arbiter_cores().await.unwrap();
    assert_eq!(cores.len(), 2);
    let usable = cores[0].clone();
    assert!(!usable.is_empty());
    assert!(cores.iter().all(|c| *c == usable), "{cores:?}");
    free.shutdown().await;

    // One arbiter per usable core: each runs on its own.
    let mut options = env.options();
    options.arbiters = usable.len();
    options.pin_arbiters = true;
    let pinned = Runtime::start(options).await.unwrap();
    let mut homes: Vec<usize> = pinned
        .arbiter_cores()
        .await
        .unwrap()
        .into_iter()
        .map(|c| {
            assert_eq!(c.len(), 1, "pinned to one core: {c:?}");
            c[0]
        })
        .collect();
    homes.sort_unstable();
    assert_eq!(homes, usable);
    pinned.shutdown().await;

    // More arbiters than cores are left to the kernel.
    let mut options = env.options();
    options.arbiters = usable.len() + 1;
    options.pin_arbiters = true;
    let crowded = Runtime::start(options).await.unwrap();
    let cores = crowded.arbiter_cores().await.unwrap();
    assert!(cores.iter().all(|c| *c == usable), "{cores:?}");
    crowded.shutdown().await;
}

#[actix_rt::test]
async fn parent_delegates_to_child_and_reads_its_answer() {
    let fake = FakeOpenAi::start(delegating(
        r#"{"description":"Look around","prompt":"List the files","subagent_type":"general"}"#,
        "The project has one file: notes.txt.",
        "Done: the child says there is one file.",
    ))
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap();
    let answer = rt
        .prompt(&parent.id, PromptInput::text("What is here?"))
        .await
        .unwrap();
    assert_eq!(text_of(&answer), "Done: the child says there is one file.");

    let children = rt.children(&parent.id).await.unwrap();
    assert_eq!(children.len(), 1);
    let child = &children[0];
    assert_eq!(child.parent_id.as_ref(), Some(&parent.id));
    assert_eq!(child.title, "Look around (@general subagent)");

    let parts = tool_parts(&rt, &parent.id).await;
    assert_eq!(parts.len(), 1);
    let ToolState::Completed(done) = &parts[0].1 else {
        panic!("task part should be completed: {:?}", parts[0].1)
    };
    assert_eq!(
        done.output,
        format!(
            "The project has one file: notes.txt.\n\n<task_metadata>\nsession_id: {}\n</task_metadata>",
            child.id
        )
    );
    assert_eq!(done.title, "Look around");
    assert_eq!(done.metadata["sessionId"], child.id.as_str());
    assert_eq!(
        done.metadata["model"],
        serde_json::json!({"providerID": "fake", "modelID": "gpt-test"})
    );

    // The parent's model saw the task result; the child's request offered no delegation tools.
    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    assert!(requests[2].contains("<task_metadata>"));
    let child_request = requests.iter().find(|r| is_child(r)).unwrap();
    for hidden in ["task", "todowrite", "todoread"] {
        assert!(
            !child_request.tool_names().contains(&hidden),
            "{hidden} offered to the child"
        );
    }
    assert!(child_request.tool_names().contains(&"read"));
    assert!(requests[0].tool_names().contains(&"todowrite"));
}

#[actix_rt::test]
async fn resume_continues_the_same_child() {
    let fake = FakeOpenAi::start(|req| {
        if is_child(req) {
            let turns = req.messages().iter().filter(|m| m["role"] == "user").count();
            Response::text(&format!("child turn {turns}"))
        } else if req.last_role() == Some("user") {
            let resume = child_id_in(&req.raw_body)
                .map(|id| format!(r#","session_id":"{id}""#))
                .unwrap_or_default();
            task_call(&format!(
                r#"{{"description":"Count","prompt":"Count your turns","subagent_type":"general"{resume}}}"#
            ))
        } else {
            Response::text("ok")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap();
    rt.prompt(&parent.id, PromptInput::text("first"))
        .await
        .unwrap();
    rt.prompt(&parent.id, PromptInput::text("again"))
        .await
        .unwrap();
    let children = rt.children(&parent.id).await.unwrap();
    assert_eq!(
        children.len(),
        1,
        "the second task call continued the first child"
    );
    let child_messages = rt.messages(&children[0].id).await.unwrap();
    let users = child_messages
        .iter()
        .filter(|m| matches!(*m.info, Message::User(_)))
        .count();
    assert_eq!(users, 2);
    let parts = tool_parts(&rt, &parent.id).await;
    let ToolState::Completed(second) = &parts[1].1 else {
        panic!("second task should complete")
    };
    assert!(
        second.output.starts_with("child turn 2"),
        "{}",
        second.output
    );
}

#[actix_rt::test]
async fn unknown_agent_error_reaches_the_model_and_creates_no_session() {
    let fake = FakeOpenAi::start(|req| {
        if req.last_role() == Some("user") {
            task_call(r#"{"description":"x","prompt":"y","subagent_type":"nope"}"#)
        } else {
            Response::text("understood")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap();
    rt.prompt(&parent.id, PromptInput::text("go"))
        .await
        .unwrap();
    assert!(rt.children(&parent.id).await.unwrap().is_empty());
    let requests = fake.requests();
    assert!(requests[1].contains("Unknown agent type: nope is not a valid agent type"));
}

#[actix_rt::test]
async fn parallel_children_overlap_in_time() {
    let fake = FakeOpenAi::start(|req| {
        if is_child(req) {
            Response::text("partial findings from one explorer").with_delay(Duration::from_millis(40))
        } else if req.last_role() == Some("user") {
            let call = |n: u32| {
                (
                    format!("call_{n}"),
                    format!(r#"{{"description":"part {n}","prompt":"look at part {n}","subagent_type":"explore"}}"#),
                )
            };
            let calls: Vec<(String, String)> = (1..=3).map(call).collect();
            let refs: Vec<(&str, &str, &str)> =
                calls.iter().map(|(id, a)| (id.as_str(), "task", a.as_str())).collect();
            Response::tool_calls(&refs)
        } else {
            Response::text("merged")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap();
    rt.prompt(&parent.id, PromptInput::text("fan out"))
        .await
        .unwrap();
    let children = rt.children(&parent.id).await.unwrap();
    assert_eq!(children.len(), 3);
    let mut spans = Vec::new();
    for child in &children {
        for m in rt.messages(&child.id).await.unwrap() {
            if let Message::Assistant(a) = &*m.info {
                spans.push((a.time.created, a.time.completed.unwrap()));
            }
        }
    }
    let latest_start = spans.iter().map(|s| s.0).max().unwrap();
    let earliest_end = spans.iter().map(|s| s.1).min().unwrap();
    assert!(
        latest_start < earliest_end,
        "every child started before any finished: {spans:?}"
    );
}

#[actix_rt::test]
async fn cancelling_the_parent_stops_a_stalled_child_within_a_second() {
    let fake = FakeOpenAi::start(|req| {
        if is_child(req) {
            Response::text("this answer never finishes because the stream stalls").stall_after(3)
        } else {
            task_call(
                r#"{"description":"Stall","prompt":"take forever","subagent_type":"general"}"#,
            )
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap();
    let running = prompt_in_background(&rt, &parent.id, "go");
    assert!(fake.wait_for_requests(2, Duration::from_secs(10)).await);
    until_first_child_runs(&rt, &parent.id).await;
    rt.cancel(&parent.id).await.unwrap();
    expect_cancelled(
        running,
        Duration::from_secs(1),
        "the parent answered within one second",
    )
    .await;
    assert!(fake.wait_for_disconnects(1, Duration::from_secs(2)).await);

    let child = rt.children(&parent.id).await.unwrap().remove(0);
    // The child's loop makes its last writes, then every session is idle.
    until_idle(&rt).await;
    for id in [&parent.id, &child.id] {
        for (tool, state) in tool_parts(&rt, id).await {
            assert!(state.is_finished(), "{tool} left {}", state.status());
        }
    }
    let ToolState::Error(e) = &tool_parts(&rt, &parent.id).await[0].1 else {
        panic!("the task part should be an error")
    };
    assert!(
        e.error
            .starts_with("SUBAGENT_CANCELLED: Tool execution aborted"),
        "{}",
        e.error
    );
    let metadata = e.metadata.as_ref().unwrap().to_json();
    let details = &metadata["details"];
    assert_eq!(details["error"]["code"], "SUBAGENT_CANCELLED");
    assert_eq!(details["results"][0]["sessionId"], child.id.to_string());
    assert_eq!(details["results"][0]["exitCode"], 130);
    let child_messages = rt.messages(&child.id).await.unwrap();
    let Message::Assistant(a) = &*child_messages.last().unwrap().info else {
        panic!("the child's last message is its answer")
    };
    assert_eq!(a.error.as_ref().unwrap().name(), "MessageAbortedError");
    assert!(
        child_messages
            .last()
            .unwrap()
            .parts
            .iter()
            .all(|p| match &p.kind {
                PartKind::Tool(t) => t.state.is_finished(),
                _ => true,
            })
    );
}

#[actix_rt::test]
async fn child_model_is_the_agents_own_else_the_callers() {
    let fake = FakeOpenAi::start(|req| {
        if is_child(req) {
            Response::text("child")
        } else if req.last_role() == Some("user") {
            let last = req
                .messages()
                .last()
                .map(|m| m["content"].to_string())
                .unwrap_or_default();
            let agent = if last.contains("use explore") {
                "explore"
            } else {
                "general"
            };
            task_call(&format!(
                r#"{{"description":"d","prompt":"p","subagent_type":"{agent}"}}"#
            ))
        } else {
            Response::text("ok")
        }
    })
    .await
    .unwrap();
    let env = Env::new(
        &fake.base_url(),
        "\n[agent.explore]\nmodel = \"fake/explorer-model\"\n",
    );
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap();
    rt.prompt(&parent.id, PromptInput::text("use explore"))
        .await
        .unwrap();
    rt.prompt(&parent.id, PromptInput::text("use general"))
        .await
        .unwrap();
    let child_models: Vec<String> = fake
        .requests()
        .iter()
        .filter(|r| is_child(r))
        .map(|r| r.body["model"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(child_models, ["explorer-model", "gpt-test"]);
    let parent_models: Vec<&str> = fake
        .requests()
        .iter()
        .filter(|r| !is_child(r))
        .map(|r| r.body["model"].as_str().unwrap_or(""))
        .map(|m| if m == "gpt-test" { "gpt-test" } else { "other" })
        .collect();
    assert!(parent_models.iter().all(|m| *m == "gpt-test"));
}

#[actix_rt::test]
async fn everything_survives_a_restart_on_the_same_data_directory() {
    let fake = FakeOpenAi::start(delegating(
        r#"{"description":"Persist","prompt":"p","subagent_type":"general"}"#,
        "child answer",
        "parent answer",
    ))
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let (parent_id, before_parent, before_child, before_tree) = {
        let rt = env.runtime().await;
        let parent = rt.create_session(None, None).await.unwrap();
        rt.prompt(&parent.id, PromptInput::text("remember this"))
            .await
            .unwrap();
        let child = rt.children(&parent.id).await.unwrap().remove(0);
        (
            parent.id.clone(),
            rt.messages(&parent.id).await.unwrap(),
            rt.messages(&child.id).await.unwrap(),
            rt.tree(&parent.id).await.unwrap(),
        )
    };
    let rt = env.runtime().await;
    assert_eq!(rt.messages(&parent_id).await.unwrap(), before_parent);
    let child = rt.children(&parent_id).await.unwrap().remove(0);
    assert_eq!(rt.messages(&child.id).await.unwrap(), before_child);
    let tree = rt.tree(&parent_id).await.unwrap();
    assert_eq!(tree.children.len(), 1);
    assert_eq!(tree.info, before_tree.info);
    assert_eq!(tree.total_usage, before_tree.total_usage);
    assert!(tree.total_usage.turns >= 3);
    // The restarted runtime can continue the stored session.
    let again = rt
        .prompt(&parent_id, PromptInput::text("and now?"))
        .await
        .unwrap();
    assert!(matches!(*again.info, Message::Assistant(_)));
}

#[actix_rt::test]
async fn an_http_500_ends_in_a_clean_error_on_the_assistant_message() {
    let fake = FakeOpenAi::start(|_| Response::error(500, "upstream exploded"))
        .await
        .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let session = rt.create_session(None, None).await.unwrap();
    let answer = rt
        .prompt(&session.id, PromptInput::text("hi"))
        .await
        .unwrap();
    let Message::Assistant(a) = &*answer.info else {
        panic!("expected the assistant message")
    };
    let error = serde_json::to_value(a.error.as_ref().unwrap()).unwrap();
    assert_eq!(error["name"], "APIError");
    assert_eq!(error["data"]["statusCode"], 500);
    assert!(
        error["data"]["message"]
            .as_str()
            .unwrap()
            .contains("upstream exploded")
    );
    assert!(a.time.completed.is_some());
}

#[actix_rt::test]
async fn prompts_queued_while_busy_are_answered_and_cancel_answers_them_too() {
    let fake = FakeOpenAi::start(|req| {
        if req.contains("slow") && req.last_role() == Some("user") {
            Response::text("slow answer done").with_delay(Duration::from_millis(30))
        } else {
            Response::text("quick")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let first = prompt_in_background(&rt, &s.id, "slow please");
    assert!(fake.wait_for_requests(1, Duration::from_secs(5)).await);
    let second = rt
        .prompt(&s.id, PromptInput::text("and this"))
        .await
        .unwrap();
    let first = first.await.unwrap().unwrap();
    assert_eq!(
        first.info.id(),
        second.info.id(),
        "both wait for the same final answer"
    );
    // The queued text reached the model as a system reminder.
    assert!(
        fake.requests()
            .iter()
            .any(|r| r.contains("The user sent the following message"))
    );

    // A cancel answers every waiter with the cancellation error.
    let stalled = FakeOpenAi::start(|_| Response::text("never").stall_after(1))
        .await
        .unwrap();
    let env = Env::new(&stalled.base_url(), "");
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let a = prompt_in_background(&rt, &s.id, "one");
    assert!(stalled.wait_for_requests(1, Duration::from_secs(5)).await);
    // The second prompt is in the session's queue before the cancel.
    let b = rt
        .prompt_queued(&s.id, PromptInput::text("two"))
        .await
        .unwrap();
    let b = tokio::spawn(b);
    rt.cancel(&s.id).await.unwrap();
    for waiter in [a, b] {
        let r = tokio::time::timeout(Duration::from_secs(2), waiter)
            .await
            .unwrap()
            .unwrap();
        assert!(matches!(r, Err(RuntimeError::Cancelled)), "{r:?}");
    }
    let users = rt
        .messages(&s.id)
        .await
        .unwrap()
        .iter()
        .filter(|m| matches!(*m.info, Message::User(_)))
        .count();
    assert_eq!(users, 2, "nothing the user sent is lost");
}

#[actix_rt::test]
async fn each_step_offers_the_tools_of_its_own_prompt_and_agent() {
    // One live session, three prompts: the offered tools follow what each one allows, not what
    // an earlier step of the same loop was offered.
    let fake = FakeOpenAi::start(|_| Response::text("ok")).await.unwrap();
    let env = Env::new(
        &fake.base_url(),
        "\n[agent.reader]\nmode = \"primary\"\ntools = { grep = false }\n",
    );
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    rt.prompt(&s.id, PromptInput::text("one")).await.unwrap();
    let mut no_bash = PromptInput::text("two");
    no_bash.tools = Some([("bash".to_string(), false)].into_iter().collect());
    rt.prompt(&s.id, no_bash).await.unwrap();
    let mut reader = PromptInput::text("three");
    reader.agent = Some("reader".into());
    rt.prompt(&s.id, reader).await.unwrap();
    rt.prompt(&s.id, PromptInput::text("four")).await.unwrap();
    let offered: Vec<Vec<String>> = fake
        .requests()
        .iter()
        .map(|r| r.tool_names().into_iter().map(String::from).collect())
        .collect();
    assert_eq!(offered.len(), 4);
    assert!(offered[0].iter().any(|t| t == "bash"), "{:?}", offered[0]);
    assert!(!offered[1].iter().any(|t| t == "bash"), "{:?}", offered[1]);
    assert_eq!(offered[1].len() + 1, offered[0].len());
    // `question` is denied by default; build allows it, a custom agent does not.
    let reader: Vec<&String> = offered[0]
        .iter()
        .filter(|t| *t != "grep" && *t != "question")
        .collect();
    assert_eq!(
        offered[2].iter().collect::<Vec<_>>(),
        reader,
        "the agent's own tools"
    );
    assert_eq!(offered[3], offered[0]);
}

#[actix_rt::test]
async fn idle_session_actors_stop_and_come_back_from_the_store() {
    let fake = FakeOpenAi::start(|_| Response::text("hello"))
        .await
        .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let mut options = env.options();
    options.idle_stop = Duration::from_millis(50);
    let rt = Runtime::start(options).await.unwrap();
    let s = rt.create_session(None, None).await.unwrap();
    rt.prompt(&s.id, PromptInput::text("one")).await.unwrap();
    assert_eq!(rt.live_sessions().await.unwrap(), 1);
    until(&rt, "the idle actor to stop", |rt| async move {
        rt.live_sessions().await.unwrap() == 0
    })
    .await;
    let again = rt.prompt(&s.id, PromptInput::text("two")).await.unwrap();
    assert_eq!(text_of(&again), "hello");
    assert_eq!(rt.messages(&s.id).await.unwrap().len(), 4);
}

#[actix_rt::test]
async fn the_parent_task_part_follows_the_child_live() {
    use futures::StreamExt;
    use taskforce_actors::bus::{BusItem, Event, Filter};

    let fake = FakeOpenAi::start(|req| {
        if is_child(req) {
            if req.last_role() == Some("user") {
                Response::tool_calls(&[("call_read", "read", r#"{"filePath":"notes.txt"}"#)])
            } else {
                Response::text("notes read")
            }
        } else if req.last_role() == Some("user") {
            task_call(r#"{"description":"Read notes","prompt":"read notes.txt","subagent_type":"general"}"#)
        } else {
            Response::text("ok")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let parent = rt.create_session(None, None).await.unwrap();
    let mut events = rt.subscribe(Filter::Session(parent.id.clone()));
    rt.prompt(&parent.id, PromptInput::text("go"))
        .await
        .unwrap();
    let mut running_summaries = Vec::new();
    while let Ok(Some(BusItem::Event(e))) =
        tokio::time::timeout(Duration::from_millis(300), events.next()).await
    {
        if let Event::PartUpdated { part, .. } = &e.event
            && let PartKind::Tool(t) = &part.kind
            && let ToolState::Running(r) = &t.state
            && let Some(meta) = &r.metadata
        {
            assert_eq!(r.title.as_deref(), Some("Read notes"));
            if let Some(summary) = meta.to_json().get("summary") {
                running_summaries.push(summary.clone());
            }
        }
    }
    let last = running_summaries
        .last()
        .expect("the running part carried a summary");
    assert_eq!(last[0]["tool"], "read");
    let statuses: Vec<&str> = running_summaries
        .iter()
        .map(|s| s[0]["state"]["status"].as_str().unwrap())
        .collect();
    assert!(statuses.contains(&"running"), "{statuses:?}");
    assert!(statuses.contains(&"completed"), "{statuses:?}");
    let ToolState::Completed(done) = &tool_parts(&rt, &parent.id).await[0].1 else {
        panic!("the task completed")
    };
    let summary = done.metadata.summary().expect("the summary is held typed");
    assert_eq!(summary[0].tool, "read");
    assert_eq!(summary[0].state.status, ToolStatus::Completed);
    assert_eq!(
        done.metadata.to_json()["summary"][0]["state"]["status"],
        "completed"
    );
}

#[actix_rt::test]
async fn a_deleted_session_cannot_be_prompted_even_while_its_actor_was_live() {
    let fake = FakeOpenAi::start(|_| Response::text("hi")).await.unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    rt.prompt(&s.id, PromptInput::text("one")).await.unwrap();
    assert_eq!(rt.delete_session(&s.id).await.unwrap().len(), 1);
    let err = rt
        .prompt(&s.id, PromptInput::text("two"))
        .await
        .unwrap_err();
    assert!(matches!(err, RuntimeError::SessionNotFound(_)), "{err:?}");
    assert!(matches!(
        rt.messages(&s.id).await,
        Err(RuntimeError::SessionNotFound(_))
    ));
}

#[actix_rt::test]
async fn steps_record_tokens_and_cost_from_the_configured_prices() {
    let fake = FakeOpenAi::start(|_| Response::text("priced answer"))
        .await
        .unwrap();
    let env = Env::new(
        &fake.base_url(),
        "[provider.fake.models.\"gpt-test\"]\ncost = { input = 1000000.0, output = 2000000.0 }\n",
    );
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let answer = rt.prompt(&s.id, PromptInput::text("hi")).await.unwrap();
    let Message::Assistant(a) = &*answer.info else {
        panic!("expected the answer")
    };
    // Response::text reports 10 prompt tokens and one completion token per word.
    assert_eq!(a.tokens.input, 10);
    assert_eq!(a.tokens.output, 2);
    assert!(
        (a.cost - (10.0 + 2.0 * 2.0)).abs() < 1e-9,
        "cost {}",
        a.cost
    );
    let tree = rt.tree(&s.id).await.unwrap();
    assert!((tree.total_usage.cost - a.cost).abs() < 1e-9);
}

#[actix_rt::test]
async fn a_task_cannot_continue_a_session_of_another_tree() {
    let fake = FakeOpenAi::start(|req| {
        if is_child(req) {
            Response::text("child")
        } else if req.last_role() == Some("user") {
            let last = req
                .messages()
                .last()
                .map(|m| m["content"].to_string())
                .unwrap_or_default();
            let target = last.split("resume ").nth(1).map(|t| {
                t.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                    .to_string()
            });
            let resume = target
                .map(|id| format!(r#","session_id":"{id}""#))
                .unwrap_or_default();
            task_call(&format!(
                r#"{{"description":"d","prompt":"p","subagent_type":"general"{resume}}}"#
            ))
        } else {
            Response::text("done")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let first = rt.create_session(None, None).await.unwrap();
    rt.prompt(&first.id, PromptInput::text("start"))
        .await
        .unwrap();
    let foreign_child = rt.children(&first.id).await.unwrap().remove(0);
    let second = rt.create_session(None, None).await.unwrap();
    rt.prompt(
        &second.id,
        PromptInput::text(format!("resume {}", foreign_child.id)),
    )
    .await
    .unwrap();
    let ToolState::Error(e) = &tool_parts(&rt, &second.id).await[0].1 else {
        panic!("the task call should fail")
    };
    assert!(
        e.error.contains("belongs to another session tree"),
        "{}",
        e.error
    );
    assert!(rt.children(&second.id).await.unwrap().is_empty());
}

/// What a [`WatchedStore`] is told of each commit of sessions, messages and parts, before it
/// is made.
type OnCommit = Box<dyn Fn(&[&Session], &[&Message], &[&Part]) + Send + Sync>;

/// A SQLite store that shows each `put_many` commit to a test first (which may panic in it, as a
/// crashing loop would) and counts its reads of a session's children.
struct WatchedStore(SqliteStore, OnCommit, std::sync::atomic::AtomicUsize);

impl WatchedStore {
    fn new(store: SqliteStore, on_commit: OnCommit) -> Arc<Self> {
        Arc::new(WatchedStore(store, on_commit, Default::default()))
    }

    /// How many times a session's children were read.
    fn children_reads(&self) -> usize {
        self.2.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl Store for WatchedStore {
    async fn put_session(&self, s: &Session) -> Result<(), StoreError> {
        self.0.put_session(s).await
    }
    async fn session(&self, id: &SessionId) -> Result<Option<Session>, StoreError> {
        self.0.session(id).await
    }
    async fn sessions(&self, f: &SessionFilter) -> Result<Vec<Session>, StoreError> {
        self.0.sessions(f).await
    }
    async fn children(&self, id: &SessionId) -> Result<Vec<Session>, StoreError> {
        self.2.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.0.children(id).await
    }
    async fn delete_session(&self, id: &SessionId) -> Result<Vec<Session>, StoreError> {
        self.0.delete_session(id).await
    }
    async fn put_message(&self, m: &Message) -> Result<(), StoreError> {
        self.0.put_message(m).await
    }
    fn queue_message(&self, m: &Message) {
        self.0.queue_message(m)
    }
    async fn message(
        &self,
        s: &SessionId,
        id: &MessageId,
    ) -> Result<Option<MessageWithParts>, StoreError> {
        self.0.message(s, id).await
    }
    async fn messages(&self, s: &SessionId) -> Result<Vec<MessageWithParts>, StoreError> {
        self.0.messages(s).await
    }
    async fn remove_message(&self, s: &SessionId, id: &MessageId) -> Result<(), StoreError> {
        self.0.remove_message(s, id).await
    }
    async fn put_part(&self, p: &Part) -> Result<(), StoreError> {
        self.0.put_part(p).await
    }
    async fn put_many(
        &self,
        s: &[&Session],
        m: &[&Message],
        p: &[&Part],
    ) -> Result<(), StoreError> {
        (self.1)(s, m, p);
        self.0.put_many(s, m, p).await
    }
    fn queue_part(&self, p: &Part) {
        self.0.queue_part(p)
    }
    fn queue_many(&self, s: Vec<Session>, m: Vec<Arc<Message>>, p: Vec<Arc<Part>>) {
        self.0.queue_many(s, m, p)
    }
    async fn remove_part(&self, id: &PartId) -> Result<(), StoreError> {
        self.0.remove_part(id).await
    }
    async fn todos(&self, s: &SessionId) -> Result<Vec<Todo>, StoreError> {
        self.0.todos(s).await
    }
    async fn put_todos(&self, s: &SessionId, t: &[Todo]) -> Result<(), StoreError> {
        self.0.put_todos(s, t).await
    }
    async fn approvals(&self, project: &str) -> Result<Vec<Approval>, StoreError> {
        self.0.approvals(project).await
    }
    async fn add_approvals(&self, project: &str, a: &[Approval]) -> Result<(), StoreError> {
        self.0.add_approvals(project, a).await
    }
}

#[actix_rt::test]
async fn a_crashed_child_becomes_an_error_result_for_its_parent() {
    let fake = FakeOpenAi::start(delegating(
        r#"{"description":"Crash","prompt":"p","subagent_type":"general"}"#,
        "never stored",
        "the parent carried on",
    ))
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let options = env.options();
    let store = taskforce_actors::store::SqliteStore::open(&env.data())
        .await
        .unwrap();
    // A store that panics when asked to save a `general` agent's answer: a child that crashes.
    let crashing: OnCommit = Box::new(|_, messages, _| {
        if messages
            .iter()
            .any(|m| matches!(m, Message::Assistant(a) if a.agent == "general"))
        {
            panic!("simulated crash of the child's loop");
        }
    });
    let rt = Runtime::start_with_store(options, WatchedStore::new(store, crashing))
        .await
        .unwrap();
    let s = rt.create_session(None, None).await.unwrap();
    let answer = tokio::time::timeout(
        Duration::from_secs(5),
        rt.prompt(&s.id, PromptInput::text("go")),
    )
    .await
    .expect("the parent never waits forever")
    .unwrap();
    assert_eq!(text_of(&answer), "the parent carried on");
    let ToolState::Error(e) = &tool_parts(&rt, &s.id).await[0].1 else {
        panic!("the task part is an error")
    };
    assert!(e.error.contains("stopped unexpectedly"), "{}", e.error);
}

#[actix_rt::test]
async fn text_of_a_stalled_stream_is_written_once_it_is_due() {
    let fake = FakeOpenAi::start(|_| Response::text("partial_answer").stall_after(2))
        .await
        .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let session = rt.create_session(None, None).await.unwrap();
    rt.prompt_async(&session.id, PromptInput::text("go"))
        .await
        .unwrap();
    // One delta, then nothing: the text is on disk (and read back) while the call still hangs.
    let data_dir = rt.paths().data_dir.clone();
    let (data_dir, sid) = (&data_dir, &session.id);
    until(&rt, "the streamed text on disk", |_| async move {
        let store = SqliteStore::open(data_dir).await.unwrap();
        let stored = store.messages(sid).await.unwrap();
        store.close().await;
        stored
            .iter()
            .flat_map(|m| m.parts.iter())
            .filter_map(|p| p.as_text())
            .any(|t| t.text == "partial_answer")
    })
    .await;
    assert!(rt.statuses().contains_key(&session.id), "still streaming");
    rt.cancel(&session.id).await.unwrap();
}

/// A short name for a stored or published state: `session`, `user`, `open` (an answer's first
/// state), `answer:<finish>`, a part's type, or `tool:<name>:<status>`.
fn label_message(m: &Message) -> String {
    match m {
        Message::User(_) => "user".into(),
        Message::Assistant(a) if a.time.completed.is_none() => "open".into(),
        Message::Assistant(a) => format!("answer:{}", a.finish.as_deref().unwrap_or("-")),
    }
}

fn label_part(p: &Part) -> String {
    match &p.kind {
        PartKind::Tool(t) => format!("tool:{}:{}", t.tool, t.state.status()),
        _ => serde_json::to_value(p).unwrap()["type"]
            .as_str()
            .unwrap()
            .to_string(),
    }
}

#[actix_rt::test]
async fn a_delegated_prompt_commits_a_steps_end_with_the_next_steps_opening() {
    let delegate = delegating(
        r#"{"description":"Commit","prompt":"p","subagent_type":"general"}"#,
        "child answer",
        "parent answer",
    );
    let fake = FakeOpenAi::start(move |req: &RecordedRequest| {
        if req.contains("fail now") {
            Response::error(400, "refused")
        } else {
            delegate(req)
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let store = SqliteStore::open(&env.data()).await.unwrap();
    let commits: Arc<std::sync::Mutex<Vec<Vec<String>>>> = Arc::default();
    let seen = commits.clone();
    let watch: OnCommit = Box::new(move |sessions, messages, parts| {
        let mut labels: Vec<String> = sessions.iter().map(|_| "session".to_string()).collect();
        labels.extend(messages.iter().map(|m| label_message(m)));
        labels.extend(parts.iter().map(|p| label_part(p)));
        labels.sort();
        seen.lock().unwrap().push(labels);
    });
    let rt = Runtime::start_with_store(env.options(), WatchedStore::new(store, watch))
        .await
        .unwrap();
    let s = rt.create_session(None, None).await.unwrap();
    commits.lock().unwrap().clear();
    let answer = rt.prompt(&s.id, PromptInput::text("go")).await.unwrap();
    assert_eq!(text_of(&answer), "parent answer");
    let got = commits.lock().unwrap().clone();
    let expected: Vec<Vec<&str>> = vec![
        // The parent: its prompt with the first answer's opening.
        vec!["open", "step-start", "text", "user"],
        // The child: its row, its prompt and its answer's opening; then its answer.
        vec!["open", "session", "step-start", "text", "user"],
        vec!["answer:stop", "step-finish", "text"],
        // The parent: its task call's end and its first answer's end with the second opening.
        vec![
            "answer:tool-calls",
            "open",
            "step-finish",
            "step-start",
            "tool:task:completed",
        ],
        vec!["answer:stop", "step-finish", "text"],
    ];
    assert_eq!(got, expected, "one commit per line");

    // A step that fails writes its end at once, and a run with nothing left over commits
    // nothing more.
    commits.lock().unwrap().clear();
    rt.prompt(&s.id, PromptInput::text("fail now"))
        .await
        .unwrap();
    assert_eq!(
        *commits.lock().unwrap(),
        vec![vec!["open", "step-start", "text", "user"], vec!["answer:-"]]
    );

    // Everything is on disk: a runtime started on the same store reads the same history.
    let child = rt.children(&s.id).await.unwrap().remove(0);
    let (parent_before, child_before) = (
        rt.messages(&s.id).await.unwrap(),
        rt.messages(&child.id).await.unwrap(),
    );
    rt.shutdown().await;
    let rt = env.runtime().await;
    let parent_after = rt.messages(&s.id).await.unwrap();
    assert_eq!(parent_after, parent_before);
    assert_eq!(rt.messages(&child.id).await.unwrap(), child_before);
    let labels: Vec<Vec<String>> = parent_after
        .iter()
        .map(|m| {
            std::iter::once(label_message(&m.info))
                .chain(m.parts.iter().map(|p| label_part(p)))
                .collect()
        })
        .collect();
    assert_eq!(
        labels,
        vec![
            vec!["user", "text"],
            vec![
                "answer:tool-calls",
                "step-start",
                "tool:task:completed",
                "step-finish"
            ],
            vec!["answer:stop", "step-start", "text", "step-finish"],
            vec!["user", "text"],
            vec!["answer:-", "step-start"],
        ]
    );
}

#[actix_rt::test]
async fn a_steps_end_is_published_before_the_next_steps_opening() {
    use futures::StreamExt;
    use taskforce_actors::bus::{BusItem, Event, Filter};
    let fake = FakeOpenAi::start(delegating(
        r#"{"description":"Order","prompt":"p","subagent_type":"general"}"#,
        "child answer",
        "parent answer",
    ))
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let mut events = rt.subscribe(Filter::Session(s.id.clone()));
    rt.prompt(&s.id, PromptInput::text("go")).await.unwrap();
    // The final states, in the order they were published (live tool states, streaming text
    // states and deltas left out).
    let mut order = Vec::new();
    while let Ok(Some(BusItem::Event(e))) =
        tokio::time::timeout(Duration::from_millis(200), events.next()).await
    {
        match &e.event {
            Event::MessageUpdated { info } => order.push(label_message(info)),
            Event::PartUpdated { part } => {
                let label = label_part(part);
                let streaming = matches!(&part.kind, PartKind::Text(t)
                    if t.time.as_ref().is_some_and(|t| t.end.is_none()));
                if !streaming && !label.ends_with(":pending") && !label.ends_with(":running") {
                    order.push(label);
                }
            }
            Event::SessionIdle { .. } => order.push("idle".into()),
            _ => {}
        }
    }
    assert_eq!(
        order,
        [
            "user",
            "text",
            "open",
            "step-start",
            "tool:task:completed",
            "step-finish",
            "answer:tool-calls",
            "open",
            "step-start",
            "text",
            "step-finish",
            "answer:stop",
            "idle"
        ]
    );
}

#[actix_rt::test]
async fn concurrent_task_calls_count_a_stored_tree_from_the_store_once() {
    let args: Vec<(String, String)> = (0..20)
        .map(|i| {
            (
                format!("call_{i}"),
                format!(r#"{{"description":"part {i}","prompt":"p","subagent_type":"general"}}"#),
            )
        })
        .collect();
    let fake = FakeOpenAi::start(move |req: &RecordedRequest| {
        if is_child(req) {
            Response::text("part done")
        } else if req.last_role() == Some("user") {
            let calls: Vec<(&str, &str, &str)> = args
                .iter()
                .map(|(id, a)| (id.as_str(), "task", a.as_str()))
                .collect();
            Response::tool_calls(&calls)
        } else {
            Response::text("all parts done")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "[subagent]\nmax_concurrent = 20\n");
    // A session from an earlier runtime: this one does not know its tree.
    let earlier = env.runtime().await;
    let s = earlier.create_session(None, None).await.unwrap();
    earlier.shutdown().await;
    let store = WatchedStore::new(
        SqliteStore::open(&env.data()).await.unwrap(),
        Box::new(|_, _, _| {}),
    );
    let rt = Runtime::start_with_store(env.options(), store.clone())
        .await
        .unwrap();
    let answer = rt.prompt(&s.id, PromptInput::text("split")).await.unwrap();
    assert_eq!(text_of(&answer), "all parts done");
    // The twenty calls started together; one of them read the stored tree (empty), the
    // others waited for its count.
    assert_eq!(store.children_reads(), 1);
    assert_eq!(rt.children(&s.id).await.unwrap().len(), 20);
    // A root this runtime made has no stored tree to read.
    let fresh = rt.create_session(None, None).await.unwrap();
    let reads = store.children_reads();
    rt.prompt(&fresh.id, PromptInput::text("split"))
        .await
        .unwrap();
    assert_eq!(store.children_reads(), reads);
}

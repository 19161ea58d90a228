//! Delegation never widens rights: a child session is bounded by the effective rules of every
//! caller above it, however it is prompted (a task call, a `session_id` continuation, a direct
//! prompt). Real sessions over real HTTP to the fake OpenAI-compatible server.

use std::time::Duration;

use serde_json::json;
use taskforce_actors::bus::Filter;
use taskforce_actors::permission::{PermissionReply, PermissionRequest};
use taskforce_actors::store::MessageWithParts;
use taskforce_actors::{PromptInput, Runtime, RuntimeError};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::{Message, ToolState};
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::runtime::next_ask;
use taskforce_testkit::script::{bash, first_user};
use tokio::task::JoinHandle;

use super::runtime::{Env, child_id_in, tool_parts};

/// A primary agent (not the default one) whose own rules deny or ask for something.
pub(super) fn guarded(permission: &str) -> String {
    format!(
        "[agent.guarded]\nmode = \"primary\"\ndescription = \"A restricted primary\"\npermission = {permission}\n"
    )
}

fn task(prompt: &str, session_id: Option<&str>) -> Response {
    let mut args = json!({"description": "Do it", "prompt": prompt, "subagent_type": "general"});
    if let Some(id) = session_id {
        args["session_id"] = json!(id);
        // The continuing call names another agent: the child still runs its own.
        args["subagent_type"] = json!("explore");
    }
    Response::tool_calls(&[("call_task", "task", &args.to_string())])
}

fn write(path: &str) -> Response {
    let args = json!({"filePath": path, "content": "written by a child\n"}).to_string();
    Response::tool_calls(&[("call_write", "write", &args)])
}

/// A tree of `depth` levels below the root: each level delegates to `general` on its user
/// turn, the deepest one makes `leaf_call`; every level answers `<who> done` afterwards.
pub(super) fn tree(
    depth: usize,
    leaf_call: fn() -> Response,
) -> impl Fn(&RecordedRequest) -> Response + Send + Sync + 'static {
    move |req| {
        let who = first_user(req);
        let level = if who.contains("level-") {
            who.trim_start_matches("level-")
                .parse::<usize>()
                .unwrap_or(0)
        } else {
            0
        };
        if req.last_role() != Some("user") {
            return Response::text(&format!("level {level} done"));
        }
        if level == depth {
            leaf_call()
        } else {
            task(&format!("level-{}", level + 1), None)
        }
    }
}

pub(super) fn go(
    rt: &Runtime,
    id: &SessionId,
    input: PromptInput,
) -> JoinHandle<Result<MessageWithParts, RuntimeError>> {
    let (rt, id) = (rt.clone(), id.clone());
    tokio::spawn(async move { rt.prompt(&id, input).await })
}

pub(super) async fn finished(
    running: JoinHandle<Result<MessageWithParts, RuntimeError>>,
) -> MessageWithParts {
    tokio::time::timeout(Duration::from_secs(20), running)
        .await
        .expect("the prompt was answered")
        .unwrap()
        .unwrap()
}

/// Prompts a new root session as `guarded` and waits for its answer.
pub(super) async fn run_root(rt: &Runtime) -> SessionId {
    let root = rt.create_session(None, None).await.unwrap();
    finished(go(
        rt,
        &root.id,
        PromptInput::text("go").with_agent("guarded"),
    ))
    .await;
    root.id
}

/// The session `depth` levels below `root` (first children all the way).
pub(super) async fn descendant(rt: &Runtime, root: &SessionId, depth: usize) -> SessionId {
    let mut id = root.clone();
    for _ in 0..depth {
        id = rt.children(&id).await.unwrap().remove(0).id;
    }
    id
}

/// The error of `session`'s call of `tool`.
pub(super) async fn tool_error(rt: &Runtime, session: &SessionId, tool: &str) -> String {
    let parts = tool_parts(rt, session).await;
    let state = parts
        .iter()
        .rev()
        .find(|(t, _)| t == tool)
        .map(|(_, s)| s.clone())
        .unwrap_or_else(|| panic!("no {tool} call in {parts:?}"));
    match state {
        ToolState::Error(e) => e.error,
        other => panic!("the {tool} call should have been refused: {other:?}"),
    }
}

/// A tool a caller denies outright is not offered to any model below it, and a call of it
/// anyway fails as a call of an unavailable tool without running.
fn assert_hidden_below_root(fake: &FakeOpenAi, error: &str, tool: &str) {
    let below_root: Vec<RecordedRequest> = fake
        .requests()
        .into_iter()
        .filter(|r| first_user(r) != "go")
        .collect();
    assert!(!below_root.is_empty(), "a child asked its model");
    for req in &below_root {
        assert!(
            !req.tool_names().contains(&tool),
            "{tool} was offered below the root: {:?}",
            req.tool_names()
        );
    }
    assert!(
        error.contains(&format!("Model tried to call unavailable tool '{tool}'")),
        "{error}"
    );
}

pub(super) fn assert_denied(error: &str, permission: &str) {
    assert!(
        error.contains("prevents you from using this specific tool call"),
        "{error}"
    );
    assert!(
        error.contains(&format!("\"permission\":\"{permission}\"")),
        "the denying rule is shown: {error}"
    );
}

/// The agent of `session`'s last user message.
async fn last_agent(rt: &Runtime, session: &SessionId) -> String {
    rt.messages(session)
        .await
        .unwrap()
        .iter()
        .rev()
        .find_map(|m| match &*m.info {
            Message::User(u) => Some(u.agent.clone()),
            Message::Assistant(_) => None,
        })
        .unwrap()
}

#[actix_rt::test]
async fn a_caller_denied_bash_cannot_run_it_through_general() {
    let fake = FakeOpenAi::start(tree(1, || bash("echo escaped > escaped.txt")))
        .await
        .unwrap();
    let env = Env::new(&fake.base_url(), &guarded("{ bash = \"deny\" }"));
    let rt = env.runtime().await;
    let root = run_root(&rt).await;
    let child = descendant(&rt, &root, 1).await;
    assert_hidden_below_root(&fake, &tool_error(&rt, &child, "bash").await, "bash");
    assert!(!env.project().join("escaped.txt").exists());
    assert_eq!(last_agent(&rt, &child).await, "general");
}

#[actix_rt::test]
async fn a_caller_denied_bash_holds_two_delegations_down() {
    let fake = FakeOpenAi::start(tree(2, || bash("echo escaped > escaped.txt")))
        .await
        .unwrap();
    let config = format!(
        "{}[subagent]\nmax_depth = 2\n",
        guarded("{ bash = \"deny\" }")
    );
    let env = Env::new(&fake.base_url(), &config);
    let rt = env.runtime().await;
    let root = run_root(&rt).await;
    let leaf = descendant(&rt, &root, 2).await;
    assert_hidden_below_root(&fake, &tool_error(&rt, &leaf, "bash").await, "bash");
    assert!(!env.project().join("escaped.txt").exists());
}

#[actix_rt::test]
async fn a_caller_denied_edit_cannot_write_through_general() {
    let fake = FakeOpenAi::start(tree(1, || write("escaped.txt")))
        .await
        .unwrap();
    let env = Env::new(&fake.base_url(), &guarded("{ edit = \"deny\" }"));
    let rt = env.runtime().await;
    let root = run_root(&rt).await;
    let child = descendant(&rt, &root, 1).await;
    assert_hidden_below_root(&fake, &tool_error(&rt, &child, "write").await, "write");
    assert!(!env.project().join("escaped.txt").exists());
}

#[actix_rt::test]
async fn a_callers_ask_makes_the_child_ask_through_the_broker() {
    let fake = FakeOpenAi::start(tree(1, || bash("echo asked-first")))
        .await
        .unwrap();
    let env = Env::new(&fake.base_url(), &guarded("{ bash = \"ask\" }"));
    let rt = env.runtime().await;
    let root = rt.create_session(None, None).await.unwrap();
    let mut events = rt.subscribe(Filter::Subtree(root.id.clone()));
    let running = go(&rt, &root.id, PromptInput::text("go").with_agent("guarded"));
    let request = next_ask(&mut events).await;
    let child = descendant(&rt, &root.id, 1).await;
    assert_eq!(request.session_id, child);
    assert_eq!(request.permission, "bash");
    assert_eq!(request.root_session_id, root.id);
    assert_eq!(request.path, ["guarded", "general"]);
    let output = approve_once(&rt, &request, running, &child).await;
    assert!(output.contains("asked-first"), "{output}");
}

/// Approves `request` once, waits for the prompt `running` to finish, and answers the output
/// of the approved (first) tool call of `session`.
pub(super) async fn approve_once(
    rt: &Runtime,
    request: &PermissionRequest,
    running: JoinHandle<Result<MessageWithParts, RuntimeError>>,
    session: &SessionId,
) -> String {
    assert!(
        rt.reply_permission(&request.id, PermissionReply::Once, None)
            .await
    );
    finished(running).await;
    match &tool_parts(rt, session).await[0].1 {
        ToolState::Completed(ran) => ran.output.clone(),
        other => panic!("the approved call ran: {other:?}"),
    }
}

/// A root that delegates on its first prompt and continues that child (by `session_id`) on
/// its second; the child answers its first task with text and tries bash on the second.
fn continuing(req: &RecordedRequest) -> Response {
    let who = first_user(req);
    let child_turns = req
        .messages()
        .iter()
        .filter(|m| m["role"] == "user")
        .count();
    if who == "go" {
        let last_user = req
            .messages()
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .map(|m| m["content"].to_string())
            .unwrap_or_default();
        if req.last_role() != Some("user") {
            return Response::text("root done");
        }
        if last_user.contains("again") {
            let child =
                child_id_in(&req.raw_body.replace("\\n", "\n")).expect("the first task's child id");
            return task("second task", Some(&child));
        }
        return task("first task", None);
    }
    if req.last_role() != Some("user") || child_turns < 2 {
        Response::text("child done")
    } else {
        bash("echo escaped > escaped.txt")
    }
}

#[actix_rt::test]
async fn a_child_continued_by_session_id_runs_its_own_agent_still_bounded() {
    let fake = FakeOpenAi::start(continuing).await.unwrap();
    let env = Env::new(&fake.base_url(), &guarded("{ bash = \"deny\" }"));
    let rt = env.runtime().await;
    let root = rt.create_session(None, None).await.unwrap();
    finished(go(
        &rt,
        &root.id,
        PromptInput::text("go").with_agent("guarded"),
    ))
    .await;
    finished(go(
        &rt,
        &root.id,
        PromptInput::text("again").with_agent("guarded"),
    ))
    .await;
    let children = rt.children(&root.id).await.unwrap();
    assert_eq!(
        children.len(),
        1,
        "the second task continued the first child"
    );
    let child = &children[0].id;
    assert_eq!(
        last_agent(&rt, child).await,
        "general",
        "it runs as the agent it was started for, not the continuing call's"
    );
    assert_hidden_below_root(&fake, &tool_error(&rt, child, "bash").await, "bash");
    assert!(!env.project().join("escaped.txt").exists());
}

/// A child that answers its task with text and, prompted again, tries bash.
fn answers_then_bash(req: &RecordedRequest) -> Response {
    let who = first_user(req);
    if who == "go" {
        return if req.last_role() == Some("user") {
            task("first task", None)
        } else {
            Response::text("root done")
        };
    }
    if req.last_role() != Some("user") {
        return Response::text("child done");
    }
    let turns = req
        .messages()
        .iter()
        .filter(|m| m["role"] == "user")
        .count();
    if turns < 2 {
        Response::text("child done")
    } else {
        bash("echo escaped > escaped.txt")
    }
}

#[actix_rt::test]
async fn a_child_prompted_directly_runs_its_recorded_agent_still_bounded_after_a_restart() {
    let fake = FakeOpenAi::start(answers_then_bash).await.unwrap();
    let env = Env::new(&fake.base_url(), &guarded("{ bash = \"deny\" }"));
    let child = {
        let rt = env.runtime().await;
        let root = run_root(&rt).await;
        let child = descendant(&rt, &root, 1).await;
        rt.shutdown().await;
        child
    };
    // A new runtime on the same data directory: the child's bounds were stored with it.
    let rt = env.runtime().await;
    finished(go(&rt, &child, PromptInput::text("now run it"))).await;
    assert_eq!(
        last_agent(&rt, &child).await,
        "general",
        "a prompt naming no agent runs the child's own, never the default primary"
    );
    assert_hidden_below_root(&fake, &tool_error(&rt, &child, "bash").await, "bash");
    assert!(!env.project().join("escaped.txt").exists());
}

#[actix_rt::test]
async fn a_callers_deny_of_some_commands_holds_in_the_child_with_the_rule_shown() {
    let fake = FakeOpenAi::start(tree(1, || bash("rm -f keep.txt")))
        .await
        .unwrap();
    let env = Env::new(
        &fake.base_url(),
        &guarded("{ bash = { \"*\" = \"allow\", \"rm *\" = \"deny\" } }"),
    );
    std::fs::write(env.project().join("keep.txt"), "kept\n").unwrap();
    let rt = env.runtime().await;
    let root = run_root(&rt).await;
    let child = descendant(&rt, &root, 1).await;
    let offered_to_child = fake
        .requests()
        .into_iter()
        .filter(|r| first_user(r) != "go")
        .all(|r| r.tool_names().contains(&"bash"));
    assert!(
        offered_to_child,
        "bash stays offered: only some commands are denied"
    );
    assert_denied(&tool_error(&rt, &child, "bash").await, "bash");
    assert!(env.project().join("keep.txt").exists());
}

//! Slash commands, subtask parts, @agent mentions, prompt references and hooks, end to end.

use std::sync::{Arc, Mutex};

use serde_json::Value;
use taskforce_actors::store::MessageWithParts;
use taskforce_actors::{HookCall, Hooks, PartInput, PromptInput, RuntimeError};
use taskforce_agents::model::{Message, PartKind, ToolState};
use taskforce_agents::provider::ModelRequest;
use taskforce_agents::tool::ToolOutput;
use taskforce_testkit::fake_openai::{FakeOpenAi, Response};
use taskforce_testkit::script::{delegating, is_child, last_content};

use super::runtime::{Env, tool_parts};

fn user_parts(messages: &[MessageWithParts]) -> Vec<Vec<&'static str>> {
    messages
        .iter()
        .filter(|m| matches!(*m.info, Message::User(_)))
        .map(|m| m.parts.iter().map(|p| p.type_name()).collect())
        .collect()
}

#[actix_rt::test]
async fn an_inline_command_prompts_under_its_agent() {
    let fake = FakeOpenAi::start(|_| Response::text("hello back"))
        .await
        .unwrap();
    let env = Env::new(&fake.base_url(), "");
    env.file(
        ".taskforce/command/greet.md",
        "---\ndescription: Greets\nagent: plan\n---\nSay hello to $1 from $ARGUMENTS",
    );
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let answer = rt
        .command(&s.id, "greet", "Ada Lovelace", None, None)
        .await
        .unwrap();
    assert!(matches!(&*answer.info, Message::Assistant(a) if a.agent == "plan"));
    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    assert!(last_content(&requests[0]).contains("Say hello to Ada Lovelace from Ada Lovelace"));
    let messages = rt.messages(&s.id).await.unwrap();
    let Message::User(user) = &*messages[0].info else {
        panic!("a user message first")
    };
    assert_eq!(user.agent, "plan");
}

#[actix_rt::test]
async fn a_subtask_command_runs_the_subagent_then_hands_back_to_the_caller() {
    let fake = FakeOpenAi::start(|req| {
        if is_child(req) {
            Response::text("the review found two issues")
        } else {
            Response::text("summary: two issues to fix")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    env.file(
        ".taskforce/command/check.md",
        "---\ndescription: Check things\nagent: general\nsubtask: true\n---\nCheck $ARGUMENTS carefully",
    );
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let answer = rt
        .command(&s.id, "check", "the parser", None, None)
        .await
        .unwrap();
    assert_eq!(
        answer
            .parts
            .iter()
            .filter_map(|p| p.as_text())
            .map(|t| t.text.clone())
            .collect::<String>(),
        "summary: two issues to fix"
    );

    let messages = rt.messages(&s.id).await.unwrap();
    // user [subtask] → assistant (general, task part) → user [synthetic summarize] → assistant.
    assert_eq!(messages.len(), 4);
    let Message::User(first) = &*messages[0].info else {
        panic!()
    };
    assert_eq!(first.agent, "build", "the message stays the caller's");
    assert_eq!(messages[0].parts.len(), 1);
    let PartKind::Subtask(task) = &messages[0].parts[0].kind else {
        panic!("exactly one subtask part")
    };
    assert_eq!(task.prompt, "Check the parser carefully");
    assert_eq!(task.description, "Check things");
    assert_eq!(task.agent, "general");
    assert_eq!(task.command.as_deref(), Some("check"));
    let Message::Assistant(runner) = &*messages[1].info else {
        panic!()
    };
    assert_eq!(runner.agent, "general");
    assert_eq!(runner.finish.as_deref(), Some("tool-calls"));
    let tool = messages[1].parts[0].as_tool().unwrap();
    assert_eq!(tool.tool, "task");
    let ToolState::Completed(done) = &tool.state else {
        panic!("the task completed: {:?}", tool.state)
    };
    assert!(done.output.starts_with("the review found two issues"));
    let summarize = messages[2].parts[0].as_text().unwrap();
    assert_eq!(summarize.text, taskforce_actors::SUMMARIZE);
    assert_eq!(summarize.synthetic, Some(true));
    let Message::Assistant(last) = &*messages[3].info else {
        panic!()
    };
    assert_eq!(last.agent, "build");

    // What the caller's model saw.
    let caller = fake.requests().into_iter().rfind(|r| !is_child(r)).unwrap();
    assert!(caller.contains("The following tool was executed by the user"));
    assert!(caller.contains("Summarize the task tool output above and continue with your task."));
    assert!(caller.contains("the review found two issues"));
}

#[actix_rt::test]
async fn subagent_commands_are_subtasks_unless_they_say_otherwise() {
    let fake = FakeOpenAi::start(|_| Response::text("ok")).await.unwrap();
    let env = Env::new(&fake.base_url(), "");
    env.file(
        ".taskforce/command/look.md",
        "---\nagent: explore\n---\nLook around",
    );
    env.file(
        ".taskforce/command/inline.md",
        "---\nagent: explore\nsubtask: false\n---\nLook here",
    );
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    rt.command(&s.id, "look", "", None, None).await.unwrap();
    let t = rt.create_session(None, None).await.unwrap();
    rt.command(&t.id, "inline", "", None, None).await.unwrap();
    assert_eq!(
        user_parts(&rt.messages(&s.id).await.unwrap())[0],
        ["subtask"]
    );
    let inline = rt.messages(&t.id).await.unwrap();
    assert_eq!(user_parts(&inline)[0], ["text"]);
    assert!(matches!(&*inline[0].info, Message::User(u) if u.agent == "explore"));
}

#[actix_rt::test]
async fn the_subtask_model_is_the_commands_then_the_subagents_then_the_callers() {
    let fake = FakeOpenAi::start(|_| Response::text("ok")).await.unwrap();
    let env = Env::new(
        &fake.base_url(),
        "\n[agent.general]\nmodel = \"fake/agent-model\"\n",
    );
    env.file(
        ".taskforce/command/a.md",
        "---\nagent: general\nmodel: fake/command-model\n---\nA",
    );
    env.file(".taskforce/command/b.md", "---\nagent: general\n---\nB");
    env.file(".taskforce/command/c.md", "---\nagent: explore\n---\nC");
    let rt = env.runtime().await;
    for name in ["a", "b", "c"] {
        let s = rt.create_session(None, None).await.unwrap();
        rt.command(&s.id, name, "", None, None).await.unwrap();
    }
    let child_models: Vec<String> = fake
        .requests()
        .iter()
        .filter(|r| is_child(r))
        .map(|r| r.body["model"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(child_models, ["command-model", "agent-model", "gpt-test"]);
}

#[actix_rt::test]
async fn a_failing_subtask_never_stops_the_loop() {
    let fake = FakeOpenAi::start(|req| {
        if is_child(req) {
            Response::error(500, "child exploded")
        } else {
            Response::text("carried on")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    env.file(
        ".taskforce/command/boom.md",
        "---\nagent: general\n---\nBoom",
    );
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let answer = rt.command(&s.id, "boom", "", None, None).await.unwrap();
    assert!(matches!(&*answer.info, Message::Assistant(a) if a.error.is_none()));
    let ToolState::Error(e) = &tool_parts(&rt, &s.id).await[0].1 else {
        panic!("the task part is an error")
    };
    assert!(
        e.error
            .starts_with("Tool execution failed: SUBAGENT_FAILED: "),
        "{}",
        e.error
    );
    assert!(e.error.contains("child exploded"), "{}", e.error);
    let metadata = e.metadata.as_ref().unwrap().to_json();
    let details = &metadata["details"];
    assert_eq!(details["error"]["code"], "SUBAGENT_FAILED");
    assert_eq!(details["results"][0]["exitCode"], 1);
}

#[actix_rt::test]
async fn unknown_commands_and_agents_are_clear_errors() {
    let fake = FakeOpenAi::start(|_| Response::text("ok")).await.unwrap();
    let env = Env::new(&fake.base_url(), "");
    env.file(
        ".taskforce/command/ghost.md",
        "---\nagent: nobody\n---\nBoo",
    );
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let err = rt.command(&s.id, "nope", "", None, None).await.unwrap_err();
    assert!(matches!(err, RuntimeError::UnknownCommand(_)));
    let text = err.to_string();
    assert!(
        text.contains("/nope") && text.contains("review") && text.contains("ghost"),
        "{text}"
    );

    let mut events = rt.subscribe(taskforce_actors::bus::Filter::Session(s.id.clone()));
    let err = rt
        .command(&s.id, "ghost", "", None, None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("nobody"), "{err}");
    use futures::StreamExt;
    let item = tokio::time::timeout(std::time::Duration::from_secs(2), events.next())
        .await
        .unwrap()
        .unwrap();
    let taskforce_actors::bus::BusItem::Event(e) = item else {
        panic!("expected session.error")
    };
    let v = serde_json::to_value(&e.event).unwrap();
    assert_eq!(v["type"], "session.error");
    let message = v["properties"]["error"]["data"]["message"]
        .as_str()
        .unwrap();
    assert!(
        message.starts_with("Agent not found: \"nobody\". Available agents: build, plan"),
        "{message}"
    );
    assert!(fake.requests().is_empty(), "nothing reached the model");
}

#[actix_rt::test]
async fn templates_run_shell_commands_and_read_referenced_files() {
    let fake = FakeOpenAi::start(|_| Response::text("ok")).await.unwrap();
    let env = Env::new(&fake.base_url(), "");
    env.file(
        ".taskforce/command/ctx.md",
        "---\nagent: build\n---\nBranch: !`echo main-branch` Broken: !`exit 3` Read @notes.txt and @src please",
    );
    env.file("src/lib.rs", "pub fn f() {}\n");
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    rt.command(&s.id, "ctx", "", None, None).await.unwrap();
    let request = &fake.requests()[0];
    assert!(request.contains("Branch: main-branch"));
    assert!(request.contains("Error executing command"));
    assert!(request.contains("Called the Read tool with the following input"));
    assert!(
        request.contains("hello from the project"),
        "the file's contents reach the model"
    );
    assert!(
        request.contains("lib.rs"),
        "the directory's listing reaches the model"
    );
    let messages = rt.messages(&s.id).await.unwrap();
    let kinds = &user_parts(&messages)[0];
    assert_eq!(
        kinds.iter().filter(|k| **k == "file").count(),
        2,
        "{kinds:?}"
    );
    let mimes: Vec<String> = messages[0]
        .parts
        .iter()
        .filter_map(|p| match &p.kind {
            PartKind::File(f) => Some(f.mime.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(mimes, ["text/plain", "application/x-directory"]);
}

#[actix_rt::test]
async fn agent_mentions_hint_the_model_and_skip_the_task_ask() {
    let fake = FakeOpenAi::start(delegating(
        r#"{"description":"d","prompt":"p","subagent_type":"explore"}"#,
        "explored",
        "done",
    ))
    .await
    .unwrap();
    // Without the mention, this task call would be refused by the rules.
    let env = Env::new(
        &fake.base_url(),
        "\n[permission.task]\nexplore = \"deny\"\n",
    );
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let parts = rt
        .resolve_prompt(&s.id, "@explore find the parser")
        .await
        .unwrap();
    assert_eq!(
        parts,
        [
            PartInput::text("@explore find the parser"),
            PartInput::Agent {
                name: "explore".into()
            }
        ]
    );
    rt.prompt(
        &s.id,
        PromptInput {
            parts,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let messages = rt.messages(&s.id).await.unwrap();
    assert_eq!(user_parts(&messages)[0], ["text", "agent", "text"]);
    let hint = messages[0].parts[2].as_text().unwrap();
    assert_eq!(
        hint.text,
        " Use the above message and context to generate a prompt and call the task tool with subagent: explore . Invoked by user; guaranteed to exist."
    );
    assert_eq!(hint.synthetic, Some(true));
    let ToolState::Completed(done) = &tool_parts(&rt, &s.id).await[0].1 else {
        panic!("the mention let the task run")
    };
    assert!(done.output.starts_with("explored"));

    // A second turn without a mention: the rules apply again.
    rt.prompt(&s.id, PromptInput::text("again")).await.unwrap();
    let ToolState::Error(e) = &tool_parts(&rt, &s.id).await[1].1 else {
        panic!("denied without a mention")
    };
    assert!(
        e.error
            .starts_with("PERMISSION_DENIED: The user has specified a rule"),
        "{}",
        e.error
    );
}

/// A hook that records calls, rewrites some, refuses others, and edits model requests.
#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl Hooks for Recorder {
    async fn tool_execute_before(
        &self,
        call: &HookCall<'_>,
        args: &mut Value,
    ) -> Result<(), String> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("before {}", call.tool));
        if call.tool == "bash"
            && args["command"]
                .as_str()
                .is_some_and(|c| c.contains("rm -rf"))
        {
            return Err("blocked by policy: rm -rf is not allowed".into());
        }
        if call.tool == "read" {
            args["filePath"] = Value::String("notes.txt".into());
        }
        Ok(())
    }

    async fn tool_execute_after(&self, call: &HookCall<'_>, output: &mut ToolOutput) {
        self.calls
            .lock()
            .unwrap()
            .push(format!("after {}", call.tool));
        if call.tool == "read" {
            output.output.push_str("\n[checked by the host]");
        }
    }

    fn chat_request(
        &self,
        _: &taskforce_agents::id::SessionId,
        _: &str,
        request: &mut ModelRequest,
    ) {
        request.system.push("HOST POLICY: be brief".into());
        request.temperature = Some(0.1);
    }
}

#[actix_rt::test]
async fn hooks_rewrite_refuse_and_see_every_call_subtasks_included() {
    let fake = FakeOpenAi::start(|req| {
        if is_child(req) {
            Response::text("child ok")
        } else if req.last_role() == Some("user") && !req.contains("Summarize the task") {
            Response::tool_calls(&[
                ("c1", "bash", r#"{"command":"rm -rf /tmp/nothing"}"#),
                ("c2", "read", r#"{"filePath":"does-not-exist.txt"}"#),
            ])
        } else {
            Response::text("ok")
        }
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), "");
    env.file(
        ".taskforce/command/sub.md",
        "---\nagent: general\n---\nDo it",
    );
    let rt = env.runtime().await;
    let recorder = Arc::new(Recorder::default());
    rt.add_hooks(recorder.clone());
    let s = rt.create_session(None, None).await.unwrap();
    rt.prompt(&s.id, PromptInput::text("go")).await.unwrap();
    let parts = tool_parts(&rt, &s.id).await;
    let ToolState::Error(blocked) = &parts[0].1 else {
        panic!("bash refused")
    };
    assert_eq!(blocked.error, "blocked by policy: rm -rf is not allowed");
    let ToolState::Completed(read) = &parts[1].1 else {
        panic!("read rewritten: {:?}", parts[1].1)
    };
    assert!(read.output.contains("hello from the project"));
    assert!(read.output.ends_with("[checked by the host]"));
    let first = &fake.requests()[0];
    assert!(first.contains("HOST POLICY: be brief"));
    assert_eq!(first.body["temperature"], 0.1);

    let t = rt.create_session(None, None).await.unwrap();
    rt.command(&t.id, "sub", "", None, None).await.unwrap();
    let calls = recorder.calls.lock().unwrap().clone();
    assert!(calls.contains(&"before task".to_string()), "{calls:?}");
    assert!(calls.contains(&"after task".to_string()), "{calls:?}");
    for expected in ["before bash", "before read", "after read"] {
        assert!(
            calls.contains(&expected.to_string()),
            "{expected}: {calls:?}"
        );
    }
    assert!(
        !calls.contains(&"after bash".to_string()),
        "a refused call has no after"
    );
}

#[actix_rt::test]
async fn commands_list_the_built_in_review_first() {
    let fake = FakeOpenAi::start(|_| Response::text("ok")).await.unwrap();
    let env = Env::new(&fake.base_url(), "");
    env.file(".taskforce/command/mine.md", "Mine $1");
    let rt = env.runtime().await;
    let names: Vec<&str> = rt.commands().list().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["review", "init", "mine"]);
    let review = rt.commands().get("review").unwrap();
    assert_eq!(review.subtask, Some(true));
    assert_eq!(
        review.description.as_deref(),
        Some("review changes [commit|branch|pr], defaults to uncommitted")
    );
}

#[actix_rt::test]
async fn template_commands_are_asked_like_bash_calls() {
    use futures::StreamExt;
    use taskforce_actors::bus::{BusItem, Event, Filter};
    use taskforce_actors::permission::PermissionReply;

    let fake = FakeOpenAi::start(|_| Response::text("ok")).await.unwrap();
    let env = Env::new(
        &fake.base_url(),
        "\n[permission.bash]\n\"rm *\" = \"deny\"\n\"touch *\" = \"ask\"\n",
    );
    env.file("victim", "keep");
    env.file(
        ".taskforce/command/risky.md",
        "---\nagent: build\n---\nA: !`rm victim` B: !`echo $1` C: !`touch made` D: $1",
    );
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let mut events = rt.subscribe(Filter::Session(s.id.clone()));
    let running = {
        let (rt, id) = (rt.clone(), s.id.clone());
        tokio::spawn(async move {
            rt.command(&id, "risky", "\"x; rm victim $(rm victim)\"", None, None)
                .await
        })
    };
    // `touch` needs the user: the ask comes through the broker, as a bash call's would.
    let request = loop {
        match tokio::time::timeout(std::time::Duration::from_secs(10), events.next()).await {
            Ok(Some(BusItem::Event(e))) => {
                if let Event::PermissionAsked(request) = &e.event {
                    break (**request).clone();
                }
            }
            other => panic!("no permission ask came: {other:?}"),
        }
    };
    assert_eq!(request.permission, "bash");
    assert_eq!(request.patterns, ["touch made"]);
    assert!(!env.project().join("made").exists(), "not before the reply");
    assert!(
        rt.reply_permission(&request.id, PermissionReply::Once, None)
            .await
    );
    tokio::time::timeout(std::time::Duration::from_secs(10), running)
        .await
        .unwrap()
        .unwrap()
        .unwrap();

    assert!(env.project().join("victim").exists(), "rm was denied");
    assert!(
        env.project().join("made").exists(),
        "touch ran once allowed"
    );
    let request = &fake.requests()[0];
    assert!(
        request.contains("A: Error executing command: The user has specified a rule"),
        "{}",
        last_content(request)
    );
    assert!(
        request.contains("B: x; rm victim $(rm victim) C:"),
        "{}",
        last_content(request)
    );
}

#[actix_rt::test]
async fn files_a_client_attaches_reach_the_model_as_text_or_as_an_image() {
    let fake = FakeOpenAi::start(|_| Response::text("seen")).await.unwrap();
    let env = Env::new(&fake.base_url(), "");
    env.file("notes/plan.txt", "step one: attach files\n");
    std::fs::write(env.project().join("shot.png"), [0x89, b'P', b'N', b'G']).unwrap();
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let url = |rel: &str| format!("file://{}", env.project().join(rel).display());
    let input = PromptInput {
        parts: vec![
            PartInput::text("look at these"),
            PartInput::File {
                mime: "text/plain".into(),
                url: url("notes/plan.txt"),
                filename: Some("plan.txt".into()),
            },
            PartInput::File {
                mime: "image/png".into(),
                url: url("shot.png"),
                filename: Some("shot.png".into()),
            },
            PartInput::File {
                mime: "text/markdown".into(),
                url: "data:text/markdown;base64,IyBpbmxpbmUgbm90ZQ==".into(),
                filename: Some("note.md".into()),
            },
        ],
        ..PromptInput::default()
    };
    rt.prompt(&s.id, input).await.unwrap();
    let request = &fake.requests()[0];
    assert!(
        request.contains("step one: attach files"),
        "the text file's contents reach the model"
    );
    assert!(
        request.contains("data:image/png;base64,iVBORw=="),
        "the image goes as image content: {}",
        request.raw_body
    );
    assert!(
        request.contains("# inline note"),
        "a data: URL's text is inline"
    );
}

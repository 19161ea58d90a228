//! The web tools through a real runtime: a scripted model (the fake OpenAI server) calls
//! webfetch, websearch and codesearch against the test kit's fake web, with permission asks,
//! deny rules, the search backend switched on and off, and a delegated child.

use serde_json::{Value, json};
use taskforce_actors::bus::Filter;
use taskforce_actors::permission::PermissionReply;
use taskforce_actors::{PromptInput, Runtime};
use taskforce_agents::id::SessionId;
use taskforce_agents::model::{PartKind, ToolState, ToolStateCompleted};
use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};
use taskforce_testkit::fake_web::FakeWeb;
use taskforce_testkit::runtime::next_ask;
use taskforce_testkit::script::{first_user, is_child};

use super::delegated_permissions::{finished, go};
use super::runtime::{Env, tool_parts};

/// A model that calls `tool` with `args` on a user turn, then answers `done`.
fn calls(
    tool: &'static str,
    args: Value,
) -> impl Fn(&RecordedRequest) -> Response + Send + Sync + 'static {
    let args = args.to_string();
    move |req| {
        if req.last_role() == Some("user") && !has_tool_result(req) {
            Response::tool_calls(&[("call_web", tool, &args)])
        } else {
            Response::text("done")
        }
    }
}

/// Whether `req` already carries a tool result (an image attachment follows it as a user
/// message, so the last role alone does not tell).
fn has_tool_result(req: &RecordedRequest) -> bool {
    req.messages().iter().any(|m| m["role"] == "tool")
}

/// Runs one prompt on a new session of `rt` and returns the session.
async fn prompt(rt: &Runtime, text: &str) -> SessionId {
    let s = rt.create_session(None, None).await.unwrap();
    finished(go(rt, &s.id, PromptInput::text(text))).await;
    s.id
}

async fn only_state(rt: &Runtime, session: &SessionId) -> ToolState {
    let parts = tool_parts(rt, session).await;
    assert_eq!(parts.len(), 1, "{parts:?}");
    parts[0].1.clone()
}

fn search_config(web: &FakeWeb, engine: &str) -> String {
    match engine {
        "exa" => format!(
            "[search]\nengine = \"exa\"\nbase_url = \"{}\"\n",
            web.url("/exa/mcp")
        ),
        _ => format!(
            "[search]\nengine = \"searxng\"\nurl = \"{}\"\n",
            web.url("/searxng")
        ),
    }
}

/// A model's one webfetch of `path` on the fake web with `config` added, run to its end: the
/// completed call and the model's requests.
async fn fetched(path: &str, config: &str) -> (ToolStateCompleted, Vec<RecordedRequest>) {
    let web = FakeWeb::start().await.unwrap();
    let fake = FakeOpenAi::start(calls("webfetch", json!({"url": web.url(path)})))
        .await
        .unwrap();
    let env = Env::new(&fake.base_url(), config);
    let rt = env.runtime().await;
    let s = prompt(&rt, "fetch it").await;
    let ToolState::Completed(done) = only_state(&rt, &s).await else {
        panic!("the fetch of {path} completed");
    };
    (done, fake.requests())
}

#[actix_rt::test]
async fn a_model_fetches_a_page_as_markdown() {
    let (done, requests) = fetched("/page.html", "").await;
    assert!(done.output.contains("# Welcome"), "{}", done.output);
    assert!(requests[0].tool_names().contains(&"webfetch"));
    let result = &requests[1].messages().last().unwrap()["content"];
    assert!(result.as_str().unwrap().contains("# Welcome"), "{result}");
}

#[actix_rt::test]
async fn a_fetched_image_reaches_the_model_after_the_tool_result() {
    let (done, requests) = fetched("/image.png", "").await;
    assert_eq!(done.output, "Image fetched successfully");
    let attachments = done.attachments.expect("the image is kept on the part");
    let PartKind::File(file) = &attachments[0].kind else {
        panic!("a file part: {:?}", attachments[0]);
    };
    assert_eq!(file.mime, "image/png");
    assert!(file.url.starts_with("data:image/png;base64,"));
    // The next request: the tool's text result, then the image in a user message.
    let messages = requests[1].messages().to_vec();
    let n = messages.len();
    assert_eq!(messages[n - 2]["role"], "tool");
    assert_eq!(messages[n - 1]["role"], "user");
    assert_eq!(messages[n - 1]["content"][0]["type"], "image_url");
    assert_eq!(
        messages[n - 1]["content"][0]["image_url"]["url"],
        json!(file.url)
    );
}

#[actix_rt::test]
async fn a_model_that_takes_no_images_reads_a_note_instead() {
    let config = "[provider.fake.models.gpt-test]\nattachment = false\n";
    let (done, requests) = fetched("/image.png", config).await;
    assert!(done.attachments.is_some(), "the part keeps the image");
    let messages = requests[1].messages();
    let last = &messages[messages.len() - 1];
    assert_eq!(last["role"], "user");
    assert_eq!(
        last["content"],
        "ERROR: Cannot read image (this model does not support image input). Inform the user."
    );
}

#[actix_rt::test]
async fn an_ask_rule_on_the_address_asks_before_fetching() {
    let web = FakeWeb::start().await.unwrap();
    let page = web.url("/page.html");
    // The model spells the address its own way; the ask names its normal form.
    let spelled = page.replace("http://", "HTTP://");
    let fake = FakeOpenAi::start(calls("webfetch", json!({"url": spelled})))
        .await
        .unwrap();
    let rules = format!("[permission.webfetch]\n\"{}\" = \"ask\"\n", web.url("/*"));
    let env = Env::new(&fake.base_url(), &rules);
    let rt = env.runtime().await;
    let s = rt.create_session(None, None).await.unwrap();
    let mut events = rt.subscribe(Filter::Session(s.id.clone()));
    let running = go(&rt, &s.id, PromptInput::text("fetch"));
    let ask = next_ask(&mut events).await;
    assert_eq!(ask.permission, "webfetch");
    assert_eq!(ask.patterns, std::slice::from_ref(&page));
    assert!(
        web.requests().is_empty(),
        "nothing is fetched before the reply"
    );
    assert!(
        rt.reply_permission(&ask.id, PermissionReply::Once, None)
            .await
    );
    finished(running).await;
    assert!(matches!(
        only_state(&rt, &s.id).await,
        ToolState::Completed(_)
    ));
    assert_eq!(web.requests_to("/page.html").len(), 1);
}

#[actix_rt::test]
async fn a_deny_rule_is_not_outrun_by_another_spelling_of_the_address() {
    let web = FakeWeb::start().await.unwrap();
    let spelled = web
        .url("/page.html")
        .replace("http://127.0.0.1", "HTTP://127.0.0.1")
        .replace("/page", "/%70age");
    let fake = FakeOpenAi::start(calls("webfetch", json!({"url": spelled})))
        .await
        .unwrap();
    let rules = format!(
        "[permission.webfetch]\n\"{}\" = \"deny\"\n",
        web.url("/page*")
    );
    let env = Env::new(&fake.base_url(), &rules);
    let rt = env.runtime().await;
    let s = prompt(&rt, "fetch").await;
    let ToolState::Error(refused) = only_state(&rt, &s).await else {
        panic!("the fetch was refused");
    };
    assert!(
        refused
            .error
            .contains("prevents you from using this specific tool call")
    );
    assert!(web.requests().is_empty(), "the page was not fetched");
}

#[actix_rt::test]
async fn without_a_search_backend_the_search_tools_are_not_offered() {
    let fake = FakeOpenAi::start(|_| Response::text("hi")).await.unwrap();
    let env = Env::new(&fake.base_url(), "");
    let rt = env.runtime().await;
    prompt(&rt, "hello").await;
    let names = fake.requests()[0]
        .tool_names()
        .iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>();
    assert!(names.contains(&"webfetch".to_string()), "{names:?}");
    assert!(!names.contains(&"websearch".to_string()), "{names:?}");
    assert!(!names.contains(&"codesearch".to_string()), "{names:?}");
}

#[actix_rt::test]
async fn websearch_and_codesearch_go_to_exa() {
    let web = FakeWeb::start().await.unwrap();
    let fake = FakeOpenAi::start(|req| {
        if has_tool_result(req) {
            return Response::text("done");
        }
        Response::tool_calls(&[
            (
                "call_ws",
                "websearch",
                r#"{"query": "actix actors", "numResults": 2}"#,
            ),
            (
                "call_cs",
                "codesearch",
                r#"{"query": "tokio::select!", "tokensNum": 2000}"#,
            ),
        ])
    })
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), &search_config(&web, "exa"));
    let rt = env.runtime().await;
    let s = prompt(&rt, "search").await;
    let names = fake.requests()[0].tool_names().join(",");
    assert!(names.ends_with("webfetch,websearch,codesearch"), "{names}");
    let parts = tool_parts(&rt, &s).await;
    let outputs: Vec<String> = parts
        .iter()
        .map(|(_, state)| match state {
            ToolState::Completed(c) => c.output.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(
        outputs[0].starts_with("Title: Result for actix actors"),
        "{outputs:?}"
    );
    assert!(outputs[1].contains("(2000 tokens)"), "{outputs:?}");
    assert_eq!(web.requests_to("/exa/mcp").len(), 2);
}

#[actix_rt::test]
async fn websearch_goes_to_searxng() {
    let web = FakeWeb::start().await.unwrap();
    let fake = FakeOpenAi::start(calls(
        "websearch",
        json!({"query": "sqlite wal", "numResults": 1}),
    ))
    .await
    .unwrap();
    let env = Env::new(&fake.base_url(), &search_config(&web, "searxng"));
    let rt = env.runtime().await;
    let s = prompt(&rt, "search").await;
    let ToolState::Completed(done) = only_state(&rt, &s).await else {
        panic!("the search completed");
    };
    assert_eq!(
        done.output,
        "Title: sqlite wal result 1\nURL: https://web.example/1\nText: About sqlite wal, number 1."
    );
    let description = fake.requests()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "websearch")
        .map(|t| t["function"]["description"].as_str().unwrap().to_string())
        .unwrap();
    assert!(description.contains("SearXNG"), "{description}");
}

#[actix_rt::test]
async fn a_child_gets_no_web_tool_its_caller_is_denied() {
    let web = FakeWeb::start().await.unwrap();
    let page = web.url("/page.html");
    let fake = FakeOpenAi::start(move |req| {
        if is_child(req) {
            if has_tool_result(req) {
                return Response::text("child done");
            }
            let args = json!({"url": page}).to_string();
            return Response::tool_calls(&[("call_child", "webfetch", &args)]);
        }
        if has_tool_result(req) {
            return Response::text("parent done");
        }
        let args = json!({"description": "Look it up", "prompt": "look it up", "subagent_type": "explore"});
        Response::tool_calls(&[("call_task", "task", &args.to_string())])
    })
    .await
    .unwrap();
    // The caller may not search, and may not fetch this site; explore allows both.
    let config = format!(
        "{}[agent.build.permission]\nwebsearch = \"deny\"\ncodesearch = \"deny\"\n[agent.build.permission.webfetch]\n\"{}\" = \"deny\"\n",
        search_config(&web, "exa"),
        web.url("/*")
    );
    let env = Env::new(&fake.base_url(), &config);
    let rt = env.runtime().await;
    let root = prompt(&rt, "delegate").await;
    let child = rt.children(&root).await.unwrap().remove(0).id;
    let child_request = fake
        .requests()
        .into_iter()
        .find(|r| first_user(r) == "look it up")
        .unwrap();
    let names = child_request.tool_names().join(",");
    assert!(
        !names.contains("websearch") && !names.contains("codesearch"),
        "{names}"
    );
    assert!(
        names.contains("webfetch"),
        "only one site is denied: {names}"
    );
    let ToolState::Error(refused) = only_state(&rt, &child).await else {
        panic!("the child's fetch was refused");
    };
    assert!(
        refused
            .error
            .contains("prevents you from using this specific tool call")
    );
    assert!(web.requests().is_empty());
}

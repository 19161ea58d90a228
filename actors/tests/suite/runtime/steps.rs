//! What one model step offers and records: the tools its prompt and agent allow, an HTTP error
//! on the answer, tokens and cost, and streamed text written while the call still hangs.

use taskforce_actors::PromptInput;
use taskforce_actors::store::{SqliteStore, Store};
use taskforce_agents::model::Message;
use taskforce_testkit::fake_openai::{FakeOpenAi, Response};
use taskforce_testkit::runtime::until;

use super::Env;

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

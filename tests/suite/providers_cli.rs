//! Providers known by name: a model of theirs works with only the key in the environment, and
//! a missing key or an unknown provider is refused, saying what to set, before anything is
//! stored.

use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};

use super::config_cli::data_dir;
use super::support::{Output, Sandbox};

/// Runs `args` in a project configured with `config` plus `[provider.<provider>]` at a fake
/// OpenAI server answering `answer`, with `OPENAI_API_KEY` set to `key`; checks the run
/// printed `answer` and answers the requests the server saw.
async fn run_against_fake(
    provider: &str,
    config: &str,
    key: &str,
    args: &'static [&'static str],
    answer: &'static str,
) -> Vec<RecordedRequest> {
    let fake = FakeOpenAi::start(move |_| Response::text(answer))
        .await
        .unwrap();
    let mut s = Sandbox::new();
    s.file(
        "taskforce.toml",
        &format!(
            "{config}small_model = \"scripted/echo\"\n[provider.{provider}]\nbase_url = \"{}\"\n",
            fake.base_url()
        ),
    );
    s.env("OPENAI_API_KEY", key);
    let out: Output = tokio::task::spawn_blocking(move || s.run(args))
        .await
        .unwrap();
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    assert_eq!(out.stdout.trim(), answer);
    fake.requests()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_known_provider_takes_its_key_from_its_own_variable() {
    // Only the endpoint is configured (a test server stands in for OpenAI's); the type and the
    // key come from the built-in entry.
    let requests = run_against_fake(
        "openai",
        "",
        "sk-from-the-environment",
        &["run", "--model", "openai/gpt-4o-mini", "hi"],
        "hello from openai",
    )
    .await;
    assert!(!requests.is_empty());
    for r in &requests {
        assert_eq!(
            r.header("authorization"),
            Some("Bearer sk-from-the-environment")
        );
        assert_eq!(r.body["model"], "gpt-4o-mini");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_provider_known_by_name_sends_no_key() {
    let requests = run_against_fake(
        "ollama",
        "model = \"ollama/llama3.2\"\n",
        "sk-not-for-ollama",
        &["run", "hi"],
        "local answer",
    )
    .await;
    assert_eq!(requests[0].header("authorization"), None);
    assert_eq!(requests[0].body["model"], "llama3.2");
}

#[test]
fn a_missing_key_names_the_variable_to_set_and_stores_nothing() {
    let mut s = Sandbox::new();
    let data = data_dir(&s);
    s.env("TASKFORCE_DATA_DIR", data.to_str().unwrap());
    let err = s.usage_error(&["run", "--model", "openai/gpt-4o-mini", "hi"]);
    assert_eq!(
        err.trim(),
        "error: provider \"openai\" needs an API key: set OPENAI_API_KEY"
    );
    assert!(!data.exists(), "no session is created");

    // The same for a model named in the configuration, of another known provider.
    s.file(
        "taskforce.toml",
        "model = \"anthropic/claude-sonnet-4-5\"\n",
    );
    let err = s.usage_error(&["run", "hi"]);
    assert_eq!(
        err.trim(),
        "error: provider \"anthropic\" needs an API key: set ANTHROPIC_API_KEY"
    );
    assert!(!data.exists(), "no session is created");
    let list = s.ok(&["sessions", "list", "--json"]).json();
    assert_eq!(list, serde_json::json!([]));
}

#[test]
fn an_unknown_provider_says_how_to_configure_it_and_stores_nothing() {
    let mut s = Sandbox::new();
    let data = data_dir(&s);
    s.env("TASKFORCE_DATA_DIR", data.to_str().unwrap());
    let err = s.usage_error(&["run", "--model", "foo/bar", "hi"]);
    assert_eq!(
        err.trim(),
        "error: unknown provider \"foo\": configure [provider.foo] with type and base_url in taskforce.toml (known providers: openai, anthropic, openrouter, groq, deepseek, mistral, ollama, lmstudio, scripted)"
    );
    assert!(!data.exists(), "no session is created");
    let list = s.ok(&["sessions", "list", "--json"]).json();
    assert_eq!(list, serde_json::json!([]));
}

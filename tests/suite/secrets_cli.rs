//! Nothing the binary writes to stderr, at any verbosity, shows a provider key, a header
//! value or a URL credential, even when the provider echoes them back.

use taskforce_testkit::fake_openai::{FakeOpenAi, Response};

use super::support::Sandbox;

const SECRETS: [&str; 5] = [
    "sk-live-secret-0001",
    "xkey-secret-4242",
    "custom-secret-value",
    "pa55word-in-url",
    "env-key-secret-77",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verbose_logs_and_errors_show_no_credential() {
    // An endpoint that refuses the key and echoes every header it got.
    let fake = FakeOpenAi::start(|req| {
        let echoed: Vec<String> = req
            .headers
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        Response::error(401, &format!("bad credentials: {}", echoed.join(" ")))
    })
    .await
    .unwrap();
    let with_credentials = fake
        .base_url()
        .replacen("http://", "http://alice:pa55word-in-url@", 1);
    let mut s = Sandbox::new();
    s.file(
        "taskforce.toml",
        &format!(
            "model = \"fake/gpt-test\"\nsmall_model = \"scripted/echo\"\n\
             [provider.fake]\ntype = \"openai\"\nbase_url = \"{with_credentials}\"\n\
             api_key = \"sk-live-secret-0001\"\nmax_retries = 0\n\
             [provider.fake.headers]\nx-api-key = \"xkey-secret-4242\"\n\
             X-Custom = \"custom-secret-value\"\n\
             [provider.other]\ntype = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
             api_key_env = \"OTHER_KEY\"\n"
        ),
    );
    s.env("OTHER_KEY", "env-key-secret-77");
    let out = tokio::task::spawn_blocking(move || s.run(&["-vv", "run", "hello"]))
        .await
        .unwrap();
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    assert!(
        out.stderr.contains("bad credentials"),
        "the provider's answer is shown: {}",
        out.stderr
    );
    assert!(fake.requests()[0].header("x-api-key") == Some("xkey-secret-4242"));
    for secret in SECRETS {
        assert!(
            !out.stderr.contains(secret),
            "{secret} in stderr:\n{}",
            out.stderr
        );
        assert!(!out.stdout.contains(secret), "{secret} in stdout");
    }
    assert!(out.stderr.contains("[redacted]"), "{}", out.stderr);
}

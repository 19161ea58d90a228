//! `GET /config` shows no provider credential: keys, header values and URL credentials are
//! `[redacted]`.

use super::{answers, harness};

#[tokio::test(flavor = "multi_thread")]
async fn config_shows_no_key_header_value_or_url_credential() {
    let h = harness()
        .config(
            "[provider.proxy]\ntype = \"openai\"\n\
             base_url = \"https://alice:pa55word@proxy.example/v1\"\n\
             api_key = \"sk-proxy-secret-1\"\n\
             [provider.proxy.headers]\n\
             Authorization = \"Bearer hdr-token-123\"\n\
             x-api-key = \"xkey-456789\"\n\
             X-Custom = \"custom-secret-value\"\n",
        )
        .start(answers("never"))
        .await;
    let answer = h.get("/config").await;
    let raw = answer.body.to_string();
    let config = answer.ok();
    for secret in [
        "sk-proxy-secret-1",
        "hdr-token-123",
        "xkey-456789",
        "custom-secret-value",
        "pa55word",
        "alice",
        "sk-test-secret",
    ] {
        assert!(!raw.contains(secret), "{secret} leaked: {raw}");
    }
    let proxy = &config["provider"]["proxy"];
    assert_eq!(proxy["api_key"], "[redacted]");
    assert_eq!(proxy["base_url"], "https://[redacted]@proxy.example/v1");
    for name in ["Authorization", "x-api-key", "X-Custom"] {
        assert_eq!(proxy["headers"][name], "[redacted]", "{name}");
    }
    // What is no secret still shows.
    assert_eq!(
        config["provider"]["fake"]["base_url"],
        h.fake.base_url().as_str()
    );
}

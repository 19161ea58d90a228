//! The OpenAI-compatible adapter when things go wrong: HTTP errors mapped to provider errors,
//! streams cut short or malformed, a refused connection, and a dropped stream closing its
//! connection.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use taskforce_agents::provider::{
    LanguageModel, ModelEvent, OpenAiModel, OpenAiProvider, OpenAiSettings, ProviderError,
};
use taskforce_testkit::fake_openai::{Chunk, FakeOpenAi, Response};

use super::{WAIT, drain, openai, openai_with_key, user_request};

async fn stream_error(model: &dyn LanguageModel) -> ProviderError {
    match model.stream(&user_request("hi")).await {
        Ok(stream) => drain(stream).await.1.expect("the stream should fail"),
        Err(e) => e,
    }
}

#[tokio::test]
async fn openai_http_500_is_retryable() {
    let server = FakeOpenAi::start(|_| Response::error(500, "upstream exploded"))
        .await
        .unwrap();
    let err = stream_error(&openai(&server)).await;
    match &err {
        ProviderError::Http {
            provider,
            status,
            body,
            retry_after,
        } => {
            assert_eq!(provider, "fake");
            assert_eq!(*status, 500);
            assert!(body.contains("upstream exploded"), "{body}");
            assert_eq!(*retry_after, None);
        }
        other => panic!("expected Http, got {other:?}"),
    }
    assert!(err.is_retryable());
    assert!(err.to_string().contains("HTTP 500"), "{err}");
}

#[tokio::test]
async fn openai_429_parses_retry_after() {
    let server = FakeOpenAi::queue(vec![
        Response::error(429, "slow down").with_header("retry-after", "3"),
        Response::error(429, "slow down").with_header("retry-after-ms", "250"),
    ])
    .await
    .unwrap();
    let model = openai(&server);
    for expected in [Duration::from_secs(3), Duration::from_millis(250)] {
        let err = stream_error(&model).await;
        assert!(err.is_retryable());
        match err {
            ProviderError::Http {
                status: 429,
                retry_after,
                ..
            } => assert_eq!(retry_after, Some(expected)),
            other => panic!("expected 429, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn openai_401_is_auth() {
    let server = FakeOpenAi::start(|_| Response::error(401, "Incorrect API key provided"))
        .await
        .unwrap();
    let err = stream_error(&openai_with_key(&server, Some("bad"))).await;
    assert_eq!(
        err,
        ProviderError::Auth {
            provider: "fake".into(),
            message: "Incorrect API key provided".into()
        }
    );
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn openai_context_overflow() {
    let body = json!({"error": {
        "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
        "type": "invalid_request_error",
        "code": "context_length_exceeded"
    }});
    let server = FakeOpenAi::start(move |_| Response::status(400, body.to_string()))
        .await
        .unwrap();
    let err = stream_error(&openai(&server)).await;
    match &err {
        ProviderError::ContextOverflow { message } => {
            assert!(message.contains("maximum context length"), "{message}")
        }
        other => panic!("expected ContextOverflow, got {other:?}"),
    }
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn openai_plain_400_is_http() {
    let server = FakeOpenAi::start(|_| Response::error(400, "Invalid value for 'tools'"))
        .await
        .unwrap();
    let err = stream_error(&openai(&server)).await;
    assert!(
        matches!(err, ProviderError::Http { status: 400, .. }),
        "{err:?}"
    );
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn openai_stream_without_finish_is_cut() {
    let server = FakeOpenAi::queue(vec![
        // Ends cleanly but never says why.
        Response::Stream(vec![Chunk::role(), Chunk::text("Hel"), Chunk::text("lo")]),
        // [DONE] without a finish reason.
        Response::Stream(vec![Chunk::text("Hello"), Chunk::done()]),
        // The connection drops inside the body.
        Response::Stream(vec![Chunk::text("Hello"), Chunk::Hangup]),
    ])
    .await
    .unwrap();
    let model = openai(&server);
    for _ in 0..3 {
        let (events, err) = drain(model.stream(&user_request("hi")).await.unwrap()).await;
        assert!(!events.iter().any(|e| matches!(e, ModelEvent::Finish(_))));
        let err = err.expect("the stream should fail");
        assert!(matches!(err, ProviderError::StreamCut { .. }), "{err:?}");
        assert!(err.is_retryable());
    }
}

#[tokio::test]
async fn openai_malformed_chunk_is_decode_error() {
    let server = FakeOpenAi::start(|_| {
        Response::Stream(vec![
            Chunk::text("ok"),
            Chunk::raw("{\"choices\": [oops"),
            Chunk::done(),
        ])
    })
    .await
    .unwrap();
    let (events, err) = drain(openai(&server).stream(&user_request("hi")).await.unwrap()).await;
    assert_eq!(events, vec![ModelEvent::TextDelta("ok".into())]);
    assert!(matches!(err, Some(ProviderError::Decode { .. })), "{err:?}");
}

#[tokio::test]
async fn openai_error_chunk_mid_stream() {
    let server = FakeOpenAi::start(|_| {
        Response::Stream(vec![
            Chunk::text("partial"),
            Chunk::json(json!({"error": {"message": "Provider overloaded", "code": 502}})),
        ])
    })
    .await
    .unwrap();
    let (_, err) = drain(openai(&server).stream(&user_request("hi")).await.unwrap()).await;
    let err = err.unwrap();
    assert!(
        matches!(err, ProviderError::Http { status: 502, .. }),
        "{err:?}"
    );
    assert!(err.is_retryable());
}

#[tokio::test]
async fn openai_connection_refused() {
    let addr = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let provider = OpenAiProvider::new(
        "down",
        OpenAiSettings {
            base_url: format!("http://{addr}/v1"),
            ..OpenAiSettings::default()
        },
    )
    .unwrap();
    let model = OpenAiModel::new(Arc::new(provider), "m");
    let err = stream_error(&model).await;
    assert!(matches!(err, ProviderError::Connection { .. }), "{err:?}");
    assert!(err.is_retryable());
}

#[tokio::test]
async fn dropping_the_stream_drops_the_connection() {
    let server =
        FakeOpenAi::start(|_| Response::text("one two three four five six").stall_after(3))
            .await
            .unwrap();
    let model = openai(&server);
    let mut stream = model.stream(&user_request("hi")).await.unwrap();
    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(first, ModelEvent::TextDelta("one ".into()));
    assert_eq!(server.disconnects(), 0);
    drop(stream);
    assert!(
        server.wait_for_disconnects(1, WAIT).await,
        "the server did not see the client go away"
    );
}

//! Turning a streaming HTTP body of server-sent events into model events: the loop the HTTP
//! adapters share; each adapter brings the decoder of its own event payloads.

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};

use super::http::describe;
use super::{ModelEvent, ModelStream, ProviderError};

/// Why a response body stopped before its end.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyError {
    /// The connection failed or was reset.
    #[error("{}", describe(.0))]
    Transport(reqwest::Error),
    /// Nothing arrived for this long (the provider's `chunk_timeout`).
    #[error("no data for {}", humantime::format_duration(*.0))]
    Stalled(Duration),
}

/// A response body as the stream adapters read it.
pub(crate) type Body = Pin<Box<dyn Stream<Item = Result<Bytes, BodyError>> + Send>>;

/// `body`, failing with [`BodyError::Stalled`] (and ending) once `limit` passes without a piece
/// of it. One timer serves the whole body: it is moved forward at each piece, not remade.
pub(crate) fn watched<B>(body: B, limit: Duration) -> impl Stream<Item = Result<Bytes, BodyError>>
where
    B: Stream<Item = Result<Bytes, reqwest::Error>> + Send + 'static,
{
    let timer = Box::pin(tokio::time::sleep(limit));
    futures::stream::unfold(
        (Box::pin(body), timer, false),
        move |(mut body, mut timer, ended)| async move {
            if ended {
                return None;
            }
            timer.as_mut().reset(tokio::time::Instant::now() + limit);
            tokio::select! {
                piece = body.next() => match piece {
                    Some(Ok(bytes)) => Some((Ok(bytes), (body, timer, false))),
                    Some(Err(e)) => Some((Err(BodyError::Transport(e)), (body, timer, true))),
                    None => None,
                },
                () = timer.as_mut() => Some((Err(BodyError::Stalled(limit)), (body, timer, true))),
            }
        },
    )
}

/// Decodes one adapter's `data:` payloads into model events.
pub(crate) trait SseDecoder: Send + 'static {
    /// Decodes one non-empty payload into `out`; answers whether nothing more follows.
    fn feed(&mut self, data: &str, out: &mut VecDeque<ModelEvent>) -> Result<bool, ProviderError>;
    /// The body ended (or the payload said so): flushes what is pending, or fails when the
    /// stream was cut before its finish.
    fn finish(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ProviderError>;
}

/// A payload for an error message: at most 200 characters.
pub(crate) fn preview(data: &str) -> String {
    if data.chars().count() > 200 {
        format!("{}…", data.chars().take(200).collect::<String>())
    } else {
        data.to_string()
    }
}

/// The state of [`model_stream`]'s unfold.
struct State<S, D> {
    source: Pin<Box<S>>,
    decoder: D,
    pending: VecDeque<ModelEvent>,
    /// An error to yield once `pending` is drained; then the stream ends.
    error: Option<ProviderError>,
    done: bool,
}

/// The model events of a streaming response body, decoded by `decoder`. The stream owns the
/// body: dropping it drops the connection.
pub(crate) fn model_stream<B, D>(provider: String, body: B, decoder: D) -> ModelStream
where
    B: Stream<Item = Result<Bytes, BodyError>> + Send + 'static,
    D: SseDecoder,
{
    let state = State {
        source: Box::pin(body.eventsource()),
        decoder,
        pending: VecDeque::new(),
        error: None,
        done: false,
    };
    let stream = futures::stream::unfold(state, move |mut st| {
        let provider = provider.clone();
        async move {
            loop {
                if let Some(event) = st.pending.pop_front() {
                    return Some((Ok(event), st));
                }
                if let Some(error) = st.error.take() {
                    st.done = true;
                    return Some((Err(error), st));
                }
                if st.done {
                    return None;
                }
                match st.source.next().await {
                    Some(Ok(event)) => {
                        let data = event.data.trim();
                        if data.is_empty() {
                            continue;
                        }
                        match st.decoder.feed(data, &mut st.pending) {
                            // Nothing follows: don't wait for the body to close.
                            Ok(last) => st.done = last,
                            Err(e) => st.error = Some(e),
                        }
                    }
                    Some(Err(error)) => {
                        st.error = Some(match error {
                            EventStreamError::Transport(BodyError::Stalled(limit)) => {
                                ProviderError::Timeout {
                                    provider: provider.clone(),
                                    message: format!(
                                        "the response stream sent nothing for {} (the provider's `chunk_timeout`)",
                                        humantime::format_duration(limit)
                                    ),
                                }
                            }
                            EventStreamError::Transport(BodyError::Transport(e)) => {
                                ProviderError::StreamCut {
                                    provider: provider.clone(),
                                    message: describe(&e),
                                }
                            }
                            EventStreamError::Utf8(e) => ProviderError::Decode {
                                provider: provider.clone(),
                                message: format!("the stream is not UTF-8: {e}"),
                            },
                            EventStreamError::Parser(e) => ProviderError::Decode {
                                provider: provider.clone(),
                                message: format!("the stream is not server-sent events: {e}"),
                            },
                        });
                    }
                    None => {
                        st.done = true;
                        if let Err(e) = st.decoder.finish(&mut st.pending) {
                            st.error = Some(e);
                        }
                    }
                }
            }
        }
    });
    Box::pin(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body that sends `pieces`, then nothing, ever.
    fn silent_after(
        pieces: &'static [&'static str],
    ) -> impl Stream<Item = Result<Bytes, reqwest::Error>> + Send + 'static {
        futures::stream::iter(pieces.iter().map(|p| Ok(Bytes::from_static(p.as_bytes()))))
            .chain(futures::stream::pending())
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_silent_past_the_limit_fails_as_stalled_and_ends() {
        let limit = Duration::from_millis(200);
        let mut body = Box::pin(watched(silent_after(&["a", "b"]), limit));
        let start = tokio::time::Instant::now();
        assert_eq!(body.next().await.unwrap().unwrap(), "a");
        assert_eq!(body.next().await.unwrap().unwrap(), "b");
        let stalled = body.next().await.unwrap();
        assert!(matches!(stalled, Err(BodyError::Stalled(d)) if d == limit));
        assert_eq!(
            start.elapsed(),
            limit,
            "the silence is timed from the last piece"
        );
        assert!(body.next().await.is_none(), "nothing follows the failure");
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_stream_is_a_retryable_timeout_naming_chunk_timeout() {
        struct Texts;
        impl SseDecoder for Texts {
            fn feed(
                &mut self,
                data: &str,
                out: &mut VecDeque<ModelEvent>,
            ) -> Result<bool, ProviderError> {
                out.push_back(ModelEvent::TextDelta(data.to_string()));
                Ok(false)
            }
            fn finish(&mut self, _: &mut VecDeque<ModelEvent>) -> Result<(), ProviderError> {
                Ok(())
            }
        }
        let body = watched(silent_after(&["data: hi\n\n"]), Duration::from_secs(1));
        let mut events = model_stream("p".into(), body, Texts);
        assert!(matches!(events.next().await, Some(Ok(ModelEvent::TextDelta(t))) if t == "hi"));
        let error = events.next().await.unwrap().unwrap_err();
        assert!(matches!(error, ProviderError::Timeout { .. }), "{error:?}");
        assert!(error.is_retryable());
        assert!(error.to_string().contains("chunk_timeout"), "{error}");
    }
}

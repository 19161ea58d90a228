//! Turning a streaming HTTP body of server-sent events into model events: the loop the HTTP
//! adapters share; each adapter brings the decoder of its own event payloads.

use std::collections::VecDeque;
use std::pin::Pin;

use bytes::Bytes;
use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};

use super::http::describe;
use super::{ModelEvent, ModelStream, ProviderError};

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
    B: Stream<Item = Result<Bytes, reqwest::Error>> + Send + 'static,
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
                            EventStreamError::Transport(e) => ProviderError::StreamCut {
                                provider: provider.clone(),
                                message: describe(&e),
                            },
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

//! Entry points for the fuzz targets in `fuzz/` (feature `fuzzing`): each feeds outside input
//! to a parser the way the runtime does and answers a small summary, so a fuzzer can look for
//! panics, hangs and runaway allocation without reaching into private modules.

use bytes::Bytes;
use futures::StreamExt;

use crate::provider::ModelStream;
use crate::provider::sse::BodyError;

/// Plays `chunks` as the body of an OpenAI-compatible streaming response; answers how many
/// events and errors the stream yielded.
pub fn openai_stream(chunks: &[&[u8]]) -> (usize, usize) {
    drain(crate::provider::openai::stream::events(
        "fuzz".into(),
        body(chunks),
    ))
}

/// Plays `chunks` as the body of an Anthropic Messages streaming response; answers how many
/// events and errors the stream yielded.
pub fn anthropic_stream(chunks: &[&[u8]]) -> (usize, usize) {
    drain(crate::provider::anthropic::stream::events(
        "fuzz".into(),
        body(chunks),
    ))
}

fn body(
    chunks: &[&[u8]],
) -> impl futures::Stream<Item = Result<Bytes, BodyError>> + Send + 'static {
    let owned: Vec<Result<Bytes, BodyError>> = chunks
        .iter()
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    futures::stream::iter(owned)
}

fn drain(stream: ModelStream) -> (usize, usize) {
    futures::executor::block_on(stream.fold((0, 0), |(events, errors), item| async move {
        match item {
            Ok(_) => (events + 1, errors),
            Err(_) => (events, errors + 1),
        }
    }))
}

//! The `chat.completion.chunk` event stream → [`ModelEvent`]s.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;
use futures::Stream;
use serde::Deserialize;
use serde_json::Value;

use super::errors;
use crate::id::CallId;
use crate::provider::sse::{BodyError, SseDecoder, model_stream, preview};
use crate::provider::{FinishReason, ModelEvent, ModelStream, ProviderError, Usage};

/// One `data:` payload of the stream.
#[derive(Debug, Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

/// One choice of a chunk (only choice 0 is read).
#[derive(Debug, Deserialize)]
struct Choice {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

/// What a chunk adds to the answer.
#[derive(Debug, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

/// A piece of one tool call.
#[derive(Debug, Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

/// A piece of a tool call's function.
#[derive(Debug, Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    /// Usually a string piece; some servers send the whole arguments as an object.
    #[serde(default)]
    arguments: Option<Value>,
}

/// The usage object.
#[derive(Debug, Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
}

/// `usage.prompt_tokens_details`.
#[derive(Debug, Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// `usage.completion_tokens_details`.
#[derive(Debug, Deserialize)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

/// A tool call being assembled.
#[derive(Debug, Default)]
struct PendingCall {
    id: Option<String>,
    name: String,
    arguments: String,
    started: bool,
}

/// Turns `data:` payloads into events, keeping the state of tool calls, usage and finish.
#[derive(Debug)]
pub(crate) struct Decoder {
    provider: String,
    /// Calls in the order they appeared.
    calls: Vec<PendingCall>,
    /// Wire `index` → position in `calls`.
    slots: HashMap<u64, usize>,
    /// How many of `calls` were emitted complete.
    flushed: usize,
    usage: Option<Usage>,
    finish: Option<FinishReason>,
}

impl Decoder {
    /// A decoder for a stream from `provider`.
    pub(crate) fn new(provider: impl Into<String>) -> Self {
        Decoder {
            provider: provider.into(),
            calls: Vec::new(),
            slots: HashMap::new(),
            flushed: 0,
            usage: None,
            finish: None,
        }
    }

    /// Reads one `data:` payload (not `[DONE]`), appending the events it yields.
    pub(crate) fn data(
        &mut self,
        data: &str,
        out: &mut VecDeque<ModelEvent>,
    ) -> Result<(), ProviderError> {
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| ProviderError::Decode {
            provider: self.provider.clone(),
            message: format!("malformed chunk ({e}): {}", preview(data)),
        })?;
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            return Err(errors::from_stream_error(&self.provider, &error));
        }
        let choice = chunk
            .choices
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.index.unwrap_or(0) == 0);
        if let Some(choice) = choice {
            if let Some(delta) = choice.delta {
                self.delta(delta, out);
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.flush_calls(out);
                self.finish = Some(finish_reason(&reason));
            }
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(map_usage(&usage));
        }
        Ok(())
    }

    /// The stream ended (`[DONE]` or end of body): the remaining tool calls, usage and finish,
    /// or [`ProviderError::StreamCut`] when no finish reason came.
    pub(crate) fn end(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ProviderError> {
        let Some(mut finish) = self.finish.take() else {
            return Err(ProviderError::StreamCut {
                provider: self.provider.clone(),
                message: "the stream ended without a finish reason".into(),
            });
        };
        self.flush_calls(out);
        if finish == FinishReason::Stop && !self.calls.is_empty() {
            // Some servers say `stop` after tool calls; the calls still wait for results.
            finish = FinishReason::ToolCalls;
        }
        if let Some(usage) = self.usage.take() {
            out.push_back(ModelEvent::Usage(usage));
        }
        out.push_back(ModelEvent::Finish(finish));
        Ok(())
    }

    /// Text, reasoning and tool-call pieces of one delta.
    fn delta(&mut self, delta: Delta, out: &mut VecDeque<ModelEvent>) {
        for reasoning in [delta.reasoning_content, delta.reasoning]
            .into_iter()
            .flatten()
        {
            if !reasoning.is_empty() {
                out.push_back(ModelEvent::ReasoningDelta(reasoning));
            }
        }
        if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
            out.push_back(ModelEvent::TextDelta(text));
        }
        for (position, piece) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
            self.tool_call(position as u64, piece, out);
        }
    }

    /// One tool-call piece: find (or open) its call, add to it, announce it once id and name are
    /// known.
    fn tool_call(&mut self, position: u64, piece: ToolCallDelta, out: &mut VecDeque<ModelEvent>) {
        let index = piece.index.unwrap_or(position);
        let id = piece.id.filter(|id| !id.is_empty());
        let slot = match self.slots.get(&index) {
            // A new id at a known index is a new call (servers that reuse index 0).
            Some(&slot)
                if id.is_some() && self.calls[slot].id.is_some() && self.calls[slot].id != id =>
            {
                None
            }
            // A call already emitted complete can't grow; a piece after it is a new call.
            Some(&slot) if slot < self.flushed => None,
            Some(&slot) => Some(slot),
            None => None,
        };
        let slot = slot.unwrap_or_else(|| {
            self.calls.push(PendingCall::default());
            let slot = self.calls.len() - 1;
            self.slots.insert(index, slot);
            slot
        });
        let call = &mut self.calls[slot];
        if call.id.is_none() {
            call.id = id;
        }
        if let Some(function) = piece.function {
            if let Some(name) = function.name.filter(|n| !n.is_empty()) {
                if call.name.is_empty() {
                    call.name = name;
                } else if !call.started {
                    call.name.push_str(&name);
                }
            }
            match function.arguments {
                Some(Value::String(s)) => call.arguments.push_str(&s),
                Some(Value::Null) | None => {}
                Some(other) => call.arguments.push_str(&other.to_string()),
            }
        }
        if !call.started
            && !call.name.is_empty()
            && let Some(id) = &call.id
        {
            call.started = true;
            out.push_back(ModelEvent::ToolCallStart {
                id: id.clone(),
                name: call.name.clone(),
            });
        }
    }

    /// Emits every call not yet emitted as a complete [`ModelEvent::ToolCall`].
    fn flush_calls(&mut self, out: &mut VecDeque<ModelEvent>) {
        for call in &mut self.calls[self.flushed..] {
            let id = call
                .id
                .get_or_insert_with(|| CallId::new().into_string())
                .clone();
            if !call.started {
                call.started = true;
                out.push_back(ModelEvent::ToolCallStart {
                    id: id.clone(),
                    name: call.name.clone(),
                });
            }
            let arguments = if call.arguments.trim().is_empty() {
                "{}".to_string()
            } else {
                std::mem::take(&mut call.arguments)
            };
            out.push_back(ModelEvent::ToolCall {
                id,
                name: call.name.clone(),
                arguments,
            });
        }
        self.flushed = self.calls.len();
    }
}

/// The wire's finish reason.
fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" | "end_turn" | "eos" => FinishReason::Stop,
        "length" | "max_tokens" => FinishReason::Length,
        "tool_calls" | "function_call" | "tool_use" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}

/// The wire's usage: cached prompt tokens are counted apart from input.
fn map_usage(u: &WireUsage) -> Usage {
    let prompt = u.prompt_tokens.unwrap_or(0);
    let cached = u
        .prompt_tokens_details
        .as_ref()
        .and_then(|d| d.cached_tokens)
        .unwrap_or(0);
    Usage {
        input: prompt.saturating_sub(cached),
        output: u.completion_tokens.unwrap_or(0),
        reasoning: u
            .completion_tokens_details
            .as_ref()
            .and_then(|d| d.reasoning_tokens)
            .unwrap_or(0),
        cache_read: cached,
        cache_write: 0,
    }
}

/// How a chat completions stream is decoded: `[DONE]` ends it.
impl SseDecoder for Decoder {
    fn feed(&mut self, data: &str, out: &mut VecDeque<ModelEvent>) -> Result<bool, ProviderError> {
        if data == "[DONE]" {
            self.end(out)?;
            return Ok(true);
        }
        self.data(data, out)?;
        Ok(false)
    }

    fn finish(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ProviderError> {
        self.end(out)
    }
}

/// The model events of a streaming response body. The stream owns the body: dropping it drops
/// the connection.
pub(crate) fn events<B>(provider: String, body: B) -> ModelStream
where
    B: Stream<Item = Result<Bytes, BodyError>> + Send + 'static,
{
    model_stream(provider.clone(), body, Decoder::new(provider))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(chunks: &[Value], done: bool) -> (Vec<ModelEvent>, Option<ProviderError>) {
        let mut d = Decoder::new("p");
        let mut out = VecDeque::new();
        for c in chunks {
            if let Err(e) = d.data(&c.to_string(), &mut out) {
                return (out.into(), Some(e));
            }
        }
        let err = if done { d.end(&mut out).err() } else { None };
        (out.into(), err)
    }

    fn delta(d: Value) -> Value {
        json!({"choices": [{"index": 0, "delta": d, "finish_reason": null}]})
    }

    fn finish(r: &str) -> Value {
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": r}]})
    }

    #[test]
    fn text_reasoning_usage_and_finish() {
        let (events, err) = run(
            &[
                delta(json!({"role": "assistant", "content": ""})),
                delta(json!({"reasoning_content": "think"})),
                delta(json!({"reasoning": "ing"})),
                delta(json!({"content": "Hel"})),
                delta(json!({"content": "lo"})),
                finish("stop"),
                json!({"choices": [], "usage": {
                    "prompt_tokens": 100, "completion_tokens": 20,
                    "prompt_tokens_details": {"cached_tokens": 30},
                    "completion_tokens_details": {"reasoning_tokens": 5}
                }}),
            ],
            true,
        );
        assert!(err.is_none());
        assert_eq!(
            events,
            vec![
                ModelEvent::ReasoningDelta("think".into()),
                ModelEvent::ReasoningDelta("ing".into()),
                ModelEvent::TextDelta("Hel".into()),
                ModelEvent::TextDelta("lo".into()),
                ModelEvent::Usage(Usage {
                    input: 70,
                    output: 20,
                    reasoning: 5,
                    cache_read: 30,
                    cache_write: 0
                }),
                ModelEvent::Finish(FinishReason::Stop),
            ]
        );
    }

    #[test]
    fn parallel_tool_calls_are_assembled() {
        let (events, err) = run(
            &[
                delta(
                    json!({"tool_calls": [{"index": 0, "id": "a", "type": "function", "function": {"name": "glob", "arguments": ""}}]}),
                ),
                delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"pat"}}]})),
                delta(
                    json!({"tool_calls": [{"index": 1, "id": "b", "function": {"name": "grep", "arguments": "{}"}}]}),
                ),
                delta(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": "tern\":\"*\"}"}}]}),
                ),
                finish("tool_calls"),
            ],
            true,
        );
        assert!(err.is_none());
        assert_eq!(
            events,
            vec![
                ModelEvent::ToolCallStart {
                    id: "a".into(),
                    name: "glob".into()
                },
                ModelEvent::ToolCallStart {
                    id: "b".into(),
                    name: "grep".into()
                },
                ModelEvent::ToolCall {
                    id: "a".into(),
                    name: "glob".into(),
                    arguments: "{\"pattern\":\"*\"}".into()
                },
                ModelEvent::ToolCall {
                    id: "b".into(),
                    name: "grep".into(),
                    arguments: "{}".into()
                },
                ModelEvent::Finish(FinishReason::ToolCalls),
            ]
        );
    }

    #[test]
    fn reused_index_with_new_id_is_a_new_call() {
        let (events, _) = run(
            &[
                delta(
                    json!({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "x", "arguments": {"k": 1}}}]}),
                ),
                delta(
                    json!({"tool_calls": [{"index": 0, "id": "b", "function": {"name": "y", "arguments": ""}}]}),
                ),
                finish("stop"),
            ],
            true,
        );
        let calls: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::ToolCall {
                    id,
                    name,
                    arguments,
                } => Some((id.as_str(), name.as_str(), arguments.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(calls, vec![("a", "x", "{\"k\":1}"), ("b", "y", "{}")]);
        assert_eq!(
            events.last(),
            Some(&ModelEvent::Finish(FinishReason::ToolCalls))
        );
    }

    #[test]
    fn missing_ids_are_generated() {
        let (events, _) = run(
            &[
                delta(json!({"tool_calls": [{"function": {"name": "x", "arguments": "{}"}}]})),
                finish("tool_calls"),
            ],
            true,
        );
        match &events[0] {
            ModelEvent::ToolCallStart { id, name } => {
                assert!(id.starts_with("call_"));
                assert_eq!(name, "x");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn no_finish_is_a_cut() {
        let (_, err) = run(&[delta(json!({"content": "hi"}))], true);
        assert!(matches!(err, Some(ProviderError::StreamCut { .. })));
    }

    #[test]
    fn malformed_chunk_is_a_decode_error() {
        let mut d = Decoder::new("p");
        let err = d.data("{not json", &mut VecDeque::new()).unwrap_err();
        assert!(matches!(err, ProviderError::Decode { .. }));
    }

    #[test]
    fn error_object_in_stream() {
        let (_, err) = run(
            &[json!({"error": {"message": "overloaded", "code": 503}})],
            false,
        );
        assert!(matches!(err, Some(ProviderError::Http { status: 503, .. })));
    }

    #[test]
    fn finish_reasons() {
        assert_eq!(finish_reason("length"), FinishReason::Length);
        assert_eq!(finish_reason("content_filter"), FinishReason::ContentFilter);
        assert_eq!(finish_reason("weird"), FinishReason::Other("weird".into()));
    }
}

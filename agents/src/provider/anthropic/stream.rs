//! The Messages API event stream → [`ModelEvent`]s.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;
use futures::Stream;
use serde::Deserialize;
use serde_json::{Value, json};

use super::errors;
use crate::id::CallId;
use crate::provider::sse::{BodyError, SseDecoder, model_stream, preview};
use crate::provider::{FinishReason, ModelEvent, ModelStream, ProviderError, Usage};

/// One `data:` payload of the stream, by its `type`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireEvent {
    /// The message opens; its usage holds the input counts.
    MessageStart {
        #[serde(default)]
        message: StartMessage,
    },
    /// A content block opens.
    ContentBlockStart { index: u64, content_block: Block },
    /// A piece of an open block.
    ContentBlockDelta { index: u64, delta: BlockDelta },
    /// A block is complete.
    ContentBlockStop { index: u64 },
    /// The stop reason and the final usage.
    MessageDelta {
        #[serde(default)]
        delta: MessageDeltaBody,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    /// The message is complete.
    MessageStop,
    /// The stream failed.
    Error {
        #[serde(default)]
        error: Value,
    },
    /// `ping` and anything newer.
    #[serde(other)]
    Other,
}

/// `message_start.message`.
#[derive(Debug, Default, Deserialize)]
struct StartMessage {
    #[serde(default)]
    usage: Option<WireUsage>,
}

/// `message_delta.delta`.
#[derive(Debug, Default, Deserialize)]
struct MessageDeltaBody {
    #[serde(default)]
    stop_reason: Option<String>,
}

/// `content_block_start.content_block`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        #[serde(default)]
        text: String,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
    },
    ToolUse {
        #[serde(default)]
        id: String,
        #[serde(default)]
        name: String,
        #[serde(default)]
        input: Value,
    },
    /// `redacted_thinking`, server tools and anything newer.
    #[serde(other)]
    Other,
}

/// `content_block_delta.delta`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        #[serde(default)]
        text: String,
    },
    ThinkingDelta {
        #[serde(default)]
        thinking: String,
    },
    InputJsonDelta {
        #[serde(default)]
        partial_json: String,
    },
    SignatureDelta {
        #[serde(default)]
        signature: String,
    },
    /// `citations_delta` and anything newer.
    #[serde(other)]
    Other,
}

/// The usage object; every field may be missing from `message_delta`.
#[derive(Debug, Default, Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

/// A `tool_use` block being assembled.
#[derive(Debug)]
struct PendingCall {
    id: String,
    name: String,
    /// The `input_json_delta` pieces so far.
    json: String,
    /// The input the block opened with (used when no pieces come).
    input: Value,
}

/// Turns `data:` payloads into events, keeping open tool calls, usage and the stop reason.
#[derive(Debug)]
pub(crate) struct Decoder {
    provider: String,
    /// Open `tool_use` blocks by index.
    calls: HashMap<u64, PendingCall>,
    /// Whether any tool call was emitted.
    called: bool,
    usage: Usage,
    stop_reason: Option<String>,
    /// `message_stop` was seen.
    finished: bool,
}

impl Decoder {
    /// A decoder for a stream from `provider`.
    pub(crate) fn new(provider: impl Into<String>) -> Self {
        Decoder {
            provider: provider.into(),
            calls: HashMap::new(),
            called: false,
            usage: Usage::default(),
            stop_reason: None,
            finished: false,
        }
    }

    /// Reads one `data:` payload, appending the events it yields.
    pub(crate) fn data(
        &mut self,
        data: &str,
        out: &mut VecDeque<ModelEvent>,
    ) -> Result<(), ProviderError> {
        if self.finished {
            return Ok(());
        }
        let event: WireEvent = serde_json::from_str(data).map_err(|e| ProviderError::Decode {
            provider: self.provider.clone(),
            message: format!("malformed event ({e}): {}", preview(data)),
        })?;
        match event {
            WireEvent::MessageStart { message } => {
                if let Some(usage) = message.usage {
                    self.add_usage(&usage);
                }
            }
            WireEvent::ContentBlockStart {
                index,
                content_block,
            } => match content_block {
                Block::Text { text } if !text.is_empty() => {
                    out.push_back(ModelEvent::TextDelta(text))
                }
                Block::Thinking { thinking } if !thinking.is_empty() => {
                    out.push_back(ModelEvent::ReasoningDelta(thinking));
                }
                Block::ToolUse { id, name, input } => {
                    let id = if id.is_empty() {
                        CallId::new().into_string()
                    } else {
                        id
                    };
                    out.push_back(ModelEvent::ToolCallStart {
                        id: id.clone(),
                        name: name.clone(),
                    });
                    self.calls.insert(
                        index,
                        PendingCall {
                            id,
                            name,
                            json: String::new(),
                            input,
                        },
                    );
                }
                _ => {}
            },
            WireEvent::ContentBlockDelta { index, delta } => match delta {
                BlockDelta::TextDelta { text } if !text.is_empty() => {
                    out.push_back(ModelEvent::TextDelta(text));
                }
                BlockDelta::ThinkingDelta { thinking } if !thinking.is_empty() => {
                    out.push_back(ModelEvent::ReasoningDelta(thinking));
                }
                BlockDelta::SignatureDelta { signature } if !signature.is_empty() => {
                    out.push_back(ModelEvent::ReasoningSignature(signature));
                }
                BlockDelta::InputJsonDelta { partial_json } => {
                    if let Some(call) = self.calls.get_mut(&index) {
                        call.json.push_str(&partial_json);
                    }
                }
                _ => {}
            },
            WireEvent::ContentBlockStop { index } => {
                if let Some(call) = self.calls.remove(&index) {
                    self.emit_call(call, out);
                }
            }
            WireEvent::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                if let Some(usage) = usage {
                    self.add_usage(&usage);
                }
            }
            WireEvent::MessageStop => self.finish(out),
            WireEvent::Error { error } => {
                let event = json!({"type": "error", "error": error});
                return Err(errors::from_stream_error(&self.provider, &event));
            }
            WireEvent::Other => {}
        }
        Ok(())
    }

    /// The body ended: fine after `message_stop` (or a stop reason), else a cut stream.
    pub(crate) fn end(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ProviderError> {
        if self.finished {
            return Ok(());
        }
        if self.stop_reason.is_none() {
            return Err(ProviderError::StreamCut {
                provider: self.provider.clone(),
                message: "the stream ended before message_stop".into(),
            });
        }
        self.finish(out);
        Ok(())
    }

    /// Emits the calls still open, the usage and the finish reason.
    fn finish(&mut self, out: &mut VecDeque<ModelEvent>) {
        let mut open: Vec<(u64, PendingCall)> = self.calls.drain().collect();
        open.sort_by_key(|(index, _)| *index);
        for (_, call) in open {
            self.emit_call(call, out);
        }
        let mut finish = self
            .stop_reason
            .as_deref()
            .map_or(FinishReason::Other("unknown".into()), finish_reason);
        if finish == FinishReason::Stop && self.called {
            finish = FinishReason::ToolCalls;
        }
        out.push_back(ModelEvent::Usage(self.usage));
        out.push_back(ModelEvent::Finish(finish));
        self.finished = true;
    }

    /// Emits one complete tool call.
    fn emit_call(&mut self, call: PendingCall, out: &mut VecDeque<ModelEvent>) {
        let arguments = if !call.json.trim().is_empty() {
            call.json
        } else if matches!(&call.input, Value::Object(m) if !m.is_empty()) {
            call.input.to_string()
        } else {
            "{}".to_string()
        };
        self.called = true;
        out.push_back(ModelEvent::ToolCall {
            id: call.id,
            name: call.name,
            arguments,
        });
    }

    /// Takes the fields `usage` carries; later counts replace earlier ones.
    fn add_usage(&mut self, usage: &WireUsage) {
        let u = &mut self.usage;
        if let Some(n) = usage.input_tokens {
            u.input = n;
        }
        if let Some(n) = usage.output_tokens {
            u.output = n;
        }
        if let Some(n) = usage.cache_read_input_tokens {
            u.cache_read = n;
        }
        if let Some(n) = usage.cache_creation_input_tokens {
            u.cache_write = n;
        }
    }
}

/// The wire's stop reason.
fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" | "pause_turn" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}

/// How a Messages stream is decoded: nothing follows `message_stop`.
impl SseDecoder for Decoder {
    fn feed(&mut self, data: &str, out: &mut VecDeque<ModelEvent>) -> Result<bool, ProviderError> {
        self.data(data, out)?;
        // Nothing follows `message_stop`.
        Ok(self.finished)
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
    use super::*;

    fn run(events: &[Value], end: bool) -> (Vec<ModelEvent>, Option<ProviderError>) {
        let mut d = Decoder::new("a");
        let mut out = VecDeque::new();
        for e in events {
            if let Err(err) = d.data(&e.to_string(), &mut out) {
                return (out.into(), Some(err));
            }
        }
        let err = if end { d.end(&mut out).err() } else { None };
        (out.into(), err)
    }

    fn start(input: u64, cache_read: u64, cache_write: u64) -> Value {
        json!({"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "content": [],
            "model": "claude-test", "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input, "output_tokens": 1,
                      "cache_read_input_tokens": cache_read,
                      "cache_creation_input_tokens": cache_write}
        }})
    }

    fn block_start(index: u64, block: Value) -> Value {
        json!({"type": "content_block_start", "index": index, "content_block": block})
    }

    fn delta(index: u64, delta: Value) -> Value {
        json!({"type": "content_block_delta", "index": index, "delta": delta})
    }

    fn stop(index: u64) -> Value {
        json!({"type": "content_block_stop", "index": index})
    }

    fn message_delta(reason: &str, output: u64) -> Value {
        json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": null},
               "usage": {"output_tokens": output}})
    }

    fn message_stop() -> Value {
        json!({"type": "message_stop"})
    }

    #[test]
    fn text_thinking_usage_and_finish() {
        let (events, err) = run(
            &[
                start(100, 30, 20),
                json!({"type": "ping"}),
                block_start(0, json!({"type": "thinking", "thinking": ""})),
                delta(0, json!({"type": "thinking_delta", "thinking": "Let me "})),
                delta(0, json!({"type": "thinking_delta", "thinking": "think."})),
                delta(
                    0,
                    json!({"type": "signature_delta", "signature": "EqQBCgIYAhIM"}),
                ),
                stop(0),
                block_start(1, json!({"type": "redacted_thinking", "data": "abc"})),
                stop(1),
                block_start(2, json!({"type": "text", "text": ""})),
                delta(2, json!({"type": "text_delta", "text": "Hel"})),
                delta(2, json!({"type": "text_delta", "text": "lo"})),
                stop(2),
                message_delta("end_turn", 15),
                message_stop(),
            ],
            true,
        );
        assert!(err.is_none(), "{err:?}");
        assert_eq!(
            events,
            vec![
                ModelEvent::ReasoningDelta("Let me ".into()),
                ModelEvent::ReasoningDelta("think.".into()),
                ModelEvent::ReasoningSignature("EqQBCgIYAhIM".into()),
                ModelEvent::TextDelta("Hel".into()),
                ModelEvent::TextDelta("lo".into()),
                ModelEvent::Usage(Usage {
                    input: 100,
                    output: 15,
                    reasoning: 0,
                    cache_read: 30,
                    cache_write: 20,
                }),
                ModelEvent::Finish(FinishReason::Stop),
            ]
        );
    }

    #[test]
    fn tool_use_input_is_assembled_per_block() {
        let (events, err) = run(
            &[
                start(10, 0, 0),
                block_start(0, json!({"type": "text", "text": ""})),
                delta(0, json!({"type": "text_delta", "text": "Reading."})),
                stop(0),
                block_start(
                    1,
                    json!({"type": "tool_use", "id": "toolu_a", "name": "read", "input": {}}),
                ),
                delta(1, json!({"type": "input_json_delta", "partial_json": ""})),
                delta(
                    1,
                    json!({"type": "input_json_delta", "partial_json": "{\"filePath\":"}),
                ),
                delta(
                    1,
                    json!({"type": "input_json_delta", "partial_json": " \"a.txt\"}"}),
                ),
                stop(1),
                block_start(
                    2,
                    json!({"type": "tool_use", "id": "toolu_b", "name": "glob", "input": {}}),
                ),
                stop(2),
                message_delta("tool_use", 40),
                message_stop(),
            ],
            true,
        );
        assert!(err.is_none(), "{err:?}");
        assert_eq!(
            events,
            vec![
                ModelEvent::TextDelta("Reading.".into()),
                ModelEvent::ToolCallStart {
                    id: "toolu_a".into(),
                    name: "read".into()
                },
                ModelEvent::ToolCall {
                    id: "toolu_a".into(),
                    name: "read".into(),
                    arguments: "{\"filePath\": \"a.txt\"}".into()
                },
                ModelEvent::ToolCallStart {
                    id: "toolu_b".into(),
                    name: "glob".into()
                },
                ModelEvent::ToolCall {
                    id: "toolu_b".into(),
                    name: "glob".into(),
                    arguments: "{}".into()
                },
                ModelEvent::Usage(Usage {
                    input: 10,
                    output: 40,
                    ..Usage::default()
                }),
                ModelEvent::Finish(FinishReason::ToolCalls),
            ]
        );
    }

    #[test]
    fn stop_reasons() {
        assert_eq!(finish_reason("end_turn"), FinishReason::Stop);
        assert_eq!(finish_reason("stop_sequence"), FinishReason::Stop);
        assert_eq!(finish_reason("tool_use"), FinishReason::ToolCalls);
        assert_eq!(finish_reason("max_tokens"), FinishReason::Length);
        assert_eq!(finish_reason("refusal"), FinishReason::ContentFilter);
        assert_eq!(finish_reason("new"), FinishReason::Other("new".into()));
    }

    #[test]
    fn message_delta_usage_replaces_start_counts() {
        let (events, _) = run(
            &[
                start(5, 0, 0),
                json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens"},
                       "usage": {"input_tokens": 7, "output_tokens": 9,
                                 "cache_read_input_tokens": 3}}),
                message_stop(),
            ],
            true,
        );
        assert_eq!(
            events,
            vec![
                ModelEvent::Usage(Usage {
                    input: 7,
                    output: 9,
                    reasoning: 0,
                    cache_read: 3,
                    cache_write: 0
                }),
                ModelEvent::Finish(FinishReason::Length),
            ]
        );
    }

    #[test]
    fn a_cut_stream_is_a_stream_cut_error() {
        let (events, err) = run(
            &[
                start(5, 0, 0),
                block_start(0, json!({"type": "text", "text": ""})),
                delta(0, json!({"type": "text_delta", "text": "partial"})),
            ],
            true,
        );
        assert_eq!(events, vec![ModelEvent::TextDelta("partial".into())]);
        assert!(matches!(err, Some(ProviderError::StreamCut { .. })));
        assert!(err.is_some_and(|e| e.is_retryable()));
    }

    #[test]
    fn a_stop_reason_without_message_stop_still_finishes() {
        let (events, err) = run(&[start(1, 0, 0), message_delta("end_turn", 2)], true);
        assert!(err.is_none());
        assert_eq!(events.last(), Some(&ModelEvent::Finish(FinishReason::Stop)));
    }

    #[test]
    fn error_events_are_typed() {
        let (_, err) = run(
            &[
                start(1, 0, 0),
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
            ],
            false,
        );
        assert!(matches!(err, Some(ProviderError::Http { status: 529, .. })));
    }

    #[test]
    fn unknown_events_and_blocks_are_ignored_and_garbage_is_a_decode_error() {
        let (events, err) = run(
            &[
                start(1, 0, 0),
                json!({"type": "something_new", "x": 1}),
                block_start(
                    0,
                    json!({"type": "server_tool_use", "id": "srv", "name": "web_search", "input": {}}),
                ),
                delta(
                    0,
                    json!({"type": "citations_delta", "citation": {"cited_text": "x"}}),
                ),
                stop(0),
                message_delta("end_turn", 1),
                message_stop(),
            ],
            true,
        );
        assert!(err.is_none(), "{err:?}");
        assert_eq!(events.len(), 2);
        let mut d = Decoder::new("a");
        let err = d.data("{not json", &mut VecDeque::new()).unwrap_err();
        assert!(matches!(err, ProviderError::Decode { .. }));
    }
}

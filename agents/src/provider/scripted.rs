//! A deterministic model that plays a rule script: the offline default for the demo and tests.
//!
//! # Script format
//!
//! A script is JSON (keys starting with `_` are comments, allowed on the script, rules, `when`,
//! replies and tool calls):
//!
//! ```json
//! {
//!   "rules": [
//!     {
//!       "when": {
//!         "agent": "build",        // the agent making the call
//!         "tool": "task",          // a tool the request offers
//!         "no_tool": "bash",       // a tool the request does NOT offer
//!         "last_role": "user",     // role of the last message: user | tool | assistant
//!         "contains": "handlers",  // text the last user/tool message contains (any case)
//!         "prompt": "handlers",    // text the first user message contains (any case)
//!         "turn": 0                // number of assistant messages so far in the request
//!       },
//!       "reply": {
//!         "reasoning": "…",
//!         "text": "Found: {{last}}",
//!         "tool_calls": [{"name": "glob", "input": {"pattern": "src/**/*.py"}}]
//!       },
//!       "delay_ms": 40
//!     }
//!   ],
//!   "fallback": {"text": "…"}
//! }
//! ```
//!
//! (The comments above are for reading only; JSON has none.) Every condition of `when` is
//! optional and all given ones must hold; the first matching rule wins. No match → `fallback`;
//! no fallback either → a text reply saying that no rule matched (not an error).
//!
//! Reply strings (text, reasoning, and every string inside tool inputs) may use the templates
//! `{{last}}` (the text of the last user or tool message; tool outputs joined by a blank line),
//! `{{prompt}}` (the first user message), `{{agent}}` and `{{turn}}`.
//!
//! # Playing a reply
//!
//! Reasoning, then text, stream as several chunks split on word boundaries (at most about 16 per
//! text); each tool call is a [`ModelEvent::ToolCallStart`] and a complete
//! [`ModelEvent::ToolCall`] with id `call_<n>` (unique within the process). The rule's `delay_ms`
//! is waited (with `tokio::time::sleep`, so paused-clock tests work) before each chunk and each
//! tool call. Then [`ModelEvent::Usage`] (about one token per four characters of input and
//! output) and [`ModelEvent::Finish`]: `tool-calls` when the reply calls tools, else `stop`.
//!
//! # Built-in scripts
//!
//! `echo` answers with the last user or tool text; `demo` drives `taskforce demo` (the `build`
//! agent fans out three `explore` subagents over a small sample project — the files it expects
//! are listed under `_sample_project` in `agents/scripts/demo.json`).

mod script;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use serde_json::Value;

pub use script::{
    BUILTIN_SCRIPTS, Reply, Rule, Script, ScriptError, ScriptedToolCall, Selection, When,
};

use super::{
    Content, FinishReason, LanguageModel, ModelEvent, ModelRequest, ModelStream, ProviderError,
    ToolSpec, Usage,
};
use crate::model::ModelRef;

/// The most chunks one streamed text is split into (texts of few words get fewer).
const MAX_CHUNKS: usize = 16;

/// The fewest words per chunk.
const MIN_WORDS_PER_CHUNK: usize = 3;

/// The counter behind `call_<n>` ids.
static NEXT_CALL: AtomicU64 = AtomicU64::new(1);

/// A model that answers by playing a [`Script`].
#[derive(Debug, Clone)]
pub struct ScriptedModel {
    model: ModelRef,
    script: Arc<Script>,
    tools: Arc<ToolSizes>,
}

impl ScriptedModel {
    /// The model `model` playing `script`.
    pub fn new(model: ModelRef, script: Arc<Script>) -> Self {
        ScriptedModel {
            model,
            script,
            tools: Arc::default(),
        }
    }

    /// The model `model` playing the built-in script or script file `spec`.
    pub fn load(model: ModelRef, spec: &str) -> Result<Self, ScriptError> {
        Ok(ScriptedModel::new(model, Arc::new(Script::load(spec)?)))
    }

    /// The script it plays.
    pub fn script(&self) -> &Script {
        &self.script
    }

    /// The events answering `request`, without delays (the stream adds them).
    pub fn plan(&self, request: &ModelRequest) -> (Vec<ModelEvent>, Selection) {
        let selection = self.script.select(request);
        let reply = &selection.reply;
        let mut events = Vec::new();
        let mut output_chars = 0;
        let mut reasoning_chars = 0;
        if let Some(reasoning) = reply.reasoning.as_deref().filter(|t| !t.is_empty()) {
            reasoning_chars = reasoning.chars().count();
            events.extend(
                chunks(reasoning)
                    .into_iter()
                    .map(ModelEvent::ReasoningDelta),
            );
        }
        if let Some(text) = reply.text.as_deref().filter(|t| !t.is_empty()) {
            output_chars += text.chars().count();
            events.extend(chunks(text).into_iter().map(ModelEvent::TextDelta));
        }
        for call in &reply.tool_calls {
            let id = format!("call_{}", NEXT_CALL.fetch_add(1, Ordering::Relaxed));
            let arguments = call.input.to_string();
            output_chars += call.name.chars().count() + arguments.chars().count();
            events.push(ModelEvent::ToolCallStart {
                id: id.clone(),
                name: call.name.clone(),
            });
            events.push(ModelEvent::ToolCall {
                id,
                name: call.name.clone(),
                arguments,
            });
        }
        let reasoning = tokens(reasoning_chars);
        events.push(ModelEvent::Usage(Usage {
            input: tokens(input_chars(request, &self.tools)),
            output: tokens(output_chars) + reasoning,
            reasoning,
            cache_read: 0,
            cache_write: 0,
        }));
        events.push(ModelEvent::Finish(if reply.tool_calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        }));
        (events, selection)
    }
}

#[async_trait::async_trait]
impl LanguageModel for ScriptedModel {
    fn model(&self) -> &ModelRef {
        &self.model
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ProviderError> {
        let (events, selection) = self.plan(request);
        tracing::debug!(
            model = %self.model,
            agent = %request.agent,
            rule = ?selection.rule,
            "scripted reply"
        );
        let delay = selection.delay;
        let stream = futures::stream::iter(events).then(move |event| async move {
            let paced = matches!(
                event,
                ModelEvent::TextDelta(_)
                    | ModelEvent::ReasoningDelta(_)
                    | ModelEvent::ToolCallStart { .. }
            );
            if paced && !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            Ok(event)
        });
        Ok(Box::pin(stream))
    }
}

/// `text` split on word boundaries into a few chunks that join back to `text`.
fn chunks(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_inclusive(char::is_whitespace).collect();
    let per_chunk = words.len().div_ceil(MAX_CHUNKS).max(MIN_WORDS_PER_CHUNK);
    words.chunks(per_chunk).map(|c| c.concat()).collect()
}

/// About one token per four characters.
fn tokens(chars: usize) -> u64 {
    chars.div_ceil(4) as u64
}

/// The characters of the tools seen (name, description and schema as JSON text): every call
/// offers the same shared descriptions and schemas, which are measured once each instead of
/// counted again for every call.
#[derive(Debug, Default)]
struct ToolSizes(Mutex<HashMap<(usize, usize), KnownTool, foldhash::fast::RandomState>>);

/// A tool measured, keyed by the addresses of its shared description and schema.
#[derive(Debug)]
struct KnownTool {
    /// Held so that their addresses are not reused by other texts while remembered.
    _shared: (Arc<str>, Arc<Value>),
    chars: usize,
}

impl ToolSizes {
    /// The most tools remembered (more are measured again after a reset).
    const MAX: usize = 256;

    /// The characters `tool` sends the model.
    fn chars(&self, tool: &ToolSpec) -> usize {
        let key = (
            Arc::as_ptr(&tool.description).cast::<u8>() as usize,
            Arc::as_ptr(&tool.parameters) as usize,
        );
        let mut known = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(known) = known.get(&key) {
            return tool.name.len() + known.chars;
        }
        let chars = tool.description.chars().count() + tool.parameters.to_string().len();
        if known.len() >= Self::MAX {
            known.clear();
        }
        known.insert(
            key,
            KnownTool {
                _shared: (tool.description.clone(), tool.parameters.clone()),
                chars,
            },
        );
        tool.name.len() + chars
    }
}

/// The characters of everything the request sends the model.
fn input_chars(request: &ModelRequest, tools: &ToolSizes) -> usize {
    let system: usize = request.system.iter().map(|s| s.chars().count()).sum();
    let tools: usize = request.tools.iter().map(|t| tools.chars(t)).sum();
    let messages: usize = request
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .map(|c| match c {
            Content::Text { text } | Content::Reasoning { text, .. } => text.chars().count(),
            Content::File { url, .. } => url.len().min(4000),
            Content::ToolCall { name, input, .. } => name.len() + input.to_string().len(),
            Content::ToolResult { output, .. } => output.chars().count(),
        })
        .sum();
    system + tools + messages
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn chunks_split_on_words() {
        assert_eq!(
            chunks("one two three four five"),
            vec!["one two three ", "four five"]
        );
        assert_eq!(chunks("x"), vec!["x"]);
        assert!(chunks("").is_empty());
        let long = "word ".repeat(1000);
        let c = chunks(&long);
        assert!(c.len() <= MAX_CHUNKS, "{}", c.len());
        assert!(c.len() > 1);
    }

    proptest! {
        #[test]
        fn chunks_join_back(text in "\\PC{0,200}") {
            prop_assert_eq!(chunks(&text).concat(), text);
        }
    }

    #[test]
    fn input_counts_each_tool_once_and_the_same_on_every_later_call() {
        let schema = |n: usize| Arc::new(serde_json::json!({"type": "object", "n": "é".repeat(n)}));
        // Descriptions are counted in characters, schemas as their JSON text.
        let does: Arc<str> = "does thingś".into();
        let tool = |name: &str, parameters: Arc<Value>| super::super::ToolSpec {
            name: name.into(),
            description: does.clone(),
            parameters,
        };
        let (a, b) = (schema(3), schema(40));
        let request = ModelRequest {
            tools: vec![
                tool("a", a.clone()),
                tool("b", b.clone()),
                tool("c", a.clone()),
            ]
            .into(),
            ..Default::default()
        };
        let described = "does thingś".chars().count();
        let expected = 3 * described + 3 + 2 * a.to_string().len() + b.to_string().len();
        let sizes = ToolSizes::default();
        assert_eq!(input_chars(&request, &sizes), expected);
        // Measured once each (a tool is its description and schema), the same on later calls.
        assert_eq!(sizes.0.lock().unwrap().len(), 2);
        assert_eq!(input_chars(&request, &sizes), expected);
        // A new schema at another address is measured for itself, even with equal content.
        let request = ModelRequest {
            tools: vec![tool("d", schema(40))].into(),
            ..Default::default()
        };
        assert_eq!(
            input_chars(&request, &sizes),
            1 + described + b.to_string().len()
        );
        assert_eq!(sizes.0.lock().unwrap().len(), 3);
    }

    #[test]
    fn token_estimate() {
        assert_eq!(tokens(0), 0);
        assert_eq!(tokens(1), 1);
        assert_eq!(tokens(8), 2);
    }
}

//! Model providers: the `LanguageModel` trait, the provider-neutral request and event types,
//! and the adapters (`openai`, `anthropic`, `scripted`), the [`Providers`] registry built from
//! the configuration and [`cost`] accounting. Fake HTTP endpoints for tests live in the
//! `taskforce-testkit` crate.
//!
//! A model call is `LanguageModel::stream(request)`: a stream of [`ModelEvent`]s ending with
//! [`ModelEvent::Finish`]. Dropping the stream cancels the call (an HTTP adapter drops its
//! connection).

mod adapter;
pub mod anthropic;
mod cost;
mod error;
mod http;
pub mod openai;
mod registry;
pub mod scripted;
pub(crate) mod sse;
mod types;

pub use adapter::{HttpModel, HttpProvider, HttpSettings};
pub use cost::cost;
pub use registry::{DEFAULT_SCRIPT, Providers, SCRIPTED_PROVIDER};
pub use scripted::{Script, ScriptError, ScriptedModel};

pub use error::ProviderError;
pub use http::{DEFAULT_TIMEOUT, Timeouts};
pub use types::{
    ChatMessage, Content, FinishReason, LanguageModel, ModelEvent, ModelRequest, ModelStream, Role,
    ToolSpec, Usage,
};

/// The OpenAI-compatible kind of [`HttpProvider`] (chat completions).
#[derive(Debug, Clone, Copy)]
pub enum OpenAi {}
/// Where and how to reach an OpenAI-compatible endpoint.
pub type OpenAiSettings = HttpSettings;
/// One configured OpenAI-compatible provider: an HTTP client shared by all its models.
pub type OpenAiProvider = HttpProvider<OpenAi>;
/// One model of an [`OpenAiProvider`].
pub type OpenAiModel = HttpModel<OpenAi>;

/// The Anthropic kind of [`HttpProvider`] (the Messages API).
#[derive(Debug, Clone, Copy)]
pub enum Anthropic {}
/// Where and how to reach the Messages API.
pub type AnthropicSettings = HttpSettings;
/// One configured Anthropic provider: an HTTP client shared by all its models.
pub type AnthropicProvider = HttpProvider<Anthropic>;
/// One model of an [`AnthropicProvider`].
pub type AnthropicModel = HttpModel<Anthropic>;

//! Model providers: the `LanguageModel` trait, the provider-neutral request and event types,
//! and the adapters (`openai`, `anthropic`, `scripted`), the [`Providers`] registry built from
//! the configuration and [`cost`] accounting. Fake HTTP endpoints for tests live in the
//! `taskforce-testkit` crate.
//!
//! A model call is `LanguageModel::stream(request)`: a stream of [`ModelEvent`]s ending with
//! [`ModelEvent::Finish`]. Dropping the stream cancels the call (an HTTP adapter drops its
//! connection).

pub mod anthropic;
mod cost;
mod error;
mod http;
pub mod openai;
mod registry;
pub mod scripted;
pub(crate) mod sse;
mod types;

pub use anthropic::{AnthropicModel, AnthropicProvider, AnthropicSettings};
pub use cost::cost;
pub use openai::{OpenAiModel, OpenAiProvider, OpenAiSettings};
pub use registry::{DEFAULT_SCRIPT, Providers, SCRIPTED_PROVIDER};
pub use scripted::{Script, ScriptError, ScriptedModel};

pub use error::ProviderError;
pub use http::{DEFAULT_TIMEOUT, Timeouts};
pub use types::{
    ChatMessage, Content, FinishReason, LanguageModel, ModelEvent, ModelRequest, ModelStream, Role,
    ToolSpec, Usage,
};

//! taskforce: an actor-based multi-agent runtime, to embed in a Rust program.
//!
//! Everything an embedder uses is on this page. The lower layers stay reachable for the long
//! tail: [`agents`] says what an agent is (model, permissions, registry, configuration, tools,
//! providers); [`actors`] runs them. The `taskforce` command line and its HTTP server (the
//! `taskforce-server` crate) are built on this same API.
//!
//! # Embedding
//!
//! Load the configuration of a project with [`load_config`] (from [`LoadOptions`], e.g.
//! [`LoadOptions::from_process`] as the command line does), turn the [`LoadedConfig`] into
//! [`RuntimeOptions`] and start a [`Runtime`]: [`Runtime::start`] inside an actix system, or
//! [`Runtime::spawn_dedicated`] from any other program (plain tokio included), which runs the
//! actors on a thread of their own. [`Runtime::start_with_store`] takes a [`Store`] of one's
//! own instead of the [`SqliteStore`] in the data directory.
//!
//! [`Runtime::create_session`] creates a [`Session`]; [`Runtime::prompt`] sends it a
//! [`PromptInput`] (for instance [`PromptInput::text`]) and waits for the final assistant
//! message, a [`MessageWithParts`] whose [`Part`]s carry the text, the tool calls and their
//! results. [`Runtime::prompt_async`] only queues the prompt; [`Runtime::cancel`] stops a
//! session's run and its subagents. [`Runtime::sessions`], [`Runtime::messages`] and
//! [`Runtime::tree`] read what is stored.
//!
//! Every change is published on the runtime's bus: [`Runtime::subscribe`] with a [`Filter`]
//! (all sessions, one session, or a session and its subagents) gives a [`Subscription`], a
//! stream of [`BusItem`]s that carry each [`Event`] in an [`Envelope`] with its sequence
//! number. A subscriber that falls behind is told how many events it missed and can resync
//! from the store.
//!
//! When an agent's permission rules say "ask", the runtime publishes
//! [`Event::PermissionAsked`] with a [`PermissionRequest`] and the tool call waits;
//! [`Runtime::reply_permission`] answers it with a [`PermissionReply`] (once, always, or
//! reject), and [`Runtime::pending_permissions`] lists those still open.
//!
//! [`Hooks`] registered with [`Runtime::add_hooks`] run around every tool call and model
//! request: seeing a [`HookCall`], they may rewrite a call's arguments or refuse it before it
//! runs and rewrite its [`ToolOutput`] after; they may change each [`ModelRequest`].
//!
//! ```no_run
//! use futures::StreamExt;
//! use taskforce::{
//!     BusItem, Event, Filter, LoadOptions, PermissionReply, PromptInput, Runtime,
//!     RuntimeOptions, load_config,
//! };
//!
//! # async fn example() -> anyhow::Result<()> {
//! let loaded = load_config(&LoadOptions::from_process(None, None)?)?;
//! let runtime = Runtime::spawn_dedicated(RuntimeOptions::new(loaded))?;
//! let session = runtime.create_session(None, Some("Tidy up".into())).await?;
//!
//! // Allow every tool call this run asks about, once.
//! let mut events = runtime.subscribe(Filter::Subtree(session.id.clone()));
//! let asks = runtime.clone();
//! tokio::spawn(async move {
//!     while let Some(BusItem::Event(envelope)) = events.next().await {
//!         if let Event::PermissionAsked(request) = &envelope.event {
//!             asks.reply_permission(&request.id, PermissionReply::Once, None).await;
//!         }
//!     }
//! });
//!
//! let answer = runtime
//!     .prompt(&session.id, PromptInput::text("Remove the unused imports"))
//!     .await?;
//! for text in answer.parts.iter().filter_map(|part| part.as_text()) {
//!     println!("{}", text.text);
//! }
//! runtime.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! # Examples
//!
//! Each runs offline, on a scripted model (`cargo run --example NAME`):
//!
//! - [`examples/fanout.rs`](https://github.com/taskforce-rs/taskforce/blob/main/examples/fanout.rs):
//!   a plain tokio program runs many sessions in parallel on a dedicated runtime.
//! - [`examples/actix_host.rs`](https://github.com/taskforce-rs/taskforce/blob/main/examples/actix_host.rs):
//!   an actix service's own actor hands questions to taskforce and watches the bus.
//! - [`examples/hooks.rs`](https://github.com/taskforce-rs/taskforce/blob/main/examples/hooks.rs):
//!   hooks log every tool call and refuse dangerous ones.
//! - [`examples/explain.rs`](https://github.com/taskforce-rs/taskforce/blob/main/examples/explain.rs):
//!   loads a project's configuration and asks the permission engine what an agent may do.

pub use taskforce_actors as actors;
pub use taskforce_agents as agents;

#[doc(inline)]
pub use taskforce_actors::bus::{BusItem, Envelope, Event, Filter, SessionStatus, Subscription};
#[doc(inline)]
pub use taskforce_actors::store::{
    MessageWithParts, PostgresStore, SessionFilter, SqliteStore, Store, StoreError,
};
#[doc(inline)]
pub use taskforce_actors::{
    GeneratedAgentFile, HookCall, Hooks, LockError, PartInput, PendingWork, PromptInput, Runtime,
    RuntimeError, RuntimeOptions, SessionPatch, SessionTree, ShellInput, WorkWatch,
};
#[doc(inline)]
pub use taskforce_agents::agent::{AgentInfo, AgentMode, Registry};
#[doc(inline)]
pub use taskforce_agents::config::{
    Config, ConfigError, LoadOptions, LoadedConfig, Paths, load as load_config,
};
#[doc(inline)]
pub use taskforce_agents::id::{MessageId, PartId, PermissionId, SessionId};
#[doc(inline)]
pub use taskforce_agents::model::{
    AssistantMessage, Message, ModelRef, Part, PartKind, Session, TextPart, ToolPart, ToolState,
    UserMessage,
};
#[doc(inline)]
pub use taskforce_agents::permission::{Action, PermissionReply, PermissionRequest, Rule, Ruleset};
#[doc(inline)]
pub use taskforce_agents::provider::ModelRequest;
#[doc(inline)]
pub use taskforce_agents::tool::ToolOutput;

//! `/session/:id/message` and friends: reading messages, prompting (waiting or not), commands
//! and the user's shell commands.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::Value;
use taskforce_actors::store::MessageWithParts;
use taskforce_actors::{PromptInput, RuntimeError, ShellInput};
use taskforce_agents::id::{MessageId, SessionId};
use taskforce_agents::model::{Message, ModelRef};

use super::super::AppState;
use super::super::error::ApiError;
use super::super::extract::{Body, Query, path_id};
#[allow(unused_imports)]
use super::super::openapi::ErrorBody;
use super::global::to_value;
use super::session::session_id;

/// Query of `GET /session/:id/message`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Keep only the newest this many.
    limit: Option<usize>,
}

/// `GET /session/:id/message`: `[{info, parts}]`, oldest first.
#[utoipa::path(
    get,
    path = "/session/{sessionID}/message",
    operation_id = "session.messages",
    summary = "Messages with their parts, oldest first",
    params(("sessionID" = String, Path, description = "The session"), ListQuery),
    responses((status = 200, body = Vec<MessageWithParts>), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such session", body = ErrorBody))
)]
pub async fn list(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<ListQuery>,
) -> Result<Json<Vec<MessageWithParts>>, ApiError> {
    let mut messages = state.runtime.messages(&session_id(&id)?).await?;
    if let Some(limit) = q.limit
        && messages.len() > limit
    {
        messages.drain(..messages.len() - limit);
    }
    Ok(Json(messages))
}

/// `GET /session/:id/message/:messageID`.
#[utoipa::path(
    get,
    path = "/session/{sessionID}/message/{messageID}",
    operation_id = "session.message",
    summary = "One message with its parts",
    params(("sessionID" = String, Path, description = "The session"), ("messageID" = String, Path, description = "The message")),
    responses((status = 200, body = MessageWithParts), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such session", body = ErrorBody))
)]
pub async fn get(
    State(state): State<AppState>,
    Path((id, message)): Path<(String, String)>,
) -> Result<Json<MessageWithParts>, ApiError> {
    let message: MessageId = path_id("messageID", &message)?;
    Ok(Json(
        state.runtime.message(&session_id(&id)?, &message).await?,
    ))
}

/// `POST /session/:id/message`: prompts and answers `{info, parts}` of the final assistant
/// message once the loop is done (the user message itself with `noReply`).
#[utoipa::path(
    post,
    path = "/session/{sessionID}/message",
    operation_id = "session.prompt",
    summary = "Prompt and wait for the final assistant message",
    params(("sessionID" = String, Path, description = "The session")),
    request_body = PromptInput,
    responses((status = 200, body = MessageWithParts), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such session", body = ErrorBody))
)]
pub async fn prompt(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(input): Body<PromptInput>,
) -> Result<Json<MessageWithParts>, ApiError> {
    let id = session_id(&id)?;
    check_prompt(&input)?;
    let answered = state.runtime.prompt(&id, input).await;
    events_first(&state).await;
    match answered {
        Ok(answer) => Ok(Json(answer)),
        Err(RuntimeError::Cancelled) => aborted_answer(&state, &id).await.map(Json),
        Err(e) => Err(e.into()),
    }
}

/// The longest an answer waits for its turn's events to reach the event streams (a client that
/// stopped reading its stream holds the answer up no longer than this).
const EVENTS_FIRST_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Waits until every event published so far is on its way to every event stream, so that a
/// client that ends when the answer comes (`opencode run`) has seen the whole turn.
pub(crate) async fn events_first(state: &AppState) {
    // In a cluster, this node's events are numbered once the stream has stored them.
    let Some(seq) = state
        .events
        .published(&state.runtime, EVENTS_FIRST_LIMIT)
        .await
    else {
        tracing::debug!(
            "this node's events were not all in the cluster's stream when the answer went out"
        );
        return;
    };
    if !state.events.delivered(seq, EVENTS_FIRST_LIMIT).await {
        tracing::debug!("an event stream had not taken event {seq} when the answer went out");
    }
    // A client that ends the moment its answer comes (`opencode run` exits then) may not have
    // read the events already waiting on its stream's socket: it gets a moment to.
    if state.events.streams_open() {
        tokio::time::sleep(READ_GRACE).await;
    }
}

/// How long an answer waits, once its events are on the open streams, for their clients to
/// read them (20 ms was enough for `opencode run` 40 times out of 40 on a quiet machine, not
/// always on a loaded one).
const READ_GRACE: std::time::Duration = std::time::Duration::from_millis(100);

/// An aborted prompt answers the aborted assistant message, as OpenCode does.
async fn aborted_answer(state: &AppState, id: &SessionId) -> Result<MessageWithParts, ApiError> {
    let messages = state.runtime.messages(id).await?;
    match messages.into_iter().next_back() {
        Some(last) if matches!(*last.info, Message::Assistant(_)) => Ok(last),
        _ => Err(RuntimeError::Cancelled.into()),
    }
}

fn check_prompt(input: &PromptInput) -> Result<(), ApiError> {
    if input.parts.is_empty() {
        return Err(ApiError::bad_request(
            "request body: field `parts`: a prompt needs at least one part",
        ));
    }
    Ok(())
}

/// `POST /session/:id/prompt_async`: queues the prompt and answers 204 at once.
#[utoipa::path(
    post,
    path = "/session/{sessionID}/prompt_async",
    operation_id = "session.prompt_async",
    summary = "Prompt without waiting",
    params(("sessionID" = String, Path, description = "The session")),
    request_body = PromptInput,
    responses((status = 204, description = "Queued"), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such session", body = ErrorBody))
)]
pub async fn prompt_async(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(input): Body<PromptInput>,
) -> Result<StatusCode, ApiError> {
    check_prompt(&input)?;
    state.runtime.prompt_async(&session_id(&id)?, input).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Body of `POST /session/:id/command`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct CommandBody {
    /// The command's name, without `/`.
    command: String,
    /// Everything after the name.
    #[serde(default)]
    arguments: String,
    /// The agent, when the command names none.
    agent: Option<String>,
    /// `provider/model`.
    model: Option<String>,
    /// Extra file parts (not supported yet: refused when non-empty).
    #[serde(default)]
    parts: Vec<Value>,
}

/// `POST /session/:id/command`: runs a slash command and answers its final message.
#[utoipa::path(
    post,
    path = "/session/{sessionID}/command",
    operation_id = "session.command",
    summary = "Run a slash command",
    params(("sessionID" = String, Path, description = "The session")),
    request_body = CommandBody,
    responses((status = 200, body = MessageWithParts), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such session", body = ErrorBody))
)]
pub async fn command(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(body): Body<CommandBody>,
) -> Result<Json<MessageWithParts>, ApiError> {
    let id = session_id(&id)?;
    if !body.parts.is_empty() {
        return Err(ApiError::bad_request(
            "request body: field `parts`: extra parts on commands are not supported; put file references (@path) in `arguments`",
        ));
    }
    let model = body
        .model
        .as_deref()
        .filter(|m| !m.is_empty())
        .map(str::parse::<ModelRef>)
        .transpose()
        .map_err(|e| ApiError::bad_request(format!("request body: field `model`: {e}")))?;
    let name = body.command.trim_start_matches('/');
    let answered = state
        .runtime
        .command(&id, name, &body.arguments, body.agent.as_deref(), model)
        .await;
    events_first(&state).await;
    match answered {
        Ok(answer) => Ok(Json(answer)),
        Err(RuntimeError::Cancelled) => aborted_answer(&state, &id).await.map(Json),
        Err(e) => Err(e.into()),
    }
}

/// `POST /session/:id/shell`: runs a command for the user; answers the assistant message.
#[utoipa::path(
    post,
    path = "/session/{sessionID}/shell",
    operation_id = "session.shell",
    summary = "Run a shell command for the user",
    params(("sessionID" = String, Path, description = "The session")),
    request_body = ShellInput,
    responses((status = 200, body = Message), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such session", body = ErrorBody), (status = 500, description = "The session is busy", body = ErrorBody))
)]
pub async fn shell(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(input): Body<ShellInput>,
) -> Result<Json<Value>, ApiError> {
    if input.command.trim().is_empty() {
        return Err(ApiError::bad_request(
            "request body: field `command`: must not be empty",
        ));
    }
    let answered = state.runtime.shell(&session_id(&id)?, input).await;
    events_first(&state).await;
    Ok(Json(to_value(&answered?.info)?))
}

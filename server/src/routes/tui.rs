//! `/tui/*`: an editor plugin or a script drives the TUIs attached to this server (fill and
//! submit the prompt, run a command, show a toast, open a session); each call is published as
//! a `tui.*` event that attached TUIs act on.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use taskforce_actors::bus::{Event, ToastVariant};

use super::super::AppState;
use super::super::error::ApiError;
use super::super::extract::Body;
#[allow(unused_imports)]
use super::super::openapi::ErrorBody;
use super::session::session_id;

/// Body of `POST /tui/append-prompt`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct AppendBody {
    /// The text to add to the prompt.
    text: String,
}

/// Body of `POST /tui/execute-command`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct CommandBody {
    /// A keybind action (`session_new`, `agent_cycle`, …) or a TUI command (`prompt.submit`).
    command: String,
}

/// Body of `POST /tui/show-toast`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct ToastBody {
    title: Option<String>,
    message: String,
    variant: ToastVariant,
    /// How long it shows, in milliseconds.
    duration: Option<u64>,
}

/// Body of `POST /tui/select-session`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct SelectBody {
    #[serde(rename = "sessionID")]
    session_id: String,
}

/// Body of `POST /tui/publish`: one `tui.*` event, as `{type, properties}`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct PublishBody {
    /// `tui.prompt.append`, `tui.command.execute`, `tui.toast.show` or `tui.session.select`.
    #[serde(rename = "type")]
    kind: String,
    /// The event's fields.
    #[schema(value_type = Object)]
    properties: serde_json::Value,
}

fn publish(state: &AppState, event: Event) -> Json<bool> {
    state.runtime.publish(event);
    Json(true)
}

fn command(state: &AppState, command: &str) -> Json<bool> {
    publish(
        state,
        Event::TuiCommandExecute {
            command: command.to_string(),
        },
    )
}

/// The TUI command a keybind action names, as OpenCode maps them; other names pass as they
/// are.
fn command_for(action: &str) -> &str {
    match action {
        "session_new" => "session.new",
        "session_share" => "session.share",
        "session_interrupt" => "session.interrupt",
        "session_compact" => "session.compact",
        "messages_page_up" => "session.page.up",
        "messages_page_down" => "session.page.down",
        "messages_line_up" => "session.line.up",
        "messages_line_down" => "session.line.down",
        "messages_half_page_up" => "session.half.page.up",
        "messages_half_page_down" => "session.half.page.down",
        "messages_first" => "session.first",
        "messages_last" => "session.last",
        "agent_cycle" => "agent.cycle",
        other => other,
    }
}

/// `POST /tui/append-prompt`: adds text to the prompt of attached TUIs.
#[utoipa::path(post, path = "/tui/append-prompt", operation_id = "tui.appendPrompt",
    summary = "Add text to the prompt of attached TUIs", request_body = AppendBody,
    responses((status = 200, body = bool), (status = 400, description = "Bad request: the message names the field", body = ErrorBody)))]
pub async fn append_prompt(
    State(state): State<AppState>,
    Body(body): Body<AppendBody>,
) -> Json<bool> {
    publish(&state, Event::TuiPromptAppend { text: body.text })
}

/// `POST /tui/submit-prompt`: submits the prompt of attached TUIs.
#[utoipa::path(post, path = "/tui/submit-prompt", operation_id = "tui.submitPrompt",
    summary = "Submit the prompt of attached TUIs", responses((status = 200, body = bool)))]
pub async fn submit_prompt(State(state): State<AppState>) -> Json<bool> {
    command(&state, "prompt.submit")
}

/// `POST /tui/clear-prompt`: empties the prompt of attached TUIs.
#[utoipa::path(post, path = "/tui/clear-prompt", operation_id = "tui.clearPrompt",
    summary = "Empty the prompt of attached TUIs", responses((status = 200, body = bool)))]
pub async fn clear_prompt(State(state): State<AppState>) -> Json<bool> {
    command(&state, "prompt.clear")
}

/// `POST /tui/open-help`: opens the help of attached TUIs.
#[utoipa::path(post, path = "/tui/open-help", operation_id = "tui.openHelp",
    summary = "Open the help of attached TUIs", responses((status = 200, body = bool)))]
pub async fn open_help(State(state): State<AppState>) -> Json<bool> {
    command(&state, "help.show")
}

/// `POST /tui/open-sessions`: opens the session list of attached TUIs.
#[utoipa::path(post, path = "/tui/open-sessions", operation_id = "tui.openSessions",
    summary = "Open the session list of attached TUIs", responses((status = 200, body = bool)))]
pub async fn open_sessions(State(state): State<AppState>) -> Json<bool> {
    command(&state, "session.list")
}

/// `POST /tui/open-themes`: opens the theme list of attached TUIs.
#[utoipa::path(post, path = "/tui/open-themes", operation_id = "tui.openThemes",
    summary = "Open the theme list of attached TUIs", responses((status = 200, body = bool)))]
pub async fn open_themes(State(state): State<AppState>) -> Json<bool> {
    command(&state, "theme.list")
}

/// `POST /tui/open-models`: opens the model list of attached TUIs.
#[utoipa::path(post, path = "/tui/open-models", operation_id = "tui.openModels",
    summary = "Open the model list of attached TUIs", responses((status = 200, body = bool)))]
pub async fn open_models(State(state): State<AppState>) -> Json<bool> {
    command(&state, "model.list")
}

/// `POST /tui/execute-command`: runs a command in attached TUIs.
#[utoipa::path(post, path = "/tui/execute-command", operation_id = "tui.executeCommand",
    summary = "Run a command in attached TUIs", request_body = CommandBody,
    responses((status = 200, body = bool), (status = 400, description = "Bad request: the message names the field", body = ErrorBody)))]
pub async fn execute_command(
    State(state): State<AppState>,
    Body(body): Body<CommandBody>,
) -> Json<bool> {
    command(&state, command_for(&body.command))
}

/// `POST /tui/show-toast`: shows a toast in attached TUIs.
#[utoipa::path(post, path = "/tui/show-toast", operation_id = "tui.showToast",
    summary = "Show a toast in attached TUIs", request_body = ToastBody,
    responses((status = 200, body = bool), (status = 400, description = "Bad request: the message names the field", body = ErrorBody)))]
pub async fn show_toast(State(state): State<AppState>, Body(body): Body<ToastBody>) -> Json<bool> {
    publish(
        &state,
        Event::TuiToastShow {
            title: body.title,
            message: body.message,
            variant: body.variant,
            duration: body.duration,
        },
    )
}

/// `POST /tui/select-session`: opens a session in attached TUIs (404 when there is none).
#[utoipa::path(post, path = "/tui/select-session", operation_id = "tui.selectSession",
    summary = "Open a session in attached TUIs", request_body = SelectBody,
    responses((status = 200, body = bool), (status = 400, description = "Bad request: the message names the field", body = ErrorBody), (status = 404, description = "No such session", body = ErrorBody)))]
pub async fn select_session(
    State(state): State<AppState>,
    Body(body): Body<SelectBody>,
) -> Result<Json<bool>, ApiError> {
    let id = session_id(&body.session_id)?;
    state.runtime.session(&id).await?;
    Ok(publish(&state, Event::TuiSessionSelect { session_id: id }))
}

/// `POST /tui/publish`: publishes one `tui.*` event as given.
#[utoipa::path(post, path = "/tui/publish", operation_id = "tui.publish",
    summary = "Publish a tui.* event to attached TUIs", request_body = PublishBody,
    responses((status = 200, body = bool), (status = 400, description = "Bad request: the message names the field", body = ErrorBody)))]
pub async fn publish_event(
    State(state): State<AppState>,
    Body(body): Body<PublishBody>,
) -> Result<Json<bool>, ApiError> {
    if !body.kind.starts_with("tui.") {
        return Err(ApiError::bad_request(format!(
            "only tui.* events can be published here, not {:?}",
            body.kind
        )));
    }
    let event: Event = serde_json::from_value(serde_json::json!({
        "type": body.kind,
        "properties": body.properties,
    }))
    .map_err(|e| ApiError::bad_request(format!("not a {} event: {e}", body.kind)))?;
    if let Event::TuiSessionSelect { session_id } = &event {
        state.runtime.session(session_id).await?;
    }
    Ok(publish(&state, event))
}

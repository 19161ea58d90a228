//! The OpenAPI 3.1 document of the server, generated from the handlers' annotations and served
//! at `GET /doc`; `openapi.json` at the repository root is its committed copy.

use serde::Serialize;
use taskforce_actors::bus::Event;
use utoipa::OpenApi;

use super::routes::{
    cluster, file, find, global, init, log, mcp, message, part, permission, project, provider,
    question, revert, search, services, session, share, skill, tools, tui,
};

/// The error shape of every failing route: `{name, data: {message}}`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// `NotFoundError`, `BadRequest`, `UnknownError`, `Unauthorized`, …
    pub name: String,
    /// Details.
    pub data: ErrorData,
}

/// The details of an error.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorData {
    /// What went wrong, for a person.
    pub message: String,
}

/// A frame of `GET /global/event`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct GlobalEvent {
    /// The project the event belongs to (absent on `server.*` frames).
    pub directory: Option<String>,
    /// The event.
    pub payload: Event,
}

/// Any JSON object.
pub type Object = serde_json::Map<String, serde_json::Value>;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "taskforce",
        description = "OpenCode's HTTP/SSE API served by taskforce, with taskforce's additions (`/session/{sessionID}/tree`, SSE `id:` and `Last-Event-ID` replay, `rootSessionID` and `path` on permission requests)."
    ),
    paths(
        global::health,
        cluster::status,
        global::global_events,
        global::events,
        global::agents,
        global::commands,
        skill::list,
        global::config,
        provider::config_providers,
        provider::list,
        provider::auth,
        provider::oauth_authorize,
        provider::oauth_callback,
        provider::auth_set,
        provider::auth_remove,
        project::list,
        project::get_current,
        project::paths,
        project::vcs,
        mcp::status,
        mcp::add,
        mcp::connect,
        mcp::disconnect,
        mcp::auth_start,
        mcp::auth_callback,
        mcp::auth_authenticate,
        mcp::auth_remove,
        services::resources,
        services::lsp,
        services::formatter,
        log::write,
        search::text,
        find::files,
        find::symbols,
        file::list,
        file::content,
        file::status,
        session::list,
        session::create,
        session::status,
        session::get,
        session::update,
        session::delete,
        session::children,
        session::todo,
        session::tree,
        session::fork,
        session::abort,
        session::summarize,
        init::init,
        revert::revert,
        revert::unrevert,
        revert::diff,
        tui::append_prompt,
        tui::submit_prompt,
        tui::clear_prompt,
        tui::open_help,
        tui::open_sessions,
        tui::open_themes,
        tui::open_models,
        tui::execute_command,
        tui::show_toast,
        tui::select_session,
        tui::publish_event,
        share::share,
        share::unshare,
        message::list,
        message::get,
        part::delete,
        part::update,
        message::prompt,
        message::prompt_async,
        message::command,
        message::shell,
        tools::ids,
        tools::list,
        question::list,
        question::reply,
        question::reject,
        permission::list,
        permission::reply,
        permission::respond,
    ),
    components(schemas(Event, taskforce_agents::model::Part, ErrorBody))
)]
struct ApiDoc;

/// The document, with this build's version.
pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_string();
    doc
}

//! The route table: every HTTP route the server answers, by path and method.

mod catalog;
pub(crate) mod cluster;
pub(crate) mod file;
pub(crate) mod find;
mod git;
pub(crate) mod global;
pub(crate) mod init;
pub(crate) mod log;
pub(crate) mod mcp;
pub(crate) mod message;
pub(crate) mod part;
pub(crate) mod permission;
pub(crate) mod project;
pub(crate) mod provider;
pub(crate) mod question;
pub(crate) mod revert;
pub(crate) mod search;
pub(crate) mod services;
pub(crate) mod session;
pub(crate) mod share;
pub(crate) mod skill;
pub(crate) mod tools;
pub(crate) mod tui;

use axum::Router;
use axum::routing::{delete, get, post, put};

use super::AppState;
use super::error::ApiError;

/// Every route.
pub(crate) fn all() -> Router<AppState> {
    Router::new()
        .route("/global/health", get(global::health))
        .route("/cluster/status", get(cluster::status))
        .route("/doc", get(doc))
        .route("/global/event", get(global::global_events))
        .route("/event", get(global::events))
        .route("/agent", get(global::agents))
        .route("/command", get(global::commands))
        .route("/skill", get(skill::list))
        .route("/config", get(global::config))
        .route("/config/providers", get(provider::config_providers))
        .route("/provider", get(provider::list))
        .route("/provider/auth", get(provider::auth))
        .route(
            "/provider/{providerID}/oauth/authorize",
            post(provider::oauth_authorize),
        )
        .route(
            "/provider/{providerID}/oauth/callback",
            post(provider::oauth_callback),
        )
        .route(
            "/auth/{providerID}",
            put(provider::auth_set).delete(provider::auth_remove),
        )
        .route("/project", get(project::list))
        .route("/project/current", get(project::get_current))
        .route("/path", get(project::paths))
        .route("/vcs", get(project::vcs))
        .route("/mcp", get(mcp::status).post(mcp::add))
        .route("/mcp/{name}/connect", post(mcp::connect))
        .route("/mcp/{name}/disconnect", post(mcp::disconnect))
        .route(
            "/mcp/{name}/auth",
            post(mcp::auth_start).delete(mcp::auth_remove),
        )
        .route("/mcp/{name}/auth/callback", post(mcp::auth_callback))
        .route(
            "/mcp/{name}/auth/authenticate",
            post(mcp::auth_authenticate),
        )
        .route("/experimental/resource", get(services::resources))
        .route("/lsp", get(services::lsp))
        .route("/formatter", get(services::formatter))
        .route("/log", post(log::write))
        .route("/find", get(search::text))
        .route("/find/file", get(find::files))
        .route("/find/symbol", get(find::symbols))
        .route("/file", get(file::list))
        .route("/file/content", get(file::content))
        .route("/file/status", get(file::status))
        .route("/experimental/tool/ids", get(tools::ids))
        .route("/experimental/tool", get(tools::list))
        .route("/question", get(question::list))
        .route("/question/{requestID}/reply", post(question::reply))
        .route("/question/{requestID}/reject", post(question::reject))
        .route("/tui/append-prompt", post(tui::append_prompt))
        .route("/tui/submit-prompt", post(tui::submit_prompt))
        .route("/tui/clear-prompt", post(tui::clear_prompt))
        .route("/tui/open-help", post(tui::open_help))
        .route("/tui/open-sessions", post(tui::open_sessions))
        .route("/tui/open-themes", post(tui::open_themes))
        .route("/tui/open-models", post(tui::open_models))
        .route("/tui/execute-command", post(tui::execute_command))
        .route("/tui/show-toast", post(tui::show_toast))
        .route("/tui/select-session", post(tui::select_session))
        .route("/tui/publish", post(tui::publish_event))
        .route("/session", get(session::list).post(session::create))
        .route("/session/status", get(session::status))
        .route(
            "/session/{sessionID}",
            get(session::get)
                .patch(session::update)
                .delete(session::delete),
        )
        .route("/session/{sessionID}/children", get(session::children))
        .route("/session/{sessionID}/todo", get(session::todo))
        .route("/session/{sessionID}/tree", get(session::tree))
        .route("/session/{sessionID}/fork", post(session::fork))
        .route("/session/{sessionID}/abort", post(session::abort))
        .route("/session/{sessionID}/summarize", post(session::summarize))
        .route("/session/{sessionID}/init", post(init::init))
        .route("/session/{sessionID}/revert", post(revert::revert))
        .route("/session/{sessionID}/unrevert", post(revert::unrevert))
        .route("/session/{sessionID}/diff", get(revert::diff))
        .route(
            "/session/{sessionID}/share",
            post(share::share).delete(share::unshare),
        )
        .route(
            "/session/{sessionID}/message",
            get(message::list).post(message::prompt),
        )
        .route(
            "/session/{sessionID}/prompt_async",
            post(message::prompt_async),
        )
        .route(
            "/session/{sessionID}/message/{messageID}",
            get(message::get),
        )
        .route(
            "/session/{sessionID}/message/{messageID}/part/{partID}",
            delete(part::delete).patch(part::update),
        )
        .route("/session/{sessionID}/command", post(message::command))
        .route("/session/{sessionID}/shell", post(message::shell))
        .route(
            "/session/{sessionID}/permissions/{permissionID}",
            post(permission::respond),
        )
        .route("/permission", get(permission::list))
        .route("/permission/{requestID}/reply", post(permission::reply))
        .fallback(not_found)
}

/// `GET /doc`: the OpenAPI 3.1 document.
async fn doc() -> axum::Json<utoipa::openapi::OpenApi> {
    axum::Json(super::openapi::document())
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!("no route for {}", uri.path()))
}

/// The `?directory=` every OpenCode route accepts; this server serves one project.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct DirectoryQuery {
    /// The project directory the client means.
    pub directory: Option<String>,
}

/// Checks that a client's `directory` (query or `x-opencode-directory`) is this server's project.
pub(crate) fn check_directory(
    state: &AppState,
    query: Option<&str>,
    headers: &axum::http::HeaderMap,
) -> Result<(), ApiError> {
    let header = headers
        .get("x-opencode-directory")
        .and_then(|v| v.to_str().ok());
    let Some(given) = query.or(header) else {
        return Ok(());
    };
    let decoded = taskforce_agents::model::data_url::percent_decode(given);
    let same = |p: &std::path::Path| {
        std::fs::canonicalize(p).ok() == std::fs::canonicalize(&state.directory).ok()
    };
    if same(std::path::Path::new(&decoded)) {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "directory `{decoded}`: this server serves the project at {}",
            state.directory.display()
        )))
    }
}

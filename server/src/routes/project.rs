//! `/project`, `/project/current`, `/path` and `/vcs`: the one project this server serves,
//! where taskforce keeps things, and the project's git branch.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use serde::Serialize;
use taskforce_actors::store::SessionFilter;

use super::super::AppState;
use super::super::error::ApiError;
use super::super::extract::Query;
#[allow(unused_imports)]
use super::super::openapi::ErrorBody;
use super::{DirectoryQuery, check_directory, git};

/// A project, in OpenCode's shape.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Project {
    /// The id sessions record as their `projectID`.
    pub id: String,
    /// The project's root folder.
    pub worktree: String,
    /// `git` when the root is a git repository.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vcs: Option<String>,
    /// The root folder's name.
    pub name: String,
    /// When the project was first and last worked on.
    pub time: ProjectTime,
    /// Other worktrees of the project (none).
    pub sandboxes: Vec<String>,
}

/// When a project was first and last worked on (epoch ms).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ProjectTime {
    /// Its oldest session's creation (now when it has none).
    pub created: u64,
    /// Its latest session change (now when it has none).
    pub updated: u64,
}

async fn current(state: &AppState) -> Result<Project, ApiError> {
    let runtime = &state.runtime;
    let sessions = runtime
        .sessions(&SessionFilter {
            project_id: Some(runtime.project_id().to_string()),
            ..SessionFilter::default()
        })
        .await?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let created = sessions.iter().map(|s| s.time.created).min().unwrap_or(now);
    let updated = sessions.iter().map(|s| s.time.updated).max().unwrap_or(now);
    let root = &runtime.paths().project_root;
    Ok(Project {
        id: runtime.project_id().to_string(),
        worktree: root.display().to_string(),
        vcs: git::is_repo(root).then(|| "git".to_string()),
        name: root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        time: ProjectTime { created, updated },
        sandboxes: Vec::new(),
    })
}

/// `GET /project`: the projects this server serves (one).
#[utoipa::path(
    get,
    path = "/project",
    operation_id = "project.list",
    summary = "The projects this server serves (one)",
    params(("directory" = Option<String>, Query, description = "The project directory (must be the served one)")),
    responses((status = 200, body = Vec<Project>), (status = 400, description = "Bad request: the message names the field", body = ErrorBody))
)]
pub async fn list(
    State(state): State<AppState>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
) -> Result<Json<Vec<Project>>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    Ok(Json(vec![current(&state).await?]))
}

/// `GET /project/current`: the project this server serves.
#[utoipa::path(
    get,
    path = "/project/current",
    operation_id = "project.current",
    summary = "The project this server serves",
    params(("directory" = Option<String>, Query, description = "The project directory (must be the served one)")),
    responses((status = 200, body = Project), (status = 400, description = "Bad request: the message names the field", body = ErrorBody))
)]
pub async fn get_current(
    State(state): State<AppState>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
) -> Result<Json<Project>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    Ok(Json(current(&state).await?))
}

/// The answer of `GET /path`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Paths {
    /// The user's home folder (empty when unknown).
    pub home: String,
    /// Where sessions and tool output are stored (the data folder).
    pub state: String,
    /// The global configuration folder (empty when unknown).
    pub config: String,
    /// The project's root folder.
    pub worktree: String,
    /// The folder taskforce was started in.
    pub directory: String,
}

/// `GET /path`: the folders taskforce uses.
#[utoipa::path(
    get,
    path = "/path",
    operation_id = "path.get",
    summary = "The folders taskforce uses",
    params(("directory" = Option<String>, Query, description = "The project directory (must be the served one)")),
    responses((status = 200, body = Paths), (status = 400, description = "Bad request: the message names the field", body = ErrorBody))
)]
pub async fn paths(
    State(state): State<AppState>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
) -> Result<Json<Paths>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    let paths = state.runtime.paths();
    let shown = |p: Option<&std::path::PathBuf>| p.map(|p| p.display().to_string());
    Ok(Json(Paths {
        home: shown(paths.home.as_ref()).unwrap_or_default(),
        state: paths.data_dir.display().to_string(),
        config: shown(paths.global_config_dir.as_ref()).unwrap_or_default(),
        worktree: paths.project_root.display().to_string(),
        directory: paths.cwd.display().to_string(),
    }))
}

/// The answer of `GET /vcs`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Vcs {
    /// The checked-out branch (`HEAD` when detached); absent when the project is not a git
    /// repository.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

/// `GET /vcs`: the project's git branch.
#[utoipa::path(
    get,
    path = "/vcs",
    operation_id = "vcs.get",
    summary = "The project's git branch",
    params(("directory" = Option<String>, Query, description = "The project directory (must be the served one)")),
    responses((status = 200, body = Vcs), (status = 400, description = "Bad request: the message names the field", body = ErrorBody))
)]
pub async fn vcs(
    State(state): State<AppState>,
    Query(q): Query<DirectoryQuery>,
    headers: HeaderMap,
) -> Result<Json<Vcs>, ApiError> {
    check_directory(&state, q.directory.as_deref(), &headers)?;
    Ok(Json(Vcs {
        branch: git::branch(&state.directory),
    }))
}

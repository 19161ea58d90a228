//! `GET /cluster/status`: the nodes of the cluster this server's runtime is a node of.

use axum::Json;
use axum::extract::State;
use taskforce_actors::cluster::ClusterStatus;

use super::super::AppState;
use super::super::error::ApiError;
#[allow(unused_imports)]
use super::super::openapi::ErrorBody;

/// `GET /cluster/status`: every node with a lease in the cluster (expired ones marked), as
/// `taskforce cluster status --json` prints them.
#[utoipa::path(
    get,
    path = "/cluster/status",
    operation_id = "cluster.status",
    summary = "The cluster's nodes: their load, connection and lease (taskforce's addition)",
    responses(
        (status = 200, body = ClusterStatus),
        (status = 404, description = "This server's runtime is not a node of a cluster", body = ErrorBody),
        (status = 500, description = "The cluster's NATS could not be read", body = ErrorBody)
    )
)]
pub async fn status(State(state): State<AppState>) -> Result<Json<ClusterStatus>, ApiError> {
    let Some(cluster) = state.runtime.cluster() else {
        return Err(ApiError::not_found(
            "this server is not a node of a cluster (start it with `taskforce serve --cluster`)",
        ));
    };
    let status = cluster
        .status()
        .await
        .map_err(|e| ApiError::unknown(e.to_string()))?;
    Ok(Json(status))
}

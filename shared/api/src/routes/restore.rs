//! Restores and clones: `POST /api/v1/deployments/{id}/_restore` and
//! `POST /api/v1/deployments/{id}/_clone` (the `restore_snapshot` of a
//! create is the create's).

use crate::error::ApiError;
use crate::extract::{Caller, JsonSpec, Params, PathParam, idempotency_key};
use crate::params::NoParams;
use crate::respond::{CreatedOr, Planned, deployment_created};
use crate::responses::{BodyErrors, Conflict, Invalid, ManageErrors, NotFound};
use crate::state::ApiState;
use axum::extract::State;
use axum::http::HeaderMap;
use floe_app::restore::CloneRequest;
use floe_domain::deployment::DeploymentView;
use floe_domain::restore::RestoreRequest;
use serde::Deserialize;
use utoipa::IntoParams;

operations!([restore_deployment], [clone_deployment],);

/// Restore a snapshot into a running deployment.
///
/// Runs as a `restore` plan: the snapshot's repository is registered
/// read-only if it is not the deployment's own, the restore starts with
/// the repository's `max_restore_bytes_per_sec`, and `wait-restored`
/// reports shards and bytes recovered until it is done. Elasticsearch
/// refuses to restore over an open index: restore with `rename_pattern`,
/// or close or delete the index first.
///
/// Refusals:
/// - 400: invalid, an unknown snapshot or repository, or one the nodes cannot reach; the field is named.
/// - 409: another plan is pending, the deployment is not running, no successful snapshot, or the snapshot failed.
/// - 409 `restore.source_path_read_only` (field `repository`): a mount clone reads its
///   source's path under that name; registering it at the clone's own path would take
///   the mounted data away.
#[utoipa::path(
    post,
    path = "/api/v1/deployments/{id}/_restore",
    operation_id = "restore-deployment",
    tag = "deployments",
    params(("id" = String, Path, description = "Deployment id.")),
    request_body(content = RestoreRequest, example = json!({"snapshot_name": "__latest_success__", "indices": ["orders-*"], "rename_pattern": "(.+)", "rename_replacement": "restored-$1"})),
    extensions(("x-floe-roles" = json!(floe_app::caller::MANAGE_ROLES))),
    responses(Planned<DeploymentView>, Invalid, ManageErrors, NotFound, Conflict, BodyErrors),
    security(("bearer" = []))
)]
async fn restore_deployment(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
    params: Params<NoParams>,
    JsonSpec(request): JsonSpec<RestoreRequest>,
) -> Result<Planned<DeploymentView>, ApiError> {
    let who = caller.manager()?;
    params.check()?;
    let restoring = state.app.restore_deployment(&who, &id, request).await?;
    Ok(Planned(restoring))
}

/// Clone a deployment from its snapshot.
///
/// The short form of `POST /api/v1/deployments` with `restore_snapshot`:
/// a new deployment with the source's version, user settings and (unless
/// given) node groups, filled from the source's snapshot
/// (`__latest_success__` by default). The source's repository is
/// registered read-only on the clone; the clone has no repository of its
/// own. `Idempotency-Key` works as on a create. The clone records what it
/// depends on (`clone_source`) and pins the snapshot: a mount clone until
/// it is deleted, a restore clone until its data is recovered.
///
/// Refusals:
/// - 409: the source has no successful snapshot, or the snapshot failed.
/// - 400 `restore.snapshot_not_found`: the snapshot was deleted while the clone was created.
#[utoipa::path(
    post,
    path = "/api/v1/deployments/{id}/_clone",
    operation_id = "clone-deployment",
    tag = "deployments",
    params(
        ("id" = String, Path, description = "The source deployment's id."),
        ("Idempotency-Key" = Option<String>, Header, pattern = r"^[!-~]{1,128}$", description = "Retry key: the same key and body return the first result."),
        CloneParams,
    ),
    request_body(content = CloneRequest, example = json!({"name": "logs-analysis", "mode": "mount", "license": "trial"})),
    extensions(("x-floe-roles" = json!(floe_app::caller::MANAGE_ROLES))),
    responses(CreatedOr<DeploymentView>, Invalid, ManageErrors, NotFound, Conflict, BodyErrors),
    security(("bearer" = []))
)]
async fn clone_deployment(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
    headers: HeaderMap,
    params: Params<CloneParams>,
    JsonSpec(request): JsonSpec<CloneRequest>,
) -> Result<CreatedOr<DeploymentView>, ApiError> {
    let who = caller.manager()?;
    let key = idempotency_key(&headers, params.check()?.request_id);
    let creation = state
        .app
        .clone_deployment(&who, &id, request, key.as_deref())
        .await?;
    Ok(deployment_created(creation))
}

/// The query of a clone.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct CloneParams {
    /// Same as Idempotency-Key (ECE).
    #[param(pattern = r"^[!-~]{1,128}$")]
    request_id: Option<String>,
}

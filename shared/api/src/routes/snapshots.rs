//! A deployment's snapshots: take one by hand, list them (newest first, with
//! an ECE-like health summary), look at one, delete one.

use crate::error::{ApiError, ErrorBody};
use crate::extract::{Caller, Params, PathPair, PathParam, parse_json};
use crate::params::{PageParams, flag};
use crate::respond::{Accepted, DoneOr, NoContent, Plain};
use crate::responses::{Conflict, Invalid, ManageErrors, NotFound, ReadErrors, Upstream};
use crate::state::ApiState;
use axum::body::Bytes;
use axum::extract::State;
use floe_app::snapshots::{SnapshotList, SnapshotRequest};
use floe_domain::snapshot::SnapshotView;
use serde::Deserialize;
use utoipa::IntoParams;

operations!(
    [take_snapshot, list_snapshots],
    [get_snapshot, delete_snapshot],
);

/// Take a snapshot of the deployment now, into its repository.
///
/// Refusals:
/// - 400: bad name, indices or parameters; `fields` names them.
/// - 409: a snapshot is already running (`snapshots.concurrent_snapshot`), the name is taken, the deployment is not running or has no repository.
/// - 502: the cluster refused the snapshot.
#[utoipa::path(
    post,
    path = "/api/v1/deployments/{id}/snapshots",
    operation_id = "take-deployment-snapshot",
    tag = "deployments",
    params(
        ("id" = String, Path, description = "Deployment id."),
        TakeParams,
    ),
    request_body(content = SnapshotRequest, description = "Optional; an empty body takes every index under a generated name.",
        example = json!({"name": "<before-upgrade-{now/d}>", "indices": ["logs-*"]})),
    extensions(("x-floe-roles" = json!(floe_app::caller::MANAGE_ROLES))),
    responses(DoneOr<SnapshotView>, Invalid, ManageErrors, NotFound, Conflict, Upstream, (status = 503, description = "The cluster cannot be reached right now.", body = ErrorBody)),
    security(("bearer" = []))
)]
async fn take_snapshot(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
    params: Params<TakeParams>,
    body: Bytes,
) -> Result<DoneOr<SnapshotView>, ApiError> {
    let who = caller.manager()?;
    let wait = params.check()?.wait_for_completion;
    let request: SnapshotRequest = if body.iter().all(u8::is_ascii_whitespace) {
        SnapshotRequest::default()
    } else {
        parse_json(&body)?
    };
    let taken = state.app.take_snapshot(&who, &id, request, wait).await?;
    Ok(if taken.finished {
        DoneOr::Done(Plain(taken.snapshot))
    } else {
        DoneOr::Running(Accepted(taken.snapshot))
    })
}

/// The deployment's snapshots, newest first, with a summary on the first page.
///
/// A page at a time, each with its state, times, indices, shards and size,
/// the policy that took it, and, for the snapshots Floe took, the
/// document counts recorded around it. The first page's summary gives the
/// count, the latest snapshot's state and the end of the latest successful
/// one.
#[utoipa::path(
    get,
    path = "/api/v1/deployments/{id}/snapshots",
    operation_id = "list-deployment-snapshots",
    tag = "deployments",
    params(
        ("id" = String, Path, description = "Deployment id."),
        PageParams,
    ),
    extensions(("x-floe-roles" = json!(floe_app::caller::READ_ROLES))),
    responses(Plain<SnapshotList>, Invalid, ReadErrors, NotFound),
    security(("bearer" = []))
)]
async fn list_snapshots(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
    params: Params<PageParams>,
) -> Result<Plain<SnapshotList>, ApiError> {
    let who = caller.reader()?;
    let page = params.check()?.page();
    Ok(Plain(state.app.list_snapshots(&who, &id, page).await?))
}

/// One snapshot; a running one is brought up to date from the cluster.
///
/// Refusals:
/// - 404: no such deployment (`deployments.deployment_not_found`) or snapshot (`snapshots.snapshot_not_found`).
#[utoipa::path(
    get,
    path = "/api/v1/deployments/{id}/snapshots/{name}",
    operation_id = "get-deployment-snapshot",
    tag = "deployments",
    params(
        ("id" = String, Path, description = "Deployment id."),
        ("name" = String, Path, description = "Snapshot name."),
    ),
    extensions(("x-floe-roles" = json!(floe_app::caller::READ_ROLES))),
    responses(Plain<SnapshotView>, ReadErrors, NotFound),
    security(("bearer" = []))
)]
async fn get_snapshot(
    State(state): State<ApiState>,
    caller: Caller,
    PathPair(id, name): PathPair,
) -> Result<Plain<SnapshotView>, ApiError> {
    let who = caller.reader()?;
    Ok(Plain(state.app.get_snapshot(&who, &id, &name).await?))
}

/// Delete a snapshot from the repository and forget it.
///
/// Refusals:
/// - 409: the deployment is not running, so its cluster cannot delete it.
/// - 409 `snapshots.snapshot_pinned` (field `name`): clones depend on the snapshot
///   (a mount clone until it is deleted, a restore clone until its restore has
///   completed); the message names them. Retention keeps such snapshots too.
/// - 502: the cluster refused the delete.
#[utoipa::path(
    delete,
    path = "/api/v1/deployments/{id}/snapshots/{name}",
    operation_id = "delete-deployment-snapshot",
    tag = "deployments",
    params(
        ("id" = String, Path, description = "Deployment id."),
        ("name" = String, Path, description = "Snapshot name."),
    ),
    extensions(("x-floe-roles" = json!(floe_app::caller::MANAGE_ROLES))),
    responses(NoContent, ManageErrors, NotFound, Conflict, Upstream, (status = 503, description = "The cluster cannot be reached right now.", body = ErrorBody)),
    security(("bearer" = []))
)]
async fn delete_snapshot(
    State(state): State<ApiState>,
    caller: Caller,
    PathPair(id, name): PathPair,
) -> Result<NoContent, ApiError> {
    let who = caller.manager()?;
    state.app.delete_snapshot(&who, &id, &name).await?;
    Ok(NoContent)
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct TakeParams {
    /// Answer once the snapshot ended (200) rather than at once (202).
    #[serde(default, deserialize_with = "flag")]
    wait_for_completion: bool,
}

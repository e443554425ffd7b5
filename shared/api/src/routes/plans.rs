//! A deployment's plans: `/api/v1/deployments/{id}/plans`, cancelling the
//! pending plan, and `_shutdown`.

use crate::error::ApiError;
use crate::extract::{Caller, Params, PathParam};
use crate::params::{flag, page_size};
use crate::respond::{Accepted, DoneOr, Plain, Planned};
use crate::responses::{Conflict, Invalid, ManageErrors, NotFound, ReadErrors};
use crate::state::ApiState;
use axum::extract::State;
use floe_app::plans::{DeploymentPlans, PlanView};
use floe_domain::deployment::DeploymentView;
use serde::Deserialize;
use utoipa::IntoParams;

operations!(
    [get_plans],
    [cancel_pending_plan],
    [shutdown_deployment],
    [start_deployment],
);

/// A deployment's plans: the current one, the pending one, and the history.
///
/// Each plan with its steps, their status and times, and a failed step's
/// error. The history is newest first, a page at a time (`size`, `cursor`).
#[utoipa::path(
    get,
    path = "/api/v1/deployments/{id}/plans",
    operation_id = "get-deployment-plans",
    tag = "deployments",
    params(
        ("id" = String, Path, description = "Deployment id."),
        HistoryParams,
    ),
    extensions(("x-floe-roles" = json!(floe_app::caller::READ_ROLES))),
    responses(Plain<DeploymentPlans>, Invalid, ReadErrors, NotFound),
    security(("bearer" = []))
)]
async fn get_plans(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
    params: Params<HistoryParams>,
) -> Result<Plain<DeploymentPlans>, ApiError> {
    let who = caller.reader()?;
    let params = params.check()?;
    let page = floe_store::PageRequest {
        size: params.size,
        cursor: params.cursor,
    };
    Ok(Plain(state.app.deployment_plans(&who, &id, page).await?))
}

/// Cancel the pending plan: it stops at the next step boundary and unwinds
/// (202). With `force_delete=true` it ends at once instead, where it
/// stands (200): no further step or undo runs, the plan is recorded
/// `failed` (`force_ended`) and the deployment `failed`, its nodes as the
/// plan left them; send the spec again (PUT) to converge, or shut it down.
/// The way out of a plan stuck waiting, also while it unwinds.
///
/// Refusals:
/// - 400: an unknown parameter, or `force_delete` not true or false.
/// - 404: no such deployment, or no pending plan.
#[utoipa::path(
    delete,
    path = "/api/v1/deployments/{id}/plans/pending",
    operation_id = "cancel-deployment-pending-plan",
    tag = "deployments",
    params(
        ("id" = String, Path, description = "Deployment id."),
        CancelParams,
    ),
    extensions(("x-floe-roles" = json!(floe_app::caller::MANAGE_ROLES))),
    responses(DoneOr<PlanView>, Invalid, ManageErrors, NotFound),
    security(("bearer" = []))
)]
async fn cancel_pending_plan(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
    params: Params<CancelParams>,
) -> Result<DoneOr<PlanView>, ApiError> {
    let who = caller.manager()?;
    if params.check()?.force_delete {
        let ended = state.app.force_end_pending_plan(&who, &id).await?;
        return Ok(DoneOr::Done(Plain(ended)));
    }
    let cancelling = state.app.cancel_pending_plan(&who, &id).await?;
    Ok(DoneOr::Running(Accepted(cancelling)))
}

/// Shut a deployment down: its nodes are terminated; the record (and its
/// snapshots) stay, and it can be deleted afterwards.
///
/// Refusals:
/// - 409: another plan is pending, or the deployment is already stopped.
#[utoipa::path(
    post,
    path = "/api/v1/deployments/{id}/_shutdown",
    operation_id = "shutdown-deployment",
    tag = "deployments",
    params(
        ("id" = String, Path, description = "Deployment id."),
        ShutdownParams,
    ),
    extensions(("x-floe-roles" = json!(floe_app::caller::MANAGE_ROLES))),
    responses(Planned<DeploymentView>, Invalid, ManageErrors, NotFound, Conflict),
    security(("bearer" = []))
)]
async fn shutdown_deployment(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
    params: Params<ShutdownParams>,
) -> Result<Planned<DeploymentView>, ApiError> {
    let who = caller.manager()?;
    let skip_snapshot = params.check()?.skip_snapshot;
    let stopping = state
        .app
        .shutdown_deployment(&who, &id, skip_snapshot)
        .await?;
    Ok(Planned(stopping))
}

/// Start a stopped deployment again: new nodes from its spec (with any
/// change recorded while it was stopped), its own certificates and
/// `elastic` password, and, with `restore_snapshot`, the data of one of its
/// own snapshots.
///
/// Refusals:
/// - 400: bad parameters, or no repository to restore from.
/// - 409: another plan is pending, the deployment is not stopped, or it has no successful snapshot.
#[utoipa::path(
    post,
    path = "/api/v1/deployments/{id}/_start",
    operation_id = "start-deployment",
    tag = "deployments",
    params(
        ("id" = String, Path, description = "Deployment id."),
        StartParams,
    ),
    extensions(("x-floe-roles" = json!(floe_app::caller::MANAGE_ROLES))),
    responses(Planned<DeploymentView>, Invalid, ManageErrors, NotFound, Conflict),
    security(("bearer" = []))
)]
async fn start_deployment(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
    params: Params<StartParams>,
) -> Result<Planned<DeploymentView>, ApiError> {
    let who = caller.manager()?;
    let params = params.check()?;
    let starting = state
        .app
        .start_deployment(&who, &id, params.restore_snapshot.as_deref())
        .await?;
    Ok(Planned(starting))
}

/// The plan history's page.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct HistoryParams {
    /// History page size, 1 to 100 (default 20).
    #[serde(default, deserialize_with = "page_size")]
    #[param(minimum = 1, maximum = 100)]
    size: Option<u32>,
    /// `next_cursor` of the previous page. Opaque: only a `next_cursor` this API returned is a cursor (400 otherwise).
    cursor: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct CancelParams {
    /// End the plan at once, running no further step or undo, and mark the deployment `failed` (ECE's name).
    #[serde(default, deserialize_with = "flag")]
    force_delete: bool,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct ShutdownParams {
    /// Terminate without the final snapshot the plan otherwise takes into the deployment's repository.
    #[serde(default, deserialize_with = "flag")]
    skip_snapshot: bool,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct StartParams {
    /// Restore this snapshot of the deployment's own, or `__latest_success__`, from its repository once the nodes run.
    restore_snapshot: Option<String>,
}

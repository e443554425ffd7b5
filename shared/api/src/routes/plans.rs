//! A deployment's plans: `/api/v1/deployments/{id}/plans`, cancelling the
//! pending plan, and `_shutdown`.

use crate::error::ApiError;
use crate::extract::{Caller, PathParam, bool_param, only_params, page_request};
use crate::respond::{Accepted, DoneOr, Plain, Planned};
use crate::responses::{Conflict, Invalid, ManageErrors, NotFound, ReadErrors};
use crate::state::ApiState;
use axum::extract::{Query, State};
use floe_app::plans::{DeploymentPlans, PlanView};
use floe_domain::deployment::DeploymentView;
use std::collections::BTreeMap;

operations!(
    [get_plans],
    [cancel_pending_plan],
    [shutdown_deployment],
    [start_deployment],
);

/// A deployment's plans: the current one, the pending one, and the history.
#[utoipa::path(
    get,
    path = "/api/v1/deployments/{id}/plans",
    operation_id = "get-deployment-plans",
    tag = "deployments",
    params(
        ("id" = String, Path, description = "Deployment id."),
        ("size" = Option<u32>, Query, minimum = 1, maximum = 100, description = "History page size, 1 to 100 (default 20)."),
        ("cursor" = Option<String>, Query, description = "`next_cursor` of the previous page. Opaque: only a `next_cursor` this API returned is a cursor (400 otherwise)."),
    ),
    extensions(("x-floe-roles" = json!(floe_app::caller::READ_ROLES))),
    responses(Plain<DeploymentPlans>, Invalid, ReadErrors, NotFound),
    security(("bearer" = []))
)]
async fn get_plans(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Plain<DeploymentPlans>, ApiError> {
    let who = caller.reader()?;
    only_params(&query, &["size", "cursor"])?;
    let page = page_request(&query)?;
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
        ("force_delete" = Option<bool>, Query, description = "End the plan at once, running no further step or undo, and mark the deployment `failed` (ECE's name)."),
    ),
    extensions(("x-floe-roles" = json!(floe_app::caller::MANAGE_ROLES))),
    responses(DoneOr<PlanView>, Invalid, ManageErrors, NotFound),
    security(("bearer" = []))
)]
async fn cancel_pending_plan(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<DoneOr<PlanView>, ApiError> {
    let who = caller.manager()?;
    only_params(&query, &["force_delete"])?;
    if bool_param(&query, "force_delete")? {
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
        ("skip_snapshot" = Option<bool>, Query, description = "Terminate without the final snapshot the plan otherwise takes into the deployment's repository."),
    ),
    extensions(("x-floe-roles" = json!(floe_app::caller::MANAGE_ROLES))),
    responses(Planned<DeploymentView>, Invalid, ManageErrors, NotFound, Conflict),
    security(("bearer" = []))
)]
async fn shutdown_deployment(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Planned<DeploymentView>, ApiError> {
    let who = caller.manager()?;
    only_params(&query, &["skip_snapshot"])?;
    let skip_snapshot = bool_param(&query, "skip_snapshot")?;
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
        ("restore_snapshot" = Option<String>, Query, description = "Restore this snapshot of the deployment's own, or `__latest_success__`, from its repository once the nodes run."),
    ),
    extensions(("x-floe-roles" = json!(floe_app::caller::MANAGE_ROLES))),
    responses(Planned<DeploymentView>, Invalid, ManageErrors, NotFound, Conflict),
    security(("bearer" = []))
)]
async fn start_deployment(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Planned<DeploymentView>, ApiError> {
    let who = caller.manager()?;
    only_params(&query, &["restore_snapshot"])?;
    let starting = state
        .app
        .start_deployment(&who, &id, query.get("restore_snapshot").map(String::as_str))
        .await?;
    Ok(Planned(starting))
}

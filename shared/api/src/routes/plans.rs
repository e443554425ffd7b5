//! A deployment's plans: `/api/v1/deployments/{id}/plans`, cancelling the
//! pending plan, and `_shutdown`.

use crate::error::{ApiError, ErrorBody};
use crate::extract::{Caller, PathParam, bool_param, only_params, page_request};
use crate::respond::{Accepted, Versioned};
use crate::responses::{ManageErrors, ReadErrors};
use crate::state::ApiState;
use axum::Json;
use axum::extract::{Query, State};
use floe_app::plans::{DeploymentPlans, PlanView};
use floe_domain::deployment::DeploymentView;
use std::collections::BTreeMap;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn router() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(get_plans))
        .routes(routes!(cancel_pending_plan))
        .routes(routes!(shutdown_deployment))
        .routes(routes!(start_deployment))
}

fn plans_example() -> serde_json::Value {
    serde_json::json!({
        "pending": {"plan_attempt_id": crate::examples::PLAN_ID, "kind": "create", "status": "running",
            "source": {"action": "deployments.create", "user": "alice", "date": "2026-11-29T10:00:00Z"},
            "created": "2026-11-29T10:00:00Z", "cancel_requested": false,
            "steps": [
                {"step_id": "template:hot", "status": "succeeded", "started": "2026-11-29T10:00:01Z", "duration_in_millis": 412, "attempts": 1, "info_log": ["launch template floe-…-hot (lt-0abc) for m6g.xlarge (arm64)"]},
                {"step_id": "launch:hot", "status": "succeeded", "started": "2026-11-29T10:00:02Z", "duration_in_millis": 1830, "attempts": 1, "info_log": ["1 nodes of hot in zone 0", "1 nodes of hot in zone 1", "1 nodes of hot in zone 2"]},
                {"step_id": "wait-running", "status": "waiting", "started": "2026-11-29T10:00:04Z", "attempts": 3, "info_log": ["0 of 3 nodes running", "2 of 3 nodes running"]}
            ]},
        "history": []
    })
}

/// A deployment's plans: the current one, the pending one, and the history.
#[utoipa::path(
    get,
    path = "/api/v1/deployments/{id}/plans",
    operation_id = "get-deployment-plans",
    tag = "deployments",
    params(
        ("id" = String, Path, description = "Deployment id."),
        ("size" = Option<u32>, Query, description = "History page size, 1 to 100 (default 20)."),
        ("cursor" = Option<String>, Query, description = "`next_cursor` of the previous page."),
    ),
    responses(
        (status = 200, description = "Plans with their steps: status, timing, attempts, log lines and errors.", body = DeploymentPlans,
         example = json!(plans_example())),
        (status = 400, description = "Bad paging parameters.", body = ErrorBody),
        ReadErrors,
        (status = 404, description = "No such deployment.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn get_plans(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Json<DeploymentPlans>, ApiError> {
    let who = caller.reader()?;
    only_params(&query, &["size", "cursor"])?;
    let page = page_request(&query)?;
    Ok(Json(state.app.deployment_plans(&who, &id, page).await?))
}

/// Cancel the pending plan: it stops at the next step boundary and unwinds.
#[utoipa::path(
    delete,
    path = "/api/v1/deployments/{id}/plans/pending",
    operation_id = "cancel-deployment-pending-plan",
    tag = "deployments",
    params(("id" = String, Path, description = "Deployment id.")),
    responses(
        (status = 202, description = "Cancellation requested; the plan unwinds what it did.", body = PlanView,
         example = json!(plans_example()["pending"])),
        ManageErrors,
        (status = 404, description = "No such deployment, or no pending plan.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn cancel_pending_plan(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
) -> Result<Accepted<PlanView>, ApiError> {
    let who = caller.manager()?;
    Ok(Accepted(state.app.cancel_pending_plan(&who, &id).await?))
}

/// Shut a deployment down: its nodes are terminated; the record (and its
/// snapshots) stay, and it can be deleted afterwards.
#[utoipa::path(
    post,
    path = "/api/v1/deployments/{id}/_shutdown",
    operation_id = "shutdown-deployment",
    tag = "deployments",
    params(
        ("id" = String, Path, description = "Deployment id."),
        ("skip_snapshot" = Option<bool>, Query, description = "Terminate without the final snapshot the plan otherwise takes into the deployment's repository."),
    ),
    responses(
        (status = 202, description = "A shutdown plan is pending; the deployment is stopping.", body = DeploymentView,
         example = json!(crate::examples::deployment_view())),
        ManageErrors,
        (status = 404, description = "No such deployment.", body = ErrorBody),
        (status = 409, description = "Another plan is pending, or the deployment is already stopped.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn shutdown_deployment(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Versioned<DeploymentView>, ApiError> {
    let who = caller.manager()?;
    only_params(&query, &["skip_snapshot"])?;
    let skip_snapshot = bool_param(&query, "skip_snapshot")?;
    let stopping = state
        .app
        .shutdown_deployment(&who, &id, skip_snapshot)
        .await?;
    Ok(Versioned::accepted(stopping))
}

/// Start a stopped deployment again: new nodes from its spec (with any
/// change recorded while it was stopped), its own certificates and
/// `elastic` password, and, with `restore_snapshot`, the data of one of its
/// own snapshots.
#[utoipa::path(
    post,
    path = "/api/v1/deployments/{id}/_start",
    operation_id = "start-deployment",
    tag = "deployments",
    params(
        ("id" = String, Path, description = "Deployment id."),
        ("restore_snapshot" = Option<String>, Query, description = "Restore this snapshot of the deployment's own, or `__latest_success__`, from its repository once the nodes run."),
    ),
    responses(
        (status = 202, description = "A start plan is pending; the deployment is initializing.", body = DeploymentView,
         example = json!(crate::examples::deployment_view())),
        (status = 400, description = "Bad parameters, or no repository to restore from.", body = ErrorBody),
        ManageErrors,
        (status = 404, description = "No such deployment.", body = ErrorBody),
        (status = 409, description = "Another plan is pending, the deployment is not stopped, or it has no successful snapshot.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn start_deployment(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Versioned<DeploymentView>, ApiError> {
    let who = caller.manager()?;
    only_params(&query, &["restore_snapshot"])?;
    let starting = state
        .app
        .start_deployment(&who, &id, query.get("restore_snapshot").map(String::as_str))
        .await?;
    Ok(Versioned::accepted(starting))
}

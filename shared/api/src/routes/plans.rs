//! A deployment's plans: `/api/v1/deployments/{id}/plans`, cancelling the
//! pending plan, and `_shutdown`.

use crate::error::{ApiError, ErrorBody};
use crate::extract::{Caller, PathParam, only_params, page_request};
use crate::respond::versioned;
use crate::routes::deployments::{load, not_found};
use crate::state::AppState;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use floe_domain::deployment::{Deployment, DeploymentStatus, DeploymentView};
use floe_domain::plan::{
    Plan, PlanKind, PlanParams, PlanSource, PlanStatus, ShutdownParams, StepError, StepRecord,
};
use floe_store::{StoreError, Versioned};
use serde::Serialize;
use std::collections::BTreeMap;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_plans))
        .routes(routes!(cancel_pending_plan))
        .routes(routes!(shutdown_deployment))
}

/// One plan attempt, as ECE shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct PlanView {
    pub plan_attempt_id: String,
    pub kind: PlanKind,
    pub status: PlanStatus,
    pub source: PlanSource,
    pub created: chrono::DateTime<chrono::Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished: Option<chrono::DateTime<chrono::Utc>>,
    pub cancel_requested: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<StepError>,
    pub steps: Vec<StepRecord>,
}

impl PlanView {
    fn new(p: &Plan) -> PlanView {
        PlanView {
            plan_attempt_id: p.id.clone(),
            kind: p.kind(),
            status: p.status,
            source: p.source.clone(),
            created: p.created,
            finished: p.finished,
            cancel_requested: p.cancel_requested,
            error: p.error.clone(),
            // Step outputs are the engine's working memory, not the user's view.
            steps: p
                .steps
                .iter()
                .map(|s| StepRecord {
                    output: serde_json::Value::Null,
                    ..s.clone()
                })
                .collect(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DeploymentPlans {
    /// The last plan that succeeded: what the deployment runs now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current: Option<PlanView>,
    /// The plan in progress, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<PlanView>,
    /// Finished plans, oldest first (one page; see `next_cursor`).
    pub history: Vec<PlanView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
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
        (status = 401, description = "No or bad token.", body = ErrorBody),
        (status = 403, description = "Role too weak.", body = ErrorBody),
        (status = 404, description = "No such deployment.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn get_plans(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Response, ApiError> {
    caller.require_read()?;
    only_params(&query, &["size", "cursor"])?;
    let page = page_request(&query)?;
    let deployment = load(&state, &caller, &id).await?;
    let pending = match &deployment.value.pending_plan {
        Some(p) => state
            .store
            .get_plan(&caller.org, &id, &p.plan_id)
            .await
            .map_err(ApiError::from_store)?,
        None => None,
    };
    let listed = state
        .store
        .list_plans(&caller.org, &id, &page)
        .await
        .map_err(ApiError::from_store)?;
    let history: Vec<&Plan> = listed
        .items
        .iter()
        .map(|v| &v.value)
        .filter(|p| p.status.is_finished())
        .collect();
    let current = history
        .iter()
        .rev()
        .find(|p| p.status == PlanStatus::Succeeded)
        .map(|p| PlanView::new(p));
    Ok(axum::Json(DeploymentPlans {
        current,
        pending: pending.map(|p| PlanView::new(&p.value)),
        history: history.into_iter().map(PlanView::new).collect(),
        next_cursor: listed.next_cursor,
    })
    .into_response())
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
        (status = 401, description = "No or bad token.", body = ErrorBody),
        (status = 403, description = "Needs deployment_manager or platform_admin.", body = ErrorBody),
        (status = 404, description = "No such deployment, or no pending plan.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn cancel_pending_plan(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
) -> Result<Response, ApiError> {
    caller.require_deployment_manager()?;
    let deployment = load(&state, &caller, &id).await?;
    let no_plan = || {
        ApiError::not_found(
            "deployments.no_pending_plan",
            format!("deployment {id} has no pending plan"),
        )
    };
    let pending = deployment.value.pending_plan.as_ref().ok_or_else(no_plan)?;
    // The engine writes the plan as it goes: retry on a lost race.
    for _ in 0..5 {
        let pv = state
            .store
            .get_plan(&caller.org, &id, &pending.plan_id)
            .await
            .map_err(ApiError::from_store)?
            .ok_or_else(no_plan)?;
        if pv.value.status.is_finished() {
            return Err(no_plan());
        }
        let mut plan = pv.value;
        plan.cancel_requested = true;
        match state.store.update_plan(&plan, pv.version).await {
            Ok(_) => {
                tracing::info!(deployment = %id, plan = %plan.id, "plan cancellation requested");
                state.wake(&caller.org, &id, &plan.id).await;
                return Ok((StatusCode::ACCEPTED, axum::Json(PlanView::new(&plan))).into_response());
            }
            Err(StoreError::VersionMismatch { .. }) => continue,
            Err(e) => return Err(ApiError::from_store(e)),
        }
    }
    Err(ApiError::concurrent_change())
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
        (status = 401, description = "No or bad token.", body = ErrorBody),
        (status = 403, description = "Needs deployment_manager or platform_admin.", body = ErrorBody),
        (status = 404, description = "No such deployment.", body = ErrorBody),
        (status = 409, description = "Another plan is pending, or the deployment is already stopped.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn shutdown_deployment(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Response, ApiError> {
    caller.require_deployment_manager()?;
    only_params(&query, &["skip_snapshot"])?;
    let skip_snapshot = crate::extract::bool_param(&query, "skip_snapshot")?;
    let previous = load(&state, &caller, &id).await?;
    if let Some(pending) = &previous.value.pending_plan {
        return Err(plan_in_progress(&pending.plan_id, pending.kind));
    }
    if previous.value.status == DeploymentStatus::Stopped {
        return Err(ApiError::conflict(
            "deployments.already_stopped",
            format!("deployment {id} is already stopped"),
        ));
    }
    let plan = Plan::new(
        &caller.org,
        &id,
        PlanParams::Shutdown(ShutdownParams { skip_snapshot }),
        "deployments.shutdown",
        &caller.principal.subject,
        chrono::Utc::now(),
    );
    let answer = start_plan(&state, &previous, &plan, DeploymentStatus::Stopping).await?;
    tracing::info!(deployment = %id, plan = %plan.id, "shutdown plan pending");
    state.reconcile_schedules(&caller.org, &id).await;
    Ok(answer)
}

/// Stores `plan` as the deployment's pending plan, moves it to `status`,
/// wakes a worker, and answers 202 with the deployment.
pub(crate) async fn start_plan(
    state: &AppState,
    previous: &Versioned<Deployment>,
    plan: &Plan,
    status: DeploymentStatus,
) -> Result<Response, ApiError> {
    let mut next = previous.value.clone();
    next.status = status;
    next.pending_plan = Some(plan.reference());
    next.updated = plan.created;
    let version = state
        .store
        .replace_deployment(&next, previous, Some(plan))
        .await
        .map_err(|e| match e {
            StoreError::NotFound => not_found(&previous.value.id),
            other => ApiError::from_store(other),
        })?;
    state.wake(&plan.org, &plan.deployment_id, &plan.id).await;
    Ok(versioned(
        StatusCode::ACCEPTED,
        &DeploymentView::new(&next, version),
        version,
    ))
}

pub fn plan_in_progress(plan_id: &str, kind: PlanKind) -> ApiError {
    ApiError::conflict(
        "deployments.plan_in_progress",
        format!(
            "plan {plan_id} ({}) is pending; wait for it or cancel it (DELETE …/plans/pending)",
            kind.as_str()
        ),
    )
}

//! Restore drills: `POST /api/v1/deployments/{id}/_drill` starts one,
//! `GET /api/v1/deployments/{id}/drills` lists them, newest first.

use crate::error::ApiError;
use crate::extract::{Caller, Params, PathParam, parse_json};
use crate::params::{NoParams, PageParams};
use crate::respond::{Accepted, Plain};
use crate::responses::{Conflict, Invalid, ManageErrors, NotFound, ReadErrors};
use crate::state::ApiState;
use axum::body::Bytes;
use axum::extract::State;
use floe_app::drills::DrillList;
use floe_domain::drill::{DrillRequest, DrillView};

operations!([start_drill], [list_drills],);

/// Run a restore drill of the deployment now.
///
/// Restores the deployment's latest successful snapshot into a
/// short-lived clone (one node, the smallest of the source's family unless
/// `instance_type` says otherwise; restored indices get no replicas),
/// checks it (every index of the snapshot restored and green, each
/// index's document count within the counts Floe recorded just before the
/// snapshot started and when it ended, and each query of `queries`
/// finding at least `min_hits`), measures it (recovery time split into
/// provisioning and recovery, the recovery point, bytes and rate), and
/// deletes the clone whether it passes or fails. The clone writes nothing
/// under the source's path: it reads the snapshot's repository read-only.
/// The snapshot is pinned only while the drill runs.
///
/// The answer is the drill as it starts; `GET …/drills` shows its
/// outcome, and the clone's plan (`clone_deployment_id`, `plan_id`) its
/// steps while it runs. An empty body runs the default drill.
///
/// Refusals:
/// - 400: a bad field (`fields` names it), an unknown `instance_type`, or a mount drill without a license that allows searchable snapshots.
/// - 409 `drills.drill_running`: a drill of the deployment is running; one runs at a time.
/// - 409 `restore.no_successful_snapshot`: the deployment has no successful snapshot yet.
#[utoipa::path(
    post,
    path = "/api/v1/deployments/{id}/_drill",
    operation_id = "start-deployment-drill",
    tag = "deployments",
    params(("id" = String, Path, description = "Deployment id.")),
    request_body(content = DrillRequest, description = "Optional; an empty body runs the default drill.",
        example = json!({"mode": "restore", "queries": [{"index": "logs-*", "query": {"match": {"level": "error"}}, "min_hits": 1}]})),
    extensions(("x-floe-roles" = json!(floe_app::caller::MANAGE_ROLES))),
    responses(Accepted<DrillView>, Invalid, ManageErrors, NotFound, Conflict),
    security(("bearer" = []))
)]
async fn start_drill(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
    params: Params<NoParams>,
    body: Bytes,
) -> Result<Accepted<DrillView>, ApiError> {
    let who = caller.manager()?;
    params.check()?;
    let request: DrillRequest = if body.iter().all(u8::is_ascii_whitespace) {
        DrillRequest::default()
    } else {
        parse_json(&body)?
    };
    Ok(Accepted(state.app.start_drill(&who, &id, request).await?))
}

/// The deployment's restore drills, newest first.
///
/// Each shows its status (`running`, `passed`, `failed`), the snapshot it
/// restored, its times, the recovery point (the snapshot's age when the
/// drill started) and recovery time, the bytes recovered and the rate,
/// every check with its outcome, and, for a failed drill, the step that
/// failed and why.
#[utoipa::path(
    get,
    path = "/api/v1/deployments/{id}/drills",
    operation_id = "list-deployment-drills",
    tag = "deployments",
    params(
        ("id" = String, Path, description = "Deployment id."),
        PageParams,
    ),
    extensions(("x-floe-roles" = json!(floe_app::caller::READ_ROLES))),
    responses(Plain<DrillList>, Invalid, ReadErrors, NotFound),
    security(("bearer" = []))
)]
async fn list_drills(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
    params: Params<PageParams>,
) -> Result<Plain<DrillList>, ApiError> {
    let who = caller.reader()?;
    let page = params.check()?.page();
    Ok(Plain(state.app.list_drills(&who, &id, page).await?))
}

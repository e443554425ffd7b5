//! A deployment's snapshots: take one by hand, list them (newest first, with
//! an ECE-like health summary), look at one, delete one.
//!
//! `healthy` means: the newest finished snapshot succeeded, or the newest
//! successful one (the deployment's creation when there is none yet) ended
//! less than twice the shortest attached policy interval ago (a cron policy
//! counts as daily). A deployment with no policy attached is healthy when
//! its newest finished snapshot, if any, succeeded.

use crate::error::{ApiError, ErrorBody};
use crate::extract::{Caller, PathParam, only_params, page_request, parse_json};
use crate::routes::deployments::load;
use crate::state::AppState;
use axum::body::Bytes;
use axum::extract::{FromRequestParts, Query, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use floe_domain::deployment::Deployment;
use floe_domain::snapshot::{SnapshotRecord, SnapshotState, SnapshotView};
use floe_domain::timevalue::parse_time_value;
use floe_snapshots::{SnapshotError, Snapshotter};
use floe_store::{PageRequest, Versioned};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(take_snapshot, list_snapshots))
        .routes(routes!(get_snapshot, delete_snapshot))
}

/// The summary scan reads at most this many records; a deployment whose
/// retention keeps more reports `count` as a lower bound.
const SUMMARY_SCAN_LIMIT: usize = 2_000;
/// A cron schedule's interval, for `healthy`.
const CRON_INTERVAL: Duration = Duration::from_secs(24 * 3600);
/// `wait_for_completion` waits at most this long, under API Gateway's 30 s;
/// a snapshot still running then is answered 202 to poll.
const API_WAIT: Duration = Duration::from_secs(25);

fn snapshotter(state: &AppState) -> Snapshotter {
    Snapshotter::new(state.store.clone(), state.clusters.clone()).with_settings(
        floe_snapshots::SnapshotterSettings {
            wait: API_WAIT,
            poll: Duration::from_millis(250),
        },
    )
}

fn snapshot_not_found(name: &str) -> ApiError {
    ApiError::not_found(
        "snapshots.snapshot_not_found",
        format!("snapshot {name} was not found"),
    )
}

/// The one place a snapshot failure becomes an HTTP answer.
fn from_snapshot(e: SnapshotError) -> ApiError {
    match e {
        SnapshotError::DeploymentNotFound(id) => crate::routes::deployments::not_found(&id),
        SnapshotError::NotRunning { id, status } => ApiError::conflict(
            "deployments.not_running",
            format!(
                "deployment {id} is {}; snapshots need a running deployment",
                status.as_str()
            ),
        ),
        SnapshotError::NoRepository(id) => ApiError::conflict(
            "snapshots.no_repository",
            format!(
                "deployment {id} has no snapshot repository; attach one (snapshot.repository) first"
            ),
        ),
        SnapshotError::RepositoryNotFound(name) => ApiError::conflict(
            "snapshots.repository_not_found",
            format!("the deployment's snapshot repository {name} does not exist"),
        ),
        SnapshotError::SnapshotNotFound(name) => snapshot_not_found(&name),
        SnapshotError::SnapshotExists(name) => ApiError::conflict(
            "snapshots.snapshot_exists",
            format!("the deployment already has a snapshot named {name}"),
        ),
        SnapshotError::AlreadyRunning { repository } => ApiError::conflict(
            "snapshots.concurrent_snapshot",
            format!(
                "a snapshot is already running in repository {repository}; wait for it to finish"
            ),
        ),
        SnapshotError::Invalid { field, message } => {
            let code = if field.starts_with("indices") {
                "validation.index_pattern"
            } else {
                "validation.snapshot_name"
            };
            ApiError::invalid_field(code, field, message)
        }
        SnapshotError::Store(e) => ApiError::from_store(e),
        e @ (SnapshotError::Cluster(_) | SnapshotError::Elastic(_)) => {
            tracing::warn!(error = %e, "cluster call failed");
            if e.is_transient() {
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "snapshots.cluster_unavailable",
                    "the deployment's cluster cannot be reached right now; retry later",
                )
            } else {
                ApiError::new(
                    StatusCode::BAD_GATEWAY,
                    "snapshots.cluster_error",
                    "the deployment's cluster refused the request; the details are logged",
                )
            }
        }
    }
}

/// `{id}` and `{name}`; a segment axum cannot decode names nothing.
struct SnapshotPath {
    id: String,
    name: String,
}

impl<S: Send + Sync> FromRequestParts<S> for SnapshotPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path((id, name))| SnapshotPath { id, name })
            .map_err(|_| {
                ApiError::not_found(
                    "root.not_found",
                    "no such resource: the path is not valid UTF-8",
                )
            })
    }
}

/// A manual snapshot; every field is optional, and so is the body.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotRequest {
    /// A snapshot name, or date math such as `<manual-{now/d}>`; by default
    /// `manual-{date}-{suffix}`.
    #[serde(default)]
    #[schema(example = "<before-upgrade-{now/d}>")]
    pub name: Option<String>,
    /// Index patterns; every index when absent.
    #[serde(default)]
    pub indices: Option<Vec<String>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SnapshotList {
    /// Newest first (one page; see `next_cursor`).
    pub snapshots: Vec<SnapshotView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// The summary is on the first page only (no `cursor`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latest_status: Option<SnapshotState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latest_successful_end_time: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub healthy: Option<bool>,
}

fn snapshot_example() -> serde_json::Value {
    serde_json::json!({
        "snapshot": "floe-2026.11.29-3f9c2a7d1b0e", "repository": "main-backups",
        "uuid": "dpGR0bHlS5eSn5xE1ZKYKg", "state": "SUCCESS",
        "start_time": "2026-11-29T10:00:00Z", "end_time": "2026-11-29T10:00:42Z",
        "duration_in_millis": 42113, "indices": ["logs-2026.11.29"],
        "shards": {"total": 3, "successful": 3, "failed": 0}, "size_in_bytes": 73400320,
        "policy_id": crate::examples::POLICY_ID
    })
}

fn running_example() -> serde_json::Value {
    serde_json::json!({
        "snapshot": "before-upgrade-2026.11.29", "repository": "main-backups", "uuid": "",
        "state": "IN_PROGRESS", "start_time": "2026-11-29T10:00:00Z", "indices": [],
        "shards": {"total": 0, "successful": 0, "failed": 0}
    })
}

fn list_example() -> serde_json::Value {
    serde_json::json!({
        "snapshots": [snapshot_example()],
        "next_cursor": "ODFhMjJhMjIwZTViNzYzMDk1NTViMWE1MDZiNTViYTYjODIwMzk5NjA2NzQ5OSNmbG9l",
        "count": 12, "latest_status": "SUCCESS",
        "latest_successful_end_time": "2026-11-29T10:00:42Z", "healthy": true
    })
}

/// Take a snapshot of the deployment now, into its repository.
#[utoipa::path(
    post,
    path = "/api/v1/deployments/{id}/snapshots",
    operation_id = "take-deployment-snapshot",
    tag = "deployments",
    params(
        ("id" = String, Path, description = "Deployment id."),
        ("wait_for_completion" = Option<bool>, Query, description = "Answer once the snapshot ended (200) rather than at once (202)."),
    ),
    request_body(content = SnapshotRequest, description = "Optional; an empty body takes every index under a generated name.",
        example = json!({"name": "<before-upgrade-{now/d}>", "indices": ["logs-*"]})),
    responses(
        (status = 200, description = "The snapshot ended (with `wait_for_completion=true`); see `state`.", body = SnapshotView,
         example = json!(snapshot_example())),
        (status = 202, description = "The snapshot started; poll it with GET …/snapshots/{name}.", body = SnapshotView,
         example = json!(running_example())),
        (status = 400, description = "Bad name, indices or parameters; `fields` names them.", body = ErrorBody),
        (status = 401, description = "No or bad token.", body = ErrorBody),
        (status = 403, description = "Needs deployment_manager or platform_admin.", body = ErrorBody),
        (status = 404, description = "No such deployment.", body = ErrorBody),
        (status = 409, description = "A snapshot is already running (`snapshots.concurrent_snapshot`), the name is taken, the deployment is not running or has no repository.", body = ErrorBody),
        (status = 502, description = "The cluster refused the snapshot.", body = ErrorBody),
        (status = 503, description = "The cluster cannot be reached right now.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn take_snapshot(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
    Query(query): Query<BTreeMap<String, String>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    caller.require_deployment_manager()?;
    only_params(&query, &["wait_for_completion"])?;
    let wait = crate::extract::bool_param(&query, "wait_for_completion")?;
    let request: SnapshotRequest = if body.iter().all(u8::is_ascii_whitespace) {
        SnapshotRequest::default()
    } else {
        parse_json(&body)?
    };
    // Checks the deployment's organization and id before anything else.
    load(&state, &caller, &id).await?;
    let taken = snapshotter(&state)
        .take_manual(
            &caller.org,
            &id,
            request.name.as_deref(),
            request.indices,
            wait,
        )
        .await
        .map_err(from_snapshot)?;
    let status = if taken.value.state.is_finished() {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    tracing::info!(deployment = %id, snapshot = %taken.value.name, "manual snapshot taken");
    Ok((status, axum::Json(SnapshotView::new(&taken.value))).into_response())
}

/// The deployment's snapshots, newest first, with a summary on the first page.
#[utoipa::path(
    get,
    path = "/api/v1/deployments/{id}/snapshots",
    operation_id = "list-deployment-snapshots",
    tag = "deployments",
    params(
        ("id" = String, Path, description = "Deployment id."),
        ("size" = Option<u32>, Query, description = "Page size, 1 to 100 (default 20)."),
        ("cursor" = Option<String>, Query, description = "`next_cursor` of the previous page."),
    ),
    responses(
        (status = 200, description = "One page of snapshots; the first page carries `count`, `latest_status`, `latest_successful_end_time` and `healthy`.", body = SnapshotList,
         example = json!(list_example())),
        (status = 400, description = "Bad paging parameters.", body = ErrorBody),
        (status = 401, description = "No or bad token.", body = ErrorBody),
        (status = 403, description = "Role too weak.", body = ErrorBody),
        (status = 404, description = "No such deployment.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn list_snapshots(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Response, ApiError> {
    caller.require_read()?;
    only_params(&query, &["size", "cursor"])?;
    let page = page_request(&query)?;
    let deployment = load(&state, &caller, &id).await?.value;
    let first_page = page.cursor.is_none();
    let listed = state
        .store
        .list_snapshots(&caller.org, &id, None, &page)
        .await
        .map_err(ApiError::from_store)?;
    let snapshotter = snapshotter(&state);
    let mut snapshots = Vec::with_capacity(listed.items.len());
    for stored in listed.items {
        let stored = snapshotter.refresh(&deployment, stored).await;
        snapshots.push(SnapshotView::new(&stored.value));
    }
    let mut list = SnapshotList {
        snapshots,
        next_cursor: listed.next_cursor,
        count: None,
        latest_status: None,
        latest_successful_end_time: None,
        healthy: None,
    };
    if first_page {
        summarize(&state, &deployment, &mut list).await?;
    }
    Ok(axum::Json(list).into_response())
}

/// Fills in the summary from the deployment's records, newest first.
async fn summarize(
    state: &AppState,
    deployment: &Deployment,
    list: &mut SnapshotList,
) -> Result<(), ApiError> {
    let mut count = 0u64;
    let mut latest_finished: Option<SnapshotState> = None;
    let mut latest_success: Option<SnapshotRecord> = None;
    let mut page = PageRequest {
        size: Some(floe_store::stores::MAX_PAGE_SIZE),
        cursor: None,
    };
    let mut scanned = 0usize;
    loop {
        let listed = state
            .store
            .list_snapshots(&deployment.org, &deployment.id, None, &page)
            .await
            .map_err(ApiError::from_store)?;
        for Versioned { value, .. } in listed.items {
            count += 1;
            scanned += 1;
            if latest_finished.is_none() && value.state.is_finished() {
                latest_finished = Some(value.state);
            }
            if latest_success.is_none() && value.state == SnapshotState::Success {
                latest_success = Some(value);
            }
        }
        match listed.next_cursor {
            Some(c) if scanned < SUMMARY_SCAN_LIMIT => page.cursor = Some(c),
            _ => break,
        }
    }
    let latest_end = latest_success.as_ref().map(|s| s.end.unwrap_or(s.start));
    let window = shortest_interval(state, deployment).await?;
    let recent = match window {
        Some(interval) => {
            let since = latest_end.unwrap_or(deployment.created);
            let allowed =
                chrono::TimeDelta::from_std(interval * 2).unwrap_or(chrono::TimeDelta::MAX);
            Utc::now().signed_duration_since(since) < allowed
        }
        None => false,
    };
    let healthy = latest_finished == Some(SnapshotState::Success)
        || recent
        || (window.is_none() && latest_finished.is_none());
    list.count = Some(count);
    list.latest_status = latest_finished;
    list.latest_successful_end_time = latest_end;
    list.healthy = Some(healthy);
    Ok(())
}

/// The shortest interval of the enabled policies attached to the deployment.
async fn shortest_interval(
    state: &AppState,
    deployment: &Deployment,
) -> Result<Option<Duration>, ApiError> {
    let mut shortest: Option<Duration> = None;
    for policy_id in deployment.spec.policies() {
        let Some(policy) = state
            .store
            .get_policy(&deployment.org, policy_id)
            .await
            .map_err(ApiError::from_store)?
        else {
            continue;
        };
        if !policy.value.spec.enabled {
            continue;
        }
        let interval = match &policy.value.spec.schedule.interval {
            Some(i) => parse_time_value(i).unwrap_or(CRON_INTERVAL),
            None => CRON_INTERVAL,
        };
        shortest = Some(shortest.map_or(interval, |s| s.min(interval)));
    }
    Ok(shortest)
}

/// One snapshot; a running one is brought up to date from the cluster.
#[utoipa::path(
    get,
    path = "/api/v1/deployments/{id}/snapshots/{name}",
    operation_id = "get-deployment-snapshot",
    tag = "deployments",
    params(
        ("id" = String, Path, description = "Deployment id."),
        ("name" = String, Path, description = "Snapshot name."),
    ),
    responses(
        (status = 200, description = "The snapshot: state, times, indices, shards and size.", body = SnapshotView,
         example = json!(snapshot_example())),
        (status = 401, description = "No or bad token.", body = ErrorBody),
        (status = 403, description = "Role too weak.", body = ErrorBody),
        (status = 404, description = "No such deployment (`deployments.deployment_not_found`) or snapshot (`snapshots.snapshot_not_found`).", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn get_snapshot(
    State(state): State<AppState>,
    caller: Caller,
    path: SnapshotPath,
) -> Result<Response, ApiError> {
    caller.require_read()?;
    load(&state, &caller, &path.id).await?;
    let stored = snapshotter(&state)
        .get(&caller.org, &path.id, &path.name)
        .await
        .map_err(from_snapshot)?;
    Ok(axum::Json(SnapshotView::new(&stored.value)).into_response())
}

/// Delete a snapshot from the repository and forget it.
#[utoipa::path(
    delete,
    path = "/api/v1/deployments/{id}/snapshots/{name}",
    operation_id = "delete-deployment-snapshot",
    tag = "deployments",
    params(
        ("id" = String, Path, description = "Deployment id."),
        ("name" = String, Path, description = "Snapshot name."),
    ),
    responses(
        (status = 204, description = "Deleted (a snapshot already gone from the repository counts as deleted)."),
        (status = 401, description = "No or bad token.", body = ErrorBody),
        (status = 403, description = "Needs deployment_manager or platform_admin.", body = ErrorBody),
        (status = 404, description = "No such deployment or snapshot.", body = ErrorBody),
        (status = 409, description = "The deployment is not running, so its cluster cannot delete it.", body = ErrorBody),
        (status = 502, description = "The cluster refused the delete.", body = ErrorBody),
        (status = 503, description = "The cluster cannot be reached right now.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn delete_snapshot(
    State(state): State<AppState>,
    caller: Caller,
    path: SnapshotPath,
) -> Result<Response, ApiError> {
    caller.require_deployment_manager()?;
    load(&state, &caller, &path.id).await?;
    snapshotter(&state)
        .delete(&caller.org, &path.id, &path.name)
        .await
        .map_err(from_snapshot)?;
    tracing::info!(deployment = %path.id, snapshot = %path.name, "snapshot deleted");
    Ok(StatusCode::NO_CONTENT.into_response())
}

//! Restores and clones: `POST /api/v1/deployments/{id}/_restore`,
//! `POST /api/v1/deployments/{id}/_clone`, and the `restore_snapshot` of a
//! create.
//!
//! Everything a client can get wrong is found here, before a plan exists:
//! the source deployment, the snapshot (`__latest_success__` is resolved
//! from the snapshot records, so the plan records the name it restores),
//! the repository, and whether the nodes can reach it. The plan then only
//! meets what the cluster itself refuses.

use crate::error::{ApiError, ErrorBody};
use crate::extract::{Caller, JsonSpec, PathParam, only_params};
use crate::routes::deployments::{create_validated, load};
use crate::routes::plans::{plan_in_progress, start_plan};
use crate::state::AppState;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use floe_domain::deployment::{DeploymentSpec, DeploymentStatus, DeploymentView, NodeGroup};
use floe_domain::plan::{Plan, PlanParams};
use floe_domain::repository::Repository;
use floe_domain::restore::{LATEST_SUCCESS, RestoreMode, RestoreRequest, RestoreSnapshot};
use floe_domain::snapshot::{SnapshotRecord, SnapshotState};
use floe_plans::repository_access::reachable_with;
use floe_store::PageRequest;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(restore_deployment))
        .routes(routes!(clone_deployment))
}

/// The short form of a clone: a new deployment like `{id}`, from its snapshot.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CloneRequest {
    /// The new deployment's name.
    #[schema(example = "logs-analysis")]
    pub name: String,
    /// A snapshot name, or `__latest_success__` (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_name: Option<String>,
    /// By default the source's node groups; any others may be given, on
    /// another architecture or size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_groups: Option<Vec<NodeGroup>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub indices: Vec<String>,
    #[serde(default)]
    pub mode: RestoreMode,
}

/// A snapshot resolved: its record and repository.
struct Resolved {
    record: SnapshotRecord,
    repository: Repository,
}

/// Finds the snapshot `name` (or the newest success) of `deployment_id`,
/// in `repository` when given. `field` prefixes the error fields.
async fn resolve(
    state: &AppState,
    org: &str,
    deployment_id: &str,
    name: &str,
    repository: Option<&str>,
    field: &str,
) -> Result<Resolved, ApiError> {
    let mut page = PageRequest {
        size: Some(floe_store::stores::MAX_PAGE_SIZE),
        cursor: None,
    };
    let mut found = None;
    'pages: loop {
        let listed = state
            .store
            .list_snapshots(org, deployment_id, None, &page)
            .await
            .map_err(ApiError::from_store)?;
        for item in listed.items {
            let s = item.value;
            if repository.is_some_and(|r| r != s.repository) {
                continue;
            }
            let wanted = if name == LATEST_SUCCESS {
                s.state == SnapshotState::Success
            } else {
                s.name == name
            };
            if wanted {
                found = Some(s);
                break 'pages;
            }
        }
        match listed.next_cursor {
            Some(c) => page.cursor = Some(c),
            None => break,
        }
    }
    let in_repo = repository
        .map(|r| format!(" in repository {r}"))
        .unwrap_or_default();
    let Some(record) = found else {
        return Err(if name == LATEST_SUCCESS {
            ApiError::field(
                StatusCode::CONFLICT,
                "restore.no_successful_snapshot",
                format!("{field}snapshot_name"),
                format!("deployment {deployment_id} has no successful snapshot{in_repo}"),
            )
        } else {
            ApiError::invalid_field(
                "restore.snapshot_not_found",
                format!("{field}snapshot_name"),
                format!("deployment {deployment_id} has no snapshot {name}{in_repo}"),
            )
        });
    };
    if !matches!(
        record.state,
        SnapshotState::Success | SnapshotState::Partial
    ) {
        return Err(ApiError::field(
            StatusCode::CONFLICT,
            "restore.snapshot_not_restorable",
            format!("{field}snapshot_name"),
            format!(
                "snapshot {} is {}; only a SUCCESS or PARTIAL snapshot can be restored",
                record.name,
                record.state.as_str()
            ),
        ));
    }
    let repository = state
        .store
        .get_repository(org, &record.repository)
        .await
        .map_err(ApiError::from_store)?
        .ok_or_else(|| {
            ApiError::invalid_field(
                "restore.repository_not_found",
                format!("{field}repository"),
                format!(
                    "snapshot {} is in repository {}, which no longer exists",
                    record.name, record.repository
                ),
            )
        })?
        .value;
    Ok(Resolved { record, repository })
}

async fn repository(
    state: &AppState,
    org: &str,
    name: Option<&str>,
) -> Result<Option<Repository>, ApiError> {
    match name {
        None => Ok(None),
        Some(n) => Ok(state
            .store
            .get_repository(org, n)
            .await
            .map_err(ApiError::from_store)?
            .map(|r| r.value)),
    }
}

fn unreachable(field: &str, repo: &str) -> ApiError {
    ApiError::invalid_field(
        "restore.repository_unreachable",
        field,
        format!(
            "the nodes cannot reach repository {repo}: they have one S3 client, set up for the deployment's own repository (same endpoint, protocol, path style, region and access key needed)"
        ),
    )
}

/// Checks a create's `restore_snapshot` and resolves it in place: the
/// snapshot's name and repository are what the plan restores.
/// Returns the warnings the request deserves.
pub(crate) async fn resolve_clone(
    state: &AppState,
    caller: &Caller,
    spec: &mut DeploymentSpec,
) -> Result<Vec<String>, ApiError> {
    let Some(r) = spec.restore_snapshot.as_mut() else {
        return Ok(Vec::new());
    };
    let source = state
        .store
        .get_deployment(&caller.org, &r.source_deployment_id)
        .await
        .map_err(ApiError::from_store)?;
    if source.is_none() {
        // Another organization's deployment is as absent as a missing one.
        return Err(ApiError::invalid_field(
            "restore.source_not_found",
            "restore_snapshot.source_deployment_id",
            format!("deployment {} was not found", r.source_deployment_id),
        ));
    }
    let resolved = resolve(
        state,
        &caller.org,
        &r.source_deployment_id,
        &r.snapshot_name,
        r.repository.as_deref(),
        "restore_snapshot.",
    )
    .await?;
    let source_repo = &resolved.repository;
    if spec.repository() == Some(source_repo.name.as_str()) {
        return Err(ApiError::invalid_field(
            "restore.source_repository_writable",
            "snapshot.repository",
            format!(
                "a clone cannot write to its source's repository {}: two writers corrupt a repository; attach another one, or none",
                source_repo.name
            ),
        ));
    }
    if let Some(own) = repository(state, &caller.org, spec.repository()).await?
        && !reachable_with(Some(&own), source_repo)
    {
        return Err(unreachable(
            "restore_snapshot.repository",
            &source_repo.name,
        ));
    }
    if let Some(r) = spec.restore_snapshot.as_mut() {
        tracing::info!(source = %r.source_deployment_id, requested = %r.snapshot_name, snapshot = %resolved.record.name, repository = %source_repo.name, "clone source resolved");
        r.resolved_snapshot = Some(resolved.record.name.clone());
        r.repository = Some(source_repo.name.clone());
    }
    Ok(cache_warnings(spec, &resolved.record))
}

/// A frozen tier's cache is worth its disk between 1 % and 10 % of the
/// data it mounts: below, most searches miss it; above, it is paid for and
/// idle.
fn cache_warnings(spec: &DeploymentSpec, snapshot: &SnapshotRecord) -> Vec<String> {
    let mounting = spec
        .restore_snapshot
        .as_ref()
        .is_some_and(|r| r.mode == RestoreMode::Mount);
    let cache: u64 = spec
        .node_groups
        .iter()
        .map(|g| g.shared_cache_bytes() * u64::from(g.count))
        .sum();
    let Some(data) = snapshot.size_in_bytes.filter(|d| *d > 0) else {
        return Vec::new();
    };
    if !mounting || cache == 0 {
        return Vec::new();
    }
    let percent = cache as f64 * 100.0 / data as f64;
    if (1.0..=10.0).contains(&percent) {
        return Vec::new();
    }
    vec![format!(
        "the frozen tier's shared cache ({}) is {percent:.1} % of the snapshot's data ({}); 1 % to 10 % is the useful range (node_groups[].shared_cache)",
        floe_domain::bytesize::format_byte_size(cache),
        floe_domain::bytesize::format_byte_size(data)
    )]
}

/// Restore a snapshot into a running deployment.
///
/// Runs as a `restore` plan: the snapshot's repository is registered
/// read-only if it is not the deployment's own, the restore starts with
/// the repository's `max_restore_bytes_per_sec`, and `wait-restored`
/// reports shards and bytes recovered until it is done. Elasticsearch
/// refuses to restore over an open index: restore with `rename_pattern`,
/// or close or delete the index first.
#[utoipa::path(
    post,
    path = "/api/v1/deployments/{id}/_restore",
    operation_id = "restore-deployment",
    tag = "deployments",
    params(("id" = String, Path, description = "Deployment id.")),
    request_body(content = RestoreRequest, example = json!({"snapshot_name": "__latest_success__", "indices": ["orders-*"], "rename_pattern": "(.+)", "rename_replacement": "restored-$1"})),
    responses(
        (status = 202, description = "A restore plan is pending.", body = DeploymentView,
         example = json!(crate::examples::deployment_view())),
        (status = 400, description = "Invalid, an unknown snapshot or repository, or one the nodes cannot reach; the field is named.", body = ErrorBody),
        (status = 401, description = "No or bad token.", body = ErrorBody),
        (status = 403, description = "Needs deployment_manager or platform_admin.", body = ErrorBody),
        (status = 404, description = "No such deployment.", body = ErrorBody),
        (status = 409, description = "Another plan is pending, the deployment is not running, no successful snapshot, or the snapshot failed.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn restore_deployment(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
    Query(query): Query<BTreeMap<String, String>>,
    JsonSpec(request): JsonSpec<RestoreRequest>,
) -> Result<Response, ApiError> {
    caller.require_deployment_manager()?;
    only_params(&query, &[])?;
    request.validate_request()?;
    let previous = load(&state, &caller, &id).await?;
    if let Some(pending) = &previous.value.pending_plan {
        return Err(plan_in_progress(&pending.plan_id, pending.kind));
    }
    if previous.value.status != DeploymentStatus::Running {
        return Err(ApiError::conflict(
            "deployments.not_running",
            format!(
                "deployment {id} is {}; only a running deployment can restore",
                previous.value.status.as_str()
            ),
        ));
    }
    let own = previous.value.spec.repository();
    let Some(wanted) = request.repository.as_deref().or(own) else {
        return Err(ApiError::invalid_field(
            "restore.repository_required",
            "repository",
            "the deployment has no repository of its own: name the one to restore from",
        ));
    };
    // A foreign repository's snapshots are found through the deployment
    // that took them only when it is this one; otherwise the name is
    // trusted and the cluster says whether it exists.
    let (snapshot, repo) = match resolve(
        &state,
        &caller.org,
        &id,
        &request.snapshot_name,
        Some(wanted),
        "",
    )
    .await
    {
        Ok(r) => (r.record.name, r.repository),
        Err(e) if request.snapshot_name != LATEST_SUCCESS && request.repository.is_some() => {
            let Some(repo) = repository(&state, &caller.org, Some(wanted)).await? else {
                return Err(repository_not_found(wanted));
            };
            tracing::debug!(error = ?e.codes(), "snapshot not among this deployment's records");
            (request.snapshot_name.clone(), repo)
        }
        Err(e) => return Err(e),
    };
    if own != Some(repo.name.as_str()) {
        let own_repo = repository(&state, &caller.org, own).await?;
        if !reachable_with(own_repo.as_ref(), &repo) {
            return Err(unreachable("repository", &repo.name));
        }
    }
    let target = request.target(&id, &repo.name, own, &snapshot);
    let plan = Plan::new(
        &caller.org,
        &id,
        PlanParams::Restore(target),
        "deployments.restore",
        &caller.principal.subject,
        chrono::Utc::now(),
    );
    let answer = start_plan(&state, &previous, &plan, DeploymentStatus::Reconfiguring).await?;
    tracing::info!(deployment = %id, plan = %plan.id, snapshot = %snapshot, repository = %repo.name, "restore plan pending");
    Ok(answer)
}

fn repository_not_found(name: &str) -> ApiError {
    ApiError::invalid_field(
        "restore.repository_not_found",
        "repository",
        format!("snapshot repository {name} does not exist"),
    )
}

/// Clone a deployment from its snapshot.
///
/// The short form of `POST /api/v1/deployments` with `restore_snapshot`:
/// a new deployment with the source's version, user settings and (unless
/// given) node groups, filled from the source's snapshot
/// (`__latest_success__` by default). The source's repository is
/// registered read-only on the clone; the clone has no repository of its
/// own. `Idempotency-Key` works as on a create.
#[utoipa::path(
    post,
    path = "/api/v1/deployments/{id}/_clone",
    operation_id = "clone-deployment",
    tag = "deployments",
    params(
        ("id" = String, Path, description = "The source deployment's id."),
        ("Idempotency-Key" = Option<String>, Header, description = "Retry key: the same key and body return the first result."),
    ),
    request_body(content = CloneRequest, example = json!({"name": "logs-analysis", "mode": "mount"})),
    responses(
        (status = 201, description = "The clone, with its pending create plan.", body = DeploymentView,
         example = json!(crate::examples::deployment_view())),
        (status = 400, description = "Invalid; every offending field is listed.", body = ErrorBody),
        (status = 401, description = "No or bad token.", body = ErrorBody),
        (status = 403, description = "Needs deployment_manager or platform_admin.", body = ErrorBody),
        (status = 404, description = "No such source deployment.", body = ErrorBody),
        (status = 409, description = "The source has no successful snapshot, or the snapshot failed.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn clone_deployment(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
    headers: HeaderMap,
    Query(query): Query<BTreeMap<String, String>>,
    JsonSpec(request): JsonSpec<CloneRequest>,
) -> Result<Response, ApiError> {
    caller.require_deployment_manager()?;
    only_params(&query, &["request_id"])?;
    let source = load(&state, &caller, &id).await?.value;
    let spec = DeploymentSpec {
        name: request.name,
        version: source.spec.version.clone(),
        node_groups: request
            .node_groups
            .unwrap_or_else(|| source.spec.node_groups.clone()),
        user_settings: source.spec.user_settings.clone(),
        snapshot: None,
        metadata: Default::default(),
        restore_snapshot: Some(RestoreSnapshot {
            source_deployment_id: id,
            snapshot_name: request
                .snapshot_name
                .unwrap_or_else(|| LATEST_SUCCESS.to_string()),
            repository: None,
            indices: request.indices,
            rename_pattern: None,
            rename_replacement: None,
            mode: request.mode,
            resolved_snapshot: None,
        }),
    };
    create_validated(&state, &caller, &headers, &query, spec).await
}

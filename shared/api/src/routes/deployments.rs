//! Deployments: `/api/v1/deployments`.

use crate::error::{ApiError, ErrorBody};
use crate::extract::{
    Caller, JsonSpec, PathParam, check_version, expected_version, idempotency_key, only_params,
    page_request,
};
use crate::respond::{versioned, with_location};
use crate::state::AppState;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use floe_domain::deployment::{Deployment, DeploymentSpec, DeploymentStatus, DeploymentView};
use floe_domain::names::{is_resource_id, new_resource_id};
use floe_domain::plan::{Plan, PlanParams};
use floe_store::{Filter, Idempotency, Kind, StoreError, Versioned};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub const TAG: &str = "deployments";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_deployment, list_deployments))
        .routes(routes!(get_deployment, put_deployment, delete_deployment))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DeploymentList {
    pub deployments: Vec<DeploymentView>,
    /// Present when more may follow. A page can hold fewer than `size`
    /// deployments when filters are given; follow the cursor until it is absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

pub(crate) fn not_found(id: &str) -> ApiError {
    ApiError::not_found(
        "deployments.deployment_not_found",
        format!("deployment {id} was not found"),
    )
}

pub(crate) async fn load(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> Result<Versioned<Deployment>, ApiError> {
    if !is_resource_id(id) {
        return Err(not_found(id));
    }
    state
        .store
        .get_deployment(&caller.org, id)
        .await
        .map_err(ApiError::from_store)?
        .ok_or_else(|| not_found(id))
}

fn hash(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    hex::encode(h.finalize())
}

/// Turns a dangling reference into a 400 on the field that holds it.
fn reference_error(spec: &DeploymentSpec, e: StoreError) -> ApiError {
    match e {
        StoreError::MissingReference {
            kind: Kind::Repository,
            key,
        } => ApiError::invalid_field(
            "validation.repository_not_found",
            "snapshot.repository",
            format!("snapshot repository '{key}' does not exist"),
        ),
        StoreError::MissingReference {
            kind: Kind::Policy,
            key,
        } => {
            let i = spec.policies().iter().position(|p| *p == key).unwrap_or(0);
            ApiError::invalid_field(
                "validation.policy_not_found",
                format!("snapshot.policies[{i}]"),
                format!("snapshot policy {key} does not exist"),
            )
        }
        other => ApiError::from_store(other),
    }
}

fn view(d: &Versioned<Deployment>) -> DeploymentView {
    DeploymentView::new(&d.value, d.version)
}

/// Create a deployment.
///
/// Stores the deployment as `initializing` with a pending `create` plan that
/// the plan engine runs. `Idempotency-Key` (or ECE's `request_id`) makes
/// retries safe: the same key and body return the first result.
#[utoipa::path(
    post,
    path = "/api/v1/deployments",
    operation_id = "create-deployment",
    tag = TAG,
    params(
        ("Idempotency-Key" = Option<String>, Header, description = "Retry key: the same key and body return the first result."),
        ("request_id" = Option<String>, Query, description = "Same as Idempotency-Key (ECE)."),
    ),
    request_body(content = DeploymentSpec, example = json!(crate::examples::deployment_request())),
    responses(
        (status = 201, description = "Created, with its pending create plan.", body = DeploymentView,
         example = json!(crate::examples::deployment_view())),
        (status = 200, description = "A retry with the same idempotency key and body: the first result.", body = DeploymentView,
         example = json!(crate::examples::deployment_view())),
        (status = 400, description = "Invalid; every offending field is listed.", body = ErrorBody,
         example = json!({"errors": [{"code": "validation.instance_type", "message": "node_groups[0].instance_type: 'm6g.huge' is not in the instance catalog", "fields": ["node_groups[0].instance_type"]}]})),
        (status = 401, description = "No or bad token.", body = ErrorBody),
        (status = 403, description = "Needs deployment_manager or platform_admin.", body = ErrorBody),
        (status = 409, description = "Idempotency key reused with another body.", body = ErrorBody),
        (status = 413, description = "Body over 1 MiB.", body = ErrorBody),
        (status = 415, description = "Body is not JSON.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn create_deployment(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    Query(query): Query<BTreeMap<String, String>>,
    JsonSpec(spec): JsonSpec<DeploymentSpec>,
) -> Result<Response, ApiError> {
    caller.require_deployment_manager()?;
    only_params(&query, &["request_id"])?;
    create_validated(&state, &caller, &headers, &query, spec).await
}

/// Creates a deployment from `spec` (a create's body, or a clone's):
/// normalized, validated, a clone's source resolved, then stored with its
/// create plan.
pub(crate) async fn create_validated(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    query: &BTreeMap<String, String>,
    mut spec: DeploymentSpec,
) -> Result<Response, ApiError> {
    let (state, caller) = (state.clone(), caller);
    let key = idempotency_key(headers, query)?;
    spec.normalize()?;
    spec.validate_spec()?;

    let idempotency = match &key {
        None => None,
        Some(k) => {
            let canonical = serde_json::to_vec(&spec).map_err(|_| ApiError::internal())?;
            Some(Idempotency {
                key_hash: hash(&[k.as_bytes()]),
                request_hash: hash(&[caller.principal.subject.as_bytes(), &canonical]),
            })
        }
    };
    if let Some(idem) = &idempotency
        && let Some(first) = replay(&state, caller, idem).await?
    {
        return Ok(first);
    }
    let warnings = crate::routes::restore::resolve_clone(&state, caller, &mut spec).await?;

    let now = chrono::Utc::now();
    let id = new_resource_id();
    // The plan restores the clone's source; the deployment does not keep it.
    let params = PlanParams::Create(spec.clone());
    spec.restore_snapshot = None;
    let plan = Plan::new(
        &caller.org,
        &id,
        params,
        "deployments.create",
        &caller.principal.subject,
        now,
    );
    let deployment = Deployment {
        id: id.clone(),
        org: caller.org.clone(),
        spec: spec.clone(),
        status: DeploymentStatus::Initializing,
        pending_plan: Some(plan.reference()),
        created: now,
        updated: now,
    };
    match state
        .store
        .create_deployment(&deployment, &plan, idempotency.as_ref())
        .await
    {
        Ok(()) => {}
        Err(StoreError::IdempotencyKeyReused) => {
            // A concurrent request with the same key won the race.
            if let Some(idem) = &idempotency
                && let Some(first) = replay(&state, caller, idem).await?
            {
                return Ok(first);
            }
            return Err(ApiError::concurrent_change());
        }
        Err(e) => return Err(reference_error(&spec, e)),
    }
    tracing::info!(deployment = %id, plan = %plan.id, "deployment created with a pending create plan");
    state.wake(&caller.org, &id, &plan.id).await;
    let stored = Versioned {
        value: deployment,
        version: 1,
        refs: 0,
    };
    let mut created = view(&stored);
    created.warnings = warnings;
    Ok(with_location(
        versioned(StatusCode::CREATED, &created, 1),
        &format!("/api/v1/deployments/{id}"),
    ))
}

/// The first result of an idempotent create, or a 409 when the key was used with another body.
async fn replay(
    state: &AppState,
    caller: &Caller,
    idem: &Idempotency,
) -> Result<Option<Response>, ApiError> {
    let Some(first) = state
        .store
        .get_idempotency(&caller.org, &idem.key_hash)
        .await
        .map_err(ApiError::from_store)?
    else {
        return Ok(None);
    };
    if first.request_hash != idem.request_hash {
        return Err(ApiError::conflict(
            "request.idempotency_key_reused",
            "this idempotency key was already used with a different request body",
        ));
    }
    let d = load(state, caller, &first.deployment_id).await?;
    Ok(Some(versioned(StatusCode::OK, &view(&d), d.version)))
}

/// List deployments.
#[utoipa::path(
    get,
    path = "/api/v1/deployments",
    operation_id = "list-deployments",
    tag = TAG,
    params(
        ("size" = Option<u32>, Query, description = "Page size, 1 to 100 (default 20)."),
        ("cursor" = Option<String>, Query, description = "`next_cursor` of the previous page."),
        ("name" = Option<String>, Query, description = "Only names starting with this."),
        ("status" = Option<String>, Query, description = "Only this status (initializing, running, …)."),
        ("tag" = Option<String>, Query, description = "Only deployments with this tag, as `key:value`."),
    ),
    responses(
        (status = 200, description = "One page, oldest first.", body = DeploymentList,
         example = json!({"deployments": [crate::examples::deployment_view()]})),
        (status = 400, description = "Bad parameters.", body = ErrorBody),
        (status = 401, description = "No or bad token.", body = ErrorBody),
        (status = 403, description = "Role too weak.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn list_deployments(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Response, ApiError> {
    caller.require_read()?;
    only_params(&query, &["size", "cursor", "name", "status", "tag"])?;
    let page = page_request(&query)?;
    let status = match query.get("status") {
        None => None,
        Some(s) => Some(
            DeploymentStatus::parse(s)
                .ok_or_else(|| {
                    ApiError::invalid_field(
                        "validation.unknown_value",
                        "status",
                        "must be one of initializing, reconfiguring, running, stopping, stopped, failed",
                    )
                })?
                .as_str()
                .to_string(),
        ),
    };
    if let Some(tag) = query.get("tag")
        && !tag.contains(':')
    {
        return Err(ApiError::invalid_field(
            "validation.tag",
            "tag",
            "must be key:value",
        ));
    }
    let filter = Filter {
        name_prefix: query.get("name").cloned(),
        status,
        tag: query.get("tag").cloned(),
    };
    let result = state
        .store
        .list_deployments(&caller.org, filter, &page)
        .await
        .map_err(ApiError::from_store)?;
    Ok(axum::Json(DeploymentList {
        deployments: result.items.iter().map(view).collect(),
        next_cursor: result.next_cursor,
    })
    .into_response())
}

/// Read a deployment.
#[utoipa::path(
    get,
    path = "/api/v1/deployments/{id}",
    operation_id = "get-deployment",
    tag = TAG,
    params(("id" = String, Path, description = "Deployment id.")),
    responses(
        (status = 200, description = "The deployment, with each node group's architecture and JVM heap.", body = DeploymentView,
         example = json!(crate::examples::deployment_view())),
        (status = 401, description = "No or bad token.", body = ErrorBody),
        (status = 403, description = "Role too weak.", body = ErrorBody),
        (status = 404, description = "No such deployment in this organization.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn get_deployment(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
) -> Result<Response, ApiError> {
    caller.require_read()?;
    let d = load(&state, &caller, &id).await?;
    Ok(versioned(StatusCode::OK, &view(&d), d.version))
}

/// Replace a deployment's spec.
///
/// Changes to the name, tags and policy attachments apply at once. Changes
/// to the version, node groups, user settings or repository need a plan:
/// one is recorded (status `reconfiguring`), or the request is refused with
/// 409 while another plan is pending.
#[utoipa::path(
    put,
    path = "/api/v1/deployments/{id}",
    operation_id = "update-deployment",
    tag = TAG,
    params(
        ("id" = String, Path, description = "Deployment id."),
        ("If-Match" = Option<String>, Header, description = "Update only if the deployment is at this ETag."),
        ("version" = Option<u64>, Query, description = "Same as If-Match (ECE)."),
    ),
    request_body(content = DeploymentSpec, example = json!(crate::examples::deployment_request())),
    responses(
        (status = 200, description = "Updated.", body = DeploymentView, example = json!(crate::examples::deployment_view())),
        (status = 400, description = "Invalid; every offending field is listed.", body = ErrorBody),
        (status = 401, description = "No or bad token.", body = ErrorBody),
        (status = 403, description = "Needs deployment_manager or platform_admin.", body = ErrorBody),
        (status = 404, description = "No such deployment.", body = ErrorBody),
        (status = 409, description = "A plan is pending, or a concurrent change won.", body = ErrorBody,
         example = json!({"errors": [{"code": "deployments.plan_in_progress", "message": "plan 0193a0c4d2b87c3e9a4b5c6d7e8f9a0c (create) is pending; wait for it or cancel it"}]})),
        (status = 412, description = "If-Match does not match the current version.", body = ErrorBody),
        (status = 413, description = "Body over 1 MiB.", body = ErrorBody),
        (status = 415, description = "Body is not JSON.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn put_deployment(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
    headers: HeaderMap,
    Query(query): Query<BTreeMap<String, String>>,
    JsonSpec(mut spec): JsonSpec<DeploymentSpec>,
) -> Result<Response, ApiError> {
    caller.require_deployment_manager()?;
    only_params(&query, &["version"])?;
    let expected = expected_version(&headers, &query)?;
    let previous = load(&state, &caller, &id).await?;
    check_version(expected, previous.version)?;
    spec.normalize()?;
    spec.validate_spec()?;
    if spec.restore_snapshot.is_some() {
        return Err(ApiError::invalid_field(
            "validation.create_only",
            "restore_snapshot",
            "is for creating a deployment; restore into this one with POST /api/v1/deployments/{id}/_restore",
        ));
    }

    let now = chrono::Utc::now();
    let mut next = previous.value.clone();
    let mut plan = None;
    if previous.value.spec.needs_plan_to_become(&spec) {
        if let Some(pending) = &previous.value.pending_plan {
            return Err(crate::routes::plans::plan_in_progress(
                &pending.plan_id,
                pending.kind,
            ));
        }
        if previous.value.status != DeploymentStatus::Running {
            return Err(ApiError::conflict(
                "deployments.not_running",
                format!(
                    "the deployment is {}; only a running deployment can be reconfigured",
                    previous.value.status.as_str()
                ),
            ));
        }
        let p = Plan::new(
            &caller.org,
            &id,
            PlanParams::Update(spec.clone()),
            "deployments.update",
            &caller.principal.subject,
            now,
        );
        next.pending_plan = Some(p.reference());
        next.status = DeploymentStatus::Reconfiguring;
        plan = Some(p);
    } else {
        // The cluster runs the spec of its last successful plan: a change that
        // needs a plan becomes the record's spec only when that plan succeeds.
        next.spec = spec;
    }
    next.updated = now;
    let version = state
        .store
        .replace_deployment(&next, &previous, plan.as_ref())
        .await
        .map_err(|e| match e {
            StoreError::VersionMismatch { current } if expected.is_some() => {
                ApiError::precondition_failed(current)
            }
            StoreError::NotFound => not_found(&id),
            other => reference_error(&next.spec, other),
        })?;
    tracing::info!(deployment = %id, version, plan = plan.as_ref().map(|p| p.id.as_str()), "deployment updated");
    if let Some(p) = &plan {
        state.wake(&caller.org, &id, &p.id).await;
    }
    if previous.value.spec.snapshot != next.spec.snapshot || previous.value.status != next.status {
        state.reconcile_schedules(&caller.org, &id).await;
    }
    let stored = Versioned {
        value: next,
        version,
        refs: previous.refs,
    };
    Ok(versioned(StatusCode::OK, &view(&stored), version))
}

/// Delete a stopped deployment's record.
#[utoipa::path(
    delete,
    path = "/api/v1/deployments/{id}",
    operation_id = "delete-deployment",
    tag = TAG,
    params(
        ("id" = String, Path, description = "Deployment id."),
        ("If-Match" = Option<String>, Header, description = "Delete only if the deployment is at this ETag."),
        ("version" = Option<u64>, Query, description = "Same as If-Match (ECE)."),
    ),
    responses(
        (status = 204, description = "Deleted."),
        (status = 401, description = "No or bad token.", body = ErrorBody),
        (status = 403, description = "Needs deployment_manager or platform_admin.", body = ErrorBody),
        (status = 404, description = "No such deployment.", body = ErrorBody),
        (status = 409, description = "The deployment is not stopped (shut it down first).", body = ErrorBody,
         example = json!({"errors": [{"code": "deployments.deployment_not_stopped", "message": "deployment 0193a0c4d2b77c3e9a4b5c6d7e8f9a0b is initializing; shut it down before deleting it"}]})),
        (status = 412, description = "If-Match does not match the current version.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn delete_deployment(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
    headers: HeaderMap,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Response, ApiError> {
    caller.require_deployment_manager()?;
    only_params(&query, &["version"])?;
    let expected = expected_version(&headers, &query)?;
    let current = load(&state, &caller, &id).await?;
    check_version(expected, current.version)?;
    if current.value.status != DeploymentStatus::Stopped {
        return Err(ApiError::conflict(
            "deployments.deployment_not_stopped",
            format!(
                "deployment {id} is {}; shut it down before deleting it",
                current.value.status.as_str()
            ),
        ));
    }
    state
        .store
        .delete_deployment(&current)
        .await
        .map_err(|e| match e {
            StoreError::VersionMismatch { current } if expected.is_some() => {
                ApiError::precondition_failed(current)
            }
            StoreError::NotFound => not_found(&id),
            other => ApiError::from_store(other),
        })?;
    tracing::info!(deployment = %id, "deployment deleted");
    state.reconcile_schedules(&caller.org, &id).await;
    Ok(StatusCode::NO_CONTENT.into_response())
}

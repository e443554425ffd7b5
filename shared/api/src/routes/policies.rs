//! Snapshot policies: `/api/v1/snapshot-policies`.

use crate::error::{ApiError, ErrorBody};
use crate::extract::{
    Caller, JsonSpec, PathParam, check_version, expected_version, only_params, page_request,
};
use crate::respond::{versioned, with_location};
use crate::state::AppState;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use floe_domain::names::{is_resource_id, new_resource_id};
use floe_domain::policy::{Policy, PolicySpec, PolicyView};
use floe_store::{Kind, StoreError, Versioned};
use serde::Serialize;
use std::collections::BTreeMap;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub const TAG: &str = "snapshot-policies";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_policy, list_policies))
        .routes(routes!(get_policy, put_policy, delete_policy))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PolicyList {
    pub policies: Vec<PolicyView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(
        "policies.policy_not_found",
        format!("snapshot policy {id} was not found"),
    )
}

fn view(p: &Versioned<Policy>) -> PolicyView {
    PolicyView::new(&p.value, p.version, p.refs)
}

fn reference_error(e: StoreError) -> ApiError {
    match e {
        StoreError::MissingReference {
            kind: Kind::Repository,
            key,
        } => ApiError::invalid_field(
            "validation.repository_not_found",
            "repository",
            format!("snapshot repository '{key}' does not exist"),
        ),
        other => ApiError::from_store(other),
    }
}

async fn load(state: &AppState, caller: &Caller, id: &str) -> Result<Versioned<Policy>, ApiError> {
    if !is_resource_id(id) {
        return Err(not_found(id));
    }
    state
        .store
        .get_policy(&caller.org, id)
        .await
        .map_err(ApiError::from_store)?
        .ok_or_else(|| not_found(id))
}

/// Create a snapshot policy.
///
/// The schedule is checked and translated into an EventBridge Scheduler
/// expression (`schedule_expression`), which is stored with the policy.
#[utoipa::path(
    post,
    path = "/api/v1/snapshot-policies",
    operation_id = "create-snapshot-policy",
    tag = TAG,
    request_body(content = PolicySpec, example = json!(crate::examples::policy_request())),
    responses(
        (status = 201, description = "Created.", body = PolicyView, example = json!(crate::examples::policy_view())),
        (status = 400, description = "Invalid; every offending field is listed.", body = ErrorBody,
         example = json!({"errors": [{"code": "validation.interval", "message": "schedule.interval: must be at least 1m (EventBridge Scheduler's shortest rate)", "fields": ["schedule.interval"]}]})),
        (status = 401, description = "No or bad token.", body = ErrorBody),
        (status = 403, description = "Needs deployment_manager or platform_admin.", body = ErrorBody),
        (status = 413, description = "Body over 1 MiB.", body = ErrorBody),
        (status = 415, description = "Body is not JSON.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn create_policy(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<BTreeMap<String, String>>,
    JsonSpec(spec): JsonSpec<PolicySpec>,
) -> Result<Response, ApiError> {
    caller.require_deployment_manager()?;
    only_params(&query, &[])?;
    let schedule_expression = spec.validate_spec()?;
    let now = chrono::Utc::now();
    let policy = Policy {
        id: new_resource_id(),
        org: caller.org.clone(),
        spec,
        schedule_expression,
        created: now,
        updated: now,
    };
    state
        .store
        .create_policy(&policy)
        .await
        .map_err(reference_error)?;
    tracing::info!(policy = %policy.id, "snapshot policy created");
    let location = format!("/api/v1/snapshot-policies/{}", policy.id);
    let stored = Versioned {
        value: policy,
        version: 1,
        refs: 0,
    };
    Ok(with_location(
        versioned(StatusCode::CREATED, &view(&stored), 1),
        &location,
    ))
}

/// List snapshot policies.
#[utoipa::path(
    get,
    path = "/api/v1/snapshot-policies",
    operation_id = "list-snapshot-policies",
    tag = TAG,
    params(
        ("size" = Option<u32>, Query, description = "Page size, 1 to 100 (default 20)."),
        ("cursor" = Option<String>, Query, description = "`next_cursor` of the previous page."),
    ),
    responses(
        (status = 200, description = "One page, oldest first.", body = PolicyList,
         example = json!({"policies": [crate::examples::policy_view()]})),
        (status = 400, description = "Bad parameters.", body = ErrorBody),
        (status = 401, description = "No or bad token.", body = ErrorBody),
        (status = 403, description = "Role too weak.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn list_policies(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Response, ApiError> {
    caller.require_read()?;
    only_params(&query, &["size", "cursor"])?;
    let page = state
        .store
        .list_policies(&caller.org, &page_request(&query)?)
        .await
        .map_err(ApiError::from_store)?;
    Ok(axum::Json(PolicyList {
        policies: page.items.iter().map(view).collect(),
        next_cursor: page.next_cursor,
    })
    .into_response())
}

/// Read a snapshot policy.
#[utoipa::path(
    get,
    path = "/api/v1/snapshot-policies/{id}",
    operation_id = "get-snapshot-policy",
    tag = TAG,
    params(("id" = String, Path, description = "Policy id.")),
    responses(
        (status = 200, description = "The policy.", body = PolicyView, example = json!(crate::examples::policy_view())),
        (status = 401, description = "No or bad token.", body = ErrorBody),
        (status = 403, description = "Role too weak.", body = ErrorBody),
        (status = 404, description = "No such policy in this organization.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn get_policy(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
) -> Result<Response, ApiError> {
    caller.require_read()?;
    let p = load(&state, &caller, &id).await?;
    Ok(versioned(StatusCode::OK, &view(&p), p.version))
}

/// Replace a snapshot policy.
#[utoipa::path(
    put,
    path = "/api/v1/snapshot-policies/{id}",
    operation_id = "update-snapshot-policy",
    tag = TAG,
    params(
        ("id" = String, Path, description = "Policy id."),
        ("If-Match" = Option<String>, Header, description = "Update only if the policy is at this ETag."),
        ("version" = Option<u64>, Query, description = "Same as If-Match (ECE)."),
    ),
    request_body(content = PolicySpec, example = json!(crate::examples::policy_request())),
    responses(
        (status = 200, description = "Updated.", body = PolicyView, example = json!(crate::examples::policy_view())),
        (status = 400, description = "Invalid; every offending field is listed.", body = ErrorBody),
        (status = 401, description = "No or bad token.", body = ErrorBody),
        (status = 403, description = "Needs deployment_manager or platform_admin.", body = ErrorBody),
        (status = 404, description = "No such policy.", body = ErrorBody),
        (status = 409, description = "Changed concurrently.", body = ErrorBody),
        (status = 412, description = "If-Match does not match the current version.", body = ErrorBody),
        (status = 413, description = "Body over 1 MiB.", body = ErrorBody),
        (status = 415, description = "Body is not JSON.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn put_policy(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
    headers: HeaderMap,
    Query(query): Query<BTreeMap<String, String>>,
    JsonSpec(spec): JsonSpec<PolicySpec>,
) -> Result<Response, ApiError> {
    caller.require_deployment_manager()?;
    only_params(&query, &["version"])?;
    let expected = expected_version(&headers, &query)?;
    let previous = load(&state, &caller, &id).await?;
    check_version(expected, previous.version)?;
    let schedule_expression = spec.validate_spec()?;
    let policy = Policy {
        spec,
        schedule_expression,
        updated: chrono::Utc::now(),
        ..previous.value.clone()
    };
    let version = state
        .store
        .replace_policy(&policy, &previous)
        .await
        .map_err(|e| match e {
            StoreError::VersionMismatch { current } if expected.is_some() => {
                ApiError::precondition_failed(current)
            }
            StoreError::NotFound => not_found(&id),
            other => reference_error(other),
        })?;
    tracing::info!(policy = %id, version, "snapshot policy updated");
    state.reconcile_policy_schedules(&caller.org, &id).await;
    let stored = Versioned {
        value: policy,
        version,
        refs: previous.refs,
    };
    Ok(versioned(StatusCode::OK, &view(&stored), version))
}

/// Delete a snapshot policy that no deployment has attached.
#[utoipa::path(
    delete,
    path = "/api/v1/snapshot-policies/{id}",
    operation_id = "delete-snapshot-policy",
    tag = TAG,
    params(
        ("id" = String, Path, description = "Policy id."),
        ("If-Match" = Option<String>, Header, description = "Delete only if the policy is at this ETag."),
        ("version" = Option<u64>, Query, description = "Same as If-Match (ECE)."),
    ),
    responses(
        (status = 204, description = "Deleted."),
        (status = 401, description = "No or bad token.", body = ErrorBody),
        (status = 403, description = "Needs deployment_manager or platform_admin.", body = ErrorBody),
        (status = 404, description = "No such policy.", body = ErrorBody),
        (status = 409, description = "Still attached to a deployment.", body = ErrorBody),
        (status = 412, description = "If-Match does not match the current version.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn delete_policy(
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
    state
        .store
        .delete_policy(&current)
        .await
        .map_err(|e| match e {
            StoreError::InUse { refs } => ApiError::conflict(
                "policies.policy_in_use",
                format!("snapshot policy {id} is attached to {refs} deployments; detach it first"),
            ),
            StoreError::VersionMismatch { current } if expected.is_some() => {
                ApiError::precondition_failed(current)
            }
            StoreError::NotFound => not_found(&id),
            other => ApiError::from_store(other),
        })?;
    tracing::info!(policy = %id, "snapshot policy deleted");
    Ok(StatusCode::NO_CONTENT.into_response())
}

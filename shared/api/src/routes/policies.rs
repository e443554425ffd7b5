//! Snapshot policies: `/api/v1/snapshot-policies`.

use crate::error::ApiError;
use crate::extract::{Caller, JsonSpec, Params, PathParam, expected_version};
use crate::params::{NoParams, PageParams, VersionParams};
use crate::respond::{Created, NoContent, Plain, Versioned};
use crate::responses::{BodyErrors, Conflict, Invalid, ManageErrors, NotFound, ReadErrors, Stale};
use crate::state::ApiState;
use axum::extract::State;
use axum::http::HeaderMap;
use floe_app::policies::PolicyList;
use floe_domain::policy::{PolicySpec, PolicyView};

pub const TAG: &str = "snapshot-policies";

operations!(
    [create_policy, list_policies],
    [get_policy, put_policy, delete_policy],
);

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
    extensions(("x-floe-roles" = json!(floe_app::caller::MANAGE_ROLES))),
    responses(Created<PolicyView>, Invalid, ManageErrors, BodyErrors),
    security(("bearer" = []))
)]
async fn create_policy(
    State(state): State<ApiState>,
    caller: Caller,
    params: Params<NoParams>,
    JsonSpec(spec): JsonSpec<PolicySpec>,
) -> Result<Created<PolicyView>, ApiError> {
    let who = caller.manager()?;
    params.check()?;
    let policy = state.app.create_policy(&who, spec).await?;
    Ok(Created {
        location: format!("/api/v1/snapshot-policies/{}", policy.id),
        body: policy,
    })
}

/// List snapshot policies.
///
/// The organization's policies, a page at a time, each as its GET shows
/// it.
#[utoipa::path(
    get,
    path = "/api/v1/snapshot-policies",
    operation_id = "list-snapshot-policies",
    tag = TAG,
    params(PageParams),
    extensions(("x-floe-roles" = json!(floe_app::caller::READ_ROLES))),
    responses(Plain<PolicyList>, Invalid, ReadErrors),
    security(("bearer" = []))
)]
async fn list_policies(
    State(state): State<ApiState>,
    caller: Caller,
    params: Params<PageParams>,
) -> Result<Plain<PolicyList>, ApiError> {
    let who = caller.reader()?;
    let page = params.check()?.page();
    Ok(Plain(state.app.list_policies(&who, page).await?))
}

/// Read a snapshot policy.
///
/// Its schedule, snapshot name, repository, indices and retention, and the
/// deployments it is attached to. The `ETag` is the version a replace or
/// delete names in `If-Match`. 404 for a policy of another organization.
#[utoipa::path(
    get,
    path = "/api/v1/snapshot-policies/{id}",
    operation_id = "get-snapshot-policy",
    tag = TAG,
    params(("id" = String, Path, description = "Policy id.")),
    extensions(("x-floe-roles" = json!(floe_app::caller::READ_ROLES))),
    responses(Versioned<PolicyView>, ReadErrors, NotFound),
    security(("bearer" = []))
)]
async fn get_policy(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
) -> Result<Versioned<PolicyView>, ApiError> {
    let who = caller.reader()?;
    Ok(Versioned(state.app.get_policy(&who, &id).await?))
}

/// Replace a snapshot policy.
///
/// The body is a whole policy, as a create takes it (a GET's body with
/// fields changed is one). Each deployment it is attached to gets its
/// schedule changed (one EventBridge Scheduler schedule per attachment on
/// AWS).
#[utoipa::path(
    put,
    path = "/api/v1/snapshot-policies/{id}",
    operation_id = "update-snapshot-policy",
    tag = TAG,
    params(
        ("id" = String, Path, description = "Policy id."),
        ("If-Match" = Option<String>, Header, pattern = r#"^\s*(\*|(W/)?"[0-9]{1,19}"|[0-9]{1,19})\s*$"#, description = "Update only if the policy is at this ETag."),
        VersionParams,
    ),
    request_body(content = PolicySpec, example = json!(crate::examples::policy_request())),
    extensions(("x-floe-roles" = json!(floe_app::caller::MANAGE_ROLES))),
    responses(Versioned<PolicyView>, Invalid, ManageErrors, NotFound, Conflict, Stale, BodyErrors),
    security(("bearer" = []))
)]
async fn put_policy(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
    headers: HeaderMap,
    params: Params<VersionParams>,
    JsonSpec(spec): JsonSpec<PolicySpec>,
) -> Result<Versioned<PolicyView>, ApiError> {
    let who = caller.manager()?;
    let expected = expected_version(&headers, params.check()?.version)?;
    let updated = state.app.update_policy(&who, &id, expected, spec).await?;
    Ok(Versioned(updated))
}

/// Delete a snapshot policy that no deployment has attached.
///
/// Refusals:
/// - 409: still attached to a deployment.
#[utoipa::path(
    delete,
    path = "/api/v1/snapshot-policies/{id}",
    operation_id = "delete-snapshot-policy",
    tag = TAG,
    params(
        ("id" = String, Path, description = "Policy id."),
        ("If-Match" = Option<String>, Header, pattern = r#"^\s*(\*|(W/)?"[0-9]{1,19}"|[0-9]{1,19})\s*$"#, description = "Delete only if the policy is at this ETag."),
        VersionParams,
    ),
    extensions(("x-floe-roles" = json!(floe_app::caller::MANAGE_ROLES))),
    responses(NoContent, Invalid, ManageErrors, NotFound, Conflict, Stale),
    security(("bearer" = []))
)]
async fn delete_policy(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
    headers: HeaderMap,
    params: Params<VersionParams>,
) -> Result<NoContent, ApiError> {
    let who = caller.manager()?;
    let expected = expected_version(&headers, params.check()?.version)?;
    state.app.delete_policy(&who, &id, expected).await?;
    Ok(NoContent)
}

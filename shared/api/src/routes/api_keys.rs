//! API keys: `/api/v1/users/auth/keys`, in ECE's shape. A key is sent as
//! `Authorization: ApiKey {key}` wherever a bearer token is taken.

use crate::error::ApiError;
use crate::extract::{Caller, JsonBody, PathPair, PathParam};
use crate::respond::{Made, NoContent, Plain};
use crate::responses::{AdminErrors, BodyErrors, Conflict, Invalid, NotFound, ReadErrors};
use crate::state::ApiState;
use axum::extract::State;
use floe_domain::api_key::{ApiKeys, CreatedApiKey, NewApiKey};

operations!(
    [create_api_key, list_api_keys],
    [delete_api_key],
    [list_all_api_keys],
    [delete_user_api_key],
);

/// Make an API key for your scripts.
///
/// The key acts in the organization you act in (yours, or for platform
/// roles the one `x-floe-organization` names) with the roles you give it
/// until it expires or is deleted: each one you hold there or one within
/// it (platform_admin gives any; deployment_manager and platform_viewer
/// give deployment_viewer), all of yours by default. Its text is in this
/// answer only: the platform keeps a keyed hash of it. Send it as
/// `Authorization: ApiKey {key}`.
///
/// Refusals:
/// - 400: `description` empty or over 255 characters, `expiration` not a
///   time value from `1m` to `3650d`, or `roles` naming a role beyond
///   yours.
/// - 403: the request came with an API key (keys do not make keys).
/// - 409 `api_keys.too_many`: you hold 100 keys.
#[utoipa::path(
    post,
    path = "/api/v1/users/auth/keys",
    operation_id = "create-api-key",
    tag = "api-keys",
    request_body(content = NewApiKey, example = json!({"description": "nightly export job", "expiration": "90d", "roles": ["deployment_manager"]})),
    extensions(("x-floe-roles" = json!(floe_app::caller::READ_ROLES))),
    responses(Made<CreatedApiKey>, Invalid, ReadErrors, BodyErrors, Conflict),
    security(("bearer" = []))
)]
async fn create_api_key(
    State(state): State<ApiState>,
    caller: Caller,
    JsonBody(request): JsonBody<NewApiKey>,
) -> Result<Made<CreatedApiKey>, ApiError> {
    Ok(Made(state.app.create_api_key(&caller.0, request).await?))
}

/// Your API keys in the organization you act in (never their text),
/// oldest first.
///
/// Each key's id, description, roles, creation and expiry. A key's text is
/// in its create's answer only; the platform keeps a hash.
#[utoipa::path(
    get,
    path = "/api/v1/users/auth/keys",
    operation_id = "list-api-keys",
    tag = "api-keys",
    extensions(("x-floe-roles" = json!(floe_app::caller::READ_ROLES))),
    responses(Plain<ApiKeys>, ReadErrors),
    security(("bearer" = []))
)]
async fn list_api_keys(
    State(state): State<ApiState>,
    caller: Caller,
) -> Result<Plain<ApiKeys>, ApiError> {
    Ok(Plain(state.app.list_api_keys(&caller.0).await?))
}

/// Delete one of your API keys: it is refused from the next request on.
///
/// Refusals:
/// - 404 `api_keys.api_key_not_found`: you have no such key.
#[utoipa::path(
    delete,
    path = "/api/v1/users/auth/keys/{api_key_id}",
    operation_id = "delete-api-key",
    tag = "api-keys",
    params(("api_key_id" = String, Path, description = "The key's id.")),
    extensions(("x-floe-roles" = json!(floe_app::caller::READ_ROLES))),
    responses(NoContent, ReadErrors, NotFound),
    security(("bearer" = []))
)]
async fn delete_api_key(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
) -> Result<NoContent, ApiError> {
    state.app.delete_api_key(&caller.0, &id).await?;
    Ok(NoContent)
}

/// Every user's API keys in the organization (never their text), oldest
/// first: for platform admins, in their organization or the one
/// `x-floe-organization` names.
///
/// As the caller's own list, with each key's maker (`user_id`); an admin
/// deletes any of them with `DELETE /api/v1/users/{user_id}/auth/keys/{api_key_id}`.
#[utoipa::path(
    get,
    path = "/api/v1/users/auth/keys/_all",
    operation_id = "list-all-api-keys",
    tag = "api-keys",
    extensions(("x-floe-roles" = json!(floe_app::caller::ADMIN_ROLES))),
    responses(Plain<ApiKeys>, AdminErrors),
    security(("bearer" = []))
)]
async fn list_all_api_keys(
    State(state): State<ApiState>,
    caller: Caller,
) -> Result<Plain<ApiKeys>, ApiError> {
    let who = caller.admin()?;
    Ok(Plain(state.app.list_all_api_keys(&who).await?))
}

/// Delete a user's API key (platform admins): it is refused from the next
/// request on.
///
/// Refusals:
/// - 404 `api_keys.api_key_not_found`: that user has no such key in the
///   organization.
#[utoipa::path(
    delete,
    path = "/api/v1/users/{user_id}/auth/keys/{api_key_id}",
    operation_id = "delete-user-api-key",
    tag = "api-keys",
    params(
        ("user_id" = String, Path, description = "The key's maker (their token's `sub`, `user_id` in the listing)."),
        ("api_key_id" = String, Path, description = "The key's id."),
    ),
    extensions(("x-floe-roles" = json!(floe_app::caller::ADMIN_ROLES))),
    responses(NoContent, AdminErrors, NotFound),
    security(("bearer" = []))
)]
async fn delete_user_api_key(
    State(state): State<ApiState>,
    caller: Caller,
    PathPair(user_id, id): PathPair,
) -> Result<NoContent, ApiError> {
    let who = caller.admin()?;
    state.app.delete_user_api_key(&who, &user_id, &id).await?;
    Ok(NoContent)
}

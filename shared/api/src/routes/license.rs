//! The platform license: `/api/v1/platform/license`, in ECE's shape.

use crate::error::ApiError;
use crate::extract::{Caller, JsonBody};
use crate::respond::{NoContent, Plain};
use crate::responses::{AdminErrors, BodyErrors, Invalid, NotFound, ReadErrors};
use crate::state::ApiState;
use axum::extract::State;
use floe_app::license::LicenseChange;
use floe_domain::license::{LicenseInfo, LicenseObject};

operations!([get_license, put_license, delete_license],);

/// The organization's platform license (its signature is never shown).
///
/// `allows_searchable_snapshots` says whether mount clones run on it;
/// `warnings` says when it ends within 14 days, or has ended.
///
/// Refusals:
/// - 404 `license.license_not_found`: none was uploaded.
#[utoipa::path(
    get,
    path = "/api/v1/platform/license",
    operation_id = "get-license",
    tag = "platform",
    extensions(("x-floe-roles" = json!(floe_app::caller::READ_ROLES))),
    responses(Plain<LicenseInfo>, ReadErrors, NotFound),
    security(("bearer" = []))
)]
async fn get_license(
    State(state): State<ApiState>,
    caller: Caller,
) -> Result<Plain<LicenseInfo>, ApiError> {
    let who = caller.reader()?;
    Ok(Plain(state.app.get_platform_license(&who).await?))
}

/// Add or replace the organization's platform license.
///
/// The body is an Elasticsearch license in ECE's `LicenseObject`
/// (`{"license": {...}}`, as Elastic issues it). It is checked as
/// Elasticsearch checks it before installing (all but the signature, which
/// only Elastic's key verifies): a type Elasticsearch installs, issue and
/// start dates not in the future, an expiry still ahead, `max_nodes` or (for
/// enterprise) `max_resource_units`. Then a `license` plan installs it on
/// every running deployment of the organization that does not run it
/// (`plans`); a deployment with a plan running gets it from that plan or
/// its next (`deferred`). Creates and starts install it from now on. A
/// cluster that refuses it fails its plan with Elasticsearch's answer.
///
/// Refusals:
/// - 400 `license.invalid_license`: naming the field at fault.
#[utoipa::path(
    put,
    path = "/api/v1/platform/license",
    operation_id = "set-license",
    tag = "platform",
    request_body(content = LicenseObject, example = json!(crate::examples::license_object())),
    extensions(("x-floe-roles" = json!(floe_app::caller::ADMIN_ROLES))),
    responses(Plain<LicenseChange>, Invalid, AdminErrors, BodyErrors),
    security(("bearer" = []))
)]
async fn put_license(
    State(state): State<ApiState>,
    caller: Caller,
    JsonBody(upload): JsonBody<LicenseObject>,
) -> Result<Plain<LicenseChange>, ApiError> {
    let who = caller.admin()?;
    Ok(Plain(state.app.put_platform_license(&who, upload).await?))
}

/// Remove the organization's platform license.
///
/// Running clusters keep the license they run until it expires (removing
/// it from them would stop their mounted indices); new deployments start
/// on Elasticsearch's basic license, and mount clones need a trial again.
///
/// Refusals:
/// - 404 `license.license_not_found`: none was uploaded.
#[utoipa::path(
    delete,
    path = "/api/v1/platform/license",
    operation_id = "delete-license",
    tag = "platform",
    extensions(("x-floe-roles" = json!(floe_app::caller::ADMIN_ROLES))),
    responses(NoContent, AdminErrors, NotFound),
    security(("bearer" = []))
)]
async fn delete_license(
    State(state): State<ApiState>,
    caller: Caller,
) -> Result<NoContent, ApiError> {
    let who = caller.admin()?;
    state.app.delete_platform_license(&who).await?;
    Ok(NoContent)
}

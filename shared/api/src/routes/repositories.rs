//! Snapshot repositories: `/api/v1/platform/configuration/snapshots/repositories`.

use crate::error::ApiError;
use crate::extract::{Caller, JsonBody, Params, PathParam, expected_version, parse_value_at};
use crate::params::{PageParams, VersionParams};
use crate::respond::{Created, CreatedOr, NoContent, Plain, Versioned};
use crate::responses::{AdminErrors, BodyErrors, Conflict, Invalid, NotFound, ReadErrors, Stale};
use crate::state::ApiState;
use axum::extract::FromRequestParts;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::request::Parts;
use floe_app::former::{FormerDeploymentList, FormerSnapshotList};
use floe_app::repositories::{Put, RepositoryList, check_name};
use floe_domain::Code;
use floe_domain::repository::{RepositoryRequest, RepositoryView};
use serde::Deserialize;

pub const TAG: &str = "snapshot-repositories";

operations!(
    [list_repositories],
    [get_repository, put_repository, delete_repository],
    [list_deleted_deployments],
    [list_deleted_deployment_snapshots],
);

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum RepositoryKind {
    S3,
    Fs,
}

/// The request in two steps, type first: serde's adjacently tagged enums
/// lose the field path when `settings` comes before `type`, and clients that
/// sort keys send it that way.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRepository {
    #[serde(rename = "type")]
    kind: RepositoryKind,
    settings: serde_json::Value,
}

impl RawRepository {
    fn parse(self) -> Result<RepositoryRequest, ApiError> {
        if !self.settings.is_object() {
            return Err(ApiError::field(
                Code::VALIDATION_TYPE,
                "settings",
                "must be a JSON object",
            ));
        }
        Ok(match self.kind {
            RepositoryKind::S3 => {
                RepositoryRequest::S3(parse_value_at(&self.settings, "settings")?)
            }
            RepositoryKind::Fs => {
                RepositoryRequest::Fs(parse_value_at(&self.settings, "settings")?)
            }
        })
    }
}

/// List snapshot repositories.
///
/// The platform's repositories, a page at a time, each as its GET shows it
/// (credentials never).
#[utoipa::path(
    get,
    path = "/api/v1/platform/configuration/snapshots/repositories",
    operation_id = "list-snapshot-repositories",
    tag = TAG,
    params(PageParams),
    extensions(("x-floe-roles" = json!(floe_app::caller::READ_ROLES))),
    responses(Plain<RepositoryList>, Invalid, ReadErrors),
    security(("bearer" = []))
)]
async fn list_repositories(
    State(state): State<ApiState>,
    caller: Caller,
    params: Params<PageParams>,
) -> Result<Plain<RepositoryList>, ApiError> {
    let who = caller.reader()?;
    let page = params.check()?.page();
    Ok(Plain(state.app.list_repositories(&who, page).await?))
}

/// Read one snapshot repository (credentials are never returned).
///
/// Its type and settings as last written; `secret_key` and
/// `session_token` are write-only and never shown, `access_key` is. The
/// `ETag` is the version a replace or delete names in `If-Match`.
#[utoipa::path(
    get,
    path = "/api/v1/platform/configuration/snapshots/repositories/{name}",
    operation_id = "get-snapshot-repository",
    tag = TAG,
    params(("name" = String, Path, pattern = "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", description = "Repository name.")),
    extensions(("x-floe-roles" = json!(floe_app::caller::READ_ROLES))),
    responses(Versioned<RepositoryView>, ReadErrors, NotFound),
    security(("bearer" = []))
)]
async fn get_repository(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(name): PathParam,
) -> Result<Versioned<RepositoryView>, ApiError> {
    let who = caller.reader()?;
    Ok(Versioned(state.app.get_repository(&who, &name).await?))
}

/// Create or replace a snapshot repository.
///
/// Secrets (`secret_key`, `session_token`) are encrypted at rest and never
/// returned. On replace, omitted secrets are kept when `access_key`,
/// `endpoint` and `protocol` are all unchanged, so a client can edit other
/// settings without re-sending credentials, and a stored secret never goes
/// to a new host. An `endpoint` must resolve only to addresses the platform
/// allows (no link-local or metadata address, and no private address unless
/// the operator allowed them): 400 naming `settings.endpoint` otherwise.
#[utoipa::path(
    put,
    path = "/api/v1/platform/configuration/snapshots/repositories/{name}",
    operation_id = "put-snapshot-repository",
    tag = TAG,
    params(
        ("name" = String, Path, pattern = "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", description = "Repository name: 1–63 of a-z, 0-9, '-'."),
        ("If-Match" = Option<String>, Header, pattern = r#"^\s*(\*|(W/)?"[0-9]{1,19}"|[0-9]{1,19})\s*$"#, description = "Replace only if the repository is at this ETag."),
        VersionParams,
    ),
    request_body(content = RepositoryRequest, example = json!(crate::examples::repository_request())),
    extensions(("x-floe-roles" = json!(floe_app::caller::ADMIN_ROLES))),
    responses(CreatedOr<RepositoryView>, Invalid, AdminErrors, NotFound, Conflict, Stale, BodyErrors),
    security(("bearer" = []))
)]
async fn put_repository(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(name): PathParam,
    headers: HeaderMap,
    params: Params<VersionParams>,
    JsonBody(raw): JsonBody<RawRepository>,
) -> Result<CreatedOr<RepositoryView>, ApiError> {
    let who = caller.admin()?;
    let params = params.check()?;
    // The name is the path's: it is named before the headers and body are.
    check_name(&name)?;
    let expected = expected_version(&headers, params.version)?;
    let request = raw.parse()?;
    Ok(
        match state
            .app
            .put_repository(&who, &name, expected, request)
            .await?
        {
            Put::Created(view) => CreatedOr::Created(Created {
                location: format!("/api/v1/platform/configuration/snapshots/repositories/{name}"),
                body: view,
            }),
            Put::Replaced(view) => CreatedOr::Existing(Versioned(view)),
        },
    )
}

/// Delete a snapshot repository that no deployment or policy uses.
///
/// Refusals:
/// - 409: a deployment or policy still uses it (a clone uses its source's
///   repository for as long as it exists), or it holds the kept snapshots
///   of a deleted deployment (listed under `…/{name}/deleted-deployments`;
///   counted in `used_by`).
#[utoipa::path(
    delete,
    path = "/api/v1/platform/configuration/snapshots/repositories/{name}",
    operation_id = "delete-snapshot-repository",
    tag = TAG,
    params(
        ("name" = String, Path, pattern = "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", description = "Repository name."),
        ("If-Match" = Option<String>, Header, pattern = r#"^\s*(\*|(W/)?"[0-9]{1,19}"|[0-9]{1,19})\s*$"#, description = "Delete only if the repository is at this ETag."),
        VersionParams,
    ),
    extensions(("x-floe-roles" = json!(floe_app::caller::ADMIN_ROLES))),
    responses(NoContent, Invalid, AdminErrors, NotFound, Conflict, Stale),
    security(("bearer" = []))
)]
async fn delete_repository(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(name): PathParam,
    headers: HeaderMap,
    params: Params<VersionParams>,
) -> Result<NoContent, ApiError> {
    let who = caller.admin()?;
    let expected = expected_version(&headers, params.check()?.version)?;
    state.app.delete_repository(&who, &name, expected).await?;
    Ok(NoContent)
}

/// `{name}` and `{id}`; a segment axum cannot decode names nothing.
struct FormerPath {
    name: String,
    id: String,
}

impl<S: Send + Sync> FromRequestParts<S> for FormerPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path((name, id))| FormerPath { name, id })
            .map_err(|_| {
                ApiError::new(
                    Code::ROOT_NOT_FOUND,
                    "no such resource: the path is not valid UTF-8",
                )
            })
    }
}

/// The deleted deployments whose snapshots the repository still holds.
///
/// A delete keeps a deployment's snapshots (the final snapshot a shutdown
/// takes exists for this): the deployment is listed here, by id, until
/// its snapshots are gone, and counts in the repository's `used_by`. See
/// docs/snapshot-records.md.
#[utoipa::path(
    get,
    path = "/api/v1/platform/configuration/snapshots/repositories/{name}/deleted-deployments",
    operation_id = "list-repository-deleted-deployments",
    tag = TAG,
    params(
        ("name" = String, Path, pattern = "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", description = "Repository name."),
        PageParams,
    ),
    extensions(("x-floe-roles" = json!(floe_app::caller::READ_ROLES))),
    responses(Plain<FormerDeploymentList>, Invalid, ReadErrors, NotFound),
    security(("bearer" = []))
)]
async fn list_deleted_deployments(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(name): PathParam,
    params: Params<PageParams>,
) -> Result<Plain<FormerDeploymentList>, ApiError> {
    let who = caller.reader()?;
    let page = params.check()?.page();
    Ok(Plain(
        state.app.list_former_deployments(&who, &name, page).await?,
    ))
}

/// A deleted deployment's kept snapshots, newest first.
///
/// Each is restorable into a new deployment: a create (or
/// `POST /api/v1/deployments` with `restore_snapshot`) naming the deleted
/// deployment's id as `restore_snapshot.source_deployment_id` and the
/// snapshot as `snapshot_name` (or `__latest_success__`).
///
/// Refusals:
/// - 404: the repository holds no kept snapshots of a deleted deployment `{id}`.
#[utoipa::path(
    get,
    path = "/api/v1/platform/configuration/snapshots/repositories/{name}/deleted-deployments/{id}/snapshots",
    operation_id = "list-deleted-deployment-snapshots",
    tag = TAG,
    params(
        ("name" = String, Path, pattern = "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", description = "Repository name."),
        ("id" = String, Path, description = "The deleted deployment's id."),
        PageParams,
    ),
    extensions(("x-floe-roles" = json!(floe_app::caller::READ_ROLES))),
    responses(Plain<FormerSnapshotList>, Invalid, ReadErrors, NotFound),
    security(("bearer" = []))
)]
async fn list_deleted_deployment_snapshots(
    State(state): State<ApiState>,
    caller: Caller,
    path: FormerPath,
    params: Params<PageParams>,
) -> Result<Plain<FormerSnapshotList>, ApiError> {
    let who = caller.reader()?;
    let page = params.check()?.page();
    Ok(Plain(
        state
            .app
            .list_former_snapshots(&who, &path.name, &path.id, page)
            .await?,
    ))
}

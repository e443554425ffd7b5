//! Snapshot repositories: `/api/v1/platform/configuration/snapshots/repositories`.

use crate::error::{ApiError, ErrorBody};
use crate::extract::{
    Caller, JsonBody, PathParam, check_version, expected_version, only_params, page_request,
    parse_value_at,
};
use crate::respond::{versioned, with_location};
use crate::state::AppState;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use floe_domain::repository::{
    Repository, RepositoryRequest, RepositorySettings, RepositoryView, S3Settings,
    validate_repository_name,
};
use floe_domain::secret::Sealed;
use floe_secrets::Owner;
use floe_store::StoreError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub const TAG: &str = "snapshot-repositories";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_repositories))
        .routes(routes!(get_repository, put_repository, delete_repository))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RepositoryList {
    pub repositories: Vec<RepositoryView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

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
            return Err(ApiError::invalid_field(
                "validation.type",
                "settings",
                "must be a JSON object",
            ));
        }
        Ok(match self.kind {
            RepositoryKind::S3 => RepositoryRequest::S3(parse_value_at(self.settings, "settings")?),
            RepositoryKind::Fs => RepositoryRequest::Fs(parse_value_at(self.settings, "settings")?),
        })
    }
}

fn not_found(name: &str) -> ApiError {
    ApiError::not_found(
        "repositories.repository_not_found",
        format!("snapshot repository '{name}' was not found"),
    )
}

fn checked_name(name: &str) -> Result<(), ApiError> {
    validate_repository_name(name)
        .map_err(|m| ApiError::invalid_field("validation.name", "name", m))
}

/// List snapshot repositories.
#[utoipa::path(
    get,
    path = "/api/v1/platform/configuration/snapshots/repositories",
    operation_id = "list-snapshot-repositories",
    tag = TAG,
    params(
        ("size" = Option<u32>, Query, description = "Page size, 1 to 100 (default 20)."),
        ("cursor" = Option<String>, Query, description = "`next_cursor` of the previous page."),
    ),
    responses(
        (status = 200, description = "One page of repositories, by name.", body = RepositoryList,
         example = json!({"repositories": [crate::examples::repository_view()], "next_cursor": null})),
        (status = 400, description = "Bad paging parameters.", body = ErrorBody),
        (status = 401, description = "No or bad token.", body = ErrorBody),
        (status = 403, description = "Role too weak.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn list_repositories(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Response, ApiError> {
    caller.require_read()?;
    only_params(&query, &["size", "cursor"])?;
    let page = state
        .store
        .list_repositories(&caller.org, &page_request(&query)?)
        .await
        .map_err(ApiError::from_store)?;
    let body = RepositoryList {
        repositories: page
            .items
            .iter()
            .map(|v| RepositoryView::new(&v.value, v.version, v.refs))
            .collect(),
        next_cursor: page.next_cursor,
    };
    Ok(axum::Json(body).into_response())
}

/// Read one snapshot repository (credentials are never returned).
#[utoipa::path(
    get,
    path = "/api/v1/platform/configuration/snapshots/repositories/{name}",
    operation_id = "get-snapshot-repository",
    tag = TAG,
    params(("name" = String, Path, description = "Repository name.")),
    responses(
        (status = 200, description = "The repository; secrets show only whether they are set.", body = RepositoryView,
         example = json!(crate::examples::repository_view())),
        (status = 401, description = "No or bad token.", body = ErrorBody),
        (status = 403, description = "Role too weak.", body = ErrorBody),
        (status = 404, description = "No such repository in this organization.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn get_repository(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(name): PathParam,
) -> Result<Response, ApiError> {
    caller.require_read()?;
    let v = state
        .store
        .get_repository(&caller.org, &name)
        .await
        .map_err(ApiError::from_store)?
        .ok_or_else(|| not_found(&name))?;
    Ok(versioned(
        StatusCode::OK,
        &RepositoryView::new(&v.value, v.version, v.refs),
        v.version,
    ))
}

/// Create or replace a snapshot repository.
///
/// Secrets (`secret_key`, `session_token`) are encrypted at rest and never
/// returned. On replace, omitted secrets are kept when `access_key` is
/// unchanged, so a client can edit settings without re-sending credentials.
#[utoipa::path(
    put,
    path = "/api/v1/platform/configuration/snapshots/repositories/{name}",
    operation_id = "put-snapshot-repository",
    tag = TAG,
    params(
        ("name" = String, Path, description = "Repository name: 1–63 of a-z, 0-9, '-'."),
        ("If-Match" = Option<String>, Header, description = "Replace only if the repository is at this ETag."),
        ("version" = Option<u64>, Query, description = "Same as If-Match (ECE)."),
    ),
    request_body(content = RepositoryRequest, example = json!(crate::examples::repository_request())),
    responses(
        (status = 200, description = "Replaced.", body = RepositoryView, example = json!(crate::examples::repository_view())),
        (status = 201, description = "Created.", body = RepositoryView, example = json!(crate::examples::repository_view())),
        (status = 400, description = "Invalid settings; every offending field is listed.", body = ErrorBody),
        (status = 401, description = "No or bad token.", body = ErrorBody),
        (status = 403, description = "Needs platform_admin.", body = ErrorBody),
        (status = 409, description = "Changed concurrently.", body = ErrorBody),
        (status = 412, description = "If-Match does not match the current version.", body = ErrorBody),
        (status = 413, description = "Body over 1 MiB.", body = ErrorBody),
        (status = 415, description = "Body is not JSON.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn put_repository(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(name): PathParam,
    headers: HeaderMap,
    Query(query): Query<BTreeMap<String, String>>,
    JsonBody(raw): JsonBody<RawRepository>,
) -> Result<Response, ApiError> {
    caller.require_platform_admin()?;
    only_params(&query, &["version"])?;
    checked_name(&name)?;
    let expected = expected_version(&headers, &query)?;
    let req = raw.parse()?;
    req.validate(state.endpoint_policy)?;
    let existing = state
        .store
        .get_repository(&caller.org, &name)
        .await
        .map_err(ApiError::from_store)?;
    match (&existing, expected) {
        (Some(e), _) => check_version(expected, e.version)?,
        (None, Some(_)) => return Err(not_found(&name)),
        (None, None) => {}
    }

    let now = chrono::Utc::now();
    let settings = match &req {
        RepositoryRequest::Fs(fs) => RepositorySettings::Fs(fs.clone()),
        RepositoryRequest::S3(s3) => {
            let previous = existing.as_ref().and_then(|e| match &e.value.settings {
                RepositorySettings::S3(p) if p.access_key == s3.access_key => Some(p),
                _ => None,
            });
            let secret_key = seal(
                &state,
                &caller.org,
                &name,
                "secret_key",
                s3.secret_key.as_ref(),
                previous.and_then(|p| p.secret_key.as_ref()),
            )
            .await?;
            let session_token = seal(
                &state,
                &caller.org,
                &name,
                "session_token",
                s3.session_token.as_ref(),
                previous.and_then(|p: &S3Settings| p.session_token.as_ref()),
            )
            .await?;
            RepositorySettings::S3(Repository::s3_settings_from_request(
                s3,
                secret_key,
                session_token,
            ))
        }
    };
    let repo = Repository {
        org: caller.org.clone(),
        name: name.clone(),
        settings,
        created: existing.as_ref().map(|e| e.value.created).unwrap_or(now),
        updated: now,
    };
    let location = format!("/api/v1/platform/configuration/snapshots/repositories/{name}");
    match existing {
        None => match state.store.create_repository(&repo).await {
            Ok(()) => {
                tracing::info!(repository = %name, "repository created");
                Ok(with_location(
                    versioned(StatusCode::CREATED, &RepositoryView::new(&repo, 1, 0), 1),
                    &location,
                ))
            }
            Err(StoreError::AlreadyExists) => Err(ApiError::concurrent_change()),
            Err(e) => Err(ApiError::from_store(e)),
        },
        Some(previous) => {
            let version = state
                .store
                .replace_repository(&repo, previous.version)
                .await
                .map_err(|e| match e {
                    StoreError::VersionMismatch { current } if expected.is_some() => {
                        ApiError::precondition_failed(current)
                    }
                    StoreError::NotFound => ApiError::concurrent_change(),
                    other => ApiError::from_store(other),
                })?;
            tracing::info!(repository = %name, version, "repository replaced");
            Ok(versioned(
                StatusCode::OK,
                &RepositoryView::new(&repo, version, previous.refs),
                version,
            ))
        }
    }
}

/// Seals a newly sent secret, or keeps the stored one when none was sent.
async fn seal(
    state: &AppState,
    org: &str,
    repository: &str,
    field: &str,
    sent: Option<&floe_domain::secret::SecretString>,
    kept: Option<&Sealed>,
) -> Result<Option<Sealed>, ApiError> {
    match sent {
        None => Ok(kept.cloned()),
        Some(secret) => {
            let owner = Owner {
                org,
                repository,
                field,
            };
            let sealed = state.cipher.seal(secret.expose(), &owner).await.map_err(|e| {
                tracing::error!(error = %e, field, "could not encrypt a repository secret");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "internal.secrets_unavailable",
                    "credentials cannot be encrypted right now; nothing was stored, retry later",
                )
            })?;
            Ok(Some(Sealed::new(sealed)))
        }
    }
}

/// Delete a snapshot repository that no deployment or policy uses.
#[utoipa::path(
    delete,
    path = "/api/v1/platform/configuration/snapshots/repositories/{name}",
    operation_id = "delete-snapshot-repository",
    tag = TAG,
    params(
        ("name" = String, Path, description = "Repository name."),
        ("If-Match" = Option<String>, Header, description = "Delete only if the repository is at this ETag."),
        ("version" = Option<u64>, Query, description = "Same as If-Match (ECE)."),
    ),
    responses(
        (status = 204, description = "Deleted."),
        (status = 401, description = "No or bad token.", body = ErrorBody),
        (status = 403, description = "Needs platform_admin.", body = ErrorBody),
        (status = 404, description = "No such repository.", body = ErrorBody),
        (status = 409, description = "A deployment or policy still uses it.", body = ErrorBody,
         example = json!({"errors": [{"code": "repositories.repository_in_use", "message": "snapshot repository 'main-backups' is used by 2 deployments or policies; detach it first"}]})),
        (status = 412, description = "If-Match does not match the current version.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn delete_repository(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(name): PathParam,
    headers: HeaderMap,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Response, ApiError> {
    caller.require_platform_admin()?;
    only_params(&query, &["version"])?;
    let expected = expected_version(&headers, &query)?;
    let current = state
        .store
        .get_repository(&caller.org, &name)
        .await
        .map_err(ApiError::from_store)?
        .ok_or_else(|| not_found(&name))?;
    check_version(expected, current.version)?;
    state.store.delete_repository(&caller.org, &name, current.version).await.map_err(|e| match e {
        StoreError::InUse { refs } => ApiError::conflict(
            "repositories.repository_in_use",
            format!("snapshot repository '{name}' is used by {refs} deployments or policies; detach it first"),
        ),
        StoreError::VersionMismatch { current } if expected.is_some() => ApiError::precondition_failed(current),
        StoreError::NotFound => not_found(&name),
        other => ApiError::from_store(other),
    })?;
    tracing::info!(repository = %name, "repository deleted");
    Ok(StatusCode::NO_CONTENT.into_response())
}

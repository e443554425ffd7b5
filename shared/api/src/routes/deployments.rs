//! Deployments: `/api/v1/deployments`.

use crate::error::ApiError;
use crate::extract::{
    Caller, DeploymentReplacement, JsonSpec, Params, PathParam, expected_version, idempotency_key,
};
use crate::params::{flag, page_size, version};
use crate::respond::{CreatedOr, OrValidated, Plain, Planned, Versioned, deployment_created};
use crate::responses::{BodyErrors, Conflict, Invalid, ManageErrors, NotFound, ReadErrors, Stale};
use crate::state::ApiState;
use axum::extract::State;
use axum::http::HeaderMap;
use floe_app::deployments::{DeploymentList, DeploymentQuery};
use floe_app::shown::Shown;
use floe_domain::deployment::{DeploymentSpec, DeploymentView};
use serde::Deserialize;
use utoipa::IntoParams;

pub const TAG: &str = "deployments";

operations!(
    [create_deployment, list_deployments],
    [get_deployment, put_deployment, delete_deployment],
    [reset_password],
);

/// Reset the `elastic` user's password.
///
/// A new password is made and returned in this answer only (`credentials`);
/// a `reset_password` plan applies it to the running cluster, and the old
/// one stops working when that plan's `apply-password` step ends.
///
/// Refusals:
/// - 404: no such deployment or Elasticsearch resource.
/// - 409: a plan is pending, or the deployment is not running.
#[utoipa::path(
    post,
    path = "/api/v1/deployments/{id}/elasticsearch/{ref_id}/_reset-password",
    operation_id = "reset-elasticsearch-password",
    tag = TAG,
    params(
        ("id" = String, Path, description = "Deployment id."),
        ("ref_id" = String, Path, description = "`main-elasticsearch`."),
    ),
    extensions(("x-floe-roles" = json!(floe_app::caller::MANAGE_ROLES))),
    responses(Planned<DeploymentView>, ManageErrors, NotFound, Conflict),
    security(("bearer" = []))
)]
async fn reset_password(
    State(state): State<ApiState>,
    caller: Caller,
    axum::extract::Path((id, ref_id)): axum::extract::Path<(String, String)>,
) -> Result<Planned<DeploymentView>, ApiError> {
    let who = caller.manager()?;
    let reset = state.app.reset_password(&who, &id, &ref_id).await?;
    Ok(Planned(reset))
}

/// Create a deployment.
///
/// Stores the deployment as `initializing` with a pending `create` plan that
/// the plan engine runs. `Idempotency-Key` (or ECE's `request_id`) makes
/// retries safe: the same key and body return the first result.
///
/// With `validate_only=true` the request is checked as the create checks
/// it (body, role, references, a clone's snapshot, the idempotency key)
/// and answered with 200 and what it would create, the create plan's steps
/// included; nothing is stored and no plan starts.
///
/// Refusals:
/// - 409: idempotency key reused with another body, or spent (its deployment was deleted since).
#[utoipa::path(
    post,
    path = "/api/v1/deployments",
    operation_id = "create-deployment",
    tag = TAG,
    params(
        ("Idempotency-Key" = Option<String>, Header, pattern = r"^[!-~]{1,128}$", description = "Retry key: the same key and body return the first result."),
        CreateParams,
    ),
    request_body(content = DeploymentSpec, example = json!(crate::examples::deployment_request())),
    extensions(("x-floe-roles" = json!(floe_app::caller::MANAGE_ROLES))),
    responses(OrValidated<CreatedOr<DeploymentView>>, Invalid, ManageErrors, Conflict, BodyErrors),
    security(("bearer" = []))
)]
async fn create_deployment(
    State(state): State<ApiState>,
    caller: Caller,
    headers: HeaderMap,
    params: Params<CreateParams>,
    JsonSpec(spec): JsonSpec<DeploymentSpec>,
) -> Result<OrValidated<CreatedOr<DeploymentView>>, ApiError> {
    let who = caller.manager()?;
    let params = params.check()?;
    let key = idempotency_key(&headers, params.request_id);
    let app = &state.app;
    Ok(if params.validate_only {
        let validation = app
            .validate_create_deployment(&who, spec, key.as_deref())
            .await?;
        OrValidated::Validated(Box::new(Plain(validation)))
    } else {
        let creation = app.create_deployment(&who, spec, key.as_deref()).await?;
        OrValidated::Done(deployment_created(creation))
    })
}

/// List deployments.
///
/// The deployments of the caller's organization, a page at a time (`size`,
/// then `cursor` from the previous page's `next_cursor`), each as its GET
/// shows it; deleted ones are gone from the list. `name`, `status` and
/// `tag` filter the list. Refusals: 400 for a size out of range or a
/// malformed filter.
#[utoipa::path(
    get,
    path = "/api/v1/deployments",
    operation_id = "list-deployments",
    tag = TAG,
    params(ListParams),
    extensions(("x-floe-roles" = json!(floe_app::caller::READ_ROLES))),
    responses(Plain<DeploymentList>, Invalid, ReadErrors),
    security(("bearer" = []))
)]
async fn list_deployments(
    State(state): State<ApiState>,
    caller: Caller,
    params: Params<ListParams>,
) -> Result<Plain<DeploymentList>, ApiError> {
    let who = caller.reader()?;
    let params = params.check()?;
    let query = DeploymentQuery {
        page: floe_store::PageRequest {
            size: params.size,
            cursor: params.cursor,
        },
        name_prefix: params.name,
        status: params.status,
        tag: params.tag,
    };
    Ok(Plain(state.app.list_deployments(&who, query).await?))
}

/// Read a deployment.
///
/// Its spec as last accepted, its status, its plans' summary, how to reach
/// its cluster (`elasticsearch`: endpoint, CA, nodes, proxy path), its
/// health (`healthy` and the warnings beside it) and its recovery. The
/// `ETag` is the version a replace or delete names in `If-Match`. The
/// elastic password is never here: only the create's and a reset's answers
/// carry it. 404 for a deployment of another organization.
#[utoipa::path(
    get,
    path = "/api/v1/deployments/{id}",
    operation_id = "get-deployment",
    tag = TAG,
    params(("id" = String, Path, description = "Deployment id.")),
    extensions(("x-floe-roles" = json!(floe_app::caller::READ_ROLES))),
    responses(Versioned<DeploymentView>, ReadErrors, NotFound),
    security(("bearer" = []))
)]
async fn get_deployment(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
) -> Result<Versioned<Shown<DeploymentView>>, ApiError> {
    let who = caller.reader()?;
    Ok(Versioned(state.app.show_deployment(&who, &id).await?))
}

/// Replace a deployment's spec.
///
/// The body is a spec, or the deployment's GET body with fields changed:
/// read-only fields (`id`, `status`, `plans`, `elasticsearch`, `created`,
/// `updated`, each node group's `arch`, `vcpus`, `memory_mib` and
/// `jvm_heap_mib`) are ignored when unchanged and refused with 400
/// `validation.read_only` when changed; `resource_version` works as
/// `If-Match`.
///
/// On a running deployment, changes to the name, tags and policy
/// attachments apply at once; changes to the version, node groups, user
/// settings or repository need a plan: one is recorded (status
/// `reconfiguring`), or the request is refused with 409 while another plan
/// is pending. A stopped deployment records any change; it applies at its
/// next start (`POST …/_start`). A failed deployment is fixed by sending
/// its spec again: a plan re-applies it.
///
/// With `validate_only=true` the request is checked as the update checks
/// it (body, role, read-only fields, preconditions, version path,
/// references, a pending plan) and answered with 200 and what it would
/// change, the plan's steps included when it needs one; nothing is stored
/// and no plan starts.
///
/// Refusals:
/// - 409: a plan is pending, or a concurrent change won.
/// - 409 `restore.source_path_read_only`: on a mount clone, `snapshot.repository`
///   or an attached policy's repository (`snapshot.policies[i]`) is the name its
///   source's path is registered under read-only (`clone_source.registered_as`);
///   registering it at the clone's own path would take the mounted data away.
/// - 400 `restore.repository_unreachable`: a mount clone's new `snapshot.repository`
///   cannot share the nodes' one S3 client with the source's repository.
#[utoipa::path(
    put,
    path = "/api/v1/deployments/{id}",
    operation_id = "update-deployment",
    tag = TAG,
    params(
        ("id" = String, Path, description = "Deployment id."),
        ("If-Match" = Option<String>, Header, pattern = r#"^\s*(\*|(W/)?"[0-9]{1,19}"|[0-9]{1,19})\s*$"#, description = "Update only if the deployment is at this ETag."),
        ReplaceParams,
    ),
    request_body(content = DeploymentSpec, description = "A spec, or the GET body with fields changed.", example = json!(crate::examples::deployment_request())),
    extensions(("x-floe-roles" = json!(floe_app::caller::MANAGE_ROLES))),
    responses(OrValidated<Versioned<DeploymentView>>, Invalid, ManageErrors, NotFound, Conflict, Stale, BodyErrors),
    security(("bearer" = []))
)]
async fn put_deployment(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
    headers: HeaderMap,
    params: Params<ReplaceParams>,
    DeploymentReplacement(spec, read_only): DeploymentReplacement,
) -> Result<OrValidated<Versioned<DeploymentView>>, ApiError> {
    let who = caller.manager()?;
    let params = params.check()?;
    let expected = expected_version(&headers, params.version)?;
    let app = &state.app;
    Ok(if params.validate_only {
        let validation = app
            .validate_replace_deployment(&who, &id, expected, spec, &read_only)
            .await?;
        OrValidated::Validated(Box::new(Plain(validation)))
    } else {
        let updated = app
            .replace_deployment(&who, &id, expected, spec, &read_only)
            .await?;
        OrValidated::Done(Versioned(updated))
    })
}

/// Delete a stopped deployment: a delete plan removes what it still holds
/// outside the record (any node left, its parameters and secrets, its
/// launch templates), then the record. The deployment shows `stopping`
/// until then, and a GET answers 404 once it is gone. A DELETE while that
/// plan runs answers the same plan.
///
/// The deployment's snapshots are kept by default: they stay listed under
/// `…/snapshots/repositories/{repository}/deleted-deployments`, restorable,
/// and counted in the repository's `used_by`. With `remove_snapshots=true`
/// the snapshots no clone pins are removed first, through the cluster: that
/// delete is taken from a running deployment (no shutdown first); the
/// pinned ones stay, named in the answer's `warnings`. See
/// docs/snapshot-records.md.
///
/// Refusals:
/// - 409: the deployment is not stopped (shut it down first), or a plan is pending.
/// - 409: `remove_snapshots=true` on a stopped deployment that has snapshots: they are removed through its cluster (start it first, or keep them).
#[utoipa::path(
    delete,
    path = "/api/v1/deployments/{id}",
    operation_id = "delete-deployment",
    tag = TAG,
    params(
        ("id" = String, Path, description = "Deployment id."),
        ("If-Match" = Option<String>, Header, pattern = r#"^\s*(\*|(W/)?"[0-9]{1,19}"|[0-9]{1,19})\s*$"#, description = "Delete only if the deployment is at this ETag."),
        DeleteParams,
    ),
    extensions(("x-floe-roles" = json!(floe_app::caller::MANAGE_ROLES))),
    responses(Planned<DeploymentView>, Invalid, ManageErrors, NotFound, Conflict, Stale),
    security(("bearer" = []))
)]
async fn delete_deployment(
    State(state): State<ApiState>,
    caller: Caller,
    PathParam(id): PathParam,
    headers: HeaderMap,
    params: Params<DeleteParams>,
) -> Result<Planned<DeploymentView>, ApiError> {
    let who = caller.manager()?;
    let params = params.check()?;
    let expected = expected_version(&headers, params.version)?;
    let deleting = state
        .app
        .delete_deployment_with(&who, &id, expected, params.remove_snapshots)
        .await?;
    Ok(Planned(deleting))
}

/// The query of a delete.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct DeleteParams {
    /// Same as If-Match (ECE). A version that is not the current one is 412; sent with If-Match, both must name the same version (400 otherwise).
    #[serde(default, deserialize_with = "version")]
    version: Option<u64>,
    /// Remove the deployment's snapshots that no clone pins, through its running cluster, before its nodes go (by default a delete keeps them).
    #[serde(default, deserialize_with = "flag")]
    remove_snapshots: bool,
}

/// The query of a create.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct CreateParams {
    /// Same as Idempotency-Key (ECE).
    #[param(pattern = r"^[!-~]{1,128}$")]
    request_id: Option<String>,
    /// Check the request and answer what it would create (200, `DeploymentValidation`); store nothing.
    #[serde(default, deserialize_with = "flag")]
    validate_only: bool,
}

/// The query of a list: a page, and filters the use case checks.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct ListParams {
    /// Page size, 1 to 100 (default 20).
    #[serde(default, deserialize_with = "page_size")]
    #[param(minimum = 1, maximum = 100)]
    size: Option<u32>,
    /// `next_cursor` of the previous page. Opaque: only a `next_cursor` this API returned is a cursor (400 otherwise).
    cursor: Option<String>,
    /// Only names starting with this.
    name: Option<String>,
    /// Only this status.
    #[param(value_type = Option<floe_domain::deployment::DeploymentStatus>)]
    status: Option<String>,
    /// Only deployments with this tag, as `key:value`, split at the first `:`: a tag key never holds a `:` (refused when written), a value may. `tag=env:eu:west` is key `env` with value `eu:west`. Percent-encode the value's characters a query string reserves (`&`, `#`, `+`, `%`).
    #[param(pattern = "^[^:]+:.+$")]
    tag: Option<String>,
}

/// The query of a replace.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct ReplaceParams {
    /// Same as If-Match (ECE). A version that is not the current one is 412; sent with If-Match, both must name the same version (400 otherwise).
    #[serde(default, deserialize_with = "version")]
    version: Option<u64>,
    /// Check the request and answer what it would change (200, `DeploymentValidation`); store nothing.
    #[serde(default, deserialize_with = "flag")]
    validate_only: bool,
}

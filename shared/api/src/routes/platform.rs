//! Health, the instance catalog, and the OpenAPI document.

use crate::error::{ApiError, ErrorBody};
use crate::extract::{Caller, Params};
use crate::params::NoParams;
use crate::respond::Plain;
use crate::responses::Invalid;
use crate::state::ApiState;
use axum::extract::State;
use floe_app::catalog::InstanceTypeList;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

operations!([health], [list_instance_types],);

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    #[schema(example = "ok")]
    pub status: String,
    #[schema(example = "0.1.0")]
    pub version: String,
}

/// Liveness of the API (no token needed).
///
/// Answers 200 with the API's version while the API serves requests; it
/// reads no record and calls no other service, so it says nothing of the
/// deployments (each deployment's view carries its own health). Like every
/// operation without query parameters, it refuses any (400 naming it).
#[utoipa::path(
    get,
    path = "/api/v1/health",
    operation_id = "get-health",
    tag = "platform",
    params(NoParams),
    responses(Plain<Health>, Invalid),
    security(())
)]
async fn health(params: Params<NoParams>) -> Result<Plain<Health>, ApiError> {
    params.check()?;
    Ok(Plain(Health {
        status: "ok".into(),
        version: env!("CARGO_PKG_VERSION").into(),
    }))
}

/// The EC2 instance types deployments can use.
///
/// Refusals:
/// - 400: unknown architecture.
#[utoipa::path(
    get,
    path = "/api/v1/platform/configuration/instance-types",
    operation_id = "list-instance-types",
    tag = "platform",
    params(InstanceTypeParams),
    extensions(("x-floe-roles" = json!(floe_app::caller::READ_ROLES))),
    responses(Plain<InstanceTypeList>, Invalid, (status = 401, description = "No or bad token.", body = ErrorBody)),
    security(("bearer" = []))
)]
async fn list_instance_types(
    State(state): State<ApiState>,
    caller: Caller,
    params: Params<InstanceTypeParams>,
) -> Result<Plain<InstanceTypeList>, ApiError> {
    let who = caller.reader()?;
    let params = params.check()?;
    Ok(Plain(
        state.app.instance_types(&who, params.arch.as_deref())?,
    ))
}

/// The catalog's filter; the use case checks the architecture.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct InstanceTypeParams {
    /// Only this architecture: `arm64` (Graviton) or `x86_64`.
    #[param(value_type = Option<floe_domain::catalog::Arch>)]
    arch: Option<String>,
}

//! Health, the instance catalog, and the OpenAPI document.

use crate::error::{ApiError, ErrorBody};
use crate::extract::{Caller, only_params};
use crate::state::ApiState;
use axum::Json;
use axum::extract::Query;
use floe_domain::catalog::{self, Arch};
use serde::Serialize;
use std::collections::BTreeMap;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn router() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(health))
        .routes(routes!(list_instance_types))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    #[schema(example = "ok")]
    pub status: String,
    #[schema(example = "0.1.0")]
    pub version: String,
}

/// Liveness of the API (no token needed).
#[utoipa::path(
    get,
    path = "/api/v1/health",
    operation_id = "get-health",
    tag = "platform",
    responses((status = 200, description = "The API is serving.", body = Health,
               example = json!({"status": "ok", "version": "0.1.0"}))),
    security(())
)]
async fn health() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
        version: env!("CARGO_PKG_VERSION").into(),
    })
}

#[derive(Debug, Serialize, ToSchema)]
pub struct InstanceTypeView {
    #[schema(example = "m6g.xlarge")]
    pub name: String,
    #[schema(example = "m6g")]
    pub family: String,
    pub arch: Arch,
    pub vcpus: u32,
    pub memory_mib: u32,
    /// The heap the platform sets on this type: half the RAM, at most 31 GiB.
    pub jvm_heap_mib: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_nvme_gb: Option<u32>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct InstanceTypeList {
    pub instance_types: Vec<InstanceTypeView>,
}

/// The EC2 instance types deployments can use.
#[utoipa::path(
    get,
    path = "/api/v1/platform/configuration/instance-types",
    operation_id = "list-instance-types",
    tag = "platform",
    params(("arch" = Option<String>, Query, description = "Only this architecture: `arm64` (Graviton) or `x86_64`.")),
    responses(
        (status = 200, description = "The catalog.", body = InstanceTypeList,
         example = json!({"instance_types": [{"name": "m6g.xlarge", "family": "m6g", "arch": "arm64", "vcpus": 4, "memory_mib": 16384, "jvm_heap_mib": 8192}]})),
        (status = 400, description = "Unknown architecture.", body = ErrorBody),
        (status = 401, description = "No or bad token.", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn list_instance_types(
    caller: Caller,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Json<InstanceTypeList>, ApiError> {
    caller.reader()?;
    only_params(&query, &["arch"])?;
    let arch = match query.get("arch") {
        None => None,
        Some(a) => Some(Arch::parse(a).ok_or_else(|| {
            ApiError::invalid_field(
                "validation.unknown_value",
                "arch",
                "must be arm64 or x86_64",
            )
        })?),
    };
    let instance_types = catalog::all()
        .iter()
        .filter(|t| arch.is_none_or(|a| t.arch == a))
        .map(|t| InstanceTypeView {
            name: t.name.to_string(),
            family: t.family.to_string(),
            arch: t.arch,
            vcpus: t.vcpus,
            memory_mib: t.memory_mib,
            jvm_heap_mib: catalog::jvm_heap_mib(t.memory_mib),
            local_nvme_gb: t.local_nvme_gb,
        })
        .collect();
    Ok(Json(InstanceTypeList { instance_types }))
}

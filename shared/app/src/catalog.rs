//! The instance catalog: the EC2 types deployments can use.

use crate::{App, AppError, Reader};
use floe_domain::Code;
use floe_domain::catalog::{self, Arch};
use serde::Serialize;
use utoipa::ToSchema;

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

impl App {
    /// The catalog, or its types of one architecture (`arm64`, `x86_64`).
    pub fn instance_types(
        &self,
        _who: &Reader,
        arch: Option<&str>,
    ) -> Result<InstanceTypeList, AppError> {
        let arch = match arch {
            None => None,
            Some(a) => Some(Arch::parse(a).ok_or_else(|| {
                AppError::invalid(
                    Code::VALIDATION_UNKNOWN_VALUE,
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
        Ok(InstanceTypeList { instance_types })
    }
}

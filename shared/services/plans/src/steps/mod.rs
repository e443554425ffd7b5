//! The steps of deployment plans, shared between the plan kinds that
//! declare them (see [`crate::plans`]), and what they have in common.
//!
//! - [`security`], node-security
//! - [`credentials`], repository-credentials
//! - [`nodes`], template:{group}, launch:{group}, wait-running,
//!   wait-joined, terminate, wait-terminated
//! - [`bootstrap`], bootstrap-masters, forget-parameters
//! - [`repository`], register-repository, final-snapshot
//! - [`drain`], an update's drain, wait-drained, wait-retired,
//!   clear-exclusion, forget-templates
//! - [`voting`], an update's exclude-masters, wait-masters-excluded, retire
//! - [`restore`], register-source, restore, mount, wait-restored
//! - [`drill`], a drill's drill-check, drill-verdict
//! - [`heal`], a heal's replace:{group}, exclude-lost-masters,
//!   wait-lost-masters-excluded, retire-lost, clear-lost-exclusion
//! - [`templates`], a delete's forget-templates
//! - [`identity`], node-identity, forget-identity
//! - [`records`], the endpoint's DNS records (within record-access and
//!   terminate)

pub mod access;
pub mod bootstrap;
pub mod credentials;
pub mod drain;
pub mod drill;
pub mod heal;
pub mod identity;
pub mod license;
pub mod nodes;
pub mod records;
pub mod remove_snapshots;
pub mod repository;
pub mod restore;
pub mod security;
pub mod templates;
pub mod voting;

use crate::engine::Outcome;
use crate::failure::StepFailure;
use floe_compute::{
    ComputeError, InstanceState, TAG_DEPLOYMENT, TAG_NODE_GROUP, TAG_ORG, TAG_PLAN,
};
use floe_domain::deployment::{DeploymentSpec, NodeGroup};
use floe_domain::plan::{Plan, StepError};
use floe_domain::restore::CloneSource;
use std::collections::BTreeMap;
use std::time::Duration;

/// The repository whose S3 client the nodes get: the deployment's own,
/// else, for a clone, its source's (from a create's spec, or from the
/// clone's record for every later plan: mounted shards move between nodes
/// only when the new ones can read the source).
pub(crate) fn client_repository_name<'a>(
    spec: &'a DeploymentSpec,
    source: Option<&'a CloneSource>,
) -> Option<&'a str> {
    spec.repository()
        .or_else(|| {
            spec.restore_snapshot
                .as_ref()
                .and_then(|r| r.repository.as_deref())
        })
        .or_else(|| source.map(|s| s.repository.as_str()))
}

/// The spec a plan builds: its params for create and update.
pub(crate) fn target(plan: &Plan) -> Result<DeploymentSpec, StepError> {
    plan.params.target_spec().cloned().ok_or_else(|| StepError {
        failure_type: "invalid_plan".into(),
        message: format!("a {} plan has no target spec", plan.kind().as_str()),
    })
}

/// The plan's target spec and one of its node groups.
pub(crate) fn target_group(
    plan: &Plan,
    id: &str,
) -> Result<(DeploymentSpec, NodeGroup), StepError> {
    let spec = target(plan)?;
    let group = spec
        .node_groups
        .iter()
        .find(|g| g.id == id)
        .cloned()
        .ok_or_else(|| StepError {
            failure_type: "invalid_plan".into(),
            message: format!("node group {id} is not in the plan"),
        })?;
    Ok((spec, group))
}

pub(crate) fn tags(plan: &Plan, group: Option<&str>) -> BTreeMap<String, String> {
    let mut t = BTreeMap::from([
        (TAG_DEPLOYMENT.to_string(), plan.deployment_id.clone()),
        (TAG_ORG.to_string(), plan.org.clone()),
        (TAG_PLAN.to_string(), plan.id.clone()),
    ]);
    if let Some(g) = group {
        t.insert(TAG_NODE_GROUP.to_string(), g.to_string());
    }
    t
}

pub(crate) fn template_name(plan: &Plan, group: &str) -> String {
    template_name_of(&plan.deployment_id, group, &plan.id)
}

pub(crate) fn template_name_of(deployment_id: &str, group: &str, plan_id: &str) -> String {
    format!(
        "floe-{deployment_id}-{group}-{}",
        plan_id
            .get(plan_id.len().saturating_sub(12)..)
            .unwrap_or(plan_id)
    )
}

/// The setting that keeps shards off nodes being retired.
pub(crate) const EXCLUDE_SETTING: &str = "cluster.routing.allocation.exclude._name";

/// How many of `count` nodes go to each of `zones` zones: as even as can be.
pub fn spread(count: u32, zones: u32) -> Vec<u32> {
    let zones = zones.max(1);
    (0..zones)
        .map(|z| count / zones + u32::from(z < count % zones))
        .collect()
}

/// See [`StepFailure`]'s `From<ComputeError>`; for the steps that return
/// an [`Outcome`]. A compute error is never a not-yet.
pub(crate) fn outcome_of(e: ComputeError) -> Outcome {
    StepFailure::from(e).into_outcome(Duration::ZERO)
}

pub(crate) fn is_gone(state: InstanceState) -> bool {
    matches!(
        state,
        InstanceState::Terminated | InstanceState::ShuttingDown
    )
}

#[cfg(test)]
mod tests {
    use super::spread;

    #[test]
    fn nodes_spread_evenly_over_zones() {
        assert_eq!(spread(3, 3), [1, 1, 1]);
        assert_eq!(spread(5, 3), [2, 2, 1]);
        assert_eq!(spread(1, 1), [1]);
        assert_eq!(spread(2, 3), [1, 1, 0]);
    }
}

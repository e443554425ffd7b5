//! An in-memory node identity for local mode and tests: one simulated
//! instance profile per deployment, which only records that it exists (the
//! simulated nodes read their parameters without credentials).

use async_trait::async_trait;
use floe_compute::{ComputeError, NodeIdentity, node_identity_name};
use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};

/// The deployments whose node identity exists now.
#[derive(Debug, Default)]
pub struct SimulatedIdentity {
    existing: Mutex<BTreeSet<String>>,
}

impl SimulatedIdentity {
    pub fn new() -> SimulatedIdentity {
        SimulatedIdentity::default()
    }

    /// The deployments that have a node identity, sorted.
    pub fn existing(&self) -> Vec<String> {
        // Every update is a single insert or remove: a poisoned set is whole.
        let set = self.existing.lock().unwrap_or_else(PoisonError::into_inner);
        set.iter().cloned().collect()
    }

    /// What the simulated instance profile of a deployment is called.
    pub fn profile_of(deployment_id: &str) -> String {
        format!(
            "arn:aws:iam::000000000000:instance-profile/floe-nodes/{}",
            node_identity_name(deployment_id)
        )
    }
}

#[async_trait]
impl NodeIdentity for SimulatedIdentity {
    async fn ensure(&self, deployment_id: &str) -> Result<String, ComputeError> {
        let mut set = self.existing.lock().unwrap_or_else(PoisonError::into_inner);
        set.insert(deployment_id.to_owned());
        Ok(SimulatedIdentity::profile_of(deployment_id))
    }

    async fn forget(&self, deployment_id: &str) -> Result<(), ComputeError> {
        let mut set = self.existing.lock().unwrap_or_else(PoisonError::into_inner);
        set.remove(deployment_id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn ensure_and_forget_are_idempotent() -> Result<(), ComputeError> {
        let sim = SimulatedIdentity::new();
        let first = sim.ensure("dep-1").await?;
        assert_eq!(sim.ensure("dep-1").await?, first);
        sim.ensure("dep-2").await?;
        assert_eq!(sim.existing(), ["dep-1", "dep-2"]);
        sim.forget("dep-1").await?;
        sim.forget("dep-1").await?;
        assert_eq!(sim.existing(), ["dep-2"]);
        Ok(())
    }
}

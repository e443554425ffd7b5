//! An in-memory node identity for local mode and tests: one simulated
//! instance profile per deployment, which records that it exists and the
//! snapshot paths it was last granted (the simulated nodes read their
//! parameters and snapshots without credentials, so nothing enforces them
//! here; tests read them back to see what a node role would allow).

use async_trait::async_trait;
use floe_compute::{ComputeError, NodeIdentity, SnapshotPath, node_identity_name};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, PoisonError};

/// The deployments whose node identity exists now, and the snapshot paths
/// each was last granted (kept after a forget, for tests to read).
#[derive(Debug, Default)]
pub struct SimulatedIdentity {
    existing: Mutex<BTreeSet<String>>,
    granted: Mutex<BTreeMap<String, Vec<SnapshotPath>>>,
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

    /// The snapshot paths the deployment's identity was last granted, if it
    /// was ever ensured (also after it was forgotten).
    pub fn paths_of(&self, deployment_id: &str) -> Option<Vec<SnapshotPath>> {
        let granted = self.granted.lock().unwrap_or_else(PoisonError::into_inner);
        granted.get(deployment_id).cloned()
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
    async fn ensure(
        &self,
        deployment_id: &str,
        paths: &[SnapshotPath],
    ) -> Result<String, ComputeError> {
        let mut granted = self.granted.lock().unwrap_or_else(PoisonError::into_inner);
        granted.insert(deployment_id.to_owned(), paths.to_vec());
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
        let first = sim.ensure("dep-1", &[]).await?;
        assert_eq!(sim.ensure("dep-1", &[]).await?, first);
        sim.ensure("dep-2", &[]).await?;
        assert_eq!(sim.existing(), ["dep-1", "dep-2"]);
        sim.forget("dep-1").await?;
        sim.forget("dep-1").await?;
        assert_eq!(sim.existing(), ["dep-2"]);
        Ok(())
    }
}

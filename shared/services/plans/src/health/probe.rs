//! Reading the facts of one deployment's health, through the steps' ports.

use super::judge::{ClusterFacts, Facts, Observation, judge};
use crate::deployment_steps::DeploymentSteps;
use async_trait::async_trait;
use floe_compute::{ComputeError, Instance, InstanceState};
use floe_domain::deployment::Deployment;
use std::collections::BTreeMap;

/// Looks at one deployment's instances and cluster.
#[async_trait]
pub trait Probe: Send + Sync + 'static {
    async fn probe(&self, deployment: &Deployment) -> Result<Observation, ComputeError>;
}

#[async_trait]
impl Probe for DeploymentSteps {
    async fn probe(&self, d: &Deployment) -> Result<Observation, ComputeError> {
        let facts = self.health_facts(d).await?;
        Ok(judge(&d.spec, &facts))
    }
}

impl DeploymentSteps {
    /// The instances, their status checks, and what the cluster says of
    /// itself. Only the instances must be read; the rest is a finding.
    async fn health_facts(&self, d: &Deployment) -> Result<Facts, ComputeError> {
        let instances = self.compute.instances(&d.id).await?;
        let impaired = self.impaired(&instances).await;
        // The cluster, from a node that runs.
        let cluster = match self.clusters.client(d, &[]).await {
            Ok(client) => {
                let members = client.nodes().await;
                let health = client.health(None, None).await;
                ClusterFacts::Reached {
                    members: members.ok(),
                    health: health.map(|h| h.status).map_err(|e| e.to_string()),
                }
            }
            Err(e) => ClusterFacts::Unreachable(e.to_string()),
        };
        Ok(Facts {
            instances,
            impaired,
            cluster,
        })
    }

    /// The running instances that fail a status check, with the names of
    /// the checks. Status checks that cannot be read judge nothing this
    /// time (the instances' states still do): a missing permission or an
    /// EC2 hiccup must not make every deployment look broken.
    async fn impaired(&self, instances: &[Instance]) -> BTreeMap<String, Vec<&'static str>> {
        let running: Vec<String> = instances
            .iter()
            .filter(|i| i.state == InstanceState::Running)
            .map(|i| i.id.clone())
            .collect();
        if running.is_empty() {
            return BTreeMap::new();
        }
        match self.compute.status_checks(&running).await {
            Ok(checks) => checks
                .iter()
                .filter(|c| c.impaired())
                .map(|c| (c.id.clone(), c.failing()))
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e, "health check: cannot read the instances' status checks");
                BTreeMap::new()
            }
        }
    }
}

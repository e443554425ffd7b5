//! EC2's instance state-change notifications, put on the work queue by the
//! stack's EventBridge rule: a node that stops serving starts its
//! deployment's health check at once, rather than when the sweep's round
//! over the fleet reaches it.
//!
//! A notification names an instance and its state, nothing else, and a
//! shared account sends them for every instance it runs: the instance's
//! tags (one `DescribeInstances`) say whether it is a node and whose. A
//! plan's own terminations (an update, a shutdown, a heal) find their
//! deployment with a plan pending, which the check leaves alone, as the
//! sweep does.

use super::check::HealthCheck;
use floe_compute::{Compute, ComputeError, TAG_DEPLOYMENT, TAG_ORG};
use floe_ports::InstanceStateChange;
use floe_store::StoreError;
use std::sync::Arc;

/// Why a notification could not be handled now: worth a retry.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    #[error("EC2: {0}")]
    Compute(#[from] ComputeError),
    #[error("the store: {0}")]
    Store(#[from] StoreError),
}

/// What a notification came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventOutcome {
    /// Not a loss (an instance that starts or runs), or not a node of
    /// Floe's (no such instance, or not tagged as one).
    Ignored,
    /// The deployment was checked; `healing` when a heal started.
    Checked {
        org: String,
        deployment_id: String,
        healthy: bool,
        healing: bool,
    },
    /// The deployment is not one the check looks at now: not running, a
    /// plan pending (its own terminations), or gone.
    Left { org: String, deployment_id: String },
}

/// The worker's handler of instance state-change notifications.
#[derive(Clone)]
pub struct InstanceEvents {
    health: Arc<HealthCheck>,
    compute: Arc<dyn Compute>,
}

impl InstanceEvents {
    pub fn new(health: Arc<HealthCheck>, compute: Arc<dyn Compute>) -> InstanceEvents {
        InstanceEvents { health, compute }
    }

    /// Checks the deployment of the instance `change` names, when it is a
    /// node that stopped serving. An error (EC2 or the store unavailable)
    /// is worth a retry.
    pub async fn handle(&self, change: &InstanceStateChange) -> Result<EventOutcome, EventError> {
        if !change.is_loss() {
            return Ok(EventOutcome::Ignored);
        }
        let Some(instance) = self.compute.instance(&change.detail.instance_id).await? else {
            return Ok(EventOutcome::Ignored);
        };
        let (Some(org), Some(deployment_id)) = (
            instance.tags.get(TAG_ORG),
            instance.tags.get(TAG_DEPLOYMENT),
        ) else {
            return Ok(EventOutcome::Ignored);
        };
        tracing::info!(
            instance = %instance.id,
            state = %change.detail.state,
            org = %org,
            deployment = %deployment_id,
            "a node stopped serving: checking its deployment"
        );
        let checked = self.health.check_now(org, deployment_id).await?;
        Ok(match checked {
            Some((healthy, healing)) => EventOutcome::Checked {
                org: org.clone(),
                deployment_id: deployment_id.clone(),
                healthy,
                healing,
            },
            None => EventOutcome::Left {
                org: org.clone(),
                deployment_id: deployment_id.clone(),
            },
        })
    }
}

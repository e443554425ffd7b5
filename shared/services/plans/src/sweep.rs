//! What the sweep runs beside the plans, and the narrow way it starts one.
//!
//! The engine's sweep re-queues idle plans, then runs its [`SweepTask`]s
//! (the health check) without knowing what they are; a task that starts a
//! plan does so through [`StartPlan`], never through the engine. Neither
//! side reaches into the other, so the engine and the health check each
//! stand alone (omicron's instance watcher is likewise a task of its own
//! that starts sagas through a narrow trait).

use async_trait::async_trait;
use floe_domain::deployment::Deployment;
use floe_domain::plan::Plan;
use floe_ports::{PlanJob, WorkQueue};
use floe_store::{Store, StoreError, Versioned};
use std::sync::Arc;
use std::time::Duration;

/// Work each sweep does after re-queueing the plans, whatever became of
/// them. It cannot fail the sweep: it reports its own trouble.
#[async_trait]
pub trait SweepTask: Send + Sync + 'static {
    async fn sweep(&self);
}

/// Starts a plan that a sweep task decided on.
#[async_trait]
pub trait StartPlan: Send + Sync + 'static {
    /// Records `plan` with `next`, the deployment's record that names it
    /// as its pending plan, if `previous` is still the current record
    /// (else `StoreError::VersionMismatch`), and wakes the plan.
    async fn start(
        &self,
        previous: &Versioned<Deployment>,
        next: &Deployment,
        plan: &Plan,
    ) -> Result<(), StoreError>;
}

/// [`StartPlan`] over the store the engine reads and the queue it listens to.
#[derive(Clone)]
pub struct PlanStarter {
    store: Store,
    queue: Arc<dyn WorkQueue>,
}

impl PlanStarter {
    pub fn new(store: Store, queue: Arc<dyn WorkQueue>) -> PlanStarter {
        PlanStarter { store, queue }
    }
}

#[async_trait]
impl StartPlan for PlanStarter {
    async fn start(
        &self,
        previous: &Versioned<Deployment>,
        next: &Deployment,
        plan: &Plan,
    ) -> Result<(), StoreError> {
        self.store
            .replace_deployment(next, previous, Some(plan))
            .await?;
        let job = PlanJob {
            org: plan.org.clone(),
            deployment_id: plan.deployment_id.clone(),
            plan_id: plan.id.clone(),
        };
        // A lost wake-up is found by the next sweep, as any plan's is.
        if let Err(e) = self.queue.enqueue(job, Duration::ZERO).await {
            tracing::warn!(deployment = %plan.deployment_id, plan = %plan.id, error = %e, "the new plan waits for the next sweep");
        }
        Ok(())
    }
}

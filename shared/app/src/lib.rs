//! Floe's use cases. Each takes an authorised caller and a typed input and
//! answers with domain (or view) types, or one [`AppError`]. The HTTP layer
//! extracts, calls one of these, and maps the result; it never touches the
//! store itself.
//!
//! The app depends on the ports only: it wakes the worker through
//! [`WorkQueue`], keeps schedules in step through [`ScheduleSync`] and
//! reaches clusters through [`floe_clusters::Clusters`]. It never runs the
//! plan engine or a scheduler; it links the plans crate only to lay out the
//! steps of a plan that `validate_only` shows.

pub mod api_keys;
pub mod caller;
pub mod catalog;
pub mod deployments;
pub mod drills;
pub mod error;
pub mod former;
pub mod license;
pub mod plans;
pub mod policies;
pub mod proxy;
pub mod repositories;
pub mod restore;
pub mod scheduled;
pub mod shown;
pub mod snapshots;
pub mod validation;

pub use caller::{Admin, Caller, Manager, Reader};
pub use error::{AppError, Resource};

use floe_domain::repository::EndpointPolicy;
use floe_ports::{PlanJob, ReconcileJob, ScheduleSync, WorkQueue};
use floe_secrets::Cipher;
use floe_store::Store;
use std::sync::Arc;
use std::time::Duration;

/// Everything the use cases need, built once per process (per cold start
/// on Lambda) by the function's wiring.
#[derive(Clone)]
pub struct App {
    pub store: Store,
    pub cipher: Arc<dyn Cipher>,
    pub endpoint_policy: EndpointPolicy,
    /// How a new deployment's stable endpoint is named.
    pub endpoints: floe_domain::access::EndpointNaming,
    /// Wakes a worker for a new or cancelled plan.
    pub queue: Arc<dyn WorkQueue>,
    /// Keeps the snapshot schedules in step with the records.
    pub schedules: Arc<dyn ScheduleSync>,
    /// Reaches a deployment's Elasticsearch cluster (snapshots).
    pub clusters: Arc<dyn floe_clusters::Clusters>,
    /// Resolves the names of repository endpoints, to check the addresses
    /// behind them.
    pub resolver: Arc<dyn floe_ports::Resolver>,
    /// The deployments' views as last shown, answered again while their
    /// records are unchanged.
    pub views: Arc<shown::DeploymentViews>,
    /// The organizations' API-key hashing keys, opened once.
    pub hashing_keys: Arc<api_keys::HashingKeys>,
}

/// A page of a listing: `size` (1 to the store's maximum) and the cursor
/// of the previous page.
pub use floe_store::PageRequest;

impl App {
    /// Wakes a worker for the plan. The plan is already stored, so a queue
    /// outage delays it (the sweep re-queues it) but never loses it.
    pub(crate) async fn wake(&self, org: &str, deployment_id: &str, plan_id: &str) {
        let job = PlanJob {
            org: org.into(),
            deployment_id: deployment_id.into(),
            plan_id: plan_id.into(),
        };
        if let Err(e) = self.queue.enqueue(job, Duration::ZERO).await {
            tracing::warn!(error = %e, plan = plan_id, "could not enqueue the plan; the sweep will pick it up");
        }
    }

    /// Makes the schedules follow the records behind `job`. The records are
    /// already written, so a failure is logged, not returned: the next
    /// change or plan end reconciles again (it is idempotent).
    pub(crate) async fn sync_schedules(&self, job: ReconcileJob) {
        if let Err(e) = self.schedules.sync(job.clone()).await {
            tracing::warn!(
                deployment = job.deployment_id.as_deref(),
                policy = job.policy_id.as_deref(),
                error = %e,
                "schedules not reconciled; the next change retries"
            );
        }
    }
}

#[cfg(test)]
mod tests;

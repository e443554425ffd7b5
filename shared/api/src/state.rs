use floe_auth::Verifier;
use floe_domain::repository::EndpointPolicy;
use floe_plans::{PlanJob, WorkQueue};
use floe_secrets::Cipher;
use floe_store::Store;
use std::sync::Arc;
use std::time::Duration;

/// What every handler may use; built once per process (per cold start on Lambda).
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub cipher: Arc<dyn Cipher>,
    pub verifier: Arc<Verifier>,
    pub endpoint_policy: EndpointPolicy,
    /// Wakes a worker for a new or cancelled plan.
    pub queue: Arc<dyn WorkQueue>,
    /// Reaches a deployment's Elasticsearch cluster (snapshots).
    pub clusters: Arc<dyn floe_clusters::Clusters>,
}

impl AppState {
    /// Wakes a worker for the plan. The plan is already stored, so a queue
    /// outage delays it (the sweep re-queues it) but never loses it.
    pub async fn wake(&self, org: &str, deployment_id: &str, plan_id: &str) {
        let job = PlanJob {
            org: org.into(),
            deployment_id: deployment_id.into(),
            plan_id: plan_id.into(),
        };
        if let Err(e) = self.queue.enqueue(job, Duration::ZERO).await {
            tracing::warn!(error = %e, plan = plan_id, "could not enqueue the plan; the sweep will pick it up");
        }
    }
}

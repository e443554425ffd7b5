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
    /// One schedule per attached, enabled policy of a running deployment.
    pub scheduler: Arc<dyn floe_schedules::Scheduler>,
}

impl AppState {
    /// Makes the deployment's schedules match its record. The record is
    /// already written, so a failure here is logged, not returned: the
    /// next change or plan end reconciles again (it is idempotent).
    pub async fn reconcile_schedules(&self, org: &str, deployment_id: &str) {
        match floe_schedules::reconcile_deployment(
            &self.store,
            self.scheduler.as_ref(),
            org,
            deployment_id,
        )
        .await
        {
            Ok(summary) if !summary.is_noop() => {
                tracing::info!(deployment = deployment_id, ?summary, "schedules reconciled");
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(deployment = deployment_id, error = %e, "schedules not reconciled; the next change retries");
            }
        }
    }

    /// The schedules of every deployment that attaches the policy.
    pub async fn reconcile_policy_schedules(&self, org: &str, policy_id: &str) {
        match floe_schedules::reconcile_policy(&self.store, self.scheduler.as_ref(), org, policy_id)
            .await
        {
            Ok(summary) if !summary.is_noop() => {
                tracing::info!(policy = policy_id, ?summary, "schedules reconciled");
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(policy = policy_id, error = %e, "schedules not reconciled; the next change retries");
            }
        }
    }

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

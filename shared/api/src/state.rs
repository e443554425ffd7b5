use floe_app::App;
use floe_auth::Verifier;
use floe_domain::repository::EndpointPolicy;
use floe_ports::WorkQueue;
use floe_secrets::Cipher;
use floe_store::Store;
use std::sync::Arc;

/// What the router holds: the use cases and the token verifier. Built once
/// per process (per cold start on Lambda).
#[derive(Clone)]
pub struct ApiState {
    pub app: Arc<App>,
    pub verifier: Arc<Verifier>,
}

impl ApiState {
    pub fn new(app: App, verifier: Arc<Verifier>) -> ApiState {
        ApiState {
            app: Arc::new(app),
            verifier,
        }
    }
}

/// The parts `functions/api` hands over today. Transitional: the wiring
/// is to build an [`App`] (with its `ScheduleSync` adapter) and an
/// [`ApiState`] itself; this keeps the old shape building meanwhile, with
/// the schedules reconciled on the spot as before.
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

impl From<AppState> for ApiState {
    fn from(s: AppState) -> ApiState {
        let schedules = Arc::new(floe_schedules::ReconcileNow::new(
            s.store.clone(),
            s.scheduler,
        ));
        ApiState::new(
            App {
                store: s.store,
                cipher: s.cipher,
                endpoint_policy: s.endpoint_policy,
                queue: s.queue,
                schedules,
                clusters: s.clusters,
            },
            s.verifier,
        )
    }
}

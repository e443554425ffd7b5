//! The api function's adapters, built once per cold start from its
//! configuration. SQS carries both the plan jobs and the schedule
//! reconciliations to the worker: the api calls no EventBridge Scheduler,
//! EC2 or SSM API.

use floe_api::ApiState;
use floe_app::App;
use floe_clusters::{Clusters, StoredClusters};
use floe_domain::repository::EndpointPolicy;
use floe_ports::{PlanJob, QueueError, ReconcileJob, ScheduleSync, WorkQueue};
use floe_secrets::Cipher;
use floe_wiring::{ApiConfig, Env, WiringError, build};
use std::sync::Arc;
use std::time::Duration;

/// One attempt of an AWS call (DynamoDB, KMS and SQS answer in tens of
/// milliseconds; this leaves room for a slow one), and the call with its
/// retries: half the function's timeout, so that the answer, a 503, still
/// fits.
const AWS_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
const AWS_CALL_TIMEOUT: Duration = Duration::from_secs(10);

pub async fn state() -> Result<ApiState, WiringError> {
    let config = ApiConfig::read(&Env::process())?;
    // Every AWS call ends well inside the function's 20 s (infra/template.yaml):
    // a call that hangs answers 503, not the gateway's timeout.
    let sdk = &floe_wiring::with_timeouts(
        floe_wiring::aws().await,
        AWS_ATTEMPT_TIMEOUT,
        AWS_CALL_TIMEOUT,
    );
    let store = build::store(&config.store, sdk.into()).await?;
    let cipher = build::cipher(&config.secrets, sdk.into()).await?;
    let verifier = build::verifier(&config.auth).await?;
    let (queue, schedules): (Arc<dyn WorkQueue>, Arc<dyn ScheduleSync>) = match &config.queue_url {
        Some(url) => {
            let sqs = Arc::new(floe_queue_sqs::SqsQueue::new(sdk, url.clone()));
            (sqs.clone(), sqs)
        }
        None => (Arc::new(NoWorker), Arc::new(NoWorker)),
    };
    let app = App {
        clusters: clusters(&config, cipher.clone()),
        store,
        cipher,
        endpoint_policy: EndpointPolicy {
            allow_private: config.allow_private_endpoints,
            ..EndpointPolicy::default()
        },
        // A name in the platform's private hosted zone, which the worker's
        // plans keep pointing at the nodes; without a zone, a node's address.
        endpoints: floe_wiring::EndpointSettings::naming(config.endpoints.as_ref()),
        queue,
        schedules,
        resolver: Arc::new(floe_ports::SystemResolver),
        views: Default::default(),
        hashing_keys: Default::default(),
    };
    Ok(ApiState::new(app, Arc::new(verifier)))
}

/// Without a queue, plans wait for the worker's sweep, and schedules for
/// the next plan end (both are recorded; nothing is lost).
struct NoWorker;

#[async_trait::async_trait]
impl WorkQueue for NoWorker {
    async fn enqueue(&self, job: PlanJob, _delay: Duration) -> Result<(), QueueError> {
        tracing::info!(plan = %job.plan_id, "plan recorded; no work queue is configured, the sweep will start it");
        Ok(())
    }
}

#[async_trait::async_trait]
impl ScheduleSync for NoWorker {
    async fn sync(&self, job: ReconcileJob) -> Result<(), QueueError> {
        tracing::info!(org = %job.org, "no work queue is configured: schedules follow at the next plan end");
        Ok(())
    }
}

/// The clusters, reached from what the plans recorded on each deployment
/// (nodes, CA, the sealed elastic password): no EC2 or SSM call.
fn clusters(config: &ApiConfig, cipher: Arc<dyn Cipher>) -> Arc<dyn Clusters> {
    Arc::new(StoredClusters::new(
        cipher,
        config.node_http.port,
        Duration::from_secs(20),
    ))
}

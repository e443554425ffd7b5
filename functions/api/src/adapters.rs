//! The api function's adapters, built once per cold start from its
//! configuration.

use floe_api::AppState;
use floe_domain::repository::EndpointPolicy;
use floe_ports::{PlanJob, QueueError, WorkQueue};
use floe_wiring::{ApiConfig, Env, WiringError, build};
use std::sync::Arc;
use std::time::Duration;

pub async fn state() -> Result<AppState, WiringError> {
    let config = ApiConfig::read(&Env::process())?;
    let store = build::store(&config.store).await?;
    let cipher = build::cipher(&config.secrets).await?;
    let verifier = build::verifier(&config.auth).await?;
    let queue: Arc<dyn WorkQueue> = match &config.queue_url {
        Some(url) => Arc::new(floe_queue_sqs::SqsQueue::from_env(url.clone()).await),
        None => Arc::new(NoWorkerQueue),
    };
    Ok(AppState {
        store,
        cipher,
        verifier: Arc::new(verifier),
        endpoint_policy: EndpointPolicy {
            allow_private: config.allow_private_endpoints,
        },
        queue,
        clusters: clusters(&config).await,
        scheduler: scheduler().await,
    })
}

/// Plans recorded without a queue wait for the worker's sweep.
struct NoWorkerQueue;

#[async_trait::async_trait]
impl WorkQueue for NoWorkerQueue {
    async fn enqueue(&self, job: PlanJob, _delay: Duration) -> Result<(), QueueError> {
        tracing::info!(plan = %job.plan_id, "plan recorded; no work queue is configured, the sweep will start it");
        Ok(())
    }
}

/// The clusters, through their nodes' private addresses (the function runs
/// in the nodes' VPC).
async fn clusters(config: &ApiConfig) -> Arc<dyn floe_clusters::Clusters> {
    let compute = floe_compute_ec2::Ec2Compute::from_env(floe_compute_ec2::Ec2Config {
        image_arm64: String::new(),
        image_x86_64: String::new(),
        subnets: Vec::new(),
        security_groups: Vec::new(),
        instance_profile: None,
        key_name: None,
    })
    .await;
    let parameters =
        floe_parameters_ssm::SsmParameters::from_env(floe_parameters_ssm::SsmParametersConfig {
            kms_key_id: None,
        })
        .await;
    Arc::new(
        floe_clusters::NodeAddresses::new(
            Arc::new(compute),
            config.node_http.https,
            config.node_http.port,
            None,
            Duration::from_secs(20),
        )
        .with_security(Arc::new(parameters), config.parameter_prefix.clone()),
    )
}

async fn scheduler() -> Arc<dyn floe_schedules::Scheduler> {
    match floe_wiring::SchedulerSettings::read(&Env::process()) {
        Ok(Some(s)) => Arc::new(
            floe_scheduler_aws::AwsScheduler::from_env(
                floe_scheduler_aws::AwsSchedulerConfig::new(
                    s.group,
                    s.target_arn,
                    s.role_arn,
                    s.dead_letter_arn,
                ),
            )
            .await,
        ),
        _ => Arc::new(floe_schedules::NoScheduler),
    }
}

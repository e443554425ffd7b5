//! The worker's adapters, built once per cold start from its configuration
//! ([`floe_wiring::WorkerConfig`]) and shared by every invocation's engine.

use floe_clusters::{Clusters, NodeAddresses};
use floe_compute::{Compute, NodeIdentity, NodeParameters};
use floe_compute_ec2::{Ec2Compute, Ec2Config};
use floe_identity_iam::{IamIdentity, IamIdentityConfig};
use floe_parameters_ssm::{SsmParameters, SsmParametersConfig};
use floe_plans::{
    DeploymentSteps, Engine, EngineConfig, StepPorts, StepSettings, Steps, WorkQueue,
};
use floe_queue_sqs::SqsQueue;
use floe_scheduler_aws::{AwsScheduler, AwsSchedulerConfig};
use floe_schedules::ReconcileNow;
use floe_store::Store;
use floe_wiring::{ComputeChoice, ConfigError, WiringError, WorkerConfig, build};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone)]
pub struct Adapters {
    pub store: Store,
    pub queue: Arc<dyn WorkQueue>,
    pub steps: Arc<dyn Steps>,
    pub engine: EngineConfig,
    /// Keeps snapshot schedules in step as plans end and when the api asks;
    /// `None` when the function has no schedule settings.
    pub schedules: Option<Arc<ReconcileNow>>,
    /// The health check each sweep runs (its place in the fleet is kept
    /// while the function stays warm).
    pub health: Arc<floe_plans::HealthCheck>,
    /// EC2's notifications of nodes that stopped serving: the same check,
    /// of their deployments, at once.
    pub instances: floe_plans::InstanceEvents,
    /// The use cases, for what a drill schedule's firing starts (the drill
    /// is checked and recorded as one started through the API is).
    pub app: floe_app::App,
    /// The operators' event bus: failed drills, breached recovery targets.
    pub events: Arc<dyn floe_ports::Events>,
}

/// How long the final snapshot step waits for its snapshot in one go.
const STEP_SNAPSHOT_WAIT: Duration = Duration::from_secs(30);

impl Adapters {
    pub async fn from_config(config: &WorkerConfig) -> Result<Adapters, WiringError> {
        Adapters::with_sdk(config, floe_wiring::aws().await).await
    }

    /// As [`Adapters::from_config`], every AWS client built from `sdk`
    /// (the tests' moto endpoint) instead of the process's.
    pub async fn with_sdk(
        config: &WorkerConfig,
        sdk: &aws_config::SdkConfig,
    ) -> Result<Adapters, WiringError> {
        let store = build::store(&config.store, sdk.into()).await?;
        let sqs = Arc::new(SqsQueue::new(sdk, config.queue_url.clone()));
        let queue: Arc<dyn WorkQueue> = sqs.clone();
        let Nodes {
            compute,
            clusters,
            parameters,
            identity,
        } = nodes(config, sdk)?;
        let owners = compute.clone();
        let cipher = build::cipher(&config.secrets, sdk.into()).await?;
        // A plan step (the final snapshot) waits at most this long at once:
        // a snapshot still running then makes the step wait and look again,
        // so no wait outlasts the function's 120 s timeout.
        let snapshotter = floe_snapshots::Snapshotter::new(store.clone(), clusters.clone())
            .with_settings(floe_snapshots::SnapshotterSettings {
                wait: STEP_SNAPSHOT_WAIT,
                ..floe_snapshots::SnapshotterSettings::default()
            });
        let settings = StepSettings {
            region: config.region.clone(),
            parameter_prefix: config.parameter_prefix.clone(),
            http_port: config.node_http.port,
            ..StepSettings::default()
        };
        // Each deployment's nodes run with a role of their own: the
        // create, start and update plans ensure it before a launch template
        // names it, the delete plan removes it.
        let mut steps = DeploymentSteps::new(
            StepPorts {
                compute,
                clusters: clusters.clone(),
                parameters,
                cipher: cipher.clone(),
                snapshots: snapshotter,
            },
            settings,
        )
        .with_identity(identity)
        // Repository endpoints given as names are checked again, as the
        // API checked them when they were written, before nodes get them.
        .with_endpoint_check(floe_plans::EndpointCheck::system(
            config.allow_private_endpoints,
        ));
        // Each deployment's endpoint name follows its nodes, in the
        // platform's private hosted zone.
        if let Some(endpoints) = &config.endpoints {
            steps = steps.with_records(Arc::new(floe_records_route53::Route53Records::new(
                sdk,
                endpoints.zone_id.clone(),
            )));
        }
        let steps = Arc::new(steps);
        let events: Arc<dyn floe_ports::Events> = Arc::new(
            floe_events_eventbridge::EventBridgeEvents::new(sdk, config.event_bus.clone()),
        );
        // Its heals are plans like any other: recorded, then queued.
        let health = Arc::new(
            floe_plans::HealthCheck::new(
                store.clone(),
                Arc::new(floe_plans::PlanStarter::new(store.clone(), queue.clone())),
                steps.clone(),
                floe_plans::HealthConfig::default(),
            )
            .with_events(events.clone())
            // Each sweep hands the shards to workers of their own.
            .with_shards(sqs),
        );
        let schedules = match &config.scheduler {
            Some(s) => {
                let mut aws = AwsSchedulerConfig::new(
                    s.group.clone(),
                    s.target_arn.clone(),
                    s.role_arn.clone(),
                    s.dead_letter_arn.clone(),
                );
                if let Some(queue) = &s.drill_target_arn {
                    aws = aws.with_drill_target(queue.clone());
                }
                let scheduler = AwsScheduler::new(sdk, aws);
                Some(Arc::new(ReconcileNow::new(
                    store.clone(),
                    Arc::new(scheduler),
                )))
            }
            None => None,
        };
        let app = floe_app::App {
            store: store.clone(),
            cipher,
            endpoint_policy: floe_domain::repository::EndpointPolicy {
                allow_private: config.allow_private_endpoints,
                ..floe_domain::repository::EndpointPolicy::default()
            },
            endpoints: floe_wiring::EndpointSettings::naming(config.endpoints.as_ref()),
            queue: queue.clone(),
            schedules: match &schedules {
                Some(s) => s.clone(),
                None => Arc::new(NoSchedules),
            },
            clusters,
            resolver: Arc::new(floe_ports::SystemResolver),
            views: Default::default(),
            hashing_keys: Default::default(),
        };
        Ok(Adapters {
            app,
            events,
            store,
            queue,
            steps,
            engine: EngineConfig::default(),
            schedules,
            instances: floe_plans::InstanceEvents::new(health.clone(), owners),
            health,
        })
    }

    /// The engine of one invocation. Its owner names the invocation, so a
    /// plan's lease points at the request id to look up in the logs; the
    /// budget ends early enough for the last step to finish before the
    /// invocation's deadline (`remaining`).
    pub fn engine(&self, request_id: &str, remaining: Duration) -> Engine {
        let config = EngineConfig {
            budget: crate::budget(remaining, self.engine.budget),
            ..self.engine.clone()
        };
        let engine = Engine::new(
            self.store.clone(),
            self.queue.clone(),
            self.steps.clone(),
            format!("worker/{request_id}"),
            config,
        )
        .with_sweep_task(self.health.clone())
        .with_events(self.events.clone());
        match &self.schedules {
            Some(schedules) => engine.with_listener(schedules.clone()),
            None => engine,
        }
    }
}

/// Without schedule settings there is nothing to reconcile; a use case
/// that asks is told so (it logs it; the records are written).
struct NoSchedules;

#[async_trait::async_trait]
impl floe_ports::ScheduleSync for NoSchedules {
    async fn sync(&self, job: floe_ports::ReconcileJob) -> Result<(), floe_ports::QueueError> {
        Err(floe_ports::QueueError(format!(
            "this worker has no schedule settings; schedules of organization {} not reconciled",
            job.org
        )))
    }
}

struct Nodes {
    compute: Arc<dyn Compute>,
    clusters: Arc<dyn Clusters>,
    parameters: Arc<dyn NodeParameters>,
    identity: Arc<dyn NodeIdentity>,
}

fn nodes(config: &WorkerConfig, sdk: &aws_config::SdkConfig) -> Result<Nodes, WiringError> {
    match &config.compute {
        ComputeChoice::Ec2(ec2) => {
            let compute: Arc<dyn Compute> = Arc::new(Ec2Compute::new(
                sdk,
                Ec2Config {
                    image_arm64: ec2.image_arm64.clone(),
                    image_x86_64: ec2.image_x86_64.clone(),
                    subnets: ec2.subnets.clone(),
                    security_groups: ec2.security_groups.clone(),
                    // No shared profile: every launch template names its
                    // deployment's own (node-identity), and a template
                    // without one launches nodes that read nothing.
                    instance_profile: None,
                    key_name: ec2.key_name.clone(),
                },
            ));
            let parameters: Arc<dyn NodeParameters> = Arc::new(SsmParameters::new(
                sdk,
                SsmParametersConfig { kms_key_id: None },
            ));
            let identity: Arc<dyn NodeIdentity> = Arc::new(IamIdentity::new(
                sdk,
                identity_config(config, &ec2.identity),
            ));
            let clusters = Arc::new(
                NodeAddresses::new(
                    compute.clone(),
                    config.node_http.https,
                    config.node_http.port,
                    None,
                    Duration::from_secs(20),
                )
                .with_security(parameters.clone(), config.parameter_prefix.clone()),
            );
            Ok(Nodes {
                compute,
                clusters,
                parameters,
                identity,
            })
        }
        ComputeChoice::Simulated(sim) => simulated(sim),
    }
}

/// The IAM adapter's settings: the parameters a node may read are its
/// deployment's under the worker's prefix, in the worker's region and the
/// boundary's account.
fn identity_config(
    config: &WorkerConfig,
    identity: &floe_wiring::NodeIdentitySettings,
) -> IamIdentityConfig {
    IamIdentityConfig {
        path: identity.path.clone(),
        permissions_boundary: identity.permissions_boundary.clone(),
        parameters_arn: format!(
            "arn:{}:ssm:{}:{}:parameter{}",
            identity.partition,
            config.region,
            identity.account,
            config.parameter_prefix.trim_end_matches('/')
        ),
        // The SecureStrings are under SSM's default key (the parameters
        // adapter above names none), whose key policy already lets the
        // account's principals decrypt through SSM.
        kms_key_arn: None,
        snapshot_buckets: identity.snapshot_buckets.clone(),
    }
}

/// Simulated instances and clusters, for the emulator tests of this
/// function: only a build with the `simulated` feature carries them (the
/// test crate's); the Lambda zip does not.
#[cfg(feature = "simulated")]
fn simulated(sim: &floe_wiring::SimSettings) -> Result<Nodes, WiringError> {
    use floe_clusters_sim::{SimulatedClusters, SimulatedClustersConfig};
    use floe_compute_sim::{SimulatedCompute, SimulatedConfig};
    let config =
        SimulatedConfig::parse(sim.boot_delay, sim.terminate_delay, &sim.faults).map_err(|m| {
            ConfigError {
                name: floe_wiring::SimSettings::FAULTS,
                message: m,
            }
        })?;
    let compute: Arc<dyn Compute> = match &sim.state_dir {
        // Kept in a file: worker processes one after the other share one
        // simulated EC2.
        Some(dir) => Arc::new(
            SimulatedCompute::persisted(config, dir.join("compute.json")).map_err(|e| {
                ConfigError {
                    name: "FLOE_SIM_STATE_DIR",
                    message: e.to_string(),
                }
            })?,
        ),
        None => Arc::new(SimulatedCompute::new(config)),
    };
    let clusters = Arc::new(SimulatedClusters::new(
        compute.clone(),
        SimulatedClustersConfig::default(),
    ));
    let parameters = Arc::new(floe_compute_sim::SimulatedParameters::new(Vec::new()));
    Ok(Nodes {
        compute,
        clusters,
        parameters,
        identity: Arc::new(floe_compute_sim::SimulatedIdentity::new()),
    })
}

#[cfg(not(feature = "simulated"))]
fn simulated(_sim: &floe_wiring::SimSettings) -> Result<Nodes, WiringError> {
    Err(ConfigError {
        name: "FLOE_COMPUTE",
        message: "this build has no simulated compute (it is in local mode and the test builds)"
            .into(),
    }
    .into())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_budget_leaves_the_last_step_time_before_the_deadline() {
        use std::time::Duration;
        let engine = Duration::from_secs(60);
        assert_eq!(crate::budget(Duration::from_secs(900), engine), engine);
        assert_eq!(
            crate::budget(Duration::from_secs(60), engine),
            Duration::from_secs(30)
        );
        assert_eq!(
            crate::budget(Duration::from_secs(10), engine),
            crate::MIN_BUDGET
        );
        assert_eq!(
            crate::budget(Duration::from_secs(10), Duration::from_secs(1)),
            Duration::from_secs(1)
        );
    }
}

//! The worker's configuration, read once per cold start, and the adapters it
//! selects. Every value is checked here, so that a mistake in the deployment
//! stops the function at its first start with the variable's name, rather
//! than failing plans one step at a time.

use floe_clusters::{Clusters, NodeAddresses};
use floe_clusters_sim::{SimulatedClusters, SimulatedClustersConfig};
use floe_compute::Compute;
use floe_compute_ec2::{Ec2Compute, Ec2Config};
use floe_compute_sim::{SimulatedCompute, SimulatedConfig};
use floe_parameters_ssm::{SsmParameters, SsmParametersConfig};
use floe_plans::{DeploymentSteps, Engine, EngineConfig, StepSettings, Steps, WorkQueue};
use floe_queue_sqs::SqsQueue;
use floe_scheduler_aws::{AwsScheduler, AwsSchedulerConfig};
use floe_schedules::{ReconcileNow, Scheduler};
use floe_secrets_kms::KmsCipher;
use floe_store::Store;
use floe_store_dynamo::DynamoBackend;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name}: {message}")]
pub struct ConfigError {
    pub name: &'static str,
    pub message: String,
}

fn invalid(name: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        name,
        message: message.into(),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComputeChoice {
    Ec2(Ec2Config),
    /// In-memory instances (`FLOE_SIM_*` tune them). Each Lambda execution
    /// environment has its own, so this is for smoke tests of the wiring, not
    /// for running deployments.
    Simulated,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    /// The DynamoDB table of every record (`FLOE_STORE=dynamodb://TABLE`).
    pub table: String,
    /// The work queue (`FLOE_QUEUE_URL`).
    pub queue_url: String,
    pub compute: ComputeChoice,
    /// `AWS_REGION`: the nodes' region, for their S3 and SSM clients.
    pub region: String,
    /// Where nodes read their bootstrap parameters (`FLOE_PARAMETER_PREFIX`).
    pub parameter_prefix: String,
    /// How the worker reaches a node's HTTP port (`FLOE_ES_SCHEME`, `FLOE_ES_PORT`).
    pub es_https: bool,
    pub es_port: u16,
    /// EventBridge Scheduler settings (`FLOE_SCHEDULE_GROUP` and friends).
    pub scheduler: Option<AwsSchedulerConfig>,
    /// The KMS key the api seals repository keys with (`FLOE_KMS_KEY_ID`);
    /// without it a plan for a deployment whose repository holds keys fails
    /// at its `repository-credentials` step, naming the variable.
    pub kms_key_id: Option<String>,
}

impl WorkerConfig {
    pub fn from_env() -> Result<WorkerConfig, ConfigError> {
        WorkerConfig::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the configuration through `var` (the environment, or a map in tests).
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Result<WorkerConfig, ConfigError> {
        let var = |name: &str| {
            var(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let required = |name: &'static str, what: &str| {
            var(name).ok_or_else(|| invalid(name, format!("is required: {what}")))
        };

        let store = required("FLOE_STORE", "dynamodb://TABLE")?;
        let table = parse_store(&store)?;
        let queue_url = required("FLOE_QUEUE_URL", "the URL of the work queue")?;
        if !(queue_url.starts_with("https://") || queue_url.starts_with("http://")) {
            return Err(invalid(
                "FLOE_QUEUE_URL",
                "must be the queue's URL (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME)",
            ));
        }
        let region = required("AWS_REGION", "the region the worker and the nodes run in")?;
        let parameter_prefix =
            floe_compute::parameters::prefix_from_lookup(var).map_err(|(n, m)| invalid(n, m))?;

        let compute = match var("FLOE_COMPUTE").as_deref() {
            None | Some("ec2") => ComputeChoice::Ec2(ec2_config(&var)?),
            Some("simulated") => ComputeChoice::Simulated,
            Some(_) => return Err(invalid("FLOE_COMPUTE", "must be ec2 or simulated")),
        };
        let floe_clusters::NodeHttp {
            https: es_https,
            port: es_port,
        } = floe_clusters::NodeHttp::from_lookup(var).map_err(|(n, m)| invalid(n, m))?;
        let scheduler = floe_scheduler_aws::config_from_env(var)
            .map_err(|m| invalid("FLOE_SCHEDULE_GROUP", m))?;
        Ok(WorkerConfig {
            scheduler,
            kms_key_id: var("FLOE_KMS_KEY_ID"),
            table,
            queue_url,
            compute,
            region,
            parameter_prefix,
            es_https,
            es_port,
        })
    }

    pub fn step_settings(&self) -> StepSettings {
        StepSettings {
            region: self.region.clone(),
            parameter_prefix: self.parameter_prefix.clone(),
            ..StepSettings::default()
        }
    }
}

fn parse_store(value: &str) -> Result<String, ConfigError> {
    // SQLite has no place here: a file in one Lambda environment's /tmp is
    // shared with neither the api function nor the other environments.
    let Some(table) = value.strip_prefix("dynamodb://") else {
        return Err(invalid(
            "FLOE_STORE",
            "must be dynamodb://TABLE (the worker shares the api's table)",
        ));
    };
    if !floe_store_dynamo::is_table_name(table) {
        return Err(invalid(
            "FLOE_STORE",
            "dynamodb://TABLE needs a DynamoDB table name",
        ));
    }
    Ok(table.to_string())
}

/// A comma-separated list of ids that all start with `prefix`.
fn id_list(
    name: &'static str,
    value: Option<String>,
    prefix: &str,
    what: &str,
) -> Result<Vec<String>, ConfigError> {
    let ids: Vec<String> = value
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if ids.is_empty() {
        return Err(invalid(
            name,
            format!("is required: a comma-separated list of {what}"),
        ));
    }
    if let Some(bad) = ids.iter().find(|id| !id.starts_with(prefix)) {
        return Err(invalid(
            name,
            format!("{bad:?} is not {what} ({prefix}...)"),
        ));
    }
    Ok(ids)
}

fn ec2_config(var: &impl Fn(&str) -> Option<String>) -> Result<Ec2Config, ConfigError> {
    let image = |name: &'static str| match var(name) {
        Some(id) if id.starts_with("ami-") => Ok(id),
        Some(id) => Err(invalid(
            name,
            format!("{id:?} is not an image id (ami-...)"),
        )),
        None => Err(invalid(
            name,
            "is required with FLOE_COMPUTE=ec2: an AMI id",
        )),
    };
    let image_arm64 = image("FLOE_EC2_IMAGE_ARM64")?;
    let image_x86_64 = image("FLOE_EC2_IMAGE_X86_64")?;
    let subnets = id_list(
        "FLOE_EC2_SUBNETS",
        var("FLOE_EC2_SUBNETS"),
        "subnet-",
        "subnet ids, one per zone",
    )?;
    let security_groups = id_list(
        "FLOE_EC2_SECURITY_GROUPS",
        var("FLOE_EC2_SECURITY_GROUPS"),
        "sg-",
        "security group ids",
    )?;
    // Nodes read their bootstrap parameters and write snapshots with the
    // profile's role: without one they would boot into a broken cluster.
    let instance_profile = var("FLOE_EC2_INSTANCE_PROFILE").ok_or_else(|| {
        invalid(
            "FLOE_EC2_INSTANCE_PROFILE",
            "is required with FLOE_COMPUTE=ec2: the nodes' instance profile (name or ARN)",
        )
    })?;
    Ok(Ec2Config {
        image_arm64,
        image_x86_64,
        subnets,
        security_groups,
        instance_profile: Some(instance_profile),
        key_name: var("FLOE_EC2_KEY_NAME"),
    })
}

/// The adapters of one process, built once per cold start and shared by
/// every invocation's engine.
#[derive(Clone)]
pub struct Adapters {
    pub store: Store,
    pub queue: Arc<dyn WorkQueue>,
    pub steps: Arc<dyn Steps>,
    pub engine: EngineConfig,
    /// Keeps snapshot schedules in step with deployments as plans end;
    /// `None` when the function has no schedule settings.
    pub scheduler: Option<Arc<dyn Scheduler>>,
}

impl Adapters {
    pub async fn from_config(config: &WorkerConfig) -> Result<Adapters, ConfigError> {
        let store = Store::new(Arc::new(
            DynamoBackend::from_env(config.table.clone()).await,
        ));
        let queue: Arc<dyn WorkQueue> =
            Arc::new(SqsQueue::from_env(config.queue_url.clone()).await);
        let (compute, clusters, parameters): (
            Arc<dyn Compute>,
            Arc<dyn Clusters>,
            Arc<dyn floe_compute::NodeParameters>,
        ) = match &config.compute {
            ComputeChoice::Ec2(ec2) => {
                let compute: Arc<dyn Compute> = Arc::new(Ec2Compute::from_env(ec2.clone()).await);
                let parameters: Arc<dyn floe_compute::NodeParameters> = Arc::new(
                    SsmParameters::from_env(SsmParametersConfig { kms_key_id: None }).await,
                );
                let clusters = Arc::new(
                    NodeAddresses::new(
                        compute.clone(),
                        config.es_https,
                        config.es_port,
                        None,
                        Duration::from_secs(20),
                    )
                    .with_security(parameters.clone(), config.parameter_prefix.clone()),
                );
                (compute, clusters, parameters)
            }
            ComputeChoice::Simulated => {
                let compute: Arc<dyn Compute> = Arc::new(SimulatedCompute::new(
                    SimulatedConfig::from_env().map_err(|m| invalid("FLOE_SIM_*", m))?,
                ));
                let clusters = Arc::new(SimulatedClusters::new(
                    compute.clone(),
                    SimulatedClustersConfig::default(),
                ));
                let parameters = Arc::new(floe_compute_sim::SimulatedParameters::new(Vec::new()));
                (compute, clusters, parameters)
            }
        };
        let snapshotter = floe_snapshots::Snapshotter::new(store.clone(), clusters.clone());
        let mut steps = DeploymentSteps::new(compute, clusters, config.step_settings())
            .with_snapshots(snapshotter)
            .with_parameters(parameters);
        if let Some(key_id) = &config.kms_key_id {
            steps = steps.with_cipher(Arc::new(KmsCipher::from_env(key_id.clone()).await));
        }
        Ok(Adapters {
            store,
            queue,
            steps: Arc::new(steps),
            engine: EngineConfig::default(),
            scheduler: match &config.scheduler {
                Some(c) => Some(Arc::new(AwsScheduler::from_env(c.clone()).await)),
                None => None,
            },
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
        );
        match &self.scheduler {
            Some(scheduler) => engine.with_listener(Arc::new(ReconcileNow::new(
                self.store.clone(),
                scheduler.clone(),
            ))),
            None => engine,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    const BASE: &[(&str, &str)] = &[
        ("FLOE_STORE", "dynamodb://floe-records"),
        (
            "FLOE_QUEUE_URL",
            "https://sqs.eu-west-1.amazonaws.com/123456789012/floe-work",
        ),
        ("AWS_REGION", "eu-west-1"),
        ("FLOE_EC2_IMAGE_ARM64", "ami-0aaa"),
        ("FLOE_EC2_IMAGE_X86_64", "ami-0bbb"),
        ("FLOE_EC2_SUBNETS", "subnet-a, subnet-b,subnet-c"),
        ("FLOE_EC2_SECURITY_GROUPS", "sg-1"),
        ("FLOE_EC2_INSTANCE_PROFILE", "floe-node"),
    ];

    fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
        let mut all: Vec<_> = BASE
            .iter()
            .filter(|(k, _)| !extra.iter().any(|(e, _)| e == k))
            .copied()
            .collect();
        all.extend(extra.iter().filter(|(_, v)| !v.is_empty()).copied());
        all
    }

    #[test]
    fn a_complete_ec2_configuration_is_read() -> Result<(), ConfigError> {
        let c = WorkerConfig::from_lookup(lookup(BASE))?;
        assert_eq!(c.table, "floe-records");
        assert_eq!(c.region, "eu-west-1");
        assert_eq!(c.parameter_prefix, "/floe");
        let ComputeChoice::Ec2(ec2) = c.compute else {
            return Err(invalid("FLOE_COMPUTE", "expected ec2"));
        };
        assert_eq!(ec2.subnets, ["subnet-a", "subnet-b", "subnet-c"]);
        assert_eq!(ec2.security_groups, ["sg-1"]);
        assert_eq!(ec2.instance_profile.as_deref(), Some("floe-node"));
        assert_eq!(ec2.key_name, None);
        let s =
            WorkerConfig::from_lookup(lookup(&with(&[("FLOE_PARAMETER_PREFIX", "/prod/floe")])))?
                .step_settings();
        assert_eq!(
            (s.region.as_str(), s.parameter_prefix.as_str()),
            ("eu-west-1", "/prod/floe")
        );
        Ok(())
    }

    #[test]
    fn simulated_compute_needs_no_ec2_settings() -> Result<(), ConfigError> {
        let c = WorkerConfig::from_lookup(lookup(&[
            ("FLOE_STORE", "dynamodb://floe-records"),
            ("FLOE_QUEUE_URL", "http://127.0.0.1:5000/123456789012/work"),
            ("AWS_REGION", "us-east-1"),
            ("FLOE_COMPUTE", "simulated"),
        ]))?;
        assert_eq!(c.compute, ComputeChoice::Simulated);
        Ok(())
    }

    #[test]
    fn each_mistake_names_its_variable() {
        let cases: &[(&[(&'static str, &'static str)], &str)] = &[
            (&[("FLOE_STORE", "")], "FLOE_STORE"),
            (&[("FLOE_STORE", "sqlite://.floe/floe.db")], "FLOE_STORE"),
            (&[("FLOE_STORE", "dynamodb://a b")], "FLOE_STORE"),
            (&[("FLOE_QUEUE_URL", "")], "FLOE_QUEUE_URL"),
            (&[("FLOE_QUEUE_URL", "floe-work")], "FLOE_QUEUE_URL"),
            (&[("AWS_REGION", "")], "AWS_REGION"),
            (&[("FLOE_COMPUTE", "fargate")], "FLOE_COMPUTE"),
            (
                &[("FLOE_PARAMETER_PREFIX", "floe")],
                "FLOE_PARAMETER_PREFIX",
            ),
            (&[("FLOE_EC2_IMAGE_ARM64", "")], "FLOE_EC2_IMAGE_ARM64"),
            (
                &[("FLOE_EC2_IMAGE_X86_64", "img-1")],
                "FLOE_EC2_IMAGE_X86_64",
            ),
            (&[("FLOE_EC2_SUBNETS", " , ")], "FLOE_EC2_SUBNETS"),
            (
                &[("FLOE_EC2_SUBNETS", "subnet-a,vpc-b")],
                "FLOE_EC2_SUBNETS",
            ),
            (
                &[("FLOE_EC2_SECURITY_GROUPS", "")],
                "FLOE_EC2_SECURITY_GROUPS",
            ),
            (
                &[("FLOE_EC2_INSTANCE_PROFILE", "")],
                "FLOE_EC2_INSTANCE_PROFILE",
            ),
        ];
        for (extra, name) in cases {
            match WorkerConfig::from_lookup(lookup(&with(extra))) {
                Err(e) => assert_eq!(e.name, *name, "{extra:?}: {e}"),
                Ok(c) => panic!("{extra:?} was accepted: {c:?}"),
            }
        }
    }

    #[test]
    fn the_budget_leaves_the_last_step_time_before_the_deadline() {
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

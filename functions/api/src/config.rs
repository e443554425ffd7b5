//! Configuration from the environment, and the adapters it selects. Read
//! once per process (per cold start on Lambda).

use floe_api::AppState;
use floe_auth::{KeySource, Verifier, VerifierConfig};
use floe_clusters::{Clusters, NodeAddresses};
use floe_clusters_sim::{SimulatedClusters, SimulatedClustersConfig};
use floe_compute::Compute;
use floe_compute_sim::{SimulatedCompute, SimulatedConfig, SimulatedParameters};
use floe_domain::repository::EndpointPolicy;
use floe_plans::queue::QueueError;
use floe_plans::{
    DeploymentSteps, Engine, EngineConfig, LocalQueue, PlanJob, StepSettings, WorkQueue,
};
use floe_schedules::{LocalScheduler, NoScheduler, ReconcileNow, Scheduler, SystemClock};
use floe_secrets::{Cipher, Ciphers, LocalCipher};
use floe_secrets_kms::KmsCipher;
use floe_store::Store;
use floe_store::backend::Backend;
use floe_store_dynamo::DynamoBackend;
use floe_store_sqlite::SqliteBackend;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
pub const DEFAULT_ISSUER: &str = "floe-local";
pub const DEFAULT_AUDIENCE: &str = "floe-api";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{name}: {message}")]
    Invalid { name: &'static str, message: String },
    #[error("{0}")]
    Auth(#[from] floe_auth::ConfigError),
    #[error("{0}")]
    Secrets(#[from] floe_secrets::SecretError),
    #[error("store: {0}")]
    Store(#[from] floe_store::BackendError),
}

fn invalid(name: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        name,
        message: message.into(),
    }
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Where local mode keeps its files: the SQLite database, the JWT secret and
/// the key that encrypts repository credentials.
pub fn data_dir() -> PathBuf {
    var("FLOE_DATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".floe"))
}

pub enum StoreChoice {
    Sqlite(PathBuf),
    Dynamo(String),
}

pub fn store_choice() -> Result<StoreChoice, ConfigError> {
    match var("FLOE_STORE") {
        None => Ok(StoreChoice::Sqlite(data_dir().join("floe.db"))),
        Some(s) => {
            if let Some(path) = s.strip_prefix("sqlite://") {
                if path.is_empty() {
                    return Err(invalid(
                        "FLOE_STORE",
                        "sqlite:// needs a file path, e.g. sqlite://.floe/floe.db",
                    ));
                }
                Ok(StoreChoice::Sqlite(PathBuf::from(path)))
            } else if let Some(table) = s.strip_prefix("dynamodb://") {
                if !floe_store_dynamo::is_table_name(table) {
                    return Err(invalid(
                        "FLOE_STORE",
                        "dynamodb://TABLE needs a DynamoDB table name",
                    ));
                }
                Ok(StoreChoice::Dynamo(table.to_string()))
            } else {
                Err(invalid(
                    "FLOE_STORE",
                    "must be sqlite://PATH or dynamodb://TABLE",
                ))
            }
        }
    }
}

pub async fn backend() -> Result<Arc<dyn Backend>, ConfigError> {
    Ok(match store_choice()? {
        StoreChoice::Sqlite(path) => Arc::new(SqliteBackend::open(&path)?),
        StoreChoice::Dynamo(table) => {
            let b = DynamoBackend::from_env(table).await;
            // Tooling and tests start from an empty endpoint; production's
            // table comes from the stack and is never created here.
            if var("FLOE_CREATE_TABLE").is_some_and(|v| v == "1" || v == "true") {
                b.ensure_table().await?;
            }
            Arc::new(b)
        }
    })
}

/// The HS256 secret: `FLOE_JWT_SECRET`, or in local mode a generated one kept
/// in the data folder so that tokens survive restarts.
pub fn jwt_secret() -> Result<Vec<u8>, ConfigError> {
    match var("FLOE_JWT_SECRET") {
        Some(s) => {
            if s.len() < floe_auth::MIN_SECRET_LEN {
                return Err(invalid(
                    "FLOE_JWT_SECRET",
                    format!("must be at least {} bytes", floe_auth::MIN_SECRET_LEN),
                ));
            }
            Ok(s.into_bytes())
        }
        None => Ok(floe_auth::load_or_create_secret(
            &data_dir().join("jwt.secret"),
        )?),
    }
}

pub fn issuer() -> String {
    var("FLOE_JWT_ISSUER").unwrap_or_else(|| DEFAULT_ISSUER.to_string())
}

pub fn audience() -> String {
    var("FLOE_JWT_AUDIENCE").unwrap_or_else(|| DEFAULT_AUDIENCE.to_string())
}

pub fn uses_jwks() -> bool {
    var("FLOE_JWKS_URL").is_some() || var("FLOE_JWKS_FILE").is_some()
}

pub async fn verifier() -> Result<Verifier, ConfigError> {
    let keys = if let Some(url) = var("FLOE_JWKS_URL") {
        KeySource::Jwks(floe_auth::fetch_jwks(&url).await?)
    } else if let Some(file) = var("FLOE_JWKS_FILE") {
        KeySource::Jwks(floe_auth::load_jwks_file(std::path::Path::new(&file))?)
    } else {
        KeySource::Hs256Secret(jwt_secret()?)
    };
    if matches!(keys, KeySource::Jwks(_))
        && (var("FLOE_JWT_ISSUER").is_none() || var("FLOE_JWT_AUDIENCE").is_none())
    {
        // With a real identity provider a default issuer would accept nothing
        // (or, worse, the wrong tokens): make the operator say which.
        return Err(invalid(
            "FLOE_JWT_ISSUER",
            "FLOE_JWT_ISSUER and FLOE_JWT_AUDIENCE must be set with a JWKS",
        ));
    }
    Ok(Verifier::new(VerifierConfig {
        issuer: issuer(),
        audience: audience(),
        keys,
        leeway_secs: 30,
    })?)
}

pub async fn cipher() -> Result<Arc<dyn Cipher>, ConfigError> {
    let key_file = var("FLOE_SECRET_KEY_FILE")
        .map(PathBuf::from)
        .unwrap_or_else(|| data_dir().join("secrets.key"));
    match var("FLOE_KMS_KEY_ID") {
        Some(key_id) => {
            // Values sealed with a local key stay readable if its file is there.
            let local = if key_file.exists() {
                Some(LocalCipher::load_or_create(&key_file)?)
            } else {
                None
            };
            Ok(Arc::new(Ciphers::new(
                Box::new(KmsCipher::from_env(key_id).await),
                local,
            )))
        }
        None => Ok(Arc::new(LocalCipher::load_or_create(&key_file)?)),
    }
}

pub fn endpoint_policy() -> Result<EndpointPolicy, ConfigError> {
    let allow_private = match var("FLOE_ALLOW_PRIVATE_ENDPOINTS").as_deref() {
        None | Some("0") | Some("false") => false,
        Some("1") | Some("true") => true,
        Some(_) => {
            return Err(invalid(
                "FLOE_ALLOW_PRIVATE_ENDPOINTS",
                "must be true or false",
            ));
        }
    };
    Ok(EndpointPolicy { allow_private })
}

/// The API's state, with the queue that wakes workers.
pub async fn state(
    queue: Arc<dyn WorkQueue>,
    clusters: Arc<dyn Clusters>,
    scheduler: Arc<dyn Scheduler>,
    store: Store,
    cipher: Arc<dyn Cipher>,
) -> Result<AppState, ConfigError> {
    Ok(AppState {
        store,
        cipher,
        verifier: Arc::new(verifier().await?),
        endpoint_policy: endpoint_policy()?,
        queue,
        clusters,
        scheduler,
    })
}

/// On Lambda: EventBridge Scheduler when the template's schedule settings
/// are there; without them snapshot schedules cannot be kept, which every
/// reconciliation then logs.
pub async fn lambda_scheduler() -> Result<Arc<dyn Scheduler>, ConfigError> {
    match floe_scheduler_aws::config_from_env(var).map_err(|m| invalid("FLOE_SCHEDULE_GROUP", m))? {
        Some(config) => Ok(Arc::new(
            floe_scheduler_aws::AwsScheduler::from_env(config).await,
        )),
        None => {
            tracing::warn!(
                "FLOE_SCHEDULE_GROUP is not set: snapshot policies will not be scheduled"
            );
            Ok(Arc::new(NoScheduler))
        }
    }
}

/// Local mode runs the worker in this process: an in-process queue, the
/// plan engine over the simulated compute provider, and a periodic sweep.
/// What local mode runs in this process besides the API.
pub struct LocalAdapters {
    pub queue: Arc<dyn WorkQueue>,
    pub clusters: Arc<dyn Clusters>,
    pub scheduler: Arc<LocalScheduler>,
}

pub fn local_worker(store: Store, cipher: Arc<dyn Cipher>) -> Result<LocalAdapters, ConfigError> {
    let compute: Arc<dyn Compute> = Arc::new(SimulatedCompute::new(
        SimulatedConfig::from_env().map_err(|m| invalid("FLOE_SIM_*", m))?,
    ));
    // The simulated clusters keep fs repositories under the data folder, as
    // `path.repo`, shared by every deployment so clones see their source's
    // snapshots.
    let clusters: Arc<dyn Clusters> = Arc::new(SimulatedClusters::new(
        compute.clone(),
        SimulatedClustersConfig {
            fs_root: Some(data_dir().join("repositories")),
            ..SimulatedClustersConfig::default()
        },
    ));
    let settings = StepSettings {
        poll: Duration::from_millis(poll_ms()?),
        ..StepSettings::default()
    };
    let snapshotter = floe_snapshots::Snapshotter::new(store.clone(), clusters.clone());
    let steps = Arc::new(
        DeploymentSteps::new(compute, clusters.clone(), settings)
            .with_snapshots(snapshotter.clone())
            .with_parameters(Arc::new(SimulatedParameters::new(Vec::new())))
            .with_cipher(cipher),
    );
    let (queue, mut jobs) = LocalQueue::new();
    let queue: Arc<dyn WorkQueue> = Arc::new(queue);
    let scheduler = Arc::new(LocalScheduler::new(Arc::new(SystemClock)));
    let engine = Arc::new(
        Engine::new(
            store.clone(),
            queue.clone(),
            steps,
            "local-worker",
            EngineConfig::default(),
        )
        .with_listener(Arc::new(ReconcileNow::new(store, scheduler.clone()))),
    );
    let worker = engine.clone();
    tokio::spawn(async move {
        while let Some(job) = jobs.recv().await {
            let engine = worker.clone();
            tokio::spawn(async move {
                if let Err(e) = engine.run(&job).await {
                    tracing::error!(error = %e, plan = %job.plan_id, "plan run failed; the sweep will retry it");
                }
            });
        }
    });
    tokio::spawn(async move {
        // The first sweep also resumes plans a previous run left unfinished.
        let mut tick = tokio::time::interval(Duration::from_secs(60));
        loop {
            tick.tick().await;
            if let Err(e) = engine.sweep().await {
                tracing::warn!(error = %e, "sweep failed");
            }
        }
    });
    // The in-process scheduler fires the snapshotter as EventBridge
    // Scheduler invokes the snapshotter function in production.
    let fire: Arc<dyn floe_schedules::Fire> = Arc::new(
        move |job: floe_schedules::SnapshotJob| -> futures_util::future::BoxFuture<'static, ()> {
            let snapshotter = snapshotter.clone();
            Box::pin(async move {
                match snapshotter
                    .run_scheduled(&job.org, &job.deployment_id, &job.policy_id)
                    .await
                {
                    Ok(summary) => tracing::info!(?summary, "scheduled snapshot"),
                    Err(e) => {
                        tracing::warn!(error = %e, deployment = %job.deployment_id, policy = %job.policy_id, "scheduled snapshot failed")
                    }
                }
            })
        },
    );
    scheduler.clone().spawn(fire, Duration::from_secs(1));
    Ok(LocalAdapters {
        queue,
        clusters,
        scheduler,
    })
}

fn poll_ms() -> Result<u64, ConfigError> {
    match var("FLOE_PLAN_POLL_MS") {
        None => Ok(1000),
        Some(v) => v
            .parse()
            .map_err(|_| invalid("FLOE_PLAN_POLL_MS", "must be whole milliseconds")),
    }
}

/// On Lambda the api function reaches clusters by their nodes' private
/// addresses (it runs in the nodes' VPC); describing instances is all it
/// asks of EC2, so no launch settings are needed here.
pub async fn lambda_clusters() -> Result<Arc<dyn Clusters>, ConfigError> {
    let compute = floe_compute_ec2::Ec2Compute::from_env(floe_compute_ec2::Ec2Config {
        image_arm64: String::new(),
        image_x86_64: String::new(),
        subnets: Vec::new(),
        security_groups: Vec::new(),
        instance_profile: None,
        key_name: None,
    })
    .await;
    let http = floe_clusters::NodeHttp::from_lookup(var).map_err(|(n, m)| invalid(n, m))?;
    let prefix =
        floe_compute::parameters::prefix_from_lookup(var).map_err(|(n, m)| invalid(n, m))?;
    let parameters =
        floe_parameters_ssm::SsmParameters::from_env(floe_parameters_ssm::SsmParametersConfig {
            kms_key_id: None,
        })
        .await;
    Ok(Arc::new(
        NodeAddresses::new(
            Arc::new(compute),
            http.https,
            http.port,
            None,
            Duration::from_secs(20),
        )
        .with_security(Arc::new(parameters), prefix),
    ))
}

/// On Lambda the api function records plans and wakes the worker through
/// SQS (`FLOE_QUEUE_URL`). Without a queue, plans still start: the worker's
/// one-minute sweep picks them up.
pub async fn lambda_queue() -> Arc<dyn WorkQueue> {
    match var("FLOE_QUEUE_URL") {
        Some(url) => Arc::new(floe_queue_sqs::SqsQueue::from_env(url).await),
        None => Arc::new(NoWorkerQueue),
    }
}

/// Plans recorded without a queue wait for the sweep.
pub struct NoWorkerQueue;

#[async_trait::async_trait]
impl WorkQueue for NoWorkerQueue {
    async fn enqueue(&self, job: PlanJob, _delay: Duration) -> Result<(), QueueError> {
        tracing::info!(plan = %job.plan_id, "plan recorded; no work queue is configured, the sweep will start it");
        Ok(())
    }
}

pub fn listen() -> String {
    var("FLOE_LISTEN").unwrap_or_else(|| DEFAULT_LISTEN.to_string())
}

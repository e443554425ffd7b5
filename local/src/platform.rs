//! What local mode runs in this process besides the API: the worker (an
//! in-process queue and the plan engine over simulated compute and
//! clusters), the sweep (every minute unless `FLOE_SWEEP_INTERVAL_MS`
//! says otherwise) with its health check, and the scheduler that fires the
//! snapshotter as EventBridge Scheduler does in production.

use floe_clusters::Clusters;
use floe_clusters_sim::{SimulatedClusters, SimulatedClustersConfig};
use floe_compute::Compute;
use floe_compute_sim::{AddressPool, SimulatedCompute, SimulatedConfig};
use floe_plans::{
    DeploymentSteps, Engine, EngineConfig, HealthCheck, HealthConfig, LocalQueue, PlanStarter,
    StepPorts, StepSettings, WorkQueue,
};
use floe_ports::ScheduleSync;
use floe_schedules::{LocalScheduler, ReconcileNow, SystemClock};
use floe_secrets::Cipher;
use floe_store::Store;
use floe_wiring::{ConfigError, LocalConfig, SimSettings};
use std::sync::Arc;
use std::time::Duration;

/// The adapters the API shares with the in-process worker.
pub struct LocalPlatform {
    pub queue: Arc<dyn WorkQueue>,
    pub clusters: Arc<dyn Clusters>,
    /// Reconciles schedules on the spot, as the worker does on Lambda.
    pub schedules: Arc<dyn ScheduleSync>,
    /// The in-process scheduler, not yet firing: [`LocalPlatform::fire`]
    /// starts it once the use cases its drill firings call are built.
    scheduler: Arc<LocalScheduler>,
    snapshotter: floe_snapshots::Snapshotter,
}

impl LocalPlatform {
    /// Starts the worker and the sweep as tasks of this process (the
    /// scheduler starts with [`LocalPlatform::fire`]).
    pub fn start(
        config: &LocalConfig,
        store: Store,
        cipher: Arc<dyn Cipher>,
        endpoint_check: &floe_plans::EndpointCheck,
    ) -> Result<LocalPlatform, ConfigError> {
        // Every simulated instance gets an address of its own on this
        // machine, where its simulated node serves.
        // A file named after an instance id in one of these folders loses
        // that instance, fails its status check, or stops it (docs/health.md:
        // "Trying it in local mode").
        let fault_dir = |name: &str| {
            let dir = config.data_dir.join("sim").join(name);
            if let Err(e) = std::fs::create_dir_all(&dir) {
                tracing::warn!(error = %e, dir = %dir.display(), "cannot make a folder of simulated instance faults");
            }
            Some(dir)
        };
        let sim_config = SimulatedConfig {
            addresses: AddressPool::Loopback,
            kill_dir: fault_dir("kill"),
            impair_dir: fault_dir("impair"),
            stop_dir: fault_dir("stop"),
            ..SimulatedConfig::parse(
                config.sim.boot_delay,
                config.sim.terminate_delay,
                &config.sim.faults,
            )
            .map_err(|m| ConfigError {
                name: SimSettings::FAULTS,
                message: m,
            })?
        };
        // The simulated instances and parameters are kept in the data
        // folder, so that a restart finds the deployments' nodes, keys and
        // passwords where it left them. A file that cannot be read stops
        // the start: starting empty would overwrite it at the first change.
        let sim_dir = config.data_dir.join("sim");
        let unreadable = |e: floe_compute_sim::PersistError| ConfigError {
            name: "FLOE_DATA_DIR",
            message: format!(
                "{e} (floe-local keeps its simulated instances and parameters there; moving the file aside starts without them)"
            ),
        };
        std::fs::create_dir_all(&sim_dir).map_err(|e| ConfigError {
            name: "FLOE_DATA_DIR",
            message: format!("cannot make the folder {}: {e}", sim_dir.display()),
        })?;
        let simulated = Arc::new(
            SimulatedCompute::persisted(sim_config, sim_dir.join("compute.json"))
                .map_err(unreadable)?,
        );
        let user_data = simulated.clone();
        let compute: Arc<dyn Compute> = simulated;
        // Their secure values are sealed with the local credential key, as
        // KMS seals SecureString parameters: no key or password in the clear.
        let sealer = LocalSealer(
            floe_secrets::LocalCipher::load_or_create(&config.secrets.key_file).map_err(|e| {
                ConfigError {
                    name: "FLOE_SECRET_KEY_FILE",
                    message: e.to_string(),
                }
            })?,
        );
        let parameters = Arc::new(
            floe_compute_sim::SimulatedParameters::persisted(
                Vec::new(),
                sim_dir.join("parameters.json"),
                Arc::new(sealer),
            )
            .map_err(unreadable)?,
        );
        // The simulated clusters keep fs repositories under the data folder,
        // as `path.repo`, shared by every deployment so clones see their
        // source's snapshots. Their nodes boot from what the plans store
        // for real ones: certificates, password and repository keys in the
        // parameters, S3 client settings in the user data.
        let clusters: Arc<dyn Clusters> = Arc::new(
            SimulatedClusters::new(
                compute.clone(),
                SimulatedClustersConfig {
                    fs_root: Some(config.data_dir.join("repositories")),
                    // Each deployment's nodes' disks: its indices and
                    // documents outlive a restart of floe-local.
                    data_root: Some(config.data_dir.join("clusters")),
                    ..SimulatedClustersConfig::default()
                },
            )
            .with_http_port(config.node_http.port)
            .with_parameters(parameters.clone(), config.parameter_prefix.clone())
            .with_user_data(Arc::new(move |id: &str| user_data.user_data(id))),
        );
        let settings = StepSettings {
            poll: config.plan_poll,
            parameter_prefix: config.parameter_prefix.clone(),
            http_port: config.node_http.port,
            ..StepSettings::default()
        };
        let snapshotter = floe_snapshots::Snapshotter::new(store.clone(), clusters.clone());
        let steps = Arc::new(
            DeploymentSteps::new(
                StepPorts {
                    compute,
                    clusters: clusters.clone(),
                    parameters,
                    cipher,
                    snapshots: snapshotter.clone(),
                },
                settings,
            )
            // Each deployment's nodes get an identity of their own, as on AWS
            // (simulated: local nodes read their parameters without one).
            .with_identity(Arc::new(floe_compute_sim::SimulatedIdentity::new()))
            .with_endpoint_check(endpoint_check.clone()),
        );
        let (queue, mut jobs) = LocalQueue::new();
        let queue: Arc<dyn WorkQueue> = Arc::new(queue);
        let scheduler = Arc::new(LocalScheduler::new(Arc::new(SystemClock)));
        let reconcile = Arc::new(ReconcileNow::new(store.clone(), scheduler.clone()));
        // The health check runs beside the plans on each sweep; the heals
        // it starts go to the same queue.
        let health = HealthCheck::new(
            store.clone(),
            Arc::new(PlanStarter::new(store.clone(), queue.clone())),
            steps.clone(),
            HealthConfig::default(),
        );
        let engine = Arc::new(
            Engine::new(
                store,
                queue.clone(),
                steps,
                "local-worker",
                EngineConfig::default(),
            )
            .with_listener(reconcile.clone())
            .with_sweep_task(Arc::new(health)),
        );
        let worker = engine.clone();
        let sweep_interval = config.sweep_interval;
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
            let mut tick = tokio::time::interval(sweep_interval);
            loop {
                tick.tick().await;
                if let Err(e) = engine.sweep().await {
                    tracing::warn!(error = %e, "sweep failed");
                }
            }
        });
        Ok(LocalPlatform {
            queue,
            clusters,
            schedules: reconcile,
            scheduler,
            snapshotter,
        })
    }

    /// Starts firing schedules: a policy's runs the snapshotter, a drill
    /// schedule's starts a drill through `app`, as on AWS.
    pub fn fire(&self, app: floe_app::App) {
        let firings = floe_app::scheduled::LocalFirings {
            app,
            snapshotter: self.snapshotter.clone(),
        };
        self.scheduler
            .clone()
            .spawn(Arc::new(firings), Duration::from_secs(1));
    }
}

/// Seals the simulated parameters' secure values with local mode's
/// credential key. The local cipher does no I/O, so its futures are ready
/// at once and the parameters' synchronous writes can use it.
struct LocalSealer(floe_secrets::LocalCipher);

impl LocalSealer {
    fn owner(name: &str) -> floe_secrets::Owner<'_> {
        floe_secrets::Owner {
            org: "local-mode",
            repository: "simulated-parameters",
            field: name,
        }
    }
}

impl floe_compute_sim::Sealer for LocalSealer {
    fn seal(&self, name: &str, plaintext: &str) -> Result<String, String> {
        use floe_secrets::Cipher;
        use futures_util::FutureExt;
        match self
            .0
            .seal(plaintext, &LocalSealer::owner(name))
            .now_or_never()
        {
            Some(sealed) => sealed.map_err(|e| e.to_string()),
            None => Err("the local cipher did not seal at once".into()),
        }
    }

    fn open(&self, name: &str, sealed: &str) -> Result<String, String> {
        use floe_secrets::Cipher;
        use futures_util::FutureExt;
        match self
            .0
            .open(sealed, &LocalSealer::owner(name))
            .now_or_never()
        {
            Some(opened) => opened.map_err(|e| e.to_string()),
            None => Err("the local cipher did not open at once".into()),
        }
    }
}

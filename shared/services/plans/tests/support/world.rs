//! The world of the plan tests on simulated compute and clusters (the
//! health check's heals, updates): a simulated EC2 whose instances run
//! simulated Elasticsearch nodes, their parameters, and a store, with the
//! steps over them. A test file adds its own helpers with an `impl World`.

use super::run_to_end;
use chrono::Utc;
use floe_clusters_sim::{SimulatedClusters, SimulatedClustersConfig};
use floe_compute_sim::{SimulatedCompute, SimulatedConfig, SimulatedParameters};
use floe_domain::deployment::{Deployment, DeploymentSpec};
use floe_domain::plan::{Plan, PlanParams, PlanStatus};
use floe_plans::engine::Steps;
use floe_plans::{DeploymentSteps, PlanJob, StepPorts, StepSettings};
use floe_secrets::LocalCipher;
use floe_snapshots::Snapshotter;
use floe_store::Store;
use floe_store_sqlite::SqliteBackend;
use std::sync::Arc;
use std::time::Duration;

pub type TestError = Box<dyn std::error::Error>;

pub fn settings() -> StepSettings {
    StepSettings {
        poll: Duration::from_millis(5),
        boot_timeout: Duration::from_secs(30),
        ..StepSettings::default()
    }
}

pub struct World {
    pub compute: Arc<SimulatedCompute>,
    pub clusters: Arc<SimulatedClusters>,
    pub parameters: Arc<SimulatedParameters>,
    pub store: Store,
    pub settings: StepSettings,
}

impl World {
    pub fn new() -> Result<World, TestError> {
        let compute = Arc::new(SimulatedCompute::new(SimulatedConfig::default()));
        // The nodes' roles come from their elasticsearch.yml, as on EC2.
        let source = compute.clone();
        let clusters = Arc::new(
            SimulatedClusters::new(compute.clone(), SimulatedClustersConfig::default())
                .with_user_data(Arc::new(move |id: &str| source.user_data(id))),
        );
        Ok(World {
            compute,
            clusters,
            parameters: Arc::new(SimulatedParameters::new(Vec::new())),
            store: Store::new(Arc::new(SqliteBackend::in_memory()?)),
            settings: settings(),
        })
    }

    /// As local mode runs them: instances with loopback addresses of their
    /// own, and secured simulated clusters on them at `http_port` (HTTPS
    /// with each deployment's certificates, its stable endpoint served).
    pub fn secured(http_port: u16) -> Result<World, TestError> {
        let compute = Arc::new(SimulatedCompute::new(SimulatedConfig {
            addresses: floe_compute_sim::AddressPool::Loopback,
            ..SimulatedConfig::default()
        }));
        let parameters = Arc::new(SimulatedParameters::new(Vec::new()));
        let source = compute.clone();
        let clusters = Arc::new(
            SimulatedClusters::new(compute.clone(), SimulatedClustersConfig::default())
                .with_http_port(http_port)
                .with_parameters(parameters.clone(), "/floe")
                .with_user_data(Arc::new(move |id: &str| source.user_data(id))),
        );
        Ok(World {
            compute,
            clusters,
            parameters,
            store: Store::new(Arc::new(SqliteBackend::in_memory()?)),
            settings: StepSettings {
                http_port,
                ..settings()
            },
        })
    }

    /// Records `params` as the pending plan of running deployment
    /// `deployment_id` (its record changed by `edit` too), as the api
    /// does, and drives it to the end over `steps`.
    pub async fn run_plan(
        &self,
        deployment_id: &str,
        params: PlanParams,
        edit: impl FnOnce(&mut Deployment),
        steps: Arc<dyn Steps>,
    ) -> Result<(PlanStatus, Plan), TestError> {
        let previous = self
            .store
            .get_deployment("acme", deployment_id)
            .await?
            .ok_or("deployment")?;
        let plan = Plan::new(
            "acme",
            deployment_id,
            params,
            "deployments.update",
            "tester",
            Utc::now(),
        );
        let mut next = previous.value.clone();
        next.status = floe_domain::plan::lifecycle::while_running(plan.kind());
        next.pending_plan = Some(plan.reference());
        edit(&mut next);
        self.store
            .replace_deployment(&next, &previous, Some(&plan))
            .await?;
        let status = self.run(steps, deployment_id, &plan.id).await?;
        let plan = self
            .store
            .get_plan("acme", deployment_id, &plan.id)
            .await?
            .ok_or("plan")?
            .value;
        Ok((status, plan))
    }

    pub fn steps(&self) -> DeploymentSteps {
        DeploymentSteps::new(
            StepPorts {
                compute: self.compute.clone(),
                clusters: self.clusters.clone(),
                parameters: self.parameters.clone(),
                cipher: Arc::new(LocalCipher::from_key(&[7u8; 32])),
                snapshots: Snapshotter::new(self.store.clone(), self.clusters.clone()),
            },
            self.settings.clone(),
        )
        // The tests' repositories on a store by name resolve here, never
        // through DNS: no test reaches beyond loopback.
        .with_endpoint_check(floe_plans::EndpointCheck {
            resolver: Arc::new(
                floe_ports::FixedResolver::default()
                    .with("minio.internal", &[std::net::IpAddr::from([10, 0, 0, 9])]),
            ),
            policy: floe_domain::repository::EndpointPolicy {
                allow_private: true,
                ..Default::default()
            },
        })
    }

    pub async fn deployment(&self, id: &str) -> Result<Deployment, TestError> {
        Ok(self
            .store
            .get_deployment("acme", id)
            .await?
            .ok_or("deployment")?
            .value)
    }

    /// A running deployment, made by its create plan.
    pub async fn create(&self, spec: DeploymentSpec) -> Result<Deployment, TestError> {
        let now = Utc::now();
        let plan = Plan::new(
            "acme",
            &floe_domain::names::new_resource_id(),
            PlanParams::Create(spec.clone()),
            "deployments.create",
            "tester",
            now,
        );
        let d = Deployment::first_planned_by(&plan, spec);
        self.store.create_deployment(&d, &plan, None).await?;
        let status = self.run(Arc::new(self.steps()), &d.id, &plan.id).await?;
        assert_eq!(status, PlanStatus::Succeeded);
        self.deployment(&d.id).await
    }

    /// Drives plan `plan_id` of `deployment_id` to its end over `steps`.
    pub async fn run(
        &self,
        steps: Arc<dyn Steps>,
        deployment_id: &str,
        plan_id: &str,
    ) -> Result<PlanStatus, TestError> {
        let job = PlanJob {
            org: "acme".into(),
            deployment_id: deployment_id.into(),
            plan_id: plan_id.into(),
        };
        run_to_end(&self.store, steps, &job).await
    }

    /// The cluster's address; a plan has talked to it by now.
    pub async fn url(&self, deployment_id: &str) -> Result<String, TestError> {
        Ok(self
            .clusters
            .url(deployment_id)
            .await
            .ok_or("no simulated cluster")?)
    }
}

/// An index with a replica and 40 documents, written over HTTP.
pub async fn write_documents(url: &str) -> Result<(), TestError> {
    let http = reqwest::Client::new();
    let created = http
        .put(format!("{url}/orders"))
        .json(&serde_json::json!({"settings": {"number_of_shards": 3, "number_of_replicas": 1}}))
        .send()
        .await?;
    assert_eq!(created.status(), 200, "{}", created.text().await?);
    for i in 0..40 {
        let r = http
            .post(format!("{url}/orders/_doc"))
            .json(&serde_json::json!({"n": i}))
            .send()
            .await?;
        assert_eq!(r.status(), 201);
    }
    Ok(())
}

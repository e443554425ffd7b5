//! The real deployment plans on the simulated compute provider: every step
//! run twice must start nothing twice, a failure injected after any step must
//! leave no instance and no launch template behind, and capacity shortages
//! move launches to another zone.

use chrono::Utc;
use floe_compute::{Compute, ComputeError, InstanceState};
use floe_compute_sim::{Fault, SimulatedCompute, SimulatedConfig};
use floe_compute_sim::{SimulatedIdentity, SimulatedParameters};
use floe_domain::deployment::{Deployment, DeploymentSpec, DeploymentStatus};
use floe_domain::plan::{Plan, PlanKind, PlanParams, PlanStatus, StepStatus};
use floe_plans::engine::Steps;
use floe_plans::{DeploymentSteps, PlanJob, StepPorts};
use floe_secrets::LocalCipher;
use floe_store::Store;
use floe_store_sqlite::SqliteBackend;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

mod support;

use support::world::settings;
use support::{FailAfter, Twice};

/// A plan of `kind` over `spec`, as the use cases would record it.
fn params_of(kind: PlanKind, spec: &DeploymentSpec) -> PlanParams {
    match kind {
        PlanKind::Create => PlanParams::Create(spec.clone()),
        PlanKind::Update => PlanParams::Update(spec.clone()),
        PlanKind::Shutdown => PlanParams::Shutdown(Default::default()),
        PlanKind::Delete => PlanParams::Delete,
        PlanKind::Restore => unreachable!("restore plans are made with their target"),
        PlanKind::Start => PlanParams::Start(floe_domain::plan::StartParams {
            spec: spec.clone(),
            restore: None,
        }),
        PlanKind::ResetPassword => PlanParams::ResetPassword,
        PlanKind::License => PlanParams::License,
        PlanKind::Heal => unreachable!("heal plans are made with their replacements"),
        PlanKind::Drill => unreachable!("drill plans are made with their snapshot's records"),
    }
}

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn spec() -> Result<DeploymentSpec, serde_json::Error> {
    serde_json::from_value(json!({"name": "logs", "version": "8.15.3", "node_groups": [
        {"id": "masters", "roles": ["master"], "instance_type": "c7g.large", "count": 3, "zone_count": 3, "storage": {"size_gb": 20}},
        {"id": "hot", "roles": ["data_hot", "data_content", "ingest"], "instance_type": "m5.xlarge", "count": 4, "zone_count": 2, "storage": {"size_gb": 500}}
    ]}))
}

struct Run {
    store: Store,
    job: PlanJob,
}

/// Creates a deployment with a pending plan of `kind` and drives it to the end.
async fn drive(
    steps: Arc<dyn Steps>,
    kind: PlanKind,
    store: &Store,
    existing: Option<&Deployment>,
) -> Result<(Run, PlanStatus), Box<dyn std::error::Error>> {
    let now = Utc::now();
    let (store, deployment, plan) = match existing {
        None => {
            let store = store.clone();
            let spec = spec()?;
            let plan = Plan::new(
                "acme",
                &floe_domain::names::new_resource_id(),
                params_of(kind, &spec),
                "test",
                "tester",
                now,
            );
            let d = Deployment::first_planned_by(&plan, spec);
            store.create_deployment(&d, &plan, None).await?;
            (store, d, plan)
        }
        Some(d) => {
            let previous = store
                .get_deployment(&d.org, &d.id)
                .await?
                .ok_or("deployment")?;
            let plan = Plan::new(
                "acme",
                &d.id,
                params_of(kind, &d.spec),
                "test",
                "tester",
                now,
            );
            let mut next = previous.value.clone();
            next.status = DeploymentStatus::Stopping;
            next.pending_plan = Some(plan.reference());
            store
                .replace_deployment(&next, &previous, Some(&plan))
                .await?;
            (store.clone(), next, plan)
        }
    };
    let job = PlanJob {
        org: "acme".into(),
        deployment_id: deployment.id.clone(),
        plan_id: plan.id.clone(),
    };
    let status = support::run_to_end(&store, steps, &job).await?;
    Ok((Run { store, job }, status))
}

async fn live(compute: &SimulatedCompute, deployment_id: &str) -> Result<usize, ComputeError> {
    Ok(compute
        .instances(deployment_id)
        .await?
        .iter()
        .filter(|i| i.state != InstanceState::Terminated)
        .count())
}

#[tokio::test]
async fn create_runs_every_step_twice_and_starts_each_node_once() -> TestResult {
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig {
        boot_delay: Duration::from_millis(20),
        ..SimulatedConfig::default()
    }));
    let parameters = Arc::new(SimulatedParameters::new(Vec::new()));
    let store = new_store()?;
    let identity = Arc::new(SimulatedIdentity::new());
    let steps = Arc::new(Twice(
        steps_over(&compute, parameters.clone(), &store).with_identity(identity.clone()),
    ));
    let (run, status) = drive(steps, PlanKind::Create, &store, None).await?;
    assert_eq!(status, PlanStatus::Succeeded);
    let instances = compute.instances(&run.job.deployment_id).await?;
    // The three masters, and only they, bootstrap the cluster.
    let mut masters: Vec<String> = instances
        .iter()
        .filter(|i| i.tags.get("floe:node-group").map(String::as_str) == Some("masters"))
        .map(|i| i.id.clone())
        .collect();
    masters.sort();
    let written = parameters.written();
    let name = format!("/floe/{}/initial_master_nodes", run.job.deployment_id);
    let mut listed: Vec<String> = written
        .get(&name)
        .map(|v| v.expose().split(',').map(String::from).collect())
        .unwrap_or_default();
    listed.sort();
    assert_eq!(listed, masters, "{:?}", written.keys().collect::<Vec<_>>());
    assert_eq!(
        instances.len(),
        7,
        "3 masters and 4 hot nodes, each started once"
    );
    assert!(instances.iter().all(|i| i.state == InstanceState::Running));
    // Masters spread over 3 zones, hot nodes over 2.
    let zones = |group: &str| {
        instances
            .iter()
            .filter(|i| i.tags.get("floe:node-group").map(String::as_str) == Some(group))
            .map(|i| i.zone.clone())
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    };
    assert_eq!((zones("masters"), zones("hot")), (3, 2));
    assert_eq!(
        compute.templates().len(),
        2,
        "one launch template per node group"
    );
    let d = run
        .store
        .get_deployment("acme", &run.job.deployment_id)
        .await?
        .ok_or("deployment")?
        .value;
    assert_eq!(d.status, DeploymentStatus::Running);

    // The deployment's nodes have an identity of their own.
    assert_eq!(
        identity.existing(),
        std::slice::from_ref(&run.job.deployment_id)
    );
    // Shutdown terminates every node and keeps the record.
    let compute_steps = Arc::new(Twice(
        steps_over(&compute, parameters.clone(), &run.store).with_identity(identity.clone()),
    ));
    let (_, status) = drive(
        compute_steps.clone(),
        PlanKind::Shutdown,
        &run.store,
        Some(&d),
    )
    .await?;
    assert_eq!(status, PlanStatus::Succeeded);
    assert_eq!(live(&compute, &d.id).await?, 0);
    let d = run
        .store
        .get_deployment("acme", &d.id)
        .await?
        .ok_or("deployment")?
        .value;
    assert_eq!(d.status, DeploymentStatus::Stopped);
    // The record and the secrets a start would reuse stay.
    let own = format!("/floe/{}/", d.id);
    assert!(parameters.written().keys().any(|k| k.starts_with(&own)));
    assert_eq!(compute.launch_templates(&d.id).await?.len(), 2);

    // Delete leaves nothing of the deployment (issue 12, defect 7).
    let (_, status) = drive(compute_steps, PlanKind::Delete, &run.store, Some(&d)).await?;
    assert_eq!(status, PlanStatus::Succeeded);
    assert!(run.store.get_deployment("acme", &d.id).await?.is_none());
    let left: Vec<String> = parameters
        .written()
        .into_keys()
        .filter(|k| k.starts_with(&own))
        .collect();
    assert!(left.is_empty(), "a delete left parameters {left:?}");
    assert!(compute.templates().is_empty(), "{:?}", compute.templates());
    assert!(
        identity.existing().is_empty(),
        "a delete left the node identity"
    );
    Ok(())
}

#[tokio::test]
async fn a_failure_after_any_create_step_leaves_nothing_behind() -> TestResult {
    let probe_compute = Arc::new(SimulatedCompute::new(SimulatedConfig::default()));
    let probe = steps_over(&probe_compute, no_parameters(), &new_store()?);
    let now = Utc::now();
    let layout_plan = Plan::new("acme", "x", PlanParams::Create(spec()?), "t", "t", now);
    let dummy = Deployment {
        last_drill: None,
        id: "x".into(),
        org: "acme".into(),
        spec: spec()?,
        status: DeploymentStatus::Initializing,
        pending_plan: None,
        access: None,
        password_to_apply: None,
        endpoint: None,
        endpoint_moving_to: None,
        clone_source: None,
        health: None,
        created: now,
        updated: now,
        license: None,
    };
    let layout = probe.layout(&layout_plan, &dummy).map_err(|e| e.message)?;
    assert_eq!(
        layout,
        [
            "node-security",
            "node-identity",
            "template:masters",
            "launch:masters",
            "template:hot",
            "launch:hot",
            "bootstrap-masters",
            "wait-running",
            "wait-joined",
            "license",
            "record-access"
        ]
    );

    for at in &layout {
        let compute = Arc::new(SimulatedCompute::new(SimulatedConfig::default()));
        let parameters = Arc::new(SimulatedParameters::new(Vec::new()));
        let store = new_store()?;
        let identity = Arc::new(SimulatedIdentity::new());
        let steps = Arc::new(FailAfter {
            inner: steps_over(&compute, parameters.clone(), &store).with_identity(identity.clone()),
            at: at.clone(),
        });
        let (run, status) = drive(steps, PlanKind::Create, &store, None).await?;
        assert_eq!(status, PlanStatus::Failed, "failure after {at}");
        assert!(
            identity.existing().is_empty(),
            "failure after {at} left the node identity"
        );
        assert_eq!(
            live(&compute, &run.job.deployment_id).await?,
            0,
            "failure after {at} left instances running"
        );
        assert!(
            compute.templates().is_empty(),
            "failure after {at} left templates {:?}",
            compute.templates()
        );
        assert!(
            parameters.written().is_empty(),
            "failure after {at} left parameters {:?}",
            parameters.written().keys().collect::<Vec<_>>()
        );
        let plan = run
            .store
            .get_plan("acme", &run.job.deployment_id, &run.job.plan_id)
            .await?
            .ok_or("plan")?
            .value;
        assert!(
            plan.steps
                .iter()
                .all(|s| matches!(s.status, StepStatus::Undone | StepStatus::Pending)),
            "after {at}: {:?}",
            plan.steps
                .iter()
                .map(|s| (&s.step_id, s.status))
                .collect::<Vec<_>>()
        );
        let d = run
            .store
            .get_deployment("acme", &run.job.deployment_id)
            .await?
            .ok_or("deployment")?
            .value;
        assert_eq!(
            (d.status, d.pending_plan),
            (DeploymentStatus::Stopped, None)
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_zone_without_capacity_moves_the_launch_to_another_zone() -> TestResult {
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig {
        faults: vec![Fault::NoCapacityInZone(1)],
        ..SimulatedConfig::default()
    }));
    let store = new_store()?;
    let steps = Arc::new(steps_over(&compute, no_parameters(), &store));
    let (run, status) = drive(steps, PlanKind::Create, &store, None).await?;
    assert_eq!(status, PlanStatus::Succeeded);
    let instances = compute.instances(&run.job.deployment_id).await?;
    assert_eq!(instances.len(), 7);
    assert!(
        instances.iter().all(|i| i.zone != "sim-b"),
        "nothing landed in the zone without capacity"
    );
    let plan = run
        .store
        .get_plan("acme", &run.job.deployment_id, &run.job.plan_id)
        .await?
        .ok_or("plan")?
        .value;
    let launch = plan
        .steps
        .iter()
        .find(|s| s.step_id == "launch:masters")
        .ok_or("step")?;
    assert!(
        launch.info_log.iter().any(|l| l.contains("no capacity")),
        "{:?}",
        launch.info_log
    );
    Ok(())
}

/// EC2 as seen through a lost answer: the first launch in zone 0 finds no
/// capacity, and the first launch in zone 1 starts its instances but its
/// answer never arrives (a timeout after the fact).
struct LostAnswer {
    inner: Arc<SimulatedCompute>,
    calls: std::sync::Mutex<(u32, u32)>,
}

#[async_trait::async_trait]
impl Compute for LostAnswer {
    async fn ensure_launch_template(
        &self,
        spec: &floe_compute::LaunchTemplateSpec,
    ) -> Result<String, ComputeError> {
        self.inner.ensure_launch_template(spec).await
    }
    async fn delete_launch_template(&self, name: &str) -> Result<(), ComputeError> {
        self.inner.delete_launch_template(name).await
    }
    async fn launch_templates(&self, deployment_id: &str) -> Result<Vec<String>, ComputeError> {
        self.inner.launch_templates(deployment_id).await
    }
    async fn launch(
        &self,
        request: &floe_compute::LaunchRequest,
    ) -> Result<Vec<String>, ComputeError> {
        let (zone0, zone1) = {
            let mut calls = self.calls.lock().map_err(|_| ComputeError::Transient {
                code: "poisoned".into(),
                message: "test lock".into(),
            })?;
            match request.zone {
                0 => calls.0 += 1,
                1 => calls.1 += 1,
                _ => {}
            }
            *calls
        };
        if request.zone == 0 && zone0 == 1 {
            return Err(ComputeError::InsufficientCapacity {
                zone: 0,
                message: "no c7g.large".into(),
            });
        }
        let launched = self.inner.launch(request).await?;
        if request.zone == 1 && zone1 == 1 {
            return Err(ComputeError::Transient {
                code: "RequestTimeout".into(),
                message: "the answer was lost".into(),
            });
        }
        Ok(launched)
    }
    async fn instances(
        &self,
        deployment_id: &str,
    ) -> Result<Vec<floe_compute::Instance>, ComputeError> {
        self.inner.instances(deployment_id).await
    }
    async fn terminate(&self, ids: &[String]) -> Result<(), ComputeError> {
        self.inner.terminate(ids).await
    }
}

#[tokio::test]
async fn a_launch_retried_after_another_zones_lost_answer_starts_nothing_twice() -> TestResult {
    let sim = Arc::new(SimulatedCompute::new(SimulatedConfig::default()));
    let compute = Arc::new(LostAnswer {
        inner: sim.clone(),
        calls: std::sync::Mutex::new((0, 0)),
    });
    let store = new_store()?;
    let clusters = sim_clusters(&sim);
    let steps = Arc::new(DeploymentSteps::new(
        StepPorts {
            compute: compute.clone(),
            clusters: clusters.clone(),
            parameters: no_parameters(),
            cipher: Arc::new(LocalCipher::from_key(&[7u8; 32])),
            snapshots: floe_snapshots::Snapshotter::new(store.clone(), clusters),
        },
        settings(),
    ));
    let (run, status) = drive(steps, PlanKind::Create, &store, None).await?;
    assert_eq!(status, PlanStatus::Succeeded);
    let live: Vec<_> = sim
        .instances(&run.job.deployment_id)
        .await?
        .into_iter()
        .filter(|i| i.state != InstanceState::Terminated)
        .collect();
    let masters = live
        .iter()
        .filter(|i| i.tags.get(floe_compute::TAG_NODE_GROUP).map(String::as_str) == Some("masters"))
        .count();
    // The first master went to zone 1 on the first try; the retry finds it
    // there instead of starting another in zone 0.
    assert_eq!((masters, live.len()), (3, 7), "{live:#?}");
    Ok(())
}

#[tokio::test]
async fn permanent_and_transient_compute_errors() -> TestResult {
    // A throttled launch is retried and succeeds.
    let transient = ComputeError::Transient {
        code: "RequestLimitExceeded".into(),
        message: "slow down".into(),
    };
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig {
        faults: vec![Fault::FailCall {
            operation: "launch".into(),
            nth: 1,
            times: 2,
            error: transient,
        }],
        ..SimulatedConfig::default()
    }));
    let store = new_store()?;
    let (_, status) = drive(
        Arc::new(steps_over(&compute, no_parameters(), &store)),
        PlanKind::Create,
        &store,
        None,
    )
    .await?;
    assert_eq!(status, PlanStatus::Succeeded);

    // A permanent error fails the plan with its failure type and unwinds.
    let permanent = ComputeError::Permanent {
        failure_type: "vcpu_limit_exceeded".into(),
        message: "account limit".into(),
    };
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig {
        faults: vec![Fault::FailCall {
            operation: "launch".into(),
            nth: 2,
            times: 1,
            error: permanent,
        }],
        ..SimulatedConfig::default()
    }));
    let store = new_store()?;
    let (run, status) = drive(
        Arc::new(steps_over(&compute, no_parameters(), &store)),
        PlanKind::Create,
        &store,
        None,
    )
    .await?;
    assert_eq!(status, PlanStatus::Failed);
    let plan = run
        .store
        .get_plan("acme", &run.job.deployment_id, &run.job.plan_id)
        .await?
        .ok_or("plan")?
        .value;
    assert_eq!(
        plan.error.map(|e| e.failure_type),
        Some("vcpu_limit_exceeded".into())
    );
    assert_eq!(live(&compute, &run.job.deployment_id).await?, 0);
    assert!(compute.templates().is_empty());
    Ok(())
}

fn new_store() -> Result<Store, floe_store::BackendError> {
    Ok(Store::new(Arc::new(SqliteBackend::in_memory()?)))
}

/// The steps over `compute` and its simulated clusters, writing the nodes'
/// parameters to `parameters` and reading repositories from `store`.
fn steps_over(
    compute: &Arc<SimulatedCompute>,
    parameters: Arc<SimulatedParameters>,
    store: &Store,
) -> DeploymentSteps {
    let clusters = sim_clusters(compute);
    DeploymentSteps::new(
        StepPorts {
            compute: compute.clone(),
            clusters: clusters.clone(),
            parameters,
            cipher: Arc::new(LocalCipher::from_key(&[7u8; 32])),
            snapshots: floe_snapshots::Snapshotter::new(store.clone(), clusters),
        },
        settings(),
    )
}

fn no_parameters() -> Arc<SimulatedParameters> {
    Arc::new(SimulatedParameters::new(Vec::new()))
}

/// The simulated cluster of each deployment, following the simulated instances.
fn sim_clusters(
    compute: &std::sync::Arc<floe_compute_sim::SimulatedCompute>,
) -> std::sync::Arc<dyn floe_clusters::Clusters> {
    std::sync::Arc::new(floe_clusters_sim::SimulatedClusters::new(
        compute.clone(),
        floe_clusters_sim::SimulatedClustersConfig::default(),
    ))
}

/// A running deployment of `spec()` on `compute`, made by a create plan.
async fn running(
    compute: &Arc<SimulatedCompute>,
    parameters: Arc<SimulatedParameters>,
    store: &Store,
) -> Result<Deployment, Box<dyn std::error::Error>> {
    let steps = Arc::new(steps_over(compute, parameters, store));
    let (run, status) = drive(steps, PlanKind::Create, store, None).await?;
    assert_eq!(status, PlanStatus::Succeeded);
    Ok(store
        .get_deployment("acme", &run.job.deployment_id)
        .await?
        .ok_or("deployment")?
        .value)
}

/// Loses one node of each of `groups`; returns their ids and zones.
async fn lose(
    compute: &SimulatedCompute,
    deployment_id: &str,
    groups: &[&str],
) -> Result<Vec<(String, String)>, Box<dyn std::error::Error>> {
    let instances = compute.instances(deployment_id).await?;
    let mut lost = Vec::new();
    for group in groups {
        let victim = instances
            .iter()
            .find(|i| i.tags.get("floe:node-group").map(String::as_str) == Some(group))
            .ok_or("no node in the group")?;
        assert!(compute.kill(&victim.id));
        lost.push((victim.id.clone(), victim.zone.clone()));
    }
    Ok(lost)
}

/// A health check with `probe`; the jobs of the heals it starts go to
/// the returned queue.
fn health_check(
    store: &Store,
    probe: Arc<DeploymentSteps>,
) -> (
    floe_plans::HealthCheck,
    tokio::sync::mpsc::UnboundedReceiver<PlanJob>,
) {
    let (queue, rx) = floe_plans::LocalQueue::new();
    let heals = floe_plans::PlanStarter::new(store.clone(), Arc::new(queue));
    let health = floe_plans::HealthCheck::new(
        store.clone(),
        Arc::new(heals),
        probe,
        floe_plans::HealthConfig::default(),
    );
    (health, rx)
}

#[tokio::test]
async fn a_heal_runs_every_step_twice_and_replaces_each_lost_node_once() -> TestResult {
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig {
        boot_delay: Duration::from_millis(20),
        ..SimulatedConfig::default()
    }));
    let parameters = no_parameters();
    let store = new_store()?;
    let d = running(&compute, parameters.clone(), &store).await?;
    let probe = Arc::new(steps_over(&compute, parameters.clone(), &store));
    let (check, mut jobs) = health_check(&store, probe);

    // Healthy: recorded, with every node; no plan.
    let summary = check.check().await;
    assert_eq!((summary.checked, summary.unhealthy), (1, 0), "{summary:?}");
    let checked = store.get_deployment("acme", &d.id).await?.ok_or("d")?;
    let health = checked.value.health.clone().ok_or("health")?;
    assert!(health.healthy, "{health:?}");
    assert_eq!(health.nodes.len(), 7);
    // Nothing changed: nothing written.
    check.check().await;
    let again = store.get_deployment("acme", &d.id).await?.ok_or("d")?;
    assert_eq!(again.version, checked.version);

    let lost = lose(&compute, &d.id, &["hot", "masters"]).await?;
    let summary = check.check().await;
    assert_eq!(
        (summary.unhealthy, summary.heals_started),
        (1, 1),
        "{summary:?}"
    );
    let healing = store.get_deployment("acme", &d.id).await?.ok_or("d")?.value;
    assert_eq!(healing.status, DeploymentStatus::Reconfiguring);
    let health = healing.health.clone().ok_or("health")?;
    assert!(!health.healthy);
    let reason = health.reason.unwrap_or_default();
    assert!(reason.contains("node group hot has 3 of 4"), "{reason}");
    assert!(reason.contains("node group masters has 2 of 3"), "{reason}");
    let job = jobs.try_recv()?;
    assert_eq!(
        Some(job.plan_id.clone()),
        healing.pending_plan.map(|p| p.plan_id)
    );

    let steps = Arc::new(Twice(steps_over(&compute, parameters, &store)));
    let status = support::run_to_end(&store, steps, &job).await?;
    assert_eq!(status, PlanStatus::Succeeded);
    let instances = compute.instances(&d.id).await?;
    let running: Vec<_> = instances
        .iter()
        .filter(|i| i.state == InstanceState::Running)
        .collect();
    assert_eq!(running.len(), 7, "each lost node replaced once");
    for (id, zone) in &lost {
        let group = instances
            .iter()
            .find(|i| &i.id == id)
            .and_then(|i| i.tags.get("floe:node-group"))
            .ok_or("group")?;
        // The replacement runs in the lost node's zone.
        let in_zone = running
            .iter()
            .filter(|i| i.tags.get("floe:node-group") == Some(group) && &i.zone == zone)
            .count();
        assert!(in_zone >= 1, "no {group} node in {zone}");
    }
    let plan = store
        .get_plan("acme", &d.id, &job.plan_id)
        .await?
        .ok_or("plan")?
        .value;
    assert_eq!(
        plan.steps
            .iter()
            .map(|s| s.step_id.as_str())
            .collect::<Vec<_>>(),
        [
            "template:hot",
            "replace:hot",
            "template:masters",
            "replace:masters",
            "wait-running",
            "wait-joined",
            "exclude-lost-masters",
            "wait-lost-masters-excluded",
            "retire-lost",
            "clear-lost-exclusion",
            "record-access"
        ]
    );
    let healed = store.get_deployment("acme", &d.id).await?.ok_or("d")?.value;
    assert_eq!(healed.status, DeploymentStatus::Running);
    assert_eq!(healed.pending_plan, None);
    assert_eq!(healed.access.map(|a| a.nodes.len()), Some(7));
    assert_eq!(healed.health.as_ref().and_then(|h| h.heal_started), None);
    let summary = check.check().await;
    assert_eq!((summary.unhealthy, summary.heals_started), (0, 0));
    let health = store
        .get_deployment("acme", &d.id)
        .await?
        .ok_or("d")?
        .value
        .health
        .ok_or("health")?;
    assert!(health.healthy, "{health:?}");
    Ok(())
}

#[tokio::test]
async fn a_failure_after_any_heal_step_leaves_nothing_behind() -> TestResult {
    let mut layout: Option<Vec<String>> = None;
    let mut index = 0;
    loop {
        let compute = Arc::new(SimulatedCompute::new(SimulatedConfig::default()));
        let parameters = no_parameters();
        let store = new_store()?;
        let d = running(&compute, parameters.clone(), &store).await?;
        let templates = compute.templates();
        lose(&compute, &d.id, &["hot", "masters"]).await?;
        let survivors = live(&compute, &d.id).await?;
        let probe = Arc::new(steps_over(&compute, parameters.clone(), &store));
        let (check, mut jobs) = health_check(&store, probe.clone());
        check.check().await;
        let job = jobs.try_recv()?;
        let plan = store
            .get_plan("acme", &d.id, &job.plan_id)
            .await?
            .ok_or("plan")?
            .value;
        let ids = layout
            .get_or_insert_with(|| probe.layout(&plan, &d).unwrap_or_default())
            .clone();
        let Some(at) = ids.get(index).cloned() else {
            break;
        };
        index += 1;
        let steps = Arc::new(FailAfter {
            inner: steps_over(&compute, parameters, &store),
            at: at.clone(),
        });
        let status = support::run_to_end(&store, steps, &job).await?;
        assert_eq!(status, PlanStatus::Failed, "failure after {at}");
        // Only the nodes that survived the loss run, until the lost ones
        // may be terminated: from then on their replacements stay. The
        // heal's template is gone.
        let kept = if ids.iter().position(|s| s == "retire-lost") < Some(index) {
            2
        } else {
            0
        };
        assert_eq!(
            live(&compute, &d.id).await?,
            survivors + kept,
            "failure after {at}"
        );
        assert_eq!(compute.templates(), templates, "failure after {at}");
        let after = store.get_deployment("acme", &d.id).await?.ok_or("d")?.value;
        assert_eq!(
            (after.status, after.pending_plan),
            (DeploymentStatus::Running, None),
            "failure after {at}"
        );
        // A failed heal is not started again at once.
        let summary = check.check().await;
        assert_eq!(summary.heals_started, 0, "after {at}");
    }
    assert_eq!(index, 11, "{layout:?}");
    Ok(())
}

/// Issue 14, item 5: an instance that runs but fails an EC2 status check,
/// and one that someone stopped, are no use to the cluster. The check
/// names each; the heal (every step run twice) starts one replacement
/// for each, in its zone, waits until they joined, then terminates the
/// impaired and the stopped instance, so none is left costing a volume
/// and holding a stale node.
#[tokio::test]
async fn impaired_and_stopped_nodes_are_replaced_and_terminated() -> TestResult {
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig {
        boot_delay: Duration::from_millis(20),
        ..SimulatedConfig::default()
    }));
    let parameters = no_parameters();
    let store = new_store()?;
    let d = running(&compute, parameters.clone(), &store).await?;
    let probe = Arc::new(steps_over(&compute, parameters.clone(), &store));
    let (check, mut jobs) = health_check(&store, probe);
    let summary = check.check().await;
    assert_eq!((summary.unhealthy, summary.heals_started), (0, 0));

    let instances = compute.instances(&d.id).await?;
    let first_of = |group: &str| {
        instances
            .iter()
            .find(|i| i.tags.get("floe:node-group").map(String::as_str) == Some(group))
            .map(|i| (i.id.clone(), i.zone.clone()))
            .ok_or("no node in the group")
    };
    let (impaired, impaired_zone) = first_of("hot")?;
    let (stopped, stopped_zone) = first_of("masters")?;
    assert!(compute.impair(&impaired, floe_compute_sim::Impairment::Instance));
    assert!(compute.stop(&stopped));

    let summary = check.check().await;
    assert_eq!(
        (summary.unhealthy, summary.heals_started),
        (1, 1),
        "{summary:?}"
    );
    let healing = store.get_deployment("acme", &d.id).await?.ok_or("d")?.value;
    let health = healing.health.clone().ok_or("health")?;
    assert!(!health.healthy);
    let reason = health.reason.unwrap_or_default();
    assert!(
        reason.contains(&format!(
            "instance {impaired} of node group hot is impaired (instance status check failing)"
        )),
        "{reason}"
    );
    assert!(
        reason.contains(&format!(
            "instance {stopped} of node group masters is stopped"
        )),
        "{reason}"
    );
    assert!(reason.contains("node group hot has 3 of 4"), "{reason}");
    assert!(reason.contains("node group masters has 2 of 3"), "{reason}");
    let job = jobs.try_recv()?;

    let steps = Arc::new(Twice(steps_over(&compute, parameters, &store)));
    let status = support::run_to_end(&store, steps, &job).await?;
    assert_eq!(status, PlanStatus::Succeeded);
    let instances = compute.instances(&d.id).await?;
    let state_of = |id: &str| instances.iter().find(|i| i.id == id).map(|i| i.state);
    for id in [&impaired, &stopped] {
        assert!(
            matches!(
                state_of(id),
                Some(InstanceState::ShuttingDown | InstanceState::Terminated)
            ),
            "{id} left {:?}",
            state_of(id)
        );
    }
    let running: Vec<_> = instances
        .iter()
        .filter(|i| i.state == InstanceState::Running)
        .collect();
    assert_eq!(running.len(), 7, "each broken node replaced once");
    for (group, zone) in [("hot", &impaired_zone), ("masters", &stopped_zone)] {
        assert!(
            running
                .iter()
                .any(
                    |i| i.tags.get("floe:node-group").map(String::as_str) == Some(group)
                        && &i.zone == zone
                ),
            "no {group} node in {zone}"
        );
    }
    let plan = store
        .get_plan("acme", &d.id, &job.plan_id)
        .await?
        .ok_or("plan")?
        .value;
    let retired = plan
        .steps
        .iter()
        .find(|s| s.step_id == "retire-lost")
        .ok_or("retire-lost")?;
    let log = serde_json::to_string(retired)?;
    assert!(log.contains(&impaired) && log.contains(&stopped), "{log}");

    let healed = store.get_deployment("acme", &d.id).await?.ok_or("d")?.value;
    assert_eq!(healed.status, DeploymentStatus::Running);
    let recorded: Vec<String> = healed
        .access
        .map(|a| a.nodes.into_iter().map(|n| n.name).collect())
        .unwrap_or_default();
    assert_eq!(recorded.len(), 7);
    assert!(!recorded.contains(&impaired) && !recorded.contains(&stopped));
    let summary = check.check().await;
    assert_eq!(
        (summary.unhealthy, summary.heals_started),
        (0, 0),
        "{summary:?}"
    );
    Ok(())
}

/// A stopped instance whose group does not lack a node (its replacement
/// runs, say, because an earlier heal could not terminate it) is still
/// named, and a heal that launches nothing terminates it.
#[tokio::test]
async fn a_stopped_node_beyond_the_count_is_terminated_without_a_launch() -> TestResult {
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig::default()));
    let parameters = no_parameters();
    let store = new_store()?;
    let d = running(&compute, parameters.clone(), &store).await?;
    // One more hot node than the spec asks, in zone 0, then stopped.
    let hot = compute
        .instances(&d.id)
        .await?
        .into_iter()
        .find(|i| i.tags.get("floe:node-group").map(String::as_str) == Some("hot"))
        .ok_or("hot")?;
    let template = compute
        .templates()
        .into_iter()
        .find(|t| t.contains("-hot-"))
        .ok_or("template")?;
    let mut tags = hot.tags.clone();
    tags.insert("floe:launch".into(), "extra-0-0".into());
    let extra = compute
        .launch(&floe_compute::LaunchRequest {
            template_name: template,
            count: 1,
            zone: 0,
            client_token: "extra".into(),
            tags,
        })
        .await?;
    let extra = extra.first().cloned().ok_or("extra")?;
    assert!(compute.stop(&extra));

    let probe = Arc::new(steps_over(&compute, parameters.clone(), &store));
    let (check, mut jobs) = health_check(&store, probe);
    let summary = check.check().await;
    assert_eq!((summary.unhealthy, summary.heals_started), (1, 1));
    let job = jobs.try_recv()?;
    let plan = store
        .get_plan("acme", &d.id, &job.plan_id)
        .await?
        .ok_or("plan")?
        .value;
    let PlanParams::Heal(params) = &plan.params else {
        return Err("not a heal".into());
    };
    assert_eq!(params.replacements.len(), 1, "{params:?}");
    assert_eq!(params.replacements[0].count, 0);
    assert_eq!(params.replacements[0].lost, std::slice::from_ref(&extra));

    let steps = Arc::new(Twice(steps_over(&compute, parameters, &store)));
    let before = live(&compute, &d.id).await?;
    assert_eq!(
        support::run_to_end(&store, steps, &job).await?,
        PlanStatus::Succeeded
    );
    assert_eq!(live(&compute, &d.id).await?, before - 1);
    let summary = check.check().await;
    assert_eq!((summary.unhealthy, summary.heals_started), (0, 0));
    Ok(())
}

/// Issue 14, item 5: what the check writes is no change of the deployment.
/// A user who read it before the check looked still sends the version he
/// read (`If-Match`), and is not refused for the check's sake.
#[tokio::test]
async fn a_health_write_keeps_the_version_a_user_read() -> TestResult {
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig::default()));
    let parameters = no_parameters();
    let store = new_store()?;
    let d = running(&compute, parameters.clone(), &store).await?;
    let read = store.get_deployment("acme", &d.id).await?.ok_or("d")?;
    assert_eq!(read.value.health, None);

    let probe = Arc::new(steps_over(&compute, parameters.clone(), &store));
    let (check, _jobs) = health_check(&store, probe);
    let summary = check.check().await;
    assert_eq!(summary.checked, 1);
    let checked = store.get_deployment("acme", &d.id).await?.ok_or("d")?;
    assert!(checked.value.health.as_ref().is_some_and(|h| h.healthy));
    assert_eq!(checked.version, read.version, "the check moved the version");
    // The user's change, made on what he read before the check looked.
    let mut tagged = read.value.clone();
    tagged.spec.metadata.tags.clear();
    assert_eq!(
        store.replace_deployment(&tagged, &read, None).await?,
        read.version + 1
    );
    Ok(())
}

/// The endpoint's name names the nodes that serve clients: the data nodes,
/// never the dedicated masters. An address endpoint (local mode) has no
/// record to keep.
#[tokio::test]
async fn the_endpoint_names_the_data_nodes_and_never_the_dedicated_masters() -> TestResult {
    use floe_compute::EndpointRecords;
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig {
        boot_delay: Duration::from_millis(20),
        ..SimulatedConfig::default()
    }));
    let store = new_store()?;
    let records = Arc::new(floe_compute::MemoryRecords::default());
    let steps: Arc<dyn Steps> = Arc::new(
        steps_over(
            &compute,
            Arc::new(SimulatedParameters::new(Vec::new())),
            &store,
        )
        .with_records(records.clone()),
    );
    for (endpoint, named) in [
        (Some("d.es.floe.internal"), true),
        (Some("127.200.1.2"), false),
    ] {
        let plan = Plan::new(
            "acme",
            &floe_domain::names::new_resource_id(),
            PlanParams::Create(spec()?),
            "test",
            "tester",
            Utc::now(),
        );
        let deployment = Deployment {
            endpoint: endpoint.map(String::from),
            ..Deployment::first_planned_by(&plan, spec()?)
        };
        store.create_deployment(&deployment, &plan, None).await?;
        let job = PlanJob {
            org: "acme".into(),
            deployment_id: deployment.id.clone(),
            plan_id: plan.id.clone(),
        };
        assert_eq!(
            support::run_to_end(&store, steps.clone(), &job).await?,
            PlanStatus::Succeeded
        );
        let mut data: Vec<String> = compute
            .instances(&deployment.id)
            .await?
            .into_iter()
            .filter(|i| i.tags.get("floe:node-group").map(String::as_str) == Some("hot"))
            .filter_map(|i| i.private_ip)
            .collect();
        data.sort();
        assert_eq!(data.len(), 4);
        let host = endpoint.unwrap_or_default();
        let expected = if named { data } else { Vec::new() };
        assert_eq!(records.get(host).await?, expected, "{host}");
    }
    Ok(())
}

/// A deployment's node identity reaches its own path of its repository and,
/// read only, the path of the snapshot it mounts: never the whole bucket,
/// and nothing of a repository whose keys are its own.
#[tokio::test]
async fn the_node_identity_is_granted_the_deployments_own_paths_only() -> TestResult {
    use floe_compute::{PathAccess, SnapshotPath};
    use floe_domain::repository::{Repository, RepositorySettings, S3Settings};
    use floe_domain::restore::{CloneSource, RestoreMode};

    let store = new_store()?;
    let now = Utc::now();
    let s3 = |bucket: &str, access_key: Option<&str>| Repository {
        org: "acme".into(),
        name: String::new(),
        settings: RepositorySettings::S3(S3Settings {
            bucket: bucket.into(),
            base_path: Some("prod".into()),
            access_key: access_key.map(String::from),
            ..S3Settings::default()
        }),
        created: now,
        updated: now,
    };
    store
        .create_repository(&Repository {
            name: "aws".into(),
            ..s3("snaps", None)
        })
        .await?;
    store
        .create_repository(&Repository {
            name: "keyed".into(),
            ..s3("other", Some("AKIAEXAMPLE"))
        })
        .await?;
    let source = floe_domain::names::new_resource_id();
    for (repository, clone_of, expected) in [
        (
            "aws",
            None,
            vec![("prod/{id}".to_string(), PathAccess::ReadWrite)],
        ),
        (
            "aws",
            Some(RestoreMode::Mount),
            vec![
                (format!("prod/{source}"), PathAccess::ReadOnly),
                ("prod/{id}".to_string(), PathAccess::ReadWrite),
            ],
        ),
        // A restore clone whose data was copied (no longer pinned) reads
        // its source no more.
        (
            "aws",
            Some(RestoreMode::Restore),
            vec![("prod/{id}".to_string(), PathAccess::ReadWrite)],
        ),
        ("keyed", None, vec![]),
    ] {
        let compute = Arc::new(SimulatedCompute::new(SimulatedConfig::default()));
        let parameters = Arc::new(SimulatedParameters::new(Vec::new()));
        let identity = Arc::new(SimulatedIdentity::new());
        let mut spec = spec()?;
        spec.snapshot = Some(serde_json::from_value(json!({"repository": repository}))?);
        let plan = Plan::new(
            "acme",
            &floe_domain::names::new_resource_id(),
            PlanParams::Create(spec.clone()),
            "test",
            "tester",
            now,
        );
        let mut d = Deployment::first_planned_by(&plan, spec);
        d.clone_source = clone_of.map(|mode| CloneSource {
            source_deployment_id: source.clone(),
            repository: "aws".into(),
            registered_as: "aws".into(),
            snapshot: "nightly-1".into(),
            snapshot_sort_millis: 0,
            mode,
            // A pin is counted on the source snapshot's record, which this
            // store does not hold.
            pinned: false,
            snapshot_version: None,
            license: None,
        });
        store.create_deployment(&d, &plan, None).await?;
        // Stopped right after the identity was made: the grant is what the
        // launch templates' nodes would run with.
        let steps = Arc::new(FailAfter {
            inner: steps_over(&compute, parameters, &store).with_identity(identity.clone()),
            at: "node-identity".into(),
        });
        let job = PlanJob {
            org: "acme".into(),
            deployment_id: d.id.clone(),
            plan_id: plan.id.clone(),
        };
        support::run_to_end(&store, steps, &job).await?;
        let mut want: Vec<SnapshotPath> = expected
            .iter()
            .map(|(prefix, access)| SnapshotPath {
                bucket: "snaps".into(),
                prefix: prefix.replace("{id}", &d.id),
                access: *access,
            })
            .collect();
        want.sort();
        let mut got = identity.paths_of(&d.id).ok_or("never ensured")?;
        got.sort();
        assert_eq!(got, want, "{repository} {clone_of:?}");
    }
    Ok(())
}

/// A repository endpoint given as a name is checked again when a plan hands
/// it to nodes: written while it named a public store, it names the
/// metadata service now (DNS rebinding), and the plan fails before any node
/// or parameter gets it.
#[tokio::test]
async fn a_repository_name_that_points_elsewhere_now_is_refused_before_the_nodes_get_it()
-> TestResult {
    use floe_domain::repository::{Protocol, Repository, RepositorySettings, S3Settings};
    use floe_plans::EndpointCheck;
    use floe_ports::FixedResolver;
    use std::net::IpAddr;

    let now = Utc::now();
    for (address, refused) in [
        (IpAddr::from([169, 254, 169, 254]), true),
        (IpAddr::from([10, 0, 0, 7]), true),
        (IpAddr::from([198, 51, 100, 7]), false),
    ] {
        let store = new_store()?;
        store
            .create_repository(&Repository {
                org: "acme".into(),
                name: "minio".into(),
                settings: RepositorySettings::S3(S3Settings {
                    bucket: "snaps".into(),
                    endpoint: Some("store.example.net:9000".into()),
                    protocol: Some(Protocol::Https),
                    ..S3Settings::default()
                }),
                created: now,
                updated: now,
            })
            .await?;
        let compute = Arc::new(SimulatedCompute::new(SimulatedConfig::default()));
        let parameters = Arc::new(SimulatedParameters::new(Vec::new()));
        let check = EndpointCheck {
            resolver: Arc::new(FixedResolver::default().with("store.example.net", &[address])),
            policy: Default::default(),
        };
        let steps = Arc::new(FailAfter {
            inner: steps_over(&compute, parameters.clone(), &store).with_endpoint_check(check),
            at: "repository-credentials".into(),
        });
        let mut spec = spec()?;
        spec.snapshot = Some(serde_json::from_value(json!({"repository": "minio"}))?);
        let plan = Plan::new(
            "acme",
            &floe_domain::names::new_resource_id(),
            PlanParams::Create(spec.clone()),
            "test",
            "tester",
            now,
        );
        let d = Deployment::first_planned_by(&plan, spec);
        store.create_deployment(&d, &plan, None).await?;
        let job = PlanJob {
            org: "acme".into(),
            deployment_id: d.id.clone(),
            plan_id: plan.id.clone(),
        };
        let status = support::run_to_end(&store, steps, &job).await?;
        assert_eq!(status, PlanStatus::Failed, "{address}");
        let plan = store
            .get_plan("acme", &d.id, &plan.id)
            .await?
            .ok_or("plan")?
            .value;
        let failure = plan.error.as_ref().map(|e| e.failure_type.as_str());
        if refused {
            assert_eq!(failure, Some("repository_endpoint_refused"), "{address}");
            assert!(compute.templates().is_empty(), "{address}");
            assert!(
                !parameters
                    .written()
                    .keys()
                    .any(|k| k.contains("repository")),
                "{address}: {:?}",
                parameters.written().keys().collect::<Vec<_>>()
            );
        } else {
            // Past the check: failed only where the test injected it.
            assert_eq!(failure, Some("injected"), "{address}");
        }
    }
    Ok(())
}

/// Issue 36: maintenance EC2 has scheduled for a node (a retirement, a
/// host's reboot) is a warning beside `healthy`, which stays true: the
/// node works until AWS acts, and no heal starts for it. One EC2 lists as
/// completed is no warning.
#[tokio::test]
async fn scheduled_maintenance_is_a_warning_that_starts_no_heal() -> TestResult {
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig {
        boot_delay: Duration::from_millis(20),
        ..SimulatedConfig::default()
    }));
    let parameters = no_parameters();
    let store = new_store()?;
    let d = running(&compute, parameters.clone(), &store).await?;
    let probe = Arc::new(steps_over(&compute, parameters.clone(), &store));
    let (check, mut jobs) = health_check(&store, probe);
    check.check().await;

    let instances = compute.instances(&d.id).await?;
    let ids: Vec<String> = instances
        .iter()
        .filter(|i| i.state == InstanceState::Running)
        .map(|i| i.id.clone())
        .collect();
    let retiring = ids.first().ok_or("no node")?.clone();
    let done = ids.get(1).ok_or("a second node")?.clone();
    let from = chrono::DateTime::from_timestamp(1_800_000_000, 0);
    assert!(compute.schedule_event(
        &retiring,
        floe_compute::ScheduledEvent {
            code: "instance-retirement".into(),
            description: "The instance is running on degraded hardware".into(),
            not_before: from,
            not_after: None,
        }
    ));
    assert!(compute.schedule_event(
        &done,
        floe_compute::ScheduledEvent {
            code: "system-reboot".into(),
            description: "[Completed] Scheduled reboot".into(),
            not_before: from,
            not_after: None,
        }
    ));

    let summary = check.check().await;
    assert_eq!(
        (summary.unhealthy, summary.heals_started),
        (0, 0),
        "{summary:?}"
    );
    let checked = store.get_deployment("acme", &d.id).await?.ok_or("d")?.value;
    let health = checked.health.clone().ok_or("health")?;
    assert!(health.healthy, "{health:?}");
    let about: Vec<&String> = health
        .warnings
        .iter()
        .filter(|w| w.starts_with("scheduled maintenance"))
        .collect();
    assert_eq!(about.len(), 1, "{:?}", health.warnings);
    assert!(
        about[0].contains(&format!("instance-retirement for instance {retiring}"))
            && about[0].contains("from 2027-01-15T08:00:00Z"),
        "{}",
        about[0]
    );
    assert!(jobs.try_recv().is_err(), "a warning started a heal");
    Ok(())
}

/// A snapshot record of `deployment` in state `state`, ended `ago` before now.
fn snapshot_record(
    deployment: &Deployment,
    name: &str,
    state: floe_domain::snapshot::SnapshotState,
    ago: chrono::Duration,
) -> floe_domain::snapshot::SnapshotRecord {
    let end = Utc::now() - ago;
    let start = end - chrono::Duration::seconds(30);
    floe_domain::snapshot::SnapshotRecord {
        org: deployment.org.clone(),
        deployment_id: deployment.id.clone(),
        repository: "main".into(),
        name: name.into(),
        uuid: String::new(),
        state,
        start,
        end: Some(end),
        duration_in_millis: Some(30_000),
        indices: vec!["logs-1".into()],
        shards: Default::default(),
        size_in_bytes: Some(1),
        policy_id: None,
        failure: None,
        sort_millis: start.timestamp_millis(),
        updated: end,
        deleting: None,
        place: None,
        missing: None,
        document_counts: None,
    }
}

/// The health check finds each running deployment's recovery point (its
/// newest successful snapshot) and judges it against the recovery point
/// target: a breach is recorded once, with when it was first found, and
/// cleared by a newer snapshot; none of it moves the version a user read,
/// and none of it starts a heal.
#[tokio::test]
async fn the_health_check_judges_the_recovery_point_against_its_target() -> TestResult {
    use floe_domain::snapshot::SnapshotState;
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig::default()));
    let parameters = no_parameters();
    let store = new_store()?;
    let d = running(&compute, parameters.clone(), &store).await?;
    let read = store.get_deployment("acme", &d.id).await?.ok_or("d")?;
    let mut next = read.value.clone();
    next.spec.recovery_targets = Some(floe_domain::drill::RecoveryTargets {
        recovery_point: Some("1h".into()),
        recovery_time: None,
    });
    let version = store.replace_deployment(&next, &read, None).await?;
    // Newest first: a failed one, then a success two hours old.
    store
        .create_snapshot(&snapshot_record(
            &d,
            "old",
            SnapshotState::Success,
            chrono::Duration::hours(2),
        ))
        .await?;
    store
        .create_snapshot(&snapshot_record(
            &d,
            "broken",
            SnapshotState::Failed,
            chrono::Duration::minutes(5),
        ))
        .await?;

    let probe = Arc::new(steps_over(&compute, parameters.clone(), &store));
    let (check, mut jobs) = health_check(&store, probe);
    let events = Arc::new(floe_ports::RecordedEvents::default());
    let check = check.with_events(events.clone());
    check.check().await;
    let checked = store.get_deployment("acme", &d.id).await?.ok_or("d")?;
    assert_eq!(checked.version, version, "the check moved the version");
    let told = events.taken();
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0].detail_type, "Floe Recovery Target Breached");
    assert_eq!(told[0].detail["target"], "recovery_point");
    assert_eq!(told[0].detail["recovery_point"]["snapshot"], "old");
    let health = checked.value.health.clone().ok_or("no health")?;
    assert!(health.healthy, "{health:?}");
    assert_eq!(
        health.recovery_point.as_ref().map(|p| p.snapshot.as_str()),
        Some("old")
    );
    let since = health.recovery_point_breached.ok_or("no breach found")?;
    let view = floe_domain::deployment::DeploymentView::new(&checked.value, checked.version);
    let recovery = view.recovery.ok_or("no recovery")?;
    assert!(!recovery.healthy);
    assert!(
        recovery.reasons[0].starts_with("the newest successful snapshot (old) ended at"),
        "{:?}",
        recovery.reasons
    );
    assert_eq!(
        view.healthy,
        Some(true),
        "the cluster's health is its nodes'"
    );

    // Looked at again: nothing changed, nothing written, the breach keeps
    // its first time.
    check.check().await;
    let again = store.get_deployment("acme", &d.id).await?.ok_or("d")?;
    assert_eq!(
        again
            .value
            .health
            .as_ref()
            .and_then(|h| h.recovery_point_breached),
        Some(since)
    );
    assert!(events.taken().is_empty(), "a breach is told once");

    // A fresh snapshot meets the target: the breach is cleared.
    store
        .create_snapshot(&snapshot_record(
            &d,
            "fresh",
            SnapshotState::Success,
            chrono::Duration::minutes(1),
        ))
        .await?;
    check.check().await;
    let met = store.get_deployment("acme", &d.id).await?.ok_or("d")?;
    assert_eq!(met.version, version);
    let health = met.value.health.clone().ok_or("no health")?;
    assert_eq!(
        health.recovery_point.as_ref().map(|p| p.snapshot.as_str()),
        Some("fresh")
    );
    assert_eq!(health.recovery_point_breached, None);
    let view = floe_domain::deployment::DeploymentView::new(&met.value, met.version);
    assert!(
        view.recovery
            .is_some_and(|r| r.reasons.is_empty() || r.reasons == ["no restore drill has run yet"])
    );
    assert!(
        jobs.try_recv().is_err(),
        "a recovery finding starts no heal"
    );
    Ok(())
}

//! Plan records written before the steps were typed still load and finish.
//!
//! `fixtures/create_plan_in_flight.json` is a create plan and its
//! deployment exactly as the steps of the release before wrote them to
//! SQLite (dumped from a run of that code, cut off just after
//! `launch:hot`): `kind` beside an untyped `params`, and the outputs of
//! `node-security`, `template:hot` and `launch:hot` as JSON. The engine
//! with today's steps picks it up at its cursor and finishes it.

use floe_clusters_sim::{SimulatedClusters, SimulatedClustersConfig};
use floe_compute::{
    Compute, InstanceState, LaunchRequest, LaunchTemplateSpec, TAG_DEPLOYMENT, TAG_NODE_GROUP,
    TAG_ORG, TAG_PLAN, Volume,
};
use floe_compute_sim::{SimulatedCompute, SimulatedConfig, SimulatedParameters};
use floe_domain::catalog::Arch;
use floe_domain::deployment::{Deployment, DeploymentStatus, VolumeType};
use floe_domain::plan::{Plan, PlanStatus, StepStatus};
use floe_plans::outputs::{LaunchOutput, TemplateOutput};
use floe_plans::{DeploymentSteps, PlanJob, StepPorts, StepSettings};
use floe_secrets::LocalCipher;
use floe_store::Store;
use floe_store_sqlite::SqliteBackend;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

mod support;

use support::{FailAfter, Twice};

type TestResult = Result<(), Box<dyn std::error::Error>>;

const FIXTURE: &str = include_str!("fixtures/create_plan_in_flight.json");

/// The fixture's records, stored in SQLite, with what their finished steps
/// made in the simulated compute provider; and the steps to resume them.
struct Resumed {
    store: Store,
    compute: Arc<SimulatedCompute>,
    parameters: Arc<SimulatedParameters>,
    steps: DeploymentSteps,
    plan: Plan,
    recorded: LaunchOutput,
    job: PlanJob,
    _dir: tempfile::TempDir,
}

async fn resumed() -> Result<Resumed, Box<dyn std::error::Error>> {
    let fixture: Value = serde_json::from_str(FIXTURE)?;
    let deployment: Deployment = serde_json::from_value(fixture["deployment"].clone())?;
    let plan: Plan = serde_json::from_value(fixture["plan"].clone())?;
    // The record loads as it was, and is written back unchanged.
    assert_eq!(serde_json::to_value(&plan)?, fixture["plan"]);
    assert_eq!(plan.cursor, 3);
    assert_eq!(
        plan.steps
            .iter()
            .map(|s| (s.step_id.as_str(), s.status))
            .collect::<Vec<_>>(),
        [
            ("node-security", StepStatus::Succeeded),
            ("template:hot", StepStatus::Succeeded),
            ("launch:hot", StepStatus::Succeeded),
            ("bootstrap-masters", StepStatus::Pending),
            ("wait-running", StepStatus::Pending),
            ("wait-joined", StepStatus::Pending),
        ]
    );

    let dir = tempfile::tempdir()?;
    let store = Store::new(Arc::new(SqliteBackend::open(&dir.path().join("floe.db"))?));
    store.create_deployment(&deployment, &plan, None).await?;

    // The compute provider holds what the recorded steps made: the launch
    // template, and the instances `launch:hot` started (the same client
    // tokens give the same ids back).
    let template = plan.steps[1].output.clone();
    let template: TemplateOutput = serde_json::from_value(template)?;
    let recorded: LaunchOutput = serde_json::from_value(plan.steps[2].output.clone())?;
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig {
        boot_delay: Duration::from_millis(20),
        ..SimulatedConfig::default()
    }));
    let tags = BTreeMap::from([
        (TAG_DEPLOYMENT.to_string(), plan.deployment_id.clone()),
        (TAG_ORG.to_string(), plan.org.clone()),
        (TAG_PLAN.to_string(), plan.id.clone()),
        (TAG_NODE_GROUP.to_string(), "hot".to_string()),
    ]);
    let id = compute
        .ensure_launch_template(&LaunchTemplateSpec {
            name: template.name.clone(),
            instance_type: "m6g.xlarge".into(),
            arch: Arch::Arm64,
            user_data: String::new(),
            volume: Volume {
                size_gb: 100,
                volume_type: VolumeType::Gp3,
                iops: None,
                throughput: None,
            },
            tags: tags.clone(),
            instance_profile: None,
        })
        .await?;
    assert_eq!(id, template.id);
    let mut launched = Vec::new();
    for zone in 0..3 {
        launched.extend(
            compute
                .launch(&LaunchRequest {
                    template_name: template.name.clone(),
                    count: 1,
                    zone,
                    client_token: format!("{}-0-{zone}", &plan.id[..24]),
                    tags: tags.clone(),
                })
                .await?,
        );
    }
    assert_eq!(launched, recorded.instance_ids);

    let clusters = Arc::new(SimulatedClusters::new(
        compute.clone(),
        SimulatedClustersConfig::default(),
    ));
    let parameters = Arc::new(SimulatedParameters::new(Vec::new()));
    let steps = DeploymentSteps::new(
        StepPorts {
            compute: compute.clone(),
            clusters: clusters.clone(),
            parameters: parameters.clone(),
            cipher: Arc::new(LocalCipher::from_key(&[7u8; 32])),
            snapshots: floe_snapshots::Snapshotter::new(store.clone(), clusters),
        },
        StepSettings {
            poll: Duration::from_millis(5),
            boot_timeout: Duration::from_secs(30),
            ..StepSettings::default()
        },
    );
    let job = PlanJob {
        org: plan.org.clone(),
        deployment_id: plan.deployment_id.clone(),
        plan_id: plan.id.clone(),
    };
    Ok(Resumed {
        store,
        compute,
        parameters,
        steps,
        plan,
        recorded,
        job,
        _dir: dir,
    })
}

#[tokio::test]
async fn a_create_plan_recorded_by_the_untyped_steps_resumes_and_succeeds() -> TestResult {
    let Resumed {
        store,
        compute,
        parameters,
        steps,
        plan,
        recorded,
        job,
        _dir,
    } = resumed().await?;
    // Every step left runs twice, as after a crash before its result was kept.
    let status = support::run_to_end(&store, Arc::new(Twice(steps)), &job).await?;
    assert_eq!(status, PlanStatus::Succeeded);

    let finished = store
        .get_plan(&job.org, &job.deployment_id, &job.plan_id)
        .await?
        .ok_or("plan")?
        .value;
    assert!(
        finished
            .steps
            .iter()
            .all(|s| s.status == StepStatus::Succeeded),
        "{:?}",
        finished
            .steps
            .iter()
            .map(|s| (&s.step_id, s.status))
            .collect::<Vec<_>>()
    );
    // The steps that ran before were not run again: their records stand.
    for (before, after) in plan.steps.iter().zip(&finished.steps).take(3) {
        assert_eq!(before, after);
    }
    // bootstrap-masters read the recorded instances of `launch:hot`.
    let name = format!("/floe/{}/initial_master_nodes", job.deployment_id);
    let written = parameters.written();
    let masters: Vec<String> = written
        .get(&name)
        .map(|v| v.expose().split(',').map(String::from).collect())
        .unwrap_or_default();
    assert_eq!(masters, recorded.instance_ids);
    assert_eq!(
        finished.steps[3].output["masters"],
        serde_json::to_value(&recorded.instance_ids)?
    );

    let instances = compute.instances(&job.deployment_id).await?;
    assert_eq!(instances.len(), 3, "no instance started twice");
    assert!(instances.iter().all(|i| i.state == InstanceState::Running));
    let d = store
        .get_deployment(&job.org, &job.deployment_id)
        .await?
        .ok_or("deployment")?
        .value;
    assert_eq!(
        (d.status, d.pending_plan),
        (DeploymentStatus::Running, None)
    );
    Ok(())
}

#[tokio::test]
async fn a_failure_after_resuming_an_old_record_undoes_its_recorded_steps() -> TestResult {
    let Resumed {
        store,
        compute,
        parameters,
        steps,
        job,
        _dir,
        ..
    } = resumed().await?;
    let failing = FailAfter {
        inner: steps,
        at: "wait-joined".into(),
    };
    let status = support::run_to_end(&store, Arc::new(failing), &job).await?;
    assert_eq!(status, PlanStatus::Failed);
    // The undos of the steps the old code ran find what those steps made.
    let live = compute
        .instances(&job.deployment_id)
        .await?
        .iter()
        .filter(|i| i.state != InstanceState::Terminated)
        .count();
    assert_eq!(live, 0, "instances left");
    assert!(compute.templates().is_empty(), "{:?}", compute.templates());
    assert!(
        parameters.written().is_empty(),
        "{:?}",
        parameters.written().keys().collect::<Vec<_>>()
    );
    let plan = store
        .get_plan(&job.org, &job.deployment_id, &job.plan_id)
        .await?
        .ok_or("plan")?
        .value;
    assert!(
        plan.steps.iter().all(|s| s.status == StepStatus::Undone),
        "{:?}",
        plan.steps
            .iter()
            .map(|s| (&s.step_id, s.status))
            .collect::<Vec<_>>()
    );
    let d = store
        .get_deployment(&job.org, &job.deployment_id)
        .await?
        .ok_or("deployment")?
        .value;
    assert_eq!(
        (d.status, d.pending_plan),
        (DeploymentStatus::Stopped, None)
    );
    Ok(())
}

#[tokio::test]
async fn an_output_that_is_not_what_its_step_wrote_fails_the_plan_as_invalid() -> TestResult {
    let mut fixture: Value = serde_json::from_str(FIXTURE)?;
    // `template:hot` done with an output no step ever wrote, `launch:hot` next.
    let steps = fixture["plan"]["steps"].as_array_mut().ok_or("steps")?;
    steps[1]["output"] = serde_json::json!({"template": "floe-x"});
    steps[2] = serde_json::json!({"step_id": "launch:hot", "status": "pending", "attempts": 0, "info_log": []});
    fixture["plan"]["cursor"] = 2.into();
    let deployment: Deployment = serde_json::from_value(fixture["deployment"].clone())?;
    let plan: Plan = serde_json::from_value(fixture["plan"].clone())?;
    let store = Store::new(Arc::new(SqliteBackend::in_memory()?));
    store.create_deployment(&deployment, &plan, None).await?;
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig::default()));
    let clusters = Arc::new(SimulatedClusters::new(
        compute.clone(),
        SimulatedClustersConfig::default(),
    ));
    let steps = DeploymentSteps::new(
        StepPorts {
            compute: compute.clone(),
            clusters: clusters.clone(),
            parameters: Arc::new(SimulatedParameters::new(Vec::new())),
            cipher: Arc::new(LocalCipher::from_key(&[7u8; 32])),
            snapshots: floe_snapshots::Snapshotter::new(store.clone(), clusters),
        },
        StepSettings::default(),
    );
    let job = PlanJob {
        org: plan.org.clone(),
        deployment_id: plan.deployment_id.clone(),
        plan_id: plan.id.clone(),
    };
    let status = support::run_to_end(&store, Arc::new(steps), &job).await?;
    assert_eq!(status, PlanStatus::Failed);
    let failed = store
        .get_plan(&job.org, &job.deployment_id, &job.plan_id)
        .await?
        .ok_or("plan")?
        .value;
    let error = failed.error.ok_or("no error")?;
    assert_eq!(error.failure_type, "invalid_plan", "{error:?}");
    assert!(error.message.contains("template:hot"), "{error:?}");
    assert!(compute.instances(&job.deployment_id).await?.is_empty());
    Ok(())
}

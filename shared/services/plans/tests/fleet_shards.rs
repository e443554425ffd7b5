//! The fleet's health check split into shards (issue 36): each sweep hands
//! one job per shard of the fleet index to a worker of its own, and a
//! shard's job checks every running deployment in it. Nothing is kept
//! between sweeps, so a cold worker misses no deployment; fleet copies an
//! older Floe left in the one unsharded partition are moved into their
//! shards by the sweep, and checked by their shard from that sweep on.
//!
//! The probe here is a stand-in that finds every deployment healthy: what
//! is tested is which deployments are checked, not what a check finds
//! (deployment_plans.rs probes simulated clusters).

use async_trait::async_trait;
use floe_compute::ComputeError;
use floe_domain::deployment::{Deployment, DeploymentStatus};
use floe_domain::plan::{Plan, PlanParams};
use floe_plans::health::{Observation, Survey};
use floe_plans::{HealthCheck, HealthConfig, PlanStarter, Probe};
use floe_ports::{HealthShards, LocalQueue, QueueError};
use floe_store::backend::{Kind, Record, RecordKey, Write};
use floe_store::{Backend, FLEET_SHARDS, Store, fleet_shard};
use floe_store_sqlite::SqliteBackend;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Finds every deployment healthy, and counts what it looked at: the
/// deployments probed, and the size of each survey (one per page).
#[derive(Default)]
struct Healthy(Mutex<Vec<String>>, Mutex<Vec<usize>>);

#[async_trait]
impl Probe for Healthy {
    async fn survey(&self, deployments: &[&Deployment]) -> Result<Survey, ComputeError> {
        if let Ok(mut surveys) = self.1.lock() {
            surveys.push(deployments.len());
        }
        Ok(Survey::default())
    }

    async fn probe(&self, d: &Deployment, _survey: &Survey) -> Option<Observation> {
        if let Ok(mut seen) = self.0.lock() {
            seen.push(d.id.clone());
        }
        Some(Observation {
            healthy: true,
            problems: Vec::new(),
            nodes: Vec::new(),
            replacements: Vec::new(),
            surplus: Vec::new(),
            warnings: Vec::new(),
        })
    }
}

/// The queue the sweep hands the shards to: it keeps them for the test to
/// deliver, each to a fresh worker.
#[derive(Default)]
struct Shards(Mutex<Vec<u16>>);

#[async_trait]
impl HealthShards for Shards {
    async fn check_shard(&self, shard: u16) -> Result<(), QueueError> {
        if let Ok(mut sent) = self.0.lock() {
            sent.push(shard);
        }
        Ok(())
    }
}

fn running(org: &str, n: usize) -> Result<Deployment, serde_json::Error> {
    let id = format!("0193a0c4d2b77c3e9a4b{n:012x}");
    serde_json::from_value(serde_json::json!({
        "id": id, "org": org,
        "spec": {"name": format!("d{n}"), "version": "8.15.3", "node_groups": [
            {"id": "hot", "roles": ["master", "data_hot"], "instance_type": "m6g.xlarge",
             "count": 1, "zone_count": 1, "storage": {"size_gb": 20}}]},
        "status": "running", "pending_plan": null,
        "created": "2026-11-29T10:00:00Z", "updated": "2026-11-29T10:00:00Z"
    }))
}

/// A fresh worker's health check: nothing from any earlier one.
fn fresh(store: &Store, probe: Arc<Healthy>) -> HealthCheck {
    let (queue, _jobs) = LocalQueue::new();
    HealthCheck::new(
        store.clone(),
        Arc::new(PlanStarter::new(store.clone(), Arc::new(queue))),
        probe,
        HealthConfig::default(),
    )
}

async fn checked(store: &Store, fleet: &[Deployment]) -> Result<usize, floe_store::StoreError> {
    let mut n = 0;
    for d in fleet {
        let stored = store.get_deployment(&d.org, &d.id).await?;
        n += usize::from(stored.is_some_and(|s| s.value.health.is_some()));
    }
    Ok(n)
}

#[tokio::test]
async fn a_cold_worker_misses_no_deployment_of_a_fleet_of_350() -> TestResult {
    let store = Store::new(Arc::new(SqliteBackend::in_memory()?));
    let mut fleet = Vec::new();
    for n in 0..350 {
        let org = ["acme", "globex", "initech"][n % 3];
        let d = running(org, n)?;
        let plan = Plan::new(
            org,
            &d.id,
            PlanParams::Create(d.spec.clone()),
            "t",
            "t",
            d.created,
        );
        store.create_deployment(&d, &plan, None).await?;
        fleet.push(d);
    }
    // Spread over every shard.
    let used: BTreeSet<u16> = fleet.iter().map(|d| fleet_shard(&d.org, &d.id)).collect();
    assert_eq!(used.len(), usize::from(FLEET_SHARDS));

    // Sweep after sweep, each by a fresh worker: the sweep hands out every
    // shard, and each shard's job, again in a fresh worker, checks its own.
    let probe = Arc::new(Healthy::default());
    for sweep in 0..2 {
        let shards = Arc::new(Shards::default());
        let summary = fresh(&store, probe.clone())
            .with_shards(shards.clone())
            .check()
            .await;
        assert_eq!(summary.shards_sent, usize::from(FLEET_SHARDS));
        assert_eq!(summary.checked, 0, "the sweep itself checks nothing");
        let sent = shards.0.lock().map(|s| s.clone()).unwrap_or_default();
        assert_eq!(sent, (0..FLEET_SHARDS).collect::<Vec<_>>());
        let mut total = 0;
        for shard in sent {
            total += fresh(&store, probe.clone())
                .check_shard(shard)
                .await
                .checked;
        }
        assert_eq!(total, 350, "sweep {sweep}");
        assert_eq!(checked(&store, &fleet).await?, 350);
        let seen = probe
            .0
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default();
        let distinct: BTreeSet<&String> = seen.iter().collect();
        assert_eq!((seen.len(), distinct.len()), (350, 350), "each once");
        // One survey of the instances per page of a shard (each shard
        // fits a page), not one per deployment.
        let surveys = probe
            .1
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default();
        assert_eq!(surveys.len(), usize::from(FLEET_SHARDS), "{surveys:?}");
        assert_eq!(surveys.iter().sum::<usize>(), 350);
    }

    // A deployment that is not running is in its shard but not checked.
    let stopped = &fleet[0];
    let current = store
        .get_deployment(&stopped.org, &stopped.id)
        .await?
        .ok_or("stored")?;
    let mut next = current.value.clone();
    next.status = DeploymentStatus::Stopped;
    store.replace_deployment(&next, &current, None).await?;
    let summary = fresh(&store, probe.clone()).check().await;
    assert_eq!(summary.checked, 349);
    Ok(())
}

#[tokio::test]
async fn fleet_copies_of_an_older_floe_move_into_their_shards_and_are_checked() -> TestResult {
    let backend: Arc<dyn Backend> = Arc::new(SqliteBackend::in_memory()?);
    let store = Store::new(backend.clone());
    let mut fleet = Vec::new();
    for n in 0..350 {
        let d = running("acme", n)?;
        // As a Floe before the shards wrote it: the record, and its copy
        // in the one unsharded partition.
        let body = serde_json::to_string(&d)?;
        let attrs = floe_store::stores::deployment_attrs(&d);
        backend
            .write(vec![
                Write::Create(Record {
                    key: RecordKey::new(&d.org, Kind::Deployment, &d.id),
                    body: body.clone(),
                    version: 3,
                    refs: 0,
                    attrs: attrs.clone(),
                    expires_at: None,
                }),
                Write::Create(Record {
                    key: RecordKey::new("~system", Kind::Fleet, &format!("{}#{}", d.org, d.id)),
                    body,
                    version: 3,
                    refs: 0,
                    attrs,
                    expires_at: None,
                }),
            ])
            .await?;
        fleet.push(d);
    }
    let probe = Arc::new(Healthy::default());
    let summary = fresh(&store, probe.clone()).check().await;
    assert_eq!(summary.moved, 350, "{summary:?}");
    assert_eq!(summary.checked, 350, "{summary:?}");
    assert_eq!(checked(&store, &fleet).await?, 350);
    let left = store
        .list_unsharded_fleet(&floe_store::PageRequest::default())
        .await?;
    assert!(left.items.is_empty());
    // The move is no change of the deployments: their versions stay.
    for d in &fleet {
        let stored = store.get_deployment(&d.org, &d.id).await?.ok_or("stored")?;
        assert_eq!(stored.version, 3);
    }
    let again = fresh(&store, probe).check().await;
    assert_eq!((again.moved, again.checked), (0, 350));
    Ok(())
}

/// A page's survey reads the instances of all its deployments in one
/// listing and their status checks in one call per hundred running
/// instances, whatever the number of deployments; each deployment then
/// sees its own instances only, and one the listing did not name is not
/// judged.
#[tokio::test]
async fn a_page_is_surveyed_in_one_listing_and_a_status_call_per_hundred_instances() -> TestResult {
    use floe_compute::{Compute, LaunchRequest, LaunchTemplateSpec, TAG_DEPLOYMENT, Volume};
    use floe_compute_sim::{SimulatedCompute, SimulatedConfig};
    use std::collections::BTreeMap;

    let compute = SimulatedCompute::new(SimulatedConfig::default());
    compute
        .ensure_launch_template(&LaunchTemplateSpec {
            name: "lt".into(),
            instance_type: "m6g.xlarge".into(),
            arch: floe_domain::catalog::Arch::Arm64,
            user_data: String::new(),
            volume: Volume {
                size_gb: 20,
                volume_type: floe_domain::deployment::VolumeType::Gp3,
                iops: None,
                throughput: None,
            },
            tags: BTreeMap::new(),
            instance_profile: None,
        })
        .await?;
    let mut page = Vec::new();
    for n in 0..40 {
        let d = running("acme", n)?;
        compute
            .launch(&LaunchRequest {
                template_name: "lt".into(),
                count: 3,
                zone: 0,
                client_token: format!("t{n}"),
                tags: BTreeMap::from([(TAG_DEPLOYMENT.to_string(), d.id.clone())]),
            })
            .await?;
        page.push(d);
    }
    let deployments: Vec<&Deployment> = page.iter().collect();
    let survey = Survey::read(&compute, &deployments).await?;
    assert_eq!(compute.calls("instances"), 1);
    // 120 running instances: two status calls of at most a hundred ids
    // on EC2; the simulator takes them in one.
    assert_eq!(compute.calls("status_checks"), 1);
    assert_eq!(floe_compute::describe_calls(40, 120, 120), (1, 2));
    for d in &page {
        let mine = survey.instances(&d.id).ok_or("listed")?;
        assert_eq!(mine.len(), 3);
        assert!(
            mine.iter()
                .all(|i| i.tags.get(TAG_DEPLOYMENT) == Some(&d.id))
        );
    }
    assert!(survey.instances("not-asked-for").is_none());
    Ok(())
}

//! The snapshotter against simulated clusters over real HTTP: one simulated
//! cluster per deployment, following simulated instances, with an `fs`
//! repository in a temporary folder, and (`s3_*`) an `s3` repository on moto.

use chrono::Utc;
use floe_clusters::Clusters;
use floe_clusters_sim::{SimulatedClusters, SimulatedClustersConfig};
use floe_compute::{Compute, LaunchRequest, LaunchTemplateSpec, TAG_DEPLOYMENT, Volume};
use floe_compute_sim::{SimulatedCompute, SimulatedConfig};
use floe_domain::catalog::Arch;
use floe_domain::deployment::{Deployment, DeploymentSpec, DeploymentStatus};
use floe_domain::names::new_resource_id;
use floe_domain::plan::{Plan, PlanParams};
use floe_domain::policy::{Policy, PolicySpec, Retention, Schedule, ScheduleExpression};
use floe_domain::repository::{FsSettings, Repository, RepositorySettings, S3Settings};
use floe_domain::secret::SecretString;
use floe_domain::snapshot::{RunOutcome, SnapshotState};
use floe_elastic::ElasticClient;
use floe_elastic_sim::{S3Access, SimFaults, SnapshotFault};
use floe_snapshots::{SnapshotError, Snapshotter, SnapshotterSettings, repository_registration};
use floe_store::{PageRequest, Store};
use floe_store_sqlite::SqliteBackend;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;
type Fallible<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const ORG: &str = "acme";

struct World {
    store: Store,
    compute: Arc<SimulatedCompute>,
    clusters: Arc<SimulatedClusters>,
    snapshotter: Snapshotter,
    _dir: tempfile::TempDir,
}

fn settings() -> SnapshotterSettings {
    SnapshotterSettings {
        wait: Duration::from_secs(20),
        poll: Duration::from_millis(20),
    }
}

fn world_with(faults: SimFaults, s3: Option<S3Access>) -> Fallible<World> {
    let dir = tempfile::tempdir()?;
    let store = Store::new(Arc::new(SqliteBackend::in_memory()?));
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig::default()));
    let clusters = Arc::new(SimulatedClusters::new(
        compute.clone(),
        SimulatedClustersConfig {
            fs_root: Some(dir.path().to_path_buf()),
            s3,
            faults,
            ..SimulatedClustersConfig::default()
        },
    ));
    let snapshotter = Snapshotter::new(store.clone(), clusters.clone()).with_settings(settings());
    Ok(World {
        store,
        compute,
        clusters,
        snapshotter,
        _dir: dir,
    })
}

fn world(faults: SimFaults) -> Fallible<World> {
    world_with(faults, None)
}

fn fs_repository(name: &str) -> Repository {
    let now = Utc::now();
    Repository {
        org: ORG.into(),
        name: name.into(),
        settings: RepositorySettings::Fs(FsSettings {
            location: name.into(),
            compress: None,
            max_snapshot_bytes_per_sec: Some("500mb".into()),
            max_restore_bytes_per_sec: None,
        }),
        created: now,
        updated: now,
    }
}

fn policy(repository: &str, retention: Option<Retention>) -> Policy {
    let now = Utc::now();
    Policy {
        id: new_resource_id(),
        org: ORG.into(),
        spec: PolicySpec {
            name: "every-30m".into(),
            schedule: Schedule {
                interval: Some("30m".into()),
                cron: None,
                timezone: None,
            },
            snapshot_name: "<floe-{now/d}>".into(),
            repository: repository.into(),
            indices: vec!["logs-*".into()],
            include_global_state: false,
            retention,
            enabled: true,
        },
        schedule_expression: ScheduleExpression {
            expression: "rate(30 minutes)".into(),
            timezone: "UTC".into(),
        },
        created: now,
        updated: now,
    }
}

/// A running deployment with one node, its repository and policy stored,
/// and an index `logs-1` in its cluster.
async fn deployment(w: &World, repo: &Repository, policy: &Policy) -> Fallible<Deployment> {
    w.store.create_repository(repo).await?;
    w.store.create_policy(policy).await?;
    let id = new_resource_id();
    let spec: DeploymentSpec = serde_json::from_value(json!({
        "name": "logs", "version": "8.15.3",
        "node_groups": [{"id": "hot", "roles": ["master", "data_hot"], "instance_type": "m6g.large",
                         "count": 1, "zone_count": 1, "storage": {"size_gb": 20}}],
        "snapshot": {"repository": repo.name, "policies": [policy.id]}
    }))?;
    let now = Utc::now();
    let plan = Plan::new(
        ORG,
        &id,
        PlanParams::Create(spec.clone()),
        "test",
        "tester",
        now,
    );
    let d = Deployment {
        last_drill: None,
        id: id.clone(),
        org: ORG.into(),
        spec,
        status: DeploymentStatus::Running,
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
    w.store.create_deployment(&d, &plan, None).await?;
    w.compute
        .ensure_launch_template(&LaunchTemplateSpec {
            name: format!("lt-{id}"),
            instance_type: "m6g.large".into(),
            arch: Arch::Arm64,
            user_data: String::new(),
            volume: Volume {
                size_gb: 20,
                volume_type: Default::default(),
                iops: None,
                throughput: None,
            },
            tags: BTreeMap::new(),
            instance_profile: None,
        })
        .await?;
    w.compute
        .launch(&LaunchRequest {
            template_name: format!("lt-{id}"),
            count: 1,
            zone: 0,
            client_token: id.clone(),
            tags: BTreeMap::from([(TAG_DEPLOYMENT.to_string(), id.clone())]),
        })
        .await?;
    // Starts the deployment's simulated cluster.
    w.clusters.client(&d, &[]).await?;
    let url = w.clusters.url(&id).await.ok_or("no simulated cluster")?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()?;
    http.put(format!("{url}/logs-1"))
        .json(&json!({"settings": {"number_of_shards": 2, "number_of_replicas": 0}}))
        .send()
        .await?
        .error_for_status()?;
    // No documents: the simulator's document write deadlocks on its own
    // state lock (`index_doc` holds it while `node_count` takes it again),
    // so the index stays empty; its shards are snapshotted all the same.
    Ok(d)
}

async fn es(w: &World, d: &Deployment) -> Fallible<ElasticClient> {
    Ok(w.clusters.client(d, &[]).await?)
}

async fn stored_names(w: &World, d: &Deployment) -> Fallible<Vec<String>> {
    let page = w
        .store
        .list_snapshots(
            ORG,
            &d.id,
            None,
            &PageRequest {
                size: Some(100),
                cursor: None,
            },
        )
        .await?;
    Ok(page.items.into_iter().map(|v| v.value.name).collect())
}

async fn set_status(w: &World, d: &Deployment, status: DeploymentStatus) -> TestResult {
    let previous = w
        .store
        .get_deployment(ORG, &d.id)
        .await?
        .ok_or("deployment")?;
    let mut next = previous.value.clone();
    next.status = status;
    w.store.replace_deployment(&next, &previous, None).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_run_records_the_snapshot_and_retention_trims_to_max_count() -> TestResult {
    let w = world(SimFaults::default())?;
    let repo = fs_repository("main");
    let p = policy(
        "main",
        Some(Retention {
            expire_after: None,
            min_count: None,
            max_count: Some(2),
        }),
    );
    let d = deployment(&w, &repo, &p).await?;

    let first = w.snapshotter.run_scheduled(ORG, &d.id, &p.id).await?;
    assert_eq!(first.outcome, RunOutcome::Snapshot, "{first:?}");
    assert_eq!(first.state, Some(SnapshotState::Success));
    let name = first.snapshot.clone().ok_or("no snapshot name")?;
    let today = Utc::now().format("%Y.%m.%d").to_string();
    assert!(name.starts_with(&format!("floe-{today}-")), "{name}");

    let record = w
        .store
        .get_snapshot(ORG, &d.id, &name)
        .await?
        .ok_or("record")?
        .value;
    assert_eq!(record.repository, "main");
    assert_eq!(record.policy_id.as_deref(), Some(p.id.as_str()));
    assert!(!record.uuid.is_empty());
    assert_eq!(record.indices, vec!["logs-1".to_string()]);
    assert!(
        record.shards.total > 0 && record.shards.failed == 0,
        "{:?}",
        record.shards
    );
    assert!(record.end.is_some() && record.duration_in_millis.is_some());
    assert!(record.size_in_bytes.is_some(), "{record:?}");
    let on_cluster = es(&w, &d).await?.get_snapshot("main", &name).await?;
    assert_eq!(on_cluster.uuid, record.uuid);

    let second = w.snapshotter.run_scheduled(ORG, &d.id, &p.id).await?;
    assert!(second.deleted.is_empty());
    let third = w.snapshotter.run_scheduled(ORG, &d.id, &p.id).await?;
    assert_eq!(third.deleted, vec![name.clone()], "the oldest goes");
    let kept = stored_names(&w, &d).await?;
    assert_eq!(
        kept,
        vec![
            third.snapshot.clone().ok_or("third")?,
            second.snapshot.clone().ok_or("second")?
        ],
        "newest first"
    );
    let mut listed: Vec<String> = es(&w, &d)
        .await?
        .list_snapshots("main", false)
        .await?
        .into_iter()
        .map(|s| s.snapshot)
        .collect();
    listed.sort();
    let mut expected = kept.clone();
    expected.sort();
    assert_eq!(listed, expected, "retention deleted it on the cluster too");

    let run = w
        .store
        .get_policy_run(ORG, &d.id, &p.id)
        .await?
        .ok_or("run state")?
        .value;
    assert_eq!(run.total_snapshots, 3);
    assert_eq!(run.total_deleted, 1);
    assert_eq!(run.consecutive_failures, 0);
    assert!(run.last_success.is_some());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_spares_manual_snapshots_and_the_last_success() -> TestResult {
    let w = world(SimFaults::default())?;
    let repo = fs_repository("main");
    let p = policy(
        "main",
        Some(Retention {
            expire_after: Some("1ms".into()),
            min_count: None,
            max_count: None,
        }),
    );
    let d = deployment(&w, &repo, &p).await?;
    let manual = w
        .snapshotter
        .take_manual(ORG, &d.id, Some("by-hand"), None, true)
        .await?;
    assert_eq!(manual.value.state, SnapshotState::Success);
    let first = w.snapshotter.run_scheduled(ORG, &d.id, &p.id).await?;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let second = w.snapshotter.run_scheduled(ORG, &d.id, &p.id).await?;
    assert_eq!(second.deleted, vec![first.snapshot.clone().ok_or("first")?]);
    let mut kept = stored_names(&w, &d).await?;
    kept.sort();
    let mut expected = vec![
        "by-hand".to_string(),
        second.snapshot.clone().ok_or("second")?,
    ];
    expected.sort();
    assert_eq!(kept, expected);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_skip_and_say_why() -> TestResult {
    let w = world(SimFaults {
        snapshot_delay: Duration::from_millis(800),
        ..SimFaults::default()
    })?;
    let repo = fs_repository("main");
    let p = policy("main", None);
    let d = deployment(&w, &repo, &p).await?;

    // A snapshot already running in the repository.
    let running = w
        .snapshotter
        .take_manual(ORG, &d.id, None, Some(vec!["logs-1".into()]), false)
        .await?;
    assert_eq!(running.value.state, SnapshotState::InProgress);
    let busy = w.snapshotter.run_scheduled(ORG, &d.id, &p.id).await?;
    assert_eq!(busy.outcome, RunOutcome::Skipped);
    assert_eq!(
        busy.reason.as_deref(),
        Some("a snapshot is already running in repository main")
    );
    let again = w
        .snapshotter
        .take_manual(ORG, &d.id, Some("second"), None, false)
        .await;
    assert!(
        matches!(again, Err(SnapshotError::AlreadyRunning { .. })),
        "{again:?}"
    );

    // The running one finishes; a refresh records it.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let done = w.snapshotter.get(ORG, &d.id, &running.value.name).await?;
    assert_eq!(done.value.state, SnapshotState::Success);
    assert!(done.value.size_in_bytes.is_some());

    // Disabled policy.
    let mut disabled = p.clone();
    disabled.spec.enabled = false;
    let previous = w.store.get_policy(ORG, &p.id).await?.ok_or("policy")?;
    w.store.replace_policy(&disabled, &previous).await?;
    let off = w.snapshotter.run_scheduled(ORG, &d.id, &p.id).await?;
    assert_eq!(off.reason.as_deref(), Some("the policy is disabled"));

    // Detached policy: another policy id is not attached.
    let other = policy("main", None);
    w.store.create_policy(&other).await?;
    let detached = w.snapshotter.run_scheduled(ORG, &d.id, &other.id).await?;
    assert_eq!(
        detached.reason.as_deref(),
        Some("the policy is not attached to the deployment")
    );

    // A stopped deployment.
    let previous = w.store.get_policy(ORG, &p.id).await?.ok_or("policy")?;
    w.store.replace_policy(&p, &previous).await?;
    set_status(&w, &d, DeploymentStatus::Stopped).await?;
    let stopped = w.snapshotter.run_scheduled(ORG, &d.id, &p.id).await?;
    assert_eq!(stopped.outcome, RunOutcome::Skipped);
    assert_eq!(
        stopped.reason.as_deref(),
        Some("the deployment is stopped, not running")
    );
    let run = w
        .store
        .get_policy_run(ORG, &d.id, &p.id)
        .await?
        .ok_or("run state")?
        .value;
    assert_eq!(run.last_outcome, RunOutcome::Skipped);
    assert_eq!(
        run.last_skip_reason.as_deref(),
        Some("the deployment is stopped, not running")
    );
    assert_eq!(run.total_snapshots, 0);
    let manual = w
        .snapshotter
        .take_manual(ORG, &d.id, None, None, false)
        .await;
    assert!(
        matches!(manual, Err(SnapshotError::NotRunning { .. })),
        "{manual:?}"
    );

    // Unknown deployment: nothing to record on.
    let gone = w
        .snapshotter
        .run_scheduled(ORG, "0190c4d2b7f07c3e9a4b5c6d7e8f9a0b", &p.id)
        .await?;
    assert_eq!(
        gone.reason.as_deref(),
        Some("the deployment no longer exists")
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_snapshots_are_recorded_with_the_reason_and_counted() -> TestResult {
    let w = world(SimFaults {
        fail_snapshots: Some(SnapshotFault::Failed),
        ..SimFaults::default()
    })?;
    let repo = fs_repository("main");
    let p = policy("main", None);
    let d = deployment(&w, &repo, &p).await?;

    let first = w.snapshotter.run_scheduled(ORG, &d.id, &p.id).await?;
    assert_eq!(first.outcome, RunOutcome::Failed, "{first:?}");
    assert_eq!(first.state, Some(SnapshotState::Failed));
    let reason = first.reason.clone().ok_or("no reason")?;
    let record = w
        .store
        .get_snapshot(ORG, &d.id, &first.snapshot.clone().ok_or("name")?)
        .await?
        .ok_or("record")?
        .value;
    assert_eq!(record.state, SnapshotState::Failed);
    assert_eq!(record.failure.as_deref(), Some(reason.as_str()));
    assert!(!reason.is_empty());

    let second = w.snapshotter.run_scheduled(ORG, &d.id, &p.id).await?;
    assert_eq!(second.reason.as_deref(), Some(reason.as_str()));
    let run = w
        .store
        .get_policy_run(ORG, &d.id, &p.id)
        .await?
        .ok_or("run state")?
        .value;
    assert_eq!(run.consecutive_failures, 2);
    assert_eq!(run.total_failures, 2);
    assert_eq!(run.last_failure.as_deref(), Some(reason.as_str()));
    assert!(run.last_success.is_none());

    // Healthy again: the count of consecutive failures starts over.
    w.clusters.set_faults(&d.id, SimFaults::default()).await;
    let ok = w.snapshotter.run_scheduled(ORG, &d.id, &p.id).await?;
    assert_eq!(ok.outcome, RunOutcome::Snapshot);
    let run = w
        .store
        .get_policy_run(ORG, &d.id, &p.id)
        .await?
        .ok_or("run state")?
        .value;
    assert_eq!((run.consecutive_failures, run.total_failures), (0, 2));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_snapshot_is_left_in_progress_and_finished_later() -> TestResult {
    let w = world(SimFaults {
        snapshot_delay: Duration::from_millis(600),
        ..SimFaults::default()
    })?;
    let repo = fs_repository("main");
    let p = policy("main", None);
    let d = deployment(&w, &repo, &p).await?;
    let hurried = w.snapshotter.clone().with_settings(SnapshotterSettings {
        wait: Duration::from_millis(50),
        poll: Duration::from_millis(10),
    });
    let run = hurried.run_scheduled(ORG, &d.id, &p.id).await?;
    assert_eq!(run.state, Some(SnapshotState::InProgress));
    let name = run.snapshot.ok_or("name")?;
    let stored = w
        .store
        .get_snapshot(ORG, &d.id, &name)
        .await?
        .ok_or("record")?;
    assert_eq!(stored.value.state, SnapshotState::InProgress);
    assert!(stored.value.end.is_none());

    tokio::time::sleep(Duration::from_millis(900)).await;
    let refreshed = w.snapshotter.get(ORG, &d.id, &name).await?;
    assert_eq!(refreshed.value.state, SnapshotState::Success);
    assert!(refreshed.value.end.is_some());
    assert_eq!(
        w.store
            .get_snapshot(ORG, &d.id, &name)
            .await?
            .ok_or("record")?
            .value
            .state,
        SnapshotState::Success,
        "the refresh was written"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_snapshots_validate_their_name_and_delete_cleanly() -> TestResult {
    let w = world(SimFaults::default())?;
    let repo = fs_repository("main");
    let p = policy("main", None);
    let d = deployment(&w, &repo, &p).await?;

    let taken = w
        .snapshotter
        .take_manual(
            ORG,
            &d.id,
            Some("<before-upgrade-{now/d}>"),
            Some(vec!["logs-1".into()]),
            true,
        )
        .await?;
    let name = taken.value.name.clone();
    assert_eq!(
        name,
        format!("before-upgrade-{}", Utc::now().format("%Y.%m.%d"))
    );
    assert_eq!(taken.value.state, SnapshotState::Success);
    assert_eq!(taken.value.policy_id, None);

    let dup = w
        .snapshotter
        .take_manual(ORG, &d.id, Some(&name), None, true)
        .await;
    assert!(
        matches!(dup, Err(SnapshotError::SnapshotExists(_))),
        "{dup:?}"
    );
    for (bad, field) in [
        ("Upper", "name"),
        ("<broken-{now/d}", "name"),
        ("a/b", "name"),
    ] {
        let refused = w
            .snapshotter
            .take_manual(ORG, &d.id, Some(bad), None, true)
            .await;
        assert!(
            matches!(&refused, Err(SnapshotError::Invalid { field: f, .. }) if f == field),
            "{bad}: {refused:?}"
        );
    }
    let refused = w
        .snapshotter
        .take_manual(
            ORG,
            &d.id,
            None,
            Some(vec!["ok".into(), "Bad Index".into()]),
            true,
        )
        .await;
    assert!(
        matches!(&refused, Err(SnapshotError::Invalid { field, .. }) if field == "indices[1]"),
        "{refused:?}"
    );

    w.snapshotter.delete(ORG, &d.id, &name).await?;
    assert!(w.store.get_snapshot(ORG, &d.id, &name).await?.is_none());
    assert!(
        es(&w, &d)
            .await?
            .list_snapshots("main", false)
            .await?
            .is_empty()
    );
    let again = w.snapshotter.delete(ORG, &d.id, &name).await;
    assert!(
        matches!(again, Err(SnapshotError::SnapshotNotFound(_))),
        "{again:?}"
    );

    // Already gone on the cluster: deleting the record still works.
    let other = w
        .snapshotter
        .take_manual(ORG, &d.id, Some("other"), None, true)
        .await?;
    es(&w, &d)
        .await?
        .delete_snapshot("main", &other.value.name)
        .await?;
    w.snapshotter.delete(ORG, &d.id, "other").await?;
    assert!(stored_names(&w, &d).await?.is_empty());

    // No repository on the deployment.
    let previous = w
        .store
        .get_deployment(ORG, &d.id)
        .await?
        .ok_or("deployment")?;
    let mut bare = previous.value.clone();
    bare.spec.snapshot = None;
    w.store.replace_deployment(&bare, &previous, None).await?;
    let none = w
        .snapshotter
        .take_manual(ORG, &d.id, None, None, true)
        .await;
    assert!(
        matches!(none, Err(SnapshotError::NoRepository(_))),
        "{none:?}"
    );
    Ok(())
}

fn moto_endpoint() -> Fallible<String> {
    match std::env::var("FLOE_TEST_AWS_ENDPOINT") {
        Ok(e) if !e.is_empty() => Ok(e),
        _ => Err(
            "FLOE_TEST_AWS_ENDPOINT is not set: the S3 test needs moto; run scripts/test.sh".into(),
        ),
    }
}

fn s3_client(endpoint: &str) -> aws_sdk_s3::Client {
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
        .region(aws_sdk_s3::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_s3::config::Credentials::new(
            "test",
            "test",
            None,
            None,
            "floe-tests",
        ))
        .endpoint_url(endpoint)
        .force_path_style(true)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_snapshots_land_under_base_path_and_a_second_cluster_sees_them() -> TestResult {
    let endpoint = moto_endpoint()?;
    let s3 = s3_client(&endpoint);
    let bucket = format!("floe-snap-{}", &new_resource_id()[16..]);
    s3.create_bucket().bucket(&bucket).send().await?;
    let access = S3Access {
        endpoint_url: Some(endpoint.clone()),
        region: "us-east-1".into(),
        access_key: "test".into(),
        secret_key: SecretString::new("test"),
        force_path_style: true,
    };
    let w = world_with(SimFaults::default(), Some(access.clone()))?;
    let now = Utc::now();
    let repo = Repository {
        org: ORG.into(),
        name: "shared".into(),
        settings: RepositorySettings::S3(S3Settings {
            bucket: bucket.clone(),
            base_path: Some("deployments/logs".into()),
            path_style_access: Some(true),
            max_snapshot_bytes_per_sec: Some("200mb".into()),
            ..S3Settings::default()
        }),
        created: now,
        updated: now,
    };
    let p = policy("shared", None);
    let d = deployment(&w, &repo, &p).await?;
    let run = w.snapshotter.run_scheduled(ORG, &d.id, &p.id).await?;
    assert_eq!(run.state, Some(SnapshotState::Success), "{run:?}");
    let name = run.snapshot.ok_or("name")?;
    let uuid = w
        .store
        .get_snapshot(ORG, &d.id, &name)
        .await?
        .ok_or("record")?
        .value
        .uuid;

    let objects = s3.list_objects_v2().bucket(&bucket).send().await?;
    let keys: Vec<&str> = objects.contents().iter().filter_map(|o| o.key()).collect();
    assert!(!keys.is_empty());
    let own = format!("deployments/logs/{}/", d.id);
    assert!(
        keys.iter().all(|k| k.starts_with(&own)),
        "everything under base_path, in the deployment's own folder: {keys:?}"
    );
    assert!(
        keys.iter().any(|k| k.contains(&uuid)),
        "the snapshot's own files: {keys:?}"
    );

    // Another deployment's cluster registers the same repository read-only
    // (a clone) and sees the snapshot.
    let other = floe_elastic_sim::SimulatedCluster::start(
        floe_elastic_sim::SimConfig::new("clone").with_s3(access),
    )
    .await?;
    let es2 = ElasticClient::new(other.url(), None, Duration::from_secs(30))?;
    es2.put_repository("shared", &repository_registration(&repo, &d.id, true))
        .await?;
    let seen = es2.get_snapshot("shared", &name).await?;
    assert_eq!(seen.uuid, uuid);
    other.shutdown().await?;
    Ok(())
}

/// Local mode with a controllable clock: the in-process scheduler holds the
/// policy's one schedule (reconciled from the records), fires it every 30
/// minutes of the clock's time, each firing takes a snapshot through the
/// snapshotter, and retention keeps the newest three.
#[tokio::test]
async fn a_30_minute_policy_fires_on_time_in_local_mode_and_retention_trims() -> TestResult {
    use floe_schedules::{Clock, LocalScheduler, ManualClock};

    let w = world(SimFaults::default())?;
    let repo = fs_repository("main");
    let p = policy(
        "main",
        Some(Retention {
            expire_after: None,
            min_count: None,
            max_count: Some(3),
        }),
    );
    let d = deployment(&w, &repo, &p).await?;

    let start = chrono::DateTime::parse_from_rfc3339("2026-11-30T02:00:00Z")?.with_timezone(&Utc);
    let clock = Arc::new(ManualClock::new(start));
    let scheduler = LocalScheduler::new(clock.clone());
    let summary = floe_schedules::reconcile_deployment(&w.store, &scheduler, ORG, &d.id).await?;
    assert_eq!(summary.created, 1, "{summary:?}");

    // Every firing due by the clock's now, with the time it was due; each
    // takes the snapshot, as local mode's firing loop does.
    let mut fired = Vec::new();
    let mut run_due = async |until| -> TestResult {
        for firing in scheduler.due_firings(until) {
            fired.push(firing.at);
            let floe_schedules::ScheduledJob::Snapshot(job) = firing.job else {
                return Err("a policy's schedule fired a drill".into());
            };
            w.snapshotter
                .run_scheduled(&job.org, &job.deployment_id, &job.policy_id)
                .await?;
        }
        Ok(())
    };
    // A rate schedule fires when it is created, then every 30 minutes.
    run_due(clock.now()).await?;
    clock.advance(Duration::from_secs(29 * 60));
    run_due(clock.now()).await?;
    clock.advance(Duration::from_secs(91 * 60));
    run_due(clock.now()).await?;
    let expected: Vec<chrono::DateTime<Utc>> = (0..5)
        .map(|i| start + chrono::Duration::minutes(30 * i))
        .collect();
    assert_eq!(
        fired, expected,
        "02:00 (created), 02:30, 03:00, 03:30, 04:00"
    );
    let next: Vec<chrono::DateTime<Utc>> = scheduler
        .schedules()
        .iter()
        .filter_map(|s| scheduler.next_firing(&s.name))
        .collect();
    assert_eq!(next, vec![start + chrono::Duration::minutes(150)]);

    // Five snapshots were taken; retention kept the newest three.
    let run = w
        .store
        .get_policy_run(ORG, &d.id, &p.id)
        .await?
        .ok_or("run state")?
        .value;
    assert_eq!((run.total_snapshots, run.total_deleted), (5, 2), "{run:?}");
    assert_eq!(stored_names(&w, &d).await?.len(), 3);
    assert_eq!(
        es(&w, &d).await?.list_snapshots("main", false).await?.len(),
        3,
        "retention deleted on the cluster too"
    );
    Ok(())
}

/// Two readers finish one snapshot's record at once (a listing's refresh
/// and the run that took it): the one that loses the write reads the
/// winner's record and answers with it, never a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_loses_the_write_answers_the_winners_record() -> TestResult {
    let w = world(SimFaults {
        snapshot_delay: Duration::from_millis(300),
        ..SimFaults::default()
    })?;
    let repo = fs_repository("main");
    let p = policy("main", None);
    let d = deployment(&w, &repo, &p).await?;
    let taken = w
        .snapshotter
        .take_manual(ORG, &d.id, Some("raced"), None, false)
        .await?;
    assert_eq!(taken.value.state, SnapshotState::InProgress);
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The winner: another reader wrote the finished record.
    let winner = w.snapshotter.get(ORG, &d.id, "raced").await?;
    assert_eq!(winner.value.state, SnapshotState::Success);
    // The loser still holds the IN_PROGRESS record it read before.
    let late = w.snapshotter.refresh(&d, taken).await;
    assert_eq!(late.value.state, SnapshotState::Success, "{:?}", late.value);
    assert_eq!(late.version, winner.version);
    Ok(())
}

/// Issue 12, defect 3 (a): a snapshot a clone mounts is pinned. Retention
/// keeps it, says so, and deletes nothing else in its place; a delete is
/// refused naming the clone; once the clone is gone it goes as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_keeps_a_snapshot_a_clone_pins_and_says_so() -> TestResult {
    use floe_domain::restore::{CloneSource, RestoreMode};
    let w = world(SimFaults::default())?;
    let repo = fs_repository("main");
    let p = policy(
        "main",
        Some(Retention {
            expire_after: None,
            min_count: None,
            max_count: Some(1),
        }),
    );
    let d = deployment(&w, &repo, &p).await?;
    let first = w.snapshotter.run_scheduled(ORG, &d.id, &p.id).await?;
    let pinned = first.snapshot.clone().ok_or("first")?;
    let record = w
        .store
        .get_snapshot(ORG, &d.id, &pinned)
        .await?
        .ok_or("record")?
        .value;

    // A mount clone of it, as the API records one.
    let clone_id = new_resource_id();
    let spec: DeploymentSpec = serde_json::from_value(json!({
        "name": "mounted", "version": "8.15.3",
        "node_groups": [{"id": "hot", "roles": ["master", "data_hot"], "instance_type": "m6g.large",
                         "count": 1, "zone_count": 1, "storage": {"size_gb": 20}}]
    }))?;
    let now = Utc::now();
    let clone = Deployment {
        last_drill: None,
        id: clone_id.clone(),
        org: ORG.into(),
        spec: spec.clone(),
        status: DeploymentStatus::Running,
        pending_plan: None,
        access: None,
        password_to_apply: None,
        endpoint: None,
        endpoint_moving_to: None,
        clone_source: Some(CloneSource {
            source_deployment_id: d.id.clone(),
            repository: "main".into(),
            registered_as: "main".into(),
            snapshot: pinned.clone(),
            snapshot_sort_millis: record.sort_millis,
            mode: RestoreMode::Mount,
            pinned: true,
            snapshot_version: None,
            license: None,
        }),
        health: None,
        created: now,
        updated: now,
        license: None,
    };
    let plan = Plan::new(
        ORG,
        &clone_id,
        PlanParams::Create(spec),
        "test",
        "tester",
        now,
    );
    w.store.create_deployment(&clone, &plan, None).await?;

    let second = w.snapshotter.run_scheduled(ORG, &d.id, &p.id).await?;
    assert!(second.deleted.is_empty(), "{second:?}");
    assert_eq!(second.retention_skipped.len(), 1, "{second:?}");
    assert!(
        second.retention_skipped[0].starts_with(&pinned)
            && second.retention_skipped[0].contains(&clone_id),
        "{second:?}"
    );
    let third = w.snapshotter.run_scheduled(ORG, &d.id, &p.id).await?;
    assert_eq!(
        third.deleted,
        vec![second.snapshot.clone().ok_or("second")?],
        "only what the rules drop: {third:?}"
    );
    assert_eq!(
        stored_names(&w, &d).await?,
        vec![third.snapshot.clone().ok_or("third")?, pinned.clone()]
    );
    assert!(
        es(&w, &d)
            .await?
            .get_snapshot("main", &pinned)
            .await
            .is_ok(),
        "still in the repository"
    );
    let run = w
        .store
        .get_policy_run(ORG, &d.id, &p.id)
        .await?
        .ok_or("run state")?
        .value;
    assert_eq!(run.last_retention_skipped.len(), 1, "{run:?}");

    match w.snapshotter.delete(ORG, &d.id, &pinned).await {
        Err(SnapshotError::Pinned { snapshot, by }) => {
            assert_eq!(snapshot, pinned);
            assert!(by.iter().any(|b| b.contains(&clone_id)), "{by:?}");
        }
        other => return Err(format!("not refused: {other:?}").into()),
    }
    assert!(
        es(&w, &d)
            .await?
            .get_snapshot("main", &pinned)
            .await
            .is_ok()
    );

    // The clone gone, the snapshot is the policy's like any other.
    let stored = w
        .store
        .get_deployment(ORG, &clone_id)
        .await?
        .ok_or("clone")?;
    w.store.delete_deployment(&stored).await?;
    let fourth = w.snapshotter.run_scheduled(ORG, &d.id, &p.id).await?;
    assert!(fourth.retention_skipped.is_empty(), "{fourth:?}");
    assert!(fourth.deleted.contains(&pinned), "{fourth:?}");
    Ok(())
}

/// Issue 12, defect 3 (c): a policy whose repository is the name a mount
/// clone reads its source's path under (read-only) never registers that
/// name at the clone's own path: the run skips and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_on_a_mount_clones_source_registration_skips() -> TestResult {
    use floe_domain::restore::{CloneSource, RestoreMode};
    let w = world(SimFaults::default())?;
    let repo = fs_repository("main");
    let p = policy("main", None);
    let d = deployment(&w, &repo, &p).await?;
    let previous = w
        .store
        .get_deployment(ORG, &d.id)
        .await?
        .ok_or("deployment")?;
    let mut clone = previous.value.clone();
    clone.clone_source = Some(CloneSource {
        source_deployment_id: new_resource_id(),
        repository: "main".into(),
        registered_as: "main".into(),
        snapshot: "nightly-1".into(),
        snapshot_sort_millis: 0,
        mode: RestoreMode::Mount,
        pinned: false,
        snapshot_version: None,
        license: None,
    });
    w.store.replace_deployment(&clone, &previous, None).await?;
    let run = w.snapshotter.run_scheduled(ORG, &d.id, &p.id).await?;
    assert_eq!(run.outcome, RunOutcome::Skipped, "{run:?}");
    assert!(
        run.reason
            .as_deref()
            .is_some_and(|r| r.contains("read-only registration")),
        "{run:?}"
    );
    assert!(stored_names(&w, &d).await?.is_empty());
    Ok(())
}

/// Issue 12, defect 13: each snapshot's record keeps the place it was
/// taken at. Once its repository has moved (one that nothing used, moved,
/// then attached again), a snapshot from the old place is not deleted at
/// the new one, where it is not: a delete answers `Moved`, and retention
/// keeps it and says why, instead of counting it deleted and dropping the
/// record of data left at the old place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_taken_before_its_repository_moved_is_kept_and_said_so() -> TestResult {
    let w = world(SimFaults::default())?;
    let repo = fs_repository("main");
    let p = policy(
        "main",
        Some(Retention {
            expire_after: None,
            min_count: None,
            max_count: Some(1),
        }),
    );
    let d = deployment(&w, &repo, &p).await?;
    let first = w.snapshotter.run_scheduled(ORG, &d.id, &p.id).await?;
    let old = first.snapshot.clone().ok_or("first")?;
    let record = w
        .store
        .get_snapshot(ORG, &d.id, &old)
        .await?
        .ok_or("record")?
        .value;
    let old_place = format!("fs:main/{}", d.id);
    assert_eq!(record.place.as_deref(), Some(old_place.as_str()));

    let stored = w
        .store
        .get_repository(ORG, "main")
        .await?
        .ok_or("repository")?;
    let mut moved = stored.value.clone();
    moved.settings = RepositorySettings::Fs(FsSettings {
        location: "elsewhere".into(),
        compress: None,
        max_snapshot_bytes_per_sec: None,
        max_restore_bytes_per_sec: None,
    });
    w.store.replace_repository(&moved, stored.version).await?;

    match w.snapshotter.delete(ORG, &d.id, &old).await {
        Err(SnapshotError::Moved {
            snapshot,
            taken_at,
            now_at,
        }) => {
            assert_eq!(snapshot, old);
            assert_eq!(taken_at, old_place);
            assert_eq!(now_at, format!("fs:elsewhere/{}", d.id));
        }
        other => return Err(format!("deleted at the new place: {other:?}").into()),
    }
    assert!(w.store.get_snapshot(ORG, &d.id, &old).await?.is_some());

    // The next run takes its snapshot at the new place; retention would
    // drop the old one (max_count 1) but keeps it, saying why.
    let second = w.snapshotter.run_scheduled(ORG, &d.id, &p.id).await?;
    let new = second.snapshot.clone().ok_or("second")?;
    assert!(second.deleted.is_empty(), "{second:?}");
    assert_eq!(second.retention_skipped.len(), 1, "{second:?}");
    assert!(
        second.retention_skipped[0].starts_with(&old)
            && second.retention_skipped[0].contains(&old_place),
        "{second:?}"
    );
    let record = w
        .store
        .get_snapshot(ORG, &d.id, &new)
        .await?
        .ok_or("new record")?
        .value;
    assert_eq!(
        record.place,
        Some(format!("fs:elsewhere/{}", d.id)),
        "taken at the new place"
    );
    assert_eq!(stored_names(&w, &d).await?, vec![new, old]);
    Ok(())
}

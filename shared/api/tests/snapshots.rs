//! The snapshot routes through the real router, against a simulated cluster
//! per deployment (over HTTP) with an `fs` repository in a temporary folder.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::Utc;
use floe_api::{ApiState, app};
use floe_auth::{KeySource, Role, Verifier, VerifierConfig, issue_hs256};
use floe_clusters::Clusters;
use floe_clusters_sim::{SimulatedClusters, SimulatedClustersConfig};
use floe_compute::{Compute, LaunchRequest, LaunchTemplateSpec, TAG_DEPLOYMENT, Volume};
use floe_compute_sim::{SimulatedCompute, SimulatedConfig};
use floe_domain::catalog::Arch;
use floe_domain::deployment::{Deployment, DeploymentSpec, DeploymentStatus};
use floe_domain::names::new_resource_id;
use floe_domain::plan::{Plan, PlanParams};
use floe_domain::policy::{Policy, PolicySpec, Schedule, ScheduleExpression};
use floe_domain::repository::{EndpointPolicy, FsSettings, Repository, RepositorySettings};
use floe_domain::snapshot::{SnapshotRecord, SnapshotShards, SnapshotState};
use floe_elastic_sim::SimFaults;
use floe_secrets::LocalCipher;
use floe_store::Store;
use floe_store_sqlite::SqliteBackend;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;

type TestResult = Result<(), Box<dyn std::error::Error>>;
type Fallible<T> = Result<T, Box<dyn std::error::Error>>;

const SECRET: &[u8] = b"snapshot-route-tests-hs256-secret-0123456789";
const ORG: &str = "acme";

struct Api {
    app: axum::Router,
    store: Store,
    deployment: Deployment,
    _dir: tempfile::TempDir,
}

fn token(role: Role) -> String {
    issue_hs256(
        SECRET,
        "floe-local",
        "floe-api",
        "tester",
        ORG,
        &[role],
        Duration::from_secs(600),
    )
    .unwrap_or_default()
}

/// A running deployment with repository `main` and a 30-minute policy,
/// whose simulated cluster keeps each snapshot running for `delay`.
async fn api(delay: Duration) -> Fallible<Api> {
    let dir = tempfile::tempdir()?;
    let store = Store::new(Arc::new(SqliteBackend::in_memory()?));
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig::default()));
    let clusters = Arc::new(SimulatedClusters::new(
        compute.clone(),
        SimulatedClustersConfig {
            fs_root: Some(dir.path().to_path_buf()),
            data_root: None,
            s3: None,
            faults: SimFaults {
                snapshot_delay: delay,
                ..SimFaults::default()
            },
        },
    ));
    let now = Utc::now();
    store
        .create_repository(&Repository {
            org: ORG.into(),
            name: "main".into(),
            settings: RepositorySettings::Fs(FsSettings {
                location: "main".into(),
                compress: None,
                max_snapshot_bytes_per_sec: None,
                max_restore_bytes_per_sec: None,
            }),
            created: now,
            updated: now,
        })
        .await?;
    let policy = Policy {
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
            repository: "main".into(),
            indices: vec![],
            include_global_state: true,
            retention: None,
            enabled: true,
        },
        schedule_expression: ScheduleExpression {
            expression: "rate(30 minutes)".into(),
            timezone: "UTC".into(),
        },
        created: now,
        updated: now,
    };
    store.create_policy(&policy).await?;
    let id = new_resource_id();
    let spec: DeploymentSpec = serde_json::from_value(json!({
        "name": "logs", "version": "8.15.3",
        "node_groups": [{"id": "hot", "roles": ["master", "data_hot"], "instance_type": "m6g.large",
                         "count": 1, "zone_count": 1, "storage": {"size_gb": 20}}],
        "snapshot": {"repository": "main", "policies": [policy.id]}
    }))?;
    let deployment = Deployment {
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
    let plan = Plan::new(
        ORG,
        &id,
        PlanParams::Create(deployment.spec.clone()),
        "test",
        "tester",
        now,
    );
    store.create_deployment(&deployment, &plan, None).await?;
    compute
        .ensure_launch_template(&LaunchTemplateSpec {
            name: "lt".into(),
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
    compute
        .launch(&LaunchRequest {
            template_name: "lt".into(),
            count: 1,
            zone: 0,
            client_token: id.clone(),
            tags: BTreeMap::from([(TAG_DEPLOYMENT.to_string(), id.clone())]),
        })
        .await?;
    clusters.client(&deployment, &[]).await?;
    let verifier = Verifier::new(VerifierConfig {
        issuer: "floe-local".into(),
        audience: "floe-api".into(),
        keys: KeySource::Hs256Secret(SECRET.to_vec()),
        leeway_secs: 0,
    })?;
    let state = ApiState::new(
        floe_app::App {
            store: store.clone(),
            cipher: Arc::new(LocalCipher::from_key(&[7u8; 32])),
            endpoint_policy: EndpointPolicy::default(),
            endpoints: floe_domain::access::EndpointNaming::NodeAddress,
            queue: Arc::new(floe_plans::LocalQueue::new().0),
            clusters,
            schedules: Arc::new(floe_schedules::ReconcileNow::new(
                store.clone(),
                Arc::new(floe_schedules::LocalScheduler::new(Arc::new(
                    floe_schedules::SystemClock,
                ))),
            )),
            resolver: Arc::new(floe_ports::FixedResolver::default()),
            views: Default::default(),
            hashing_keys: Default::default(),
        },
        Arc::new(verifier),
    );
    Ok(Api {
        app: app(state),
        store,
        deployment,
        _dir: dir,
    })
}

impl Api {
    async fn call(
        &self,
        role: Role,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Fallible<(StatusCode, Value)> {
        let path = path.replace("{dep}", &self.deployment.id);
        let req = Request::builder()
            .method(method)
            .uri(&path)
            .header("authorization", format!("Bearer {}", token(role)));
        let req = match body {
            Some(b) => req
                .header("content-type", "application/json")
                .body(Body::from(serde_json::to_vec(&b)?))?,
            None => req.body(Body::empty())?,
        };
        let res = self.app.clone().oneshot(req).await?;
        let status = res.status();
        let bytes = res.into_body().collect().await?.to_bytes();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)?
        };
        assert!(status.as_u16() < 500, "{method} {path}: {status} {body}");
        Ok((status, body))
    }

    async fn set_status(&self, status: DeploymentStatus) -> TestResult {
        let previous = self
            .store
            .get_deployment(ORG, &self.deployment.id)
            .await?
            .ok_or("deployment")?;
        let mut next = previous.value.clone();
        next.status = status;
        self.store
            .replace_deployment(&next, &previous, None)
            .await?;
        Ok(())
    }
}

fn code(body: &Value) -> &str {
    body["errors"][0]["code"].as_str().unwrap_or("")
}

const SNAPSHOTS: &str = "/api/v1/deployments/{dep}/snapshots";

#[tokio::test]
async fn take_poll_list_and_delete() -> TestResult {
    let api = api(Duration::from_millis(400)).await?;
    let (status, started) = api
        .call(
            Role::DeploymentManager,
            "POST",
            SNAPSHOTS,
            Some(json!({"name": "first", "indices": ["logs-*"]})),
        )
        .await?;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    assert_eq!(started["snapshot"], "first");
    assert_eq!(started["state"], "IN_PROGRESS");
    assert_eq!(started["repository"], "main");

    let (status, busy) = api
        .call(Role::DeploymentManager, "POST", SNAPSHOTS, None)
        .await?;
    assert_eq!(status, StatusCode::CONFLICT, "{busy}");
    assert_eq!(code(&busy), "snapshots.concurrent_snapshot");

    tokio::time::sleep(Duration::from_millis(700)).await;
    let (status, polled) = api
        .call(
            Role::DeploymentViewer,
            "GET",
            &format!("{SNAPSHOTS}/first"),
            None,
        )
        .await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(polled["state"], "SUCCESS", "{polled}");
    assert!(
        polled["end_time"].is_string() && polled["uuid"].as_str().is_some_and(|u| !u.is_empty())
    );

    let (status, waited) = api
        .call(
            Role::DeploymentManager,
            "POST",
            &format!("{SNAPSHOTS}?wait_for_completion=true"),
            Some(json!({"name": "<second-{now/d}>"})),
        )
        .await?;
    assert_eq!(status, StatusCode::OK, "{waited}");
    assert_eq!(waited["state"], "SUCCESS");
    let second = format!("second-{}", Utc::now().format("%Y.%m.%d"));
    assert_eq!(waited["snapshot"], second.as_str());

    let (status, dup) = api
        .call(
            Role::DeploymentManager,
            "POST",
            SNAPSHOTS,
            Some(json!({"name": "first"})),
        )
        .await?;
    assert_eq!(
        (status, code(&dup)),
        (StatusCode::CONFLICT, "snapshots.snapshot_exists")
    );

    let (status, list) = api
        .call(Role::DeploymentViewer, "GET", SNAPSHOTS, None)
        .await?;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = list["snapshots"]
        .as_array()
        .ok_or("snapshots")?
        .iter()
        .filter_map(|s| s["snapshot"].as_str())
        .collect();
    assert_eq!(names, [second.as_str(), "first"], "newest first");
    assert_eq!(list["count"], 2);
    assert_eq!(list["latest_status"], "SUCCESS");
    assert_eq!(list["latest_successful_end_time"], waited["end_time"]);
    assert_eq!(list["healthy"], true);

    let (_, page1) = api
        .call(
            Role::DeploymentViewer,
            "GET",
            &format!("{SNAPSHOTS}?size=1"),
            None,
        )
        .await?;
    let cursor = page1["next_cursor"].as_str().ok_or("next_cursor")?;
    let (_, page2) = api
        .call(
            Role::DeploymentViewer,
            "GET",
            &format!("{SNAPSHOTS}?size=1&cursor={cursor}"),
            None,
        )
        .await?;
    assert_eq!(page2["snapshots"][0]["snapshot"], "first");
    assert!(
        page2.get("count").is_none(),
        "the summary is on the first page only"
    );

    let (status, body) = api
        .call(
            Role::DeploymentViewer,
            "DELETE",
            &format!("{SNAPSHOTS}/first"),
            None,
        )
        .await?;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::FORBIDDEN, "auth.forbidden")
    );
    let (status, _) = api
        .call(
            Role::DeploymentManager,
            "DELETE",
            &format!("{SNAPSHOTS}/first"),
            None,
        )
        .await?;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, gone) = api
        .call(
            Role::DeploymentViewer,
            "GET",
            &format!("{SNAPSHOTS}/first"),
            None,
        )
        .await?;
    assert_eq!(
        (status, code(&gone)),
        (StatusCode::NOT_FOUND, "snapshots.snapshot_not_found")
    );
    Ok(())
}

#[tokio::test]
async fn refused_when_not_running_or_without_a_repository() -> TestResult {
    let api = api(Duration::ZERO).await?;
    api.set_status(DeploymentStatus::Stopped).await?;
    let (status, body) = api
        .call(Role::DeploymentManager, "POST", SNAPSHOTS, None)
        .await?;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "deployments.not_running")
    );

    let previous = api
        .store
        .get_deployment(ORG, &api.deployment.id)
        .await?
        .ok_or("deployment")?;
    let mut bare = previous.value.clone();
    bare.status = DeploymentStatus::Running;
    bare.spec.snapshot = None;
    api.store.replace_deployment(&bare, &previous, None).await?;
    let (status, body) = api
        .call(Role::DeploymentManager, "POST", SNAPSHOTS, None)
        .await?;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "snapshots.no_repository")
    );

    let (status, body) = api
        .call(
            Role::DeploymentManager,
            "POST",
            "/api/v1/deployments/0190c4d2b7f07c3e9a4b5c6d7e8f9a0b/snapshots",
            None,
        )
        .await?;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::NOT_FOUND, "deployments.deployment_not_found")
    );
    Ok(())
}

#[tokio::test]
async fn unhealthy_when_the_latest_failed_and_no_success_is_recent() -> TestResult {
    let api = api(Duration::ZERO).await?;
    let record = |name: &str, state: SnapshotState, hours_ago: i64| {
        let start = Utc::now() - chrono::TimeDelta::hours(hours_ago);
        SnapshotRecord {
            org: ORG.into(),
            deployment_id: api.deployment.id.clone(),
            repository: "main".into(),
            name: name.into(),
            uuid: "u".into(),
            state,
            start,
            end: Some(start),
            duration_in_millis: Some(0),
            indices: vec![],
            shards: SnapshotShards::default(),
            size_in_bytes: None,
            policy_id: None,
            failure: (state == SnapshotState::Failed).then(|| "disk full".to_string()),
            sort_millis: start.timestamp_millis(),
            updated: start,
            deleting: None,
            place: None,
            missing: None,
            document_counts: None,
        }
    };
    api.store
        .create_snapshot(&record("old-ok", SnapshotState::Success, 5))
        .await?;
    api.store
        .create_snapshot(&record("new-bad", SnapshotState::Failed, 2))
        .await?;
    let (_, list) = api
        .call(Role::DeploymentViewer, "GET", SNAPSHOTS, None)
        .await?;
    assert_eq!(list["latest_status"], "FAILED");
    assert_eq!(
        list["healthy"], false,
        "last success 5h ago, policy every 30m: {list}"
    );
    assert_eq!(list["snapshots"][0]["failure"], "disk full");

    // A success within twice the interval makes it healthy again, even
    // though the newest finished one failed.
    api.store
        .create_snapshot(&record("recent-ok", SnapshotState::Success, 0))
        .await?;
    api.store
        .create_snapshot(&{
            let mut r = record("newest-bad", SnapshotState::Failed, 0);
            r.start += chrono::TimeDelta::seconds(1);
            r.sort_millis = r.start.timestamp_millis();
            r
        })
        .await?;
    let (_, list) = api
        .call(Role::DeploymentViewer, "GET", SNAPSHOTS, None)
        .await?;
    assert_eq!(list["latest_status"], "FAILED");
    assert_eq!(list["healthy"], true, "{list}");
    assert_eq!(list["count"], 4);
    Ok(())
}

//! Benchmark (not a test): the time from a clone request to a running clone
//! on simulated compute with zero delays, restoring and mounting, from a
//! source with 10 and with 1,000 indices. Printed next to what the plan
//! cannot avoid, measured in the same run: the bare store writes of such a
//! plan, and the bare cluster calls (register the repository read-only,
//! restore or mount, read the recoveries until done) against a fresh
//! simulated cluster. A mount clone runs on the trial it asks for
//! (`mount`), or on the organization's platform license (`mount-pl`: its
//! plan installs the license instead of starting the trial).
//! Run: `cargo bench --workspace --bench clone`.

mod support;

use axum::body::Body;
use axum::http::Request;
use chrono::Utc;
use floe_api::{ApiState, app};
use floe_auth::Role;
use floe_clusters_sim::{SimulatedClusters, SimulatedClustersConfig};
use floe_compute_sim::{SimulatedCompute, SimulatedConfig};
use floe_domain::plan::{Plan, PlanParams};
use floe_domain::repository::{EndpointPolicy, FsSettings, Repository, RepositorySettings};
use floe_elastic::{ElasticClient, MountRequest, MountStorage, RestoreRequest};
use floe_elastic_sim::{SimConfig, SimulatedCluster};
use floe_plans::engine::EngineConfig;
use floe_plans::{DeploymentSteps, Engine, LocalQueue, StepSettings};
use floe_secrets::LocalCipher;
use floe_store::Store;
use floe_store_sqlite::SqliteBackend;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tower::ServiceExt;

type Fallible<T> = Result<T, Box<dyn std::error::Error>>;

const ORG: &str = "bench";

struct World {
    app: axum::Router,
    store: Store,
    clusters: Arc<SimulatedClusters>,
    http: reqwest::Client,
    token: String,
    root: std::path::PathBuf,
}

impl World {
    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Fallible<Value> {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header("authorization", format!("Bearer {}", self.token));
        let req = match body {
            Some(b) => req
                .header("content-type", "application/json")
                .body(Body::from(serde_json::to_vec(&b)?))?,
            None => req.body(Body::empty())?,
        };
        let res = self.app.clone().oneshot(req).await?;
        let status = res.status();
        let bytes = res.into_body().collect().await?.to_bytes();
        let body: Value = serde_json::from_slice(&bytes)?;
        if !status.is_success() {
            return Err(format!("{method} {path}: {status} {body}").into());
        }
        Ok(body)
    }

    /// Polls (every 200 µs) until the deployment has no pending plan.
    async fn settled(&self, id: &str) -> Fallible<Value> {
        loop {
            let d = self
                .call("GET", &format!("/api/v1/deployments/{id}"), None)
                .await?;
            if d["plans"].get("pending").is_none() {
                return Ok(d);
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }
}

async fn world(root: &std::path::Path) -> Fallible<World> {
    let store = Store::new(Arc::new(SqliteBackend::open(&root.join("bench.db"))?));
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig::default()));
    let clusters = Arc::new(SimulatedClusters::new(
        compute.clone(),
        SimulatedClustersConfig {
            fs_root: Some(root.join("repositories")),
            ..SimulatedClustersConfig::default()
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
    let steps = Arc::new(DeploymentSteps::new(
        floe_plans::StepPorts {
            compute: compute.clone(),
            clusters: clusters.clone(),
            parameters: Arc::new(floe_compute_sim::SimulatedParameters::new(Vec::new())),
            cipher: Arc::new(LocalCipher::from_key(&[5u8; 32])),
            snapshots: floe_snapshots::Snapshotter::new(store.clone(), clusters.clone()),
        },
        StepSettings {
            poll: Duration::ZERO,
            ..StepSettings::default()
        },
    ));
    let (queue, mut jobs) = LocalQueue::new();
    let queue = Arc::new(queue);
    let engine = Arc::new(Engine::new(
        store.clone(),
        queue.clone(),
        steps,
        "bench",
        EngineConfig::default(),
    ));
    tokio::spawn(async move {
        while let Some(job) = jobs.recv().await {
            let engine = engine.clone();
            tokio::spawn(async move {
                let _ = engine.run(&job).await;
            });
        }
    });
    let state = ApiState::new(
        floe_app::App {
            store: store.clone(),
            cipher: Arc::new(LocalCipher::from_key(&[5u8; 32])),
            endpoint_policy: EndpointPolicy::default(),
            endpoints: floe_domain::access::EndpointNaming::NodeAddress,
            queue,
            clusters: clusters.clone(),
            schedules: Arc::new(floe_schedules::ReconcileNow::new(
                store.clone(),
                Arc::new(floe_schedules::NoScheduler),
            )),
            resolver: Arc::new(floe_ports::FixedResolver::default()),
            views: Default::default(),
            hashing_keys: Default::default(),
        },
        support::verifier()?,
    );
    let token = support::token(ORG, Role::DeploymentManager)?;
    Ok(World {
        app: app(state),
        store,
        clusters,
        http: reqwest::Client::new(),
        token,
        root: root.to_path_buf(),
    })
}

fn spec(name: &str) -> Value {
    json!({
        "name": name, "version": "8.15.3",
        "node_groups": [{"id": "hot", "roles": ["master", "data_hot", "data_content"],
                         "instance_type": "m6g.xlarge", "count": 3, "zone_count": 3,
                         "storage": {"size_gb": 100}}],
        "snapshot": {"repository": "main"}
    })
}

/// A running source with `indices` indices of 5 documents each, and one
/// successful snapshot of them.
async fn source(w: &World, indices: usize) -> Fallible<(String, String)> {
    let created = w
        .call(
            "POST",
            "/api/v1/deployments",
            Some(spec(&format!("source-{indices}"))),
        )
        .await?;
    let id = created["id"].as_str().ok_or("id")?.to_string();
    w.settled(&id).await?;
    let url = w.clusters.url(&id).await.ok_or("no cluster")?;
    for i in 0..indices {
        for n in 0..5 {
            let r = w
                .http
                .post(format!("{url}/index-{i:04}/_doc"))
                .json(&json!({"n": n}))
                .send()
                .await?;
            if r.status() != 201 {
                return Err(format!("indexing: {}", r.status()).into());
            }
        }
    }
    let snap = w
        .call(
            "POST",
            &format!("/api/v1/deployments/{id}/snapshots?wait_for_completion=true"),
            Some(json!({})),
        )
        .await?;
    Ok((id, snap["snapshot"].as_str().ok_or("snapshot")?.to_string()))
}

/// The bare cluster calls of one clone, on a fresh simulated cluster.
async fn bare_cluster_calls(
    w: &World,
    source_id: &str,
    snapshot: &str,
    indices: &[String],
    mode: &str,
) -> Fallible<Duration> {
    let cluster =
        // The organization's `path.repo`, as local mode gives its clusters.
        SimulatedCluster::start(SimConfig::new("bare").with_fs_root(
            floe_clusters_sim::org_fs_root(&w.root.join("repositories"), ORG)?,
        ))
        .await?;
    let client = ElasticClient::new(cluster.url(), None, Duration::from_secs(30))?;
    let repo = w
        .store
        .get_repository(ORG, "main")
        .await?
        .ok_or("repository")?
        .value;
    let t = Instant::now();
    client
        .put_repository(
            "main",
            &floe_snapshots::repository_registration(&repo, source_id, true),
        )
        .await?;
    if mode != "restore" {
        // As the clone's plan does: mounting needs the trial or enterprise.
        client.license().await?;
        if mode == "mount" {
            client.start_trial().await?;
        } else {
            client
                .put_license(&license().license.install_body())
                .await?;
            client.license().await?;
        }
        for index in indices {
            let request = MountRequest {
                index: index.clone(),
                renamed_index: None,
                index_settings: None,
                ignore_index_settings: Vec::new(),
                storage: MountStorage::FullCopy,
            };
            client.mount("main", snapshot, &request, false).await?;
        }
    } else {
        client
            .restore("main", snapshot, &RestoreRequest::default(), false)
            .await?;
    }
    loop {
        let progress = client.recovery(&[]).await?;
        if progress.is_done() {
            break;
        }
    }
    Ok(t.elapsed())
}

/// An enterprise license, as a platform admin uploads it.
fn license() -> floe_domain::license::PlatformLicense {
    let now = Utc::now();
    let day = 86_400_000;
    floe_domain::license::PlatformLicense {
        org: ORG.into(),
        license: floe_domain::license::LicenseDocument {
            uid: "bench-license".into(),
            license_type: "enterprise".into(),
            issuer: "bench".into(),
            issued_to: "bench".into(),
            issue_date_in_millis: now.timestamp_millis() - day,
            start_date_in_millis: now.timestamp_millis() - day,
            expiry_date_in_millis: now.timestamp_millis() + 30 * day,
            signature: "bench".into(),
            max_nodes: None,
            max_resource_units: Some(8),
            max_instances: None,
            version: None,
            subscription_type: None,
        },
        uploaded: now,
        uploaded_by: "bench".into(),
    }
}

fn mean(v: &[Duration]) -> Duration {
    v.iter().sum::<Duration>() / v.len().max(1) as u32
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Fallible<()> {
    let dir = tempfile::tempdir()?;
    let w = world(dir.path()).await?;
    println!(
        "clone request to running, simulated compute (zero delays), simulated clusters over HTTP, SQLite file store; 3 nodes per clone"
    );
    println!(
        "{:<8} {:>7} {:>3} {:>14} {:>14} {:>16} {:>16} {:>12}",
        "mode",
        "indices",
        "n",
        "clone mean",
        "clone max",
        "bare cluster",
        "bare writes",
        "plan writes"
    );
    for indices in [10usize, 1000] {
        let (source_id, snapshot) = source(&w, indices).await?;
        let names: Vec<String> = (0..indices).map(|i| format!("index-{i:04}")).collect();
        let runs = if indices > 100 { 3 } else { 10 };
        for mode in ["restore", "mount", "mount-pl"] {
            // Only the `mount-pl` clones find a platform license.
            if mode == "mount-pl" {
                w.store.put_platform_license(&license(), None).await?;
            }
            let mut clones = Vec::new();
            let mut writes = 0;
            let mut bare_cluster = Vec::new();
            for run in 0..runs {
                let t = Instant::now();
                let created = w
                    .call(
                        "POST",
                        &format!("/api/v1/deployments/{source_id}/_clone"),
                        Some(json!({"name": format!("clone-{mode}-{indices}-{run}"),
                                   "mode": if mode == "restore" { "restore" } else { "mount" },
                                   "license": (mode == "mount").then_some("trial")})),
                    )
                    .await?;
                let id = created["id"].as_str().ok_or("id")?.to_string();
                let d = w.settled(&id).await?;
                clones.push(t.elapsed());
                if d["status"] != "running" {
                    return Err(format!("clone ended {}", d["status"]).into());
                }
                let plan_id = created["plans"]["pending"]["plan_id"]
                    .as_str()
                    .ok_or("plan id")?;
                let plan = w.store.get_plan(ORG, &id, plan_id).await?.ok_or("plan")?;
                writes = plan.version - 1;
                bare_cluster
                    .push(bare_cluster_calls(&w, &source_id, &snapshot, &names, mode).await?);
            }
            // The plan's writes, bare: the same count of conditional updates
            // of one plan record.
            let probe_id = floe_domain::names::new_resource_id();
            let mut d = w
                .store
                .get_deployment(ORG, &source_id)
                .await?
                .ok_or("source")?
                .value;
            d.id = probe_id.clone();
            let probe = Plan::new(
                ORG,
                &probe_id,
                PlanParams::Create(d.spec.clone()),
                "b",
                "b",
                Utc::now(),
            );
            w.store.create_deployment(&d, &probe, None).await?;
            let mut version = 1;
            let mut bare_writes = Vec::new();
            for _ in 0..runs {
                let t = Instant::now();
                for _ in 0..writes {
                    version = w.store.update_plan(&probe, version).await?;
                }
                bare_writes.push(t.elapsed());
            }
            println!(
                "{mode:<8} {indices:>7} {runs:>3} {:>14.1?} {:>14.1?} {:>16.1?} {:>16.1?} {writes:>12}",
                mean(&clones),
                clones.iter().max().copied().unwrap_or_default(),
                mean(&bare_cluster),
                mean(&bare_writes),
            );
            // The row scripts/bench.sh gathers: the clone next to what its
            // plan cannot avoid (the bare cluster calls and store writes).
            let clone_ms = mean(&clones).as_secs_f64() * 1000.0;
            let floor_ms = (mean(&bare_cluster) + mean(&bare_writes)).as_secs_f64() * 1000.0;
            println!(
                "BENCH\tclone {mode}, {indices} indices: request to running ms\t{clone_ms:.1}\t{floor_ms:.1}\t{:.2}x\t-",
                clone_ms / floor_ms.max(f64::MIN_POSITIVE)
            );
            if let Some(stored) = w.store.get_platform_license(ORG).await? {
                w.store.delete_platform_license(&stored).await?;
            }
        }
    }
    Ok(())
}

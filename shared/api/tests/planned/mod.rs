//! A world to run plans in through the real router: SQLite in memory,
//! the real plan engine and deployment steps, simulated compute with a
//! simulated Elasticsearch cluster per deployment (over HTTP) and an `fs`
//! repository they all see, as in local mode. Shared by the clone and
//! license tests.

#![allow(dead_code)]

use async_trait::async_trait;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::Utc;
use floe_api::{ApiState, app};
use floe_auth::{KeySource, Role, Verifier, VerifierConfig, issue_hs256};
use floe_clusters_sim::{SimulatedClusters, SimulatedClustersConfig};
use floe_compute_sim::{SimulatedCompute, SimulatedConfig};
use floe_domain::deployment::Deployment;
use floe_domain::plan::{Plan, StepError};
use floe_domain::repository::{EndpointPolicy, FsSettings, Repository, RepositorySettings};
use floe_plans::engine::{EngineConfig, Outcome, StepContext, Steps};
use floe_plans::{DeploymentSteps, Engine, LocalQueue, StepSettings};
use floe_secrets::LocalCipher;
use floe_store::Store;
use floe_store_sqlite::SqliteBackend;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tower::ServiceExt;

pub type TestResult = Result<(), Box<dyn std::error::Error>>;
pub type Fallible<T> = Result<T, Box<dyn std::error::Error>>;

pub const SECRET: &[u8] = b"clone-route-tests-hs256-secret-0123456789ab";
pub const ORG: &str = "acme";

/// The deployment steps, failing right after `fail_after` when it is set,
/// and waiting before `hold` for as long as it is set.
pub struct Injected {
    pub inner: DeploymentSteps,
    pub fail_after: Mutex<Option<String>>,
    pub hold: Mutex<Option<String>>,
}

#[async_trait]
impl Steps for Injected {
    fn settle(&self, plan: &Plan, next: &mut Deployment) {
        self.inner.settle(plan, next);
    }
    fn layout(&self, plan: &Plan, d: &Deployment) -> Result<Vec<String>, StepError> {
        self.inner.layout(plan, d)
    }

    async fn run(&self, step_id: &str, ctx: &StepContext<'_>) -> Outcome {
        let held = self
            .hold
            .lock()
            .map(|h| h.as_deref() == Some(step_id))
            .unwrap_or(false);
        if held {
            return Outcome::Wait {
                after: Duration::from_millis(5),
                note: "held by the test".into(),
            };
        }
        let outcome = self.inner.run(step_id, ctx).await;
        let fail = self
            .fail_after
            .lock()
            .map(|f| f.as_deref() == Some(step_id))
            .unwrap_or(false);
        match outcome {
            Outcome::Done(_) if fail => floe_plans::engine::fail("injected", "injected failure"),
            other => other,
        }
    }

    async fn undo(&self, step_id: &str, ctx: &StepContext<'_>) -> Outcome {
        self.inner.undo(step_id, ctx).await
    }
}

pub struct World {
    pub app: axum::Router,
    /// The in-process scheduler the records' schedules are kept in, on a
    /// clock the test moves, and what its firings run (as local mode's).
    pub scheduler: Arc<floe_schedules::LocalScheduler>,
    pub clock: Arc<floe_schedules::ManualClock>,
    pub firings: Arc<floe_app::scheduled::LocalFirings>,
    /// What the plans published for operators (failed drills, breached
    /// targets).
    pub events: Arc<floe_ports::RecordedEvents>,
    pub store: Store,
    pub clusters: Arc<SimulatedClusters>,
    pub compute: Arc<SimulatedCompute>,
    pub steps: Arc<Injected>,
    pub http: reqwest::Client,
    pub _dir: tempfile::TempDir,
}

pub fn token(org: &str) -> String {
    token_with(org, &[Role::DeploymentManager])
}

pub fn token_with(org: &str, roles: &[Role]) -> String {
    issue_hs256(
        SECRET,
        "floe-local",
        "floe-api",
        "tester",
        org,
        roles,
        Duration::from_secs(600),
    )
    .unwrap_or_default()
}

pub async fn world() -> Fallible<World> {
    let dir = tempfile::tempdir()?;
    let store = Store::new(Arc::new(SqliteBackend::in_memory()?));
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig::default()));
    let clusters = Arc::new(SimulatedClusters::new(
        compute.clone(),
        SimulatedClustersConfig {
            fs_root: Some(dir.path().to_path_buf()),
            ..SimulatedClustersConfig::default()
        },
    ));
    let now = Utc::now();
    for (org, name) in [(ORG, "main"), (ORG, "archive"), ("globex", "main")] {
        store
            .create_repository(&Repository {
                org: org.into(),
                name: name.into(),
                settings: RepositorySettings::Fs(FsSettings {
                    location: format!("{org}-{name}"),
                    compress: None,
                    max_snapshot_bytes_per_sec: None,
                    max_restore_bytes_per_sec: Some("500mb".into()),
                }),
                created: now,
                updated: now,
            })
            .await?;
    }
    let steps = Arc::new(Injected {
        inner: DeploymentSteps::new(
            floe_plans::StepPorts {
                compute: compute.clone(),
                clusters: clusters.clone(),
                parameters: Arc::new(floe_compute_sim::SimulatedParameters::new(Vec::new())),
                cipher: Arc::new(LocalCipher::from_key(&[7u8; 32])),
                snapshots: floe_snapshots::Snapshotter::new(store.clone(), clusters.clone()),
            },
            StepSettings {
                poll: Duration::from_millis(5),
                ..StepSettings::default()
            },
        ),
        fail_after: Mutex::new(None),
        hold: Mutex::new(None),
    });
    let (queue, mut jobs) = LocalQueue::new();
    let queue = Arc::new(queue);
    let events = Arc::new(floe_ports::RecordedEvents::default());
    let engine = Arc::new(
        Engine::new(
            store.clone(),
            queue.clone(),
            steps.clone(),
            "test-worker",
            EngineConfig {
                backoff: Duration::from_millis(1),
                ..EngineConfig::default()
            },
        )
        .with_events(events.clone()),
    );
    tokio::spawn(async move {
        while let Some(job) = jobs.recv().await {
            let engine = engine.clone();
            tokio::spawn(async move {
                let _ = engine.run(&job).await;
            });
        }
    });
    let verifier = Verifier::new(VerifierConfig {
        issuer: "floe-local".into(),
        audience: "floe-api".into(),
        keys: KeySource::Hs256Secret(SECRET.to_vec()),
        leeway_secs: 0,
    })?;
    let clock = Arc::new(floe_schedules::ManualClock::new(now));
    let scheduler = Arc::new(floe_schedules::LocalScheduler::new(clock.clone()));
    let use_cases = floe_app::App {
        store: store.clone(),
        cipher: Arc::new(LocalCipher::from_key(&[7u8; 32])),
        endpoint_policy: EndpointPolicy::default(),
        endpoints: floe_domain::access::EndpointNaming::NodeAddress,
        queue,
        clusters: clusters.clone(),
        schedules: Arc::new(floe_schedules::ReconcileNow::new(
            store.clone(),
            scheduler.clone(),
        )),
        resolver: Arc::new(floe_ports::FixedResolver::default()),
        views: Default::default(),
        hashing_keys: Default::default(),
    };
    let firings = Arc::new(floe_app::scheduled::LocalFirings {
        app: use_cases.clone(),
        snapshotter: floe_snapshots::Snapshotter::new(store.clone(), clusters.clone()),
    });
    let state = ApiState::new(use_cases, Arc::new(verifier));
    Ok(World {
        app: app(state),
        scheduler,
        clock,
        firings,
        events,
        store,
        clusters,
        compute,
        steps,
        http: reqwest::Client::new(),
        _dir: dir,
    })
}

pub fn spec(name: &str, repository: Option<&str>) -> Value {
    let mut s = json!({
        "name": name, "version": "8.15.3",
        "node_groups": [{"id": "hot", "roles": ["master", "data_hot", "data_content"],
                         "instance_type": "m5.large", "count": 1, "zone_count": 1,
                         "storage": {"size_gb": 20}}]
    });
    if let Some(r) = repository {
        s["snapshot"] = json!({"repository": r});
    }
    s
}

impl World {
    pub async fn call_as(
        &self,
        org: &str,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Fallible<(StatusCode, Value)> {
        self.call_with(&token(org), method, path, body).await
    }

    pub async fn call_with(
        &self,
        token: &str,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Fallible<(StatusCode, Value)> {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header("authorization", format!("Bearer {token}"));
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
            // `_cat` answers through the proxy are text.
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        assert!(status.as_u16() < 500, "{method} {path}: {status} {body}");
        Ok((status, body))
    }

    pub async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Fallible<(StatusCode, Value)> {
        self.call_as(ORG, method, path, body).await
    }

    /// Waits until the deployment has no pending plan, and returns it.
    pub async fn settled(&self, id: &str) -> Fallible<Value> {
        self.settled_as(ORG, id).await
    }

    pub async fn settled_as(&self, org: &str, id: &str) -> Fallible<Value> {
        for _ in 0..2000 {
            let (status, body) = self
                .call_as(org, "GET", &format!("/api/v1/deployments/{id}"), None)
                .await?;
            if status == StatusCode::NOT_FOUND {
                return Ok(Value::Null);
            }
            if body["plans"].get("pending").is_none() {
                return Ok(body);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Err(format!("deployment {id} did not settle").into())
    }

    /// Creates (or clones) through `path` and waits for the plan's end.
    pub async fn create_at(&self, path: &str, body: Value) -> Fallible<(String, Value)> {
        let (status, created) = self.call("POST", path, Some(body)).await?;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        let id = created["id"].as_str().ok_or("no id")?.to_string();
        let settled = self.settled(&id).await?;
        Ok((id, settled))
    }

    /// Instances of the deployment not terminated or terminating.
    pub async fn live(&self, id: &str) -> Fallible<usize> {
        use floe_compute::{Compute as _, InstanceState};
        Ok(self
            .compute
            .instances(id)
            .await?
            .iter()
            .filter(|i| {
                !matches!(
                    i.state,
                    InstanceState::Terminated | InstanceState::ShuttingDown
                )
            })
            .count())
    }

    pub async fn url(&self, id: &str) -> Fallible<String> {
        Ok(self.clusters.url(id).await.ok_or("no simulated cluster")?)
    }

    pub async fn write(&self, id: &str, index: &str, docs: u32) -> TestResult {
        let url = self.url(id).await?;
        for i in 0..docs {
            let r = self
                .http
                .post(format!("{url}/{index}/_doc"))
                .json(&json!({"n": i}))
                .send()
                .await?;
            assert_eq!(r.status(), 201, "{}", r.text().await?);
        }
        Ok(())
    }

    /// The document count of `index` on `id`'s cluster; `None` if there is
    /// no such index.
    pub async fn count(&self, id: &str, index: &str) -> Fallible<Option<u64>> {
        let url = self.url(id).await?;
        let r = self
            .http
            .get(format!("{url}/{index}/_count"))
            .send()
            .await?;
        if r.status() == 404 {
            return Ok(None);
        }
        let body: Value = r.json().await?;
        Ok(Some(
            body["count"].as_u64().ok_or_else(|| format!("{body}"))?,
        ))
    }

    pub async fn snapshot(&self, id: &str) -> Fallible<String> {
        let (status, body) = self
            .call(
                "POST",
                &format!("/api/v1/deployments/{id}/snapshots?wait_for_completion=true"),
                Some(json!({})),
            )
            .await?;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["state"], "SUCCESS", "{body}");
        Ok(body["snapshot"].as_str().ok_or("no name")?.to_string())
    }

    pub async fn last_plan(&self, id: &str) -> Fallible<Value> {
        let (_, plans) = self
            .call("GET", &format!("/api/v1/deployments/{id}/plans"), None)
            .await?;
        let history = plans["history"].as_array().ok_or("no history")?;
        Ok(history.last().cloned().ok_or("no plan")?)
    }

    /// A running source with `orders` (30 documents) and `logs-1` (10),
    /// snapshotted, then 5 more orders written after the snapshot.
    pub async fn source(&self) -> Fallible<(String, String)> {
        let (id, d) = self
            .create_at("/api/v1/deployments", spec("source", Some("main")))
            .await?;
        assert_eq!(d["status"], "running", "{d}");
        self.write(&id, "orders", 30).await?;
        self.write(&id, "logs-1", 10).await?;
        let snapshot = self.snapshot(&id).await?;
        self.write(&id, "orders", 5).await?;
        Ok((id, snapshot))
    }
}

pub fn step<'a>(plan: &'a Value, id: &str) -> Option<&'a Value> {
    plan["steps"]
        .as_array()?
        .iter()
        .find(|s| s["step_id"] == id)
}

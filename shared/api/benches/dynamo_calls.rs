//! Benchmark (not a test): the DynamoDB calls each API operation makes, on
//! moto, counted on the wire by an SDK interceptor (retries included), next
//! to the fewest the operation needs. The API runs in this process on the
//! DynamoDB store adapter; plans run on simulated compute and clusters, but
//! only between measurements, so that a worker's calls never count against
//! the request that woke it, and schedule reconciles go to the worker as
//! the api function sends them (its SQS messages are not counted here). Run by scripts/bench.sh, or by hand with moto
//! on loopback: `FLOE_TEST_AWS_ENDPOINT=http://127.0.0.1:PORT cargo bench
//! --profile dev --workspace --bench dynamo_calls`.

mod support;

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use axum::body::Body;
use axum::http::Request;
use floe_api::{ApiState, app};
use floe_auth::Role;
use floe_clusters_sim::{SimulatedClusters, SimulatedClustersConfig};
use floe_compute_sim::{SimulatedCompute, SimulatedConfig};
use floe_domain::repository::EndpointPolicy;
use floe_plans::engine::{EngineConfig, RunResult};
use floe_plans::{DeploymentSteps, Engine, LocalQueue, PlanJob, StepSettings};
use floe_ports::{QueueError, ReconcileJob, ScheduleSync};
use floe_secrets::LocalCipher;
use floe_store::Store;
use floe_store_dynamo::DynamoBackend;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc::UnboundedReceiver;
use tower::ServiceExt;

type Fallible<T> = Result<T, Box<dyn std::error::Error>>;

const ORG: &str = "bench";

/// The operations sent while counting is on.
#[derive(Debug, Default)]
struct Wire {
    counting: AtomicBool,
    calls: Mutex<Vec<String>>,
}

impl Wire {
    fn take(&self) -> Vec<String> {
        self.calls
            .lock()
            .map(|mut c| c.split_off(0))
            .unwrap_or_default()
    }
}

#[derive(Debug)]
struct Counter(Arc<Wire>);

impl Intercept for Counter {
    fn name(&self) -> &'static str {
        "floe-bench-dynamo-calls"
    }

    // Once per attempt: a retried request counts as the calls it cost.
    fn read_before_transmit(
        &self,
        ctx: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if self.0.counting.load(Ordering::SeqCst) {
            let target = ctx
                .request()
                .headers()
                .get("x-amz-target")
                .unwrap_or_default();
            let operation = target.rsplit('.').next().unwrap_or_default().to_string();
            if let Ok(mut calls) = self.0.calls.lock() {
                calls.push(operation);
            }
        }
        Ok(())
    }
}

/// As the api function wires it: a schedule reconcile is a message to the
/// worker (SQS), which reads the records it needs there. Local mode's
/// ReconcileNow reconciles in the request instead, with a read of its own.
struct ToTheWorker;

#[async_trait::async_trait]
impl ScheduleSync for ToTheWorker {
    async fn sync(&self, _job: ReconcileJob) -> Result<(), QueueError> {
        Ok(())
    }
}

struct World {
    app: axum::Router,
    wire: Arc<Wire>,
    engine: Arc<Engine>,
    jobs: tokio::sync::Mutex<UnboundedReceiver<PlanJob>>,
    token: String,
    rows: Vec<Row>,
}

struct Row {
    operation: String,
    calls: Vec<String>,
    minimum: usize,
    why: &'static str,
}

impl World {
    async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Fallible<(u16, Value)> {
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("authorization", format!("Bearer {}", self.token));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = match body {
            Some(b) => req
                .header("content-type", "application/json")
                .body(Body::from(serde_json::to_vec(b)?))?,
            None => req.body(Body::empty())?,
        };
        let res = self.app.clone().oneshot(req).await?;
        let status = res.status().as_u16();
        let bytes = res.into_body().collect().await?.to_bytes();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)?
        };
        Ok((status, body))
    }

    /// Sends one request with counting on and records its calls; an answer
    /// other than a success is an error (the figure would be of the wrong path).
    async fn measure(
        &mut self,
        operation: &str,
        minimum: usize,
        why: &'static str,
        (method, path): (&str, &str),
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Fallible<Value> {
        self.wire.take();
        self.wire.counting.store(true, Ordering::SeqCst);
        let answer = self.send(method, path, headers, body).await;
        self.wire.counting.store(false, Ordering::SeqCst);
        let (got, value) = answer?;
        if !(200..300).contains(&got) {
            return Err(format!("{method} {path}: answered {got}: {value}").into());
        }
        self.rows.push(Row {
            operation: operation.to_string(),
            calls: self.wire.take(),
            minimum,
            why,
        });
        Ok(value)
    }

    /// Runs the plans the measured requests queued, uncounted, until the
    /// queue has been quiet for a while.
    async fn settle(&self) -> Fallible<()> {
        let mut jobs = self.jobs.lock().await;
        while let Ok(Some(job)) = tokio::time::timeout(Duration::from_secs(2), jobs.recv()).await {
            // Busy and Gone need nothing more: the job is someone else's or over.
            let _: RunResult = self.engine.run(&job).await?;
        }
        Ok(())
    }
}

async fn world() -> Fallible<World> {
    let sdk = support::moto_config().await?;
    let wire = Arc::new(Wire::default());
    let client = aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::config::Builder::from(&sdk)
            .interceptor(Counter(wire.clone()))
            .build(),
    );
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let backend = DynamoBackend::from_client(client, format!("floe-calls-{nanos}"));
    backend.ensure_table().await?;
    let store = Store::new(Arc::new(backend));

    let root = std::env::temp_dir().join(format!("floe-calls-{nanos}"));
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig::default()));
    let clusters = Arc::new(SimulatedClusters::new(
        compute.clone(),
        SimulatedClustersConfig {
            fs_root: Some(root.join("repositories")),
            ..SimulatedClustersConfig::default()
        },
    ));
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
    let (queue, jobs) = LocalQueue::new();
    let queue = Arc::new(queue);
    let engine = Arc::new(Engine::new(
        store.clone(),
        queue.clone(),
        steps,
        "bench",
        EngineConfig::default(),
    ));
    let state = ApiState::new(
        floe_app::App {
            store: store.clone(),
            cipher: Arc::new(LocalCipher::from_key(&[5u8; 32])),
            endpoint_policy: EndpointPolicy::default(),
            endpoints: floe_domain::access::EndpointNaming::NodeAddress,
            queue,
            clusters,
            schedules: Arc::new(ToTheWorker),
            resolver: Arc::new(floe_ports::FixedResolver::default()),
            views: Default::default(),
            hashing_keys: Default::default(),
        },
        support::verifier()?,
    );
    let token = support::token(ORG, Role::PlatformAdmin)?;
    Ok(World {
        app: app(state),
        wire,
        engine,
        jobs: tokio::sync::Mutex::new(jobs),
        token,
        rows: Vec::new(),
    })
}

fn spec(name: &str) -> Value {
    json!({
        "name": name, "version": "8.15.3",
        "node_groups": [{"id": "hot", "roles": ["master", "data_hot", "data_content"],
                         "instance_type": "m6g.xlarge", "count": 1, "zone_count": 1,
                         "storage": {"size_gb": 100}}],
        "metadata": {"tags": [{"key": "team", "value": "search"}]},
        "snapshot": {"repository": "main"}
    })
}

const REPOS: &str = "/api/v1/platform/configuration/snapshots/repositories";
const DEPLOYMENTS: &str = "/api/v1/deployments";
const POLICIES: &str = "/api/v1/snapshot-policies";

fn id_of(v: &Value) -> Fallible<String> {
    Ok(v["id"].as_str().ok_or("no id in the answer")?.to_string())
}

async fn measure_all(w: &mut World) -> Fallible<()> {
    let repo = json!({"type": "fs", "settings": {"location": "main"}});
    w.measure(
        "PUT repository (new)",
        2,
        "a PUT reads the stored one (its version, the secrets it keeps), then writes",
        ("PUT", &format!("{REPOS}/main")),
        &[],
        Some(&repo),
    )
    .await?;
    w.measure(
        "GET repository",
        1,
        "",
        ("GET", &format!("{REPOS}/main")),
        &[],
        None,
    )
    .await?;
    w.measure("GET repositories", 1, "", ("GET", REPOS), &[], None)
        .await?;
    let policy = json!({"name": "hourly", "schedule": {"interval": "1h"},
        "snapshot_name": "<floe-{now/d}>", "repository": "main",
        "retention": {"expire_after": "7d", "min_count": 1, "max_count": 10}});
    let created = w
        .measure(
            "POST snapshot-policies",
            1,
            "",
            ("POST", POLICIES),
            &[],
            Some(&policy),
        )
        .await?;
    let policy_id = id_of(&created)?;
    w.measure(
        "GET snapshot-policies/{id}",
        1,
        "",
        ("GET", &format!("{POLICIES}/{policy_id}")),
        &[],
        None,
    )
    .await?;
    w.measure("GET snapshot-policies", 1, "", ("GET", POLICIES), &[], None)
        .await?;

    let body = spec("calls-a");
    let created = w
        .measure(
            "POST deployments",
            1,
            "",
            ("POST", DEPLOYMENTS),
            &[],
            Some(&body),
        )
        .await?;
    let a = id_of(&created)?;
    let keyed = spec("calls-b");
    let created = w
        .measure(
            "POST deployments, Idempotency-Key",
            1,
            "",
            ("POST", DEPLOYMENTS),
            &[("idempotency-key", "calls-bench-key")],
            Some(&keyed),
        )
        .await?;
    let b = id_of(&created)?;
    w.measure(
        "POST deployments, same key (replay)",
        2,
        "the create writes first (one call when the key is new, the usual case); a replay pays that refused write before reading the key and its deployment",
        ("POST", DEPLOYMENTS),
        &[("idempotency-key", "calls-bench-key")],
        Some(&keyed),
    )
    .await?;
    w.measure(
        "GET deployments/{id}",
        1,
        "",
        ("GET", &format!("{DEPLOYMENTS}/{a}")),
        &[],
        None,
    )
    .await?;
    for (label, query) in [
        ("GET deployments?size=100", "size=100"),
        ("GET deployments?name=calls (prefix)", "name=calls"),
        ("GET deployments?status=running", "status=running"),
        ("GET deployments?tag=team:search", "tag=team:search"),
    ] {
        w.measure(
            label,
            1,
            "",
            ("GET", &format!("{DEPLOYMENTS}?{query}")),
            &[],
            None,
        )
        .await?;
    }
    w.measure(
        "GET deployments/{id}/plans (pending)",
        2,
        "the deployment (which plan is pending), then the page of its plans",
        ("GET", &format!("{DEPLOYMENTS}/{b}/plans")),
        &[],
        None,
    )
    .await?;
    w.measure(
        "DELETE deployments/{id}/plans/pending",
        3,
        "the deployment, its pending plan (its version), then the conditional write",
        ("DELETE", &format!("{DEPLOYMENTS}/{b}/plans/pending")),
        &[],
        None,
    )
    .await?;

    w.settle().await?;
    w.measure(
        "GET deployments/{id}/plans (settled)",
        2,
        "the deployment, then the page of its plans",
        ("GET", &format!("{DEPLOYMENTS}/{a}/plans")),
        &[],
        None,
    )
    .await?;
    let (_, mut current) = w
        .send("GET", &format!("{DEPLOYMENTS}/{a}"), &[], None)
        .await?;
    current["name"] = json!("calls-a-renamed");
    w.measure(
        "PUT deployments/{id} (rename)",
        2,
        "the stored deployment (version, what changed), then the write",
        ("PUT", &format!("{DEPLOYMENTS}/{a}")),
        &[],
        Some(&current),
    )
    .await?;
    w.measure(
        "POST deployments/{id}/_shutdown",
        2,
        "the stored deployment, then the deployment with its new plan in one transaction",
        ("POST", &format!("{DEPLOYMENTS}/{a}/_shutdown")),
        &[],
        None,
    )
    .await?;
    w.settle().await?;
    w.measure(
        "DELETE deployments/{id}",
        2,
        "the stored deployment, then the deployment with its delete plan in one transaction",
        ("DELETE", &format!("{DEPLOYMENTS}/{a}")),
        &[],
        None,
    )
    .await?;
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Fallible<()> {
    let mut w = world().await?;
    measure_all(&mut w).await?;
    println!("DynamoDB calls per API operation on moto (counted on the wire, retries included)");
    println!(
        "{:<40} {:>5} {:>7}  {:<44} excess explained",
        "operation", "calls", "minimum", "calls made"
    );
    for r in &w.rows {
        let explained = if r.calls.len() > r.minimum {
            format!("EXCESS: {}", r.why)
        } else {
            r.why.to_string()
        };
        println!(
            "{:<40} {:>5} {:>7}  {:<44} {explained}",
            r.operation,
            r.calls.len(),
            r.minimum,
            r.calls.join("+"),
        );
        println!(
            "BENCH\tDynamoDB calls: {}\t{}\t{}\t{:.2}x\t= minimum",
            r.operation,
            r.calls.len(),
            r.minimum,
            r.calls.len() as f64 / r.minimum.max(1) as f64
        );
    }
    Ok(())
}

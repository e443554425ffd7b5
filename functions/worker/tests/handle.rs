//! The worker's event handling without the Lambda runtime: SQS batches run
//! their plans, unreadable records are dropped, a failing store fails only
//! its own record, and the sweep re-queues plans nobody is running.

use async_trait::async_trait;
use chrono::Utc;
use floe_compute::Compute;
use floe_compute_sim::{SimulatedCompute, SimulatedConfig};
use floe_domain::deployment::{Deployment, DeploymentSpec, DeploymentStatus};
use floe_domain::plan::{Lease, Plan, PlanParams, PlanStatus};
use floe_plans::{DeploymentSteps, Engine, EngineConfig, LocalQueue, PlanJob, StepSettings};
use floe_store::Store;
use floe_store::backend::{Backend, BackendError, ListQuery, Record, RecordKey, RecordPage, Write};
use floe_store_sqlite::SqliteBackend;
use floe_worker::{WorkerError, handle};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

type TestResult = Result<(), Box<dyn std::error::Error>>;
type Error = Box<dyn std::error::Error>;

/// SQLite, except that every read or write of one plan's records fails as
/// if the table were unreachable.
struct Unreachable {
    inner: Arc<SqliteBackend>,
    plan_id: String,
}

impl Unreachable {
    fn hits(&self, key: &RecordKey) -> bool {
        key.key.contains(&self.plan_id)
    }
    fn error(&self) -> BackendError {
        BackendError::Unavailable("injected: the table cannot be reached".into())
    }
}

#[async_trait]
impl Backend for Unreachable {
    async fn get(&self, key: &RecordKey) -> Result<Option<Record>, BackendError> {
        if self.hits(key) {
            return Err(self.error());
        }
        self.inner.get(key).await
    }
    async fn list(&self, query: &ListQuery) -> Result<RecordPage, BackendError> {
        self.inner.list(query).await
    }
    async fn write(&self, writes: Vec<Write>) -> Result<(), BackendError> {
        let hit = writes.iter().any(|w| match w {
            Write::Create(r) | Write::Update { record: r, .. } => self.hits(&r.key),
            Write::Delete { key, .. } | Write::Refs { key, .. } | Write::RefsAt { key, .. } => {
                self.hits(key)
            }
        });
        if hit {
            return Err(self.error());
        }
        self.inner.write(writes).await
    }
}

struct World {
    store: Store,
    compute: Arc<SimulatedCompute>,
    steps: Arc<DeploymentSteps>,
    engine: Engine,
    jobs: UnboundedReceiver<PlanJob>,
}

fn world(backend: Arc<dyn Backend>) -> World {
    let store = Store::new(backend);
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig {
        boot_delay: Duration::from_millis(30),
        ..SimulatedConfig::default()
    }));
    let clusters = sim_clusters(&compute);
    let steps = Arc::new(DeploymentSteps::new(
        floe_plans::StepPorts {
            compute: compute.clone(),
            clusters: clusters.clone(),
            parameters: Arc::new(floe_compute_sim::SimulatedParameters::new(Vec::new())),
            cipher: Arc::new(floe_secrets::LocalCipher::from_key(&[7u8; 32])),
            snapshots: floe_snapshots::Snapshotter::new(store.clone(), clusters),
        },
        StepSettings {
            poll: Duration::from_millis(10),
            ..StepSettings::default()
        },
    ));
    let (queue, jobs) = LocalQueue::new();
    let engine = Engine::new(
        store.clone(),
        Arc::new(queue),
        steps.clone(),
        "worker-test",
        EngineConfig {
            backoff: Duration::from_millis(1),
            ..EngineConfig::default()
        },
    );
    World {
        store,
        compute,
        steps,
        engine,
        jobs,
    }
}

fn sqlite() -> Result<SqliteBackend, Error> {
    Ok(SqliteBackend::in_memory()?)
}

fn spec() -> Result<DeploymentSpec, serde_json::Error> {
    serde_json::from_value(json!({"name": "logs", "version": "8.15.3", "node_groups": [
        {"id": "masters", "roles": ["master"], "instance_type": "c7g.large", "count": 3, "zone_count": 3, "storage": {"size_gb": 20}},
        {"id": "hot", "roles": ["data_hot", "data_content", "ingest"], "instance_type": "m5.xlarge", "count": 2, "zone_count": 2, "storage": {"size_gb": 100}}
    ]}))
}

const NODES: usize = 5;

/// A new deployment with its pending create plan, as the API records them.
async fn create_plan(store: &Store) -> Result<PlanJob, Error> {
    let now = Utc::now();
    let spec = spec()?;
    let plan = Plan::new(
        "acme",
        &floe_domain::names::new_resource_id(),
        PlanParams::Create(spec.clone()),
        "test",
        "tester",
        now,
    );
    let deployment = Deployment {
        last_drill: None,
        id: plan.deployment_id.clone(),
        org: "acme".into(),
        spec,
        status: DeploymentStatus::Initializing,
        pending_plan: Some(plan.reference()),
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
    store.create_deployment(&deployment, &plan, None).await?;
    Ok(PlanJob {
        org: "acme".into(),
        deployment_id: deployment.id,
        plan_id: plan.id,
    })
}

/// An SQS record as Lambda's event source mapping delivers it.
fn record(message_id: &str, body: Option<&str>) -> Value {
    let mut r = json!({
        "messageId": message_id,
        "receiptHandle": format!("rh-{message_id}"),
        "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1700000000000"},
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:floe-work",
        "awsRegion": "us-east-1"
    });
    if let Some(b) = body {
        r["body"] = json!(b);
    }
    r
}

fn job_record(message_id: &str, job: &PlanJob) -> Result<Value, Error> {
    Ok(record(message_id, Some(&serde_json::to_string(job)?)))
}

fn batch(records: Vec<Value>) -> Value {
    json!({ "Records": records })
}

/// The message ids the response asks SQS to deliver again.
fn failures(response: &Value) -> Result<Vec<String>, Error> {
    let list = response["batchItemFailures"]
        .as_array()
        .ok_or_else(|| format!("not a batch response: {response}"))?;
    Ok(list
        .iter()
        .filter_map(|f| f["itemIdentifier"].as_str().map(str::to_string))
        .collect())
}

async fn plan(store: &Store, job: &PlanJob) -> Result<Plan, Error> {
    Ok(store
        .get_plan(&job.org, &job.deployment_id, &job.plan_id)
        .await?
        .ok_or("no plan")?
        .value)
}

/// Feeds every job the engine re-queues back in as a one-record SQS batch,
/// as the event source mapping would, until the plan finishes.
async fn run_to_end(w: &mut World, job: &PlanJob) -> Result<PlanStatus, Error> {
    for n in 0..500 {
        let p = plan(&w.store, job).await?;
        if p.status.is_finished() {
            return Ok(p.status);
        }
        let next = tokio::time::timeout(Duration::from_secs(10), w.jobs.recv())
            .await?
            .ok_or("queue closed")?;
        let response = handle(&w.engine, batch(vec![job_record(&format!("m{n}"), &next)?])).await?;
        assert_eq!(failures(&response)?, Vec::<String>::new());
    }
    Err("the plan did not finish".into())
}

async fn live_nodes(w: &World, job: &PlanJob) -> Result<usize, Error> {
    Ok(w.compute
        .instances(&job.deployment_id)
        .await?
        .iter()
        .filter(|i| i.state != floe_compute::InstanceState::Terminated)
        .count())
}

#[tokio::test]
async fn an_sqs_batch_runs_its_plan_and_the_requeued_jobs_finish_it() -> TestResult {
    let mut w = world(Arc::new(sqlite()?));
    let job = create_plan(&w.store).await?;

    let response = handle(&w.engine, batch(vec![job_record("m-first", &job)?])).await?;
    assert_eq!(response, json!({"batchItemFailures": []}));
    let p = plan(&w.store, &job).await?;
    assert_ne!(
        p.status,
        PlanStatus::Pending,
        "the first delivery started the plan"
    );
    assert!(p.lease.is_none(), "a waiting plan holds no lease");

    assert_eq!(run_to_end(&mut w, &job).await?, PlanStatus::Succeeded);
    assert_eq!(live_nodes(&w, &job).await?, NODES);
    let d = w
        .store
        .get_deployment(&job.org, &job.deployment_id)
        .await?
        .ok_or("no deployment")?
        .value;
    assert_eq!(
        (d.status, d.pending_plan),
        (DeploymentStatus::Running, None)
    );

    // A late duplicate of a finished plan's job is fine and does nothing.
    let response = handle(&w.engine, batch(vec![job_record("m-late", &job)?])).await?;
    assert_eq!(failures(&response)?, Vec::<String>::new());
    assert_eq!(live_nodes(&w, &job).await?, NODES);
    Ok(())
}

#[tokio::test]
async fn one_plan_twice_in_a_batch_starts_each_node_once() -> TestResult {
    let mut w = world(Arc::new(sqlite()?));
    let job = create_plan(&w.store).await?;
    let response = handle(
        &w.engine,
        batch(vec![job_record("m-1", &job)?, job_record("m-2", &job)?]),
    )
    .await?;
    assert_eq!(failures(&response)?, Vec::<String>::new());
    assert_eq!(run_to_end(&mut w, &job).await?, PlanStatus::Succeeded);
    assert_eq!(live_nodes(&w, &job).await?, NODES);
    Ok(())
}

#[tokio::test]
async fn unreadable_records_are_dropped_without_failing_the_batch() -> TestResult {
    let w = world(Arc::new(sqlite()?));
    let job = create_plan(&w.store).await?;
    let unknown = PlanJob {
        plan_id: "no-such-plan".into(),
        ..job.clone()
    };
    let response = handle(
        &w.engine,
        batch(vec![
            record("m-text", Some("wake up")),
            record("m-shape", Some(r#"{"org": 7}"#)),
            record("m-empty", None),
            job_record("m-gone", &unknown)?,
            job_record("m-good", &job)?,
        ]),
    )
    .await?;
    assert_eq!(response, json!({"batchItemFailures": []}));
    assert_ne!(plan(&w.store, &job).await?.status, PlanStatus::Pending);
    Ok(())
}

#[tokio::test]
async fn a_store_failure_fails_only_its_own_record() -> TestResult {
    // The plan ids are only known once created, so the failing plan is
    // created first through a plain store on the same database.
    let inner = Arc::new(sqlite()?);
    let setup = Store::new(inner.clone());
    let broken = create_plan(&setup).await?;
    let healthy = create_plan(&setup).await?;
    let w = world(Arc::new(Unreachable {
        inner,
        plan_id: broken.plan_id.clone(),
    }));

    let response = handle(
        &w.engine,
        batch(vec![
            job_record("m-broken", &broken)?,
            job_record("m-healthy", &healthy)?,
        ]),
    )
    .await?;
    assert_eq!(failures(&response)?, ["m-broken"]);
    assert_ne!(plan(&setup, &healthy).await?.status, PlanStatus::Pending);
    assert_eq!(plan(&setup, &broken).await?.status, PlanStatus::Pending);
    Ok(())
}

#[tokio::test]
async fn a_sweep_requeues_idle_unfinished_plans_only() -> TestResult {
    let mut w = world(Arc::new(sqlite()?));
    // Finished: nothing to do.
    let done = create_plan(&w.store).await?;
    handle(&w.engine, batch(vec![job_record("m-done", &done)?])).await?;
    run_to_end(&mut w, &done).await?;
    // Held by a live worker: its lease says it is being run.
    let held = create_plan(&w.store).await?;
    let pv = w
        .store
        .get_plan(&held.org, &held.deployment_id, &held.plan_id)
        .await?
        .ok_or("no plan")?;
    let mut leased = pv.value;
    leased.lease = Some(Lease {
        owner: "worker/another-request".into(),
        expires: Utc::now() + chrono::Duration::minutes(5),
    });
    w.store.update_plan(&leased, pv.version).await?;
    // Recorded, but its message was lost.
    let lost = create_plan(&w.store).await?;

    let response = handle(&w.engine, json!({"sweep": true})).await?;
    assert_eq!(response, json!({"requeued": 1}));
    assert_eq!(w.jobs.try_recv()?, lost);
    assert!(
        w.jobs.try_recv().is_err(),
        "only the lost plan is re-queued"
    );
    Ok(())
}

/// SQLite, except that the fleet (the health check's listing) cannot be
/// read.
struct NoFleet(Arc<SqliteBackend>);

#[async_trait]
impl Backend for NoFleet {
    async fn get(&self, key: &RecordKey) -> Result<Option<Record>, BackendError> {
        self.0.get(key).await
    }
    async fn list(&self, query: &ListQuery) -> Result<RecordPage, BackendError> {
        if query.kind == floe_store::Kind::Fleet {
            return Err(BackendError::Unavailable("injected: no fleet".into()));
        }
        self.0.list(query).await
    }
    async fn write(&self, writes: Vec<Write>) -> Result<(), BackendError> {
        self.0.write(writes).await
    }
}

/// The sweep's engine with the health check over `w`'s steps, and where
/// its jobs go.
fn with_health(w: &World) -> (Engine, UnboundedReceiver<PlanJob>) {
    let (queue, jobs) = LocalQueue::new();
    let queue: Arc<dyn floe_plans::WorkQueue> = Arc::new(queue);
    let health = floe_plans::HealthCheck::new(
        w.store.clone(),
        Arc::new(floe_plans::PlanStarter::new(w.store.clone(), queue.clone())),
        w.steps.clone(),
        floe_plans::HealthConfig::default(),
    );
    let engine = Engine::new(
        w.store.clone(),
        queue,
        w.steps.clone(),
        "worker-test",
        EngineConfig::default(),
    )
    .with_sweep_task(Arc::new(health));
    (engine, jobs)
}

#[tokio::test]
async fn a_sweep_checks_health_and_starts_a_heal_for_a_lost_node() -> TestResult {
    let mut w = world(Arc::new(sqlite()?));
    let created = create_plan(&w.store).await?;
    handle(&w.engine, batch(vec![job_record("m-create", &created)?])).await?;
    assert_eq!(run_to_end(&mut w, &created).await?, PlanStatus::Succeeded);
    let instances = w.compute.instances(&created.deployment_id).await?;
    let hot = instances
        .iter()
        .find(|i| i.tags.get("floe:node-group").map(String::as_str) == Some("hot"))
        .ok_or("no hot node")?;
    assert!(w.compute.kill(&hot.id));

    let (engine, mut jobs) = with_health(&w);
    let response = handle(&engine, json!({"sweep": true})).await?;
    assert_eq!(response, json!({"requeued": 0}));
    let heal = jobs.try_recv()?;
    let plan = plan(&w.store, &heal).await?;
    assert_eq!(plan.kind(), floe_domain::plan::PlanKind::Heal);
    assert_eq!(plan.source.user, "floe-health-check");
    let d = w
        .store
        .get_deployment("acme", &created.deployment_id)
        .await?
        .ok_or("deployment")?
        .value;
    assert_eq!(d.status, DeploymentStatus::Reconfiguring);
    assert_eq!(d.health.map(|h| h.healthy), Some(false));
    Ok(())
}

#[tokio::test]
async fn a_health_check_that_cannot_read_the_fleet_fails_no_sweep() -> TestResult {
    let w = world(Arc::new(NoFleet(Arc::new(sqlite()?))));
    let lost = create_plan(&w.store).await?;
    let (engine, mut jobs) = with_health(&w);
    let response = handle(&engine, json!({"sweep": true})).await?;
    assert_eq!(response, json!({"requeued": 1}));
    assert_eq!(jobs.try_recv()?, lost);
    Ok(())
}

#[tokio::test]
async fn other_events_are_errors() -> TestResult {
    let w = world(Arc::new(sqlite()?));
    for event in [
        json!({"sweep": false}),
        json!({"sweep": true, "extra": 1}),
        json!({"detail-type": "Scheduled Event"}),
        json!({}),
        json!("sweep"),
    ] {
        match handle(&w.engine, event.clone()).await {
            Err(e @ WorkerError::UnrecognisedEvent(_)) => {
                assert_eq!(e.kind(), "floe.worker.unrecognised_event")
            }
            other => return Err(format!("{event}: {other:?}").into()),
        }
    }
    match handle(&w.engine, json!({"Records": 5})).await {
        Err(WorkerError::SqsEvent(_)) => Ok(()),
        other => Err(format!("{other:?}").into()),
    }
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

/// Records the reconciliations it is asked for; fails those of one org.
struct RecordingSync {
    seen: std::sync::Mutex<Vec<floe_ports::ReconcileJob>>,
    failing_org: &'static str,
}

#[async_trait]
impl floe_ports::ScheduleSync for RecordingSync {
    async fn sync(&self, job: floe_ports::ReconcileJob) -> Result<(), floe_ports::QueueError> {
        let fail = job.org == self.failing_org;
        if let Ok(mut seen) = self.seen.lock() {
            seen.push(job);
        }
        if fail {
            return Err(floe_ports::QueueError(
                "injected: the scheduler is throttling".into(),
            ));
        }
        Ok(())
    }
}

fn reconcile_record(message_id: &str, job: floe_ports::ReconcileJob) -> Result<Value, Error> {
    let message = floe_ports::WorkMessage::Reconcile {
        reconcile_schedules: job,
    };
    Ok(record(message_id, Some(&serde_json::to_string(&message)?)))
}

/// The api sends schedule reconciliations through the queue: the worker
/// runs each, reports a failed one for redelivery, and without schedule
/// settings drops them (saying so) rather than bouncing them forever.
#[tokio::test]
async fn schedule_reconciliations_from_the_api_run_in_the_worker() -> TestResult {
    let w = world(Arc::new(SqliteBackend::in_memory()?));
    let sync = RecordingSync {
        seen: std::sync::Mutex::new(Vec::new()),
        failing_org: "globex",
    };
    let event = batch(vec![
        reconcile_record("m-dep", floe_ports::ReconcileJob::deployment("acme", "d1"))?,
        reconcile_record("m-pol", floe_ports::ReconcileJob::policy("globex", "p1"))?,
    ]);
    let response = floe_worker::handle_with(&w.engine, Some(&sync), event.clone()).await?;
    assert_eq!(failures(&response)?, ["m-pol"]);
    let seen = sync.seen.lock().map(|s| s.clone()).unwrap_or_default();
    assert_eq!(
        seen,
        [
            floe_ports::ReconcileJob::deployment("acme", "d1"),
            floe_ports::ReconcileJob::policy("globex", "p1")
        ]
    );
    let response = handle(&w.engine, event).await?;
    assert_eq!(failures(&response)?, Vec::<String>::new());
    Ok(())
}

/// Records the drill jobs it is handed; fails those of one organization as
/// an unavailable store would.
struct RecordingDrills {
    seen: std::sync::Mutex<Vec<floe_ports::DrillJob>>,
    failing_org: &'static str,
}

#[async_trait]
impl floe_ports::DrillStarter for RecordingDrills {
    async fn start_scheduled_drill(
        &self,
        job: &floe_ports::DrillJob,
    ) -> Result<floe_ports::ScheduledDrill, floe_ports::QueueError> {
        if let Ok(mut seen) = self.seen.lock() {
            seen.push(job.clone());
        }
        if job.org == self.failing_org {
            return Err(floe_ports::QueueError(
                "injected: the store is unavailable".into(),
            ));
        }
        Ok(floe_ports::ScheduledDrill::Started {
            drill_id: "d".into(),
        })
    }
}

/// A drill schedule's firing arrives as EventBridge Scheduler puts the
/// schedule's input on the queue: `{"drill": {"org", "deployment_id"}}`.
/// The worker hands it to the drill use case, reports a firing that could
/// not be handled for redelivery, and without the use case drops it
/// (saying so).
#[tokio::test]
async fn a_drill_schedules_firing_starts_the_drill_in_the_worker() -> TestResult {
    let w = world(Arc::new(SqliteBackend::in_memory()?));
    let drills = RecordingDrills {
        seen: std::sync::Mutex::new(Vec::new()),
        failing_org: "globex",
    };
    let event = batch(vec![
        record(
            "m-acme",
            Some(r#"{"drill": {"org": "acme", "deployment_id": "d1"}}"#),
        ),
        record(
            "m-globex",
            Some(r#"{"drill": {"org": "globex", "deployment_id": "d2"}}"#),
        ),
    ]);
    let handlers = floe_worker::Handlers {
        drills: Some(&drills),
        ..floe_worker::Handlers::default()
    };
    let response = floe_worker::handle_all(&w.engine, handlers, event.clone()).await?;
    assert_eq!(failures(&response)?, ["m-globex"]);
    let seen = drills.seen.lock().map(|s| s.clone()).unwrap_or_default();
    assert_eq!(
        seen,
        [
            floe_ports::DrillJob {
                org: "acme".into(),
                deployment_id: "d1".into()
            },
            floe_ports::DrillJob {
                org: "globex".into(),
                deployment_id: "d2".into()
            }
        ]
    );
    let response = handle(&w.engine, event).await?;
    assert_eq!(failures(&response)?, Vec::<String>::new());
    Ok(())
}

/// The sweep hands out shards; a `{"health_shard": n}` message is the
/// check of shard n by the worker that takes it: a lost node of a
/// deployment in that shard starts its heal there. A shard that does not
/// exist, or a worker without a health check, drops the message.
#[tokio::test]
async fn a_health_shard_message_checks_that_shard_in_the_worker() -> TestResult {
    let mut w = world(Arc::new(sqlite()?));
    let created = create_plan(&w.store).await?;
    handle(&w.engine, batch(vec![job_record("m-create", &created)?])).await?;
    assert_eq!(run_to_end(&mut w, &created).await?, PlanStatus::Succeeded);
    let instances = w.compute.instances(&created.deployment_id).await?;
    assert!(w.compute.kill(&instances[0].id));

    let (queue, mut jobs) = LocalQueue::new();
    let queue: Arc<dyn floe_plans::WorkQueue> = Arc::new(queue);
    let health = floe_plans::HealthCheck::new(
        w.store.clone(),
        Arc::new(floe_plans::PlanStarter::new(w.store.clone(), queue)),
        w.steps.clone(),
        floe_plans::HealthConfig::default(),
    );
    let handlers = floe_worker::Handlers {
        health: Some(&health),
        ..floe_worker::Handlers::default()
    };
    let shard = floe_store::fleet_shard("acme", &created.deployment_id);
    let other = (shard + 1) % floe_store::FLEET_SHARDS;
    let event = |n: u16| {
        batch(vec![record(
            "m-shard",
            Some(&json!({ "health_shard": n }).to_string()),
        )])
    };
    // Another shard: nothing of this deployment's is looked at.
    let response = floe_worker::handle_all(&w.engine, handlers, event(other)).await?;
    assert_eq!(failures(&response)?, Vec::<String>::new());
    assert!(jobs.try_recv().is_err());
    // Its own: the heal starts.
    let response = floe_worker::handle_all(&w.engine, handlers, event(shard)).await?;
    assert_eq!(failures(&response)?, Vec::<String>::new());
    let heal = jobs.try_recv()?;
    assert_eq!(
        plan(&w.store, &heal).await?.kind(),
        floe_domain::plan::PlanKind::Heal
    );
    // No such shard, or no health check here: dropped, not retried.
    let response =
        floe_worker::handle_all(&w.engine, handlers, event(floe_store::FLEET_SHARDS)).await?;
    assert_eq!(failures(&response)?, Vec::<String>::new());
    let response = handle(&w.engine, event(shard)).await?;
    assert_eq!(failures(&response)?, Vec::<String>::new());
    Ok(())
}

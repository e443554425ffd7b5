//! Benchmark (not a test): the fleet's health check at 100, 1,000 and
//! 10,000 running deployments (issue 36), the store on SQLite (a file) and
//! on DynamoDB (moto), the 100-deployment figures printed beside each size
//! as the baseline from the same run.
//!
//! What runs for real: the health check itself (`floe_plans::HealthCheck`,
//! the sweep and one cold health check per shard job, as the worker runs
//! them), the store adapter and its queries, the survey of each page's
//! instances over the simulated compute, `judge` on what it found, heals
//! started through the real plan starter, and the handling of an EC2
//! state-change notification (`InstanceEvents`). What is simulated:
//! - **the probes' clusters**: each cluster answers green at once (its
//!   nodes are judged by their instances, as when `_cat/nodes` cannot be
//!   read); a real probe is four HTTP calls to the cluster;
//! - **the clock**: this machine's two cores and moto bound the wall time,
//!   not the design, so the time at which each deployment is checked is put
//!   on a simulated clock from what the job really did (its pages, their
//!   calls, the order of its checks) and the latencies below, which are
//!   assumptions, printed with the figures;
//! - **EC2**: the simulated compute; its calls are counted as the EC2
//!   adapter makes them (`floe_compute::describe_calls`).
//!
//! Run by scripts/bench.sh, or with moto on loopback:
//! `FLOE_TEST_AWS_ENDPOINT=http://127.0.0.1:PORT cargo bench --profile dev
//! --workspace --bench fleet_health`. FLOE_FLEET_SIZES (default
//! `100,1000,10000`) sets the sizes; FLOE_FLEET_DYNAMO=off leaves out moto,
//! FLOE_FLEET_SQLITE=off the SQLite file; FLOE_FLEET_SWEEPS (default 3) and
//! FLOE_FLEET_CHURN (default 5) shape the measured sweeps.

mod support;

use async_trait::async_trait;
use floe_compute::{
    Compute, ComputeError, LaunchRequest, LaunchTemplateSpec, TAG_DEPLOYMENT, TAG_NODE_GROUP,
    TAG_ORG, Volume,
};
use floe_compute_sim::{SimulatedCompute, SimulatedConfig};
use floe_domain::deployment::{Deployment, DeploymentSpec, DeploymentStatus};
use floe_domain::plan::{Plan, PlanParams};
use floe_elastic::HealthStatus;
use floe_plans::health::{ClusterFacts, Facts, Observation, judge};
use floe_plans::{HealthCheck, HealthConfig, InstanceEvents, PlanStarter, Probe, Survey};
use floe_ports::{HealthShards, InstanceStateChange, QueueError};
use floe_store::backend::{
    Backend, BackendError, Filter, Kind, ListQuery, Record, RecordPage, Write,
};
use floe_store::{FLEET_SHARDS, Store};
use floe_store_dynamo::DynamoBackend;
use floe_store_sqlite::SqliteBackend;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

type Fallible<T> = Result<T, Box<dyn std::error::Error>>;

const ORGS: usize = 10;
/// Nodes per deployment, in one zone of the simulated compute's many.
const NODES: u32 = 3;
const ZONES: usize = 200;
/// Sweeps measured after the first (which records every deployment's
/// health once); between two, this many deployments are created and as
/// many deleted, so that pages shift as in a living fleet. Both can be
/// lowered (FLOE_FLEET_SWEEPS, at least 2 for an interval; FLOE_FLEET_CHURN)
/// for a run on moto, whose Query and transactions grow with the table.
#[derive(Clone, Copy)]
struct Shape {
    sweeps: usize,
    churn: usize,
}

impl Shape {
    fn from_env() -> Fallible<Self> {
        let knob = |name: &str, default: usize| -> Fallible<usize> {
            match std::env::var(name) {
                Ok(v) => Ok(v
                    .trim()
                    .parse()
                    .map_err(|_| format!("{name} must be a number"))?),
                Err(_) => Ok(default),
            }
        };
        let shape = Self {
            sweeps: knob("FLOE_FLEET_SWEEPS", 3)?,
            churn: knob("FLOE_FLEET_CHURN", 5)?,
        };
        if shape.sweeps < 2 {
            return Err(
                "FLOE_FLEET_SWEEPS must be at least 2: an interval needs two sweeps".into(),
            );
        }
        Ok(shape)
    }
}
const MINUTE_S: f64 = 60.0;
const MINUTES_PER_MONTH: f64 = 43_200.0;

/// The simulated clock's latencies: assumptions, printed with the figures.
mod latency {
    /// The sweep's schedule fires to a shard's job running: Scheduler to
    /// the worker, the worker's SendMessage, SQS to the worker again.
    pub const SHARD_JOB_START_S: f64 = 1.0;
    /// One DynamoDB call (a page of a shard, a snapshot query, a write).
    pub const STORE_CALL_S: f64 = 0.010;
    /// One EC2 Describe call.
    pub const EC2_CALL_S: f64 = 0.150;
    /// One cluster's probe: `_cat/nodes`, `_cluster/health`, `_license`,
    /// `_snapshot`, inside the VPC.
    pub const CLUSTER_PROBE_S: f64 = 0.080;
    /// EC2's state-change notification to the worker running: EventBridge
    /// to SQS, SQS to the worker.
    pub const EVENT_DELIVERY_S: f64 = 1.0;
}

/// AWS list prices, us-east-1, on-demand, without free tiers, as we know
/// them on 2026-12-06 (check the pricing pages before relying on them).
mod price {
    pub const DATE: &str = "2026-12-06";
    /// Lambda: per request, and per GB-second on arm64 (Graviton).
    pub const LAMBDA_REQUEST: f64 = 0.20 / 1e6;
    pub const LAMBDA_GB_SECOND_ARM64: f64 = 0.000_013_333_4;
    /// DynamoDB on-demand: per read request unit (4 KB strongly
    /// consistent) and per write request unit (1 KB; a transaction's
    /// writes cost two each).
    pub const DYNAMODB_READ_UNIT: f64 = 0.125 / 1e6;
    pub const DYNAMODB_WRITE_UNIT: f64 = 0.625 / 1e6;
    /// SQS standard, per request (a message is sent, received and deleted).
    pub const SQS_REQUEST: f64 = 0.40 / 1e6;
    /// EventBridge Scheduler, per invocation.
    pub const SCHEDULER_INVOCATION: f64 = 1.00 / 1e6;
    /// EC2's Describe calls and EventBridge's delivery of AWS service
    /// events on the default bus cost nothing.
    pub const WORKER_MEMORY_GB: f64 = 0.5;
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let at = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

/// Counts the store's calls (each is one DynamoDB call on DynamoDB: a
/// GetItem, a Query page, a TransactWriteItems) and the request units
/// they would use.
struct Counting {
    inner: Arc<dyn Backend>,
    calls: AtomicU64,
    read_units: AtomicU64,
    write_units: AtomicU64,
}

impl Counting {
    fn new(inner: Arc<dyn Backend>) -> Counting {
        Counting {
            inner,
            calls: AtomicU64::new(0),
            read_units: AtomicU64::new(0),
            write_units: AtomicU64::new(0),
        }
    }

    fn read(&self, bytes: usize) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let units = bytes.div_ceil(4096).max(1) as u64;
        self.read_units.fetch_add(units, Ordering::Relaxed);
    }

    /// `(calls, read units, write units)` so far.
    fn taken(&self) -> (u64, u64, u64) {
        (
            self.calls.load(Ordering::Relaxed),
            self.read_units.load(Ordering::Relaxed),
            self.write_units.load(Ordering::Relaxed),
        )
    }
}

#[async_trait]
impl Backend for Counting {
    async fn get(
        &self,
        key: &floe_store::backend::RecordKey,
    ) -> Result<Option<Record>, BackendError> {
        let found = self.inner.get(key).await?;
        self.read(found.as_ref().map_or(0, |r| r.body.len()));
        Ok(found)
    }

    async fn list(&self, query: &ListQuery) -> Result<RecordPage, BackendError> {
        let page = self.inner.list(query).await?;
        self.read(page.records.iter().map(|r| r.body.len()).sum());
        Ok(page)
    }

    async fn write(&self, writes: Vec<Write>) -> Result<(), BackendError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let units: u64 = writes
            .iter()
            .map(|w| match w {
                Write::Create(r) | Write::Update { record: r, .. } => {
                    r.body.len().div_ceil(1024).max(1) as u64
                }
                _ => 1,
            })
            .sum();
        // In a transaction each write costs two units.
        let factor = if writes.len() > 1 { 2 } else { 1 };
        self.write_units
            .fetch_add(units * factor, Ordering::Relaxed);
        self.inner.write(writes).await
    }
}

/// What one shard job did, in order: each survey (deployments, instances,
/// running instances) and each check (the survey it was part of).
#[derive(Default)]
struct JobLog {
    surveys: Vec<(usize, usize, usize)>,
    checks: Vec<(String, usize)>,
}

/// The probe of this benchmark: the real survey over the simulated compute
/// and the real `judge`, with every cluster answering green at once.
struct BenchProbe {
    compute: Arc<SimulatedCompute>,
    log: Mutex<JobLog>,
}

impl BenchProbe {
    fn take(&self) -> JobLog {
        self.log
            .lock()
            .map(|mut l| std::mem::take(&mut *l))
            .unwrap_or_default()
    }
}

#[async_trait]
impl Probe for BenchProbe {
    async fn survey(&self, deployments: &[&Deployment]) -> Result<Survey, ComputeError> {
        let survey = Survey::read(self.compute.as_ref(), deployments).await?;
        let mut instances = 0;
        let mut running = 0;
        for d in deployments {
            let mine = survey.instances(&d.id).unwrap_or_default();
            instances += mine.len();
            running += mine
                .iter()
                .filter(|i| i.state == floe_compute::InstanceState::Running)
                .count();
        }
        if let Ok(mut log) = self.log.lock() {
            log.surveys.push((deployments.len(), instances, running));
        }
        Ok(survey)
    }

    async fn probe(&self, d: &Deployment, survey: &Survey) -> Option<Observation> {
        let instances = survey.instances(&d.id)?.to_vec();
        let (impaired, scheduled) = survey.status_of(&instances);
        if let Ok(mut log) = self.log.lock() {
            let page = log.surveys.len().saturating_sub(1);
            log.checks.push((d.id.clone(), page));
        }
        let facts = Facts {
            instances,
            impaired,
            scheduled,
            cluster: ClusterFacts::Reached {
                members: None,
                health: Ok(HealthStatus::Green),
            },
            recorded: BTreeSet::new(),
            owned: Default::default(),
            mount_source: None,
        };
        Some(judge(&d.spec, &facts))
    }
}

/// The sweep's queue: the shards it hands out, kept for the benchmark to
/// run each in a fresh health check (a cold worker).
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

fn spec(n: usize) -> Fallible<DeploymentSpec> {
    Ok(serde_json::from_value(serde_json::json!({
        "name": format!("fleet-{n:06}"), "version": "8.15.3",
        "node_groups": [{"id": "hot", "roles": ["master", "data_hot", "data_content"],
                         "instance_type": "m6g.xlarge", "count": NODES, "zone_count": 1,
                         "storage": {"size_gb": 100}}],
        // As a deployment whose snapshots are watched: each check also
        // finds its newest successful snapshot (one query).
        "recovery_targets": {"recovery_point": "1d"}
    }))?)
}

/// The fleet as it runs: records in the store, nodes in the compute.
struct Fleet {
    store: Store,
    counting: Arc<Counting>,
    compute: Arc<SimulatedCompute>,
    live: Vec<Deployment>,
    next: usize,
}

impl Fleet {
    async fn add(&mut self) -> Fallible<()> {
        let n = self.next;
        self.next += 1;
        let org = format!("org-{}", n % ORGS);
        let now = chrono::Utc::now();
        let d = Deployment {
            last_drill: None,
            id: floe_domain::names::new_resource_id(),
            org: org.clone(),
            spec: spec(n)?,
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
            &org,
            &d.id,
            PlanParams::Create(d.spec.clone()),
            "bench",
            "bench",
            now,
        );
        self.store.create_deployment(&d, &plan, None).await?;
        {
            self.compute
                .launch(&LaunchRequest {
                    template_name: "lt".into(),
                    count: NODES,
                    zone: n % ZONES,
                    client_token: d.id.clone(),
                    tags: BTreeMap::from([
                        (TAG_DEPLOYMENT.to_string(), d.id.clone()),
                        (TAG_ORG.to_string(), org.clone()),
                        (TAG_NODE_GROUP.to_string(), "hot".to_string()),
                    ]),
                })
                .await?;
        }
        self.live.push(d);
        Ok(())
    }

    async fn remove_oldest(&mut self) -> Fallible<()> {
        let d = self.live.remove(0);
        if let Some(current) = self.store.get_deployment(&d.org, &d.id).await? {
            self.store.delete_deployment(&current).await?;
        }
        Ok(())
    }
}

fn fresh_check(fleet: &Fleet, probe: Arc<BenchProbe>) -> HealthCheck {
    let (queue, _jobs) = floe_plans::LocalQueue::new();
    HealthCheck::new(
        fleet.store.clone(),
        Arc::new(PlanStarter::new(fleet.store.clone(), Arc::new(queue))),
        probe,
        HealthConfig::default(),
    )
}

/// One sweep as on AWS, measured: the sweep's own invocation, then each
/// shard's job in a fresh health check. The offset of each deployment's
/// check from the sweep's start on the simulated clock, and the counts.
struct SweepRun {
    offsets: BTreeMap<String, f64>,
    /// The longest job on the simulated clock, from the sweep's start.
    span_s: f64,
    invocations: u64,
    store_calls: u64,
    read_units: u64,
    write_units: u64,
    describe_instances: usize,
    describe_status: usize,
    /// Lambda seconds on the simulated clock.
    lambda_s: f64,
    wall: Duration,
}

async fn sweep(fleet: &Fleet, probe: &Arc<BenchProbe>) -> Fallible<SweepRun> {
    let before = fleet.counting.taken();
    let wall = Instant::now();
    let shards = Arc::new(Shards::default());
    let summary = fresh_check(fleet, probe.clone())
        .with_shards(shards.clone())
        .check()
        .await;
    let after_sweep = fleet.counting.taken();
    let sent = shards.0.lock().map(|s| s.clone()).unwrap_or_default();
    if sent.len() != usize::from(FLEET_SHARDS) {
        return Err(format!("the sweep handed out {} shards", sent.len()).into());
    }
    // The sweep's invocation: its store calls, a SendMessage per shard.
    let mut lambda_s = (after_sweep.0 - before.0) as f64 * latency::STORE_CALL_S
        + sent.len() as f64 * latency::STORE_CALL_S;
    let concurrency = HealthConfig::default().concurrency;
    let per_check = latency::CLUSTER_PROBE_S + latency::STORE_CALL_S;
    let mut run = SweepRun {
        offsets: BTreeMap::new(),
        span_s: 0.0,
        invocations: 1 + sent.len() as u64,
        store_calls: 0,
        read_units: 0,
        write_units: 0,
        describe_instances: 0,
        describe_status: 0,
        lambda_s: 0.0,
        wall: Duration::ZERO,
    };
    let mut checked = summary.checked;
    for shard in sent {
        let job = fresh_check(fleet, probe.clone()).check_shard(shard).await;
        checked += job.checked;
        if job.unhealthy != 0 {
            return Err(format!(
                "shard {shard}: {} unhealthy in a healthy fleet",
                job.unhealthy
            )
            .into());
        }
        let log = probe.take();
        // The job on the simulated clock: a page is its query and its
        // survey's EC2 calls, then its checks, `concurrency` at a time.
        let mut clock = latency::SHARD_JOB_START_S;
        let mut page_starts = Vec::new();
        let mut page_checks = vec![0usize; log.surveys.len()];
        for (deployments, instances, running) in &log.surveys {
            let (di, ds) = floe_compute::describe_calls(*deployments, *instances, *running);
            run.describe_instances += di;
            run.describe_status += ds;
            clock += latency::STORE_CALL_S + (di + ds) as f64 * latency::EC2_CALL_S;
            page_starts.push(clock);
            clock += deployments.div_ceil(concurrency) as f64 * per_check;
        }
        // The last query finds no more (or the shard is empty).
        clock += latency::STORE_CALL_S;
        for (id, page) in log.checks {
            let k = page_checks[page];
            page_checks[page] += 1;
            let at = page_starts[page] + (k / concurrency + 1) as f64 * per_check;
            run.offsets.insert(id, at);
        }
        lambda_s += clock - latency::SHARD_JOB_START_S;
        run.span_s = run.span_s.max(clock);
    }
    if checked != fleet.live.len() {
        return Err(format!("checked {checked} of {}", fleet.live.len()).into());
    }
    let after = fleet.counting.taken();
    run.store_calls = after.0 - before.0;
    run.read_units = after.1 - before.1;
    run.write_units = after.2 - before.2;
    run.lambda_s = lambda_s;
    run.wall = wall.elapsed();
    Ok(run)
}

/// What one size's run found.
#[derive(Clone, Copy)]
struct Figures {
    size: usize,
    interval_p50: f64,
    interval_p99: f64,
    span_s: f64,
    invocations: f64,
    store_calls: f64,
    ec2_calls: f64,
    by_event_s: f64,
    by_event_handling: Duration,
    by_sweep_p50: f64,
    by_sweep_p99: f64,
    cost_month: f64,
    wall: Duration,
}

/// A deterministic spread of termination times over a minute.
fn spread(n: usize) -> f64 {
    let x = (n as u64)
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    (x >> 11) as f64 / (1u64 << 53) as f64
}

async fn measure(label: &str, target: &Target, size: usize, shape: Shape) -> Fallible<Figures> {
    let seed: Arc<dyn Backend> = match target {
        Target::Sqlite(path) => Arc::new(SqliteBackend::open(path)?),
        Target::Dynamo(_) => Arc::new(SqliteBackend::in_memory()?),
    };
    let counting = Arc::new(Counting::new(seed.clone()));
    // A simulated zone is a /24: the fleet's nodes are spread over as
    // many zones as they need.
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig {
        zones: (0..ZONES).map(|z| format!("sim-{z:03}")).collect(),
        ..SimulatedConfig::default()
    }));
    compute
        .ensure_launch_template(&LaunchTemplateSpec {
            name: "lt".into(),
            instance_type: "m6g.xlarge".into(),
            arch: floe_domain::catalog::Arch::Arm64,
            user_data: String::new(),
            volume: Volume {
                size_gb: 100,
                volume_type: floe_domain::deployment::VolumeType::Gp3,
                iops: None,
                throughput: None,
            },
            tags: BTreeMap::new(),
            instance_profile: None,
        })
        .await?;
    let mut fleet = Fleet {
        store: Store::new(counting.clone()),
        counting,
        compute: compute.clone(),
        live: Vec::new(),
        next: 0,
    };
    let t = Instant::now();
    for _ in 0..size {
        fleet.add().await?;
    }
    println!(
        "{label} {size}: {size} running deployments created in {:.1?}",
        t.elapsed()
    );
    let probe = Arc::new(BenchProbe {
        compute: compute.clone(),
        log: Mutex::new(JobLog::default()),
    });
    // The first sweep records every deployment's health once.
    sweep(&fleet, &probe).await?;
    if let Target::Dynamo(sdk) = target {
        let t = Instant::now();
        let dynamo = load_into_dynamo(seed.as_ref(), sdk).await?;
        println!("{label} {size}: loaded into moto in {:.1?}", t.elapsed());
        fleet.counting = Arc::new(Counting::new(dynamo));
        fleet.store = Store::new(fleet.counting.clone());
    }
    let mut runs = Vec::new();
    for _ in 0..shape.sweeps {
        for _ in 0..shape.churn {
            fleet.remove_oldest().await?;
            fleet.add().await?;
        }
        runs.push(sweep(&fleet, &probe).await?);
    }
    // Intervals between two checks of one deployment, sweeps a minute apart.
    let mut intervals = Vec::new();
    for pair in runs.windows(2) {
        for (id, later) in &pair[1].offsets {
            if let Some(earlier) = pair[0].offsets.get(id) {
                intervals.push(MINUTE_S + later - earlier);
            }
        }
    }
    intervals.sort_by(f64::total_cmp);
    // By sweep alone: a node lost at a moment spread over the minute
    // before its deployment's check in the last sweep is found then.
    let last = runs.last().ok_or("no sweep")?;
    let mut by_sweep: Vec<f64> = last
        .offsets
        .values()
        .enumerate()
        .map(|(n, _)| spread(n) * MINUTE_S)
        .collect();
    by_sweep.sort_by(f64::total_cmp);

    // By event: a node of a running deployment terminated, its
    // notification handled by the real handler on this store.
    let events = InstanceEvents::new(
        Arc::new(fresh_check(&fleet, probe.clone())),
        compute.clone() as Arc<dyn Compute>,
    );
    let mut handling = Vec::new();
    let mut by_event = Vec::new();
    for d in fleet.live.iter().take(5) {
        let victim = compute
            .instances(&d.id)
            .await?
            .into_iter()
            .next()
            .ok_or("a node")?;
        compute.kill(&victim.id);
        let change: InstanceStateChange = serde_json::from_value(serde_json::json!({
            "version": "0", "id": "7bf73129-1428-4cd3-a780-95db273d1602",
            "detail-type": "EC2 Instance State-change Notification", "source": "aws.ec2",
            "account": "123456789012", "time": "2026-12-06T12:00:00Z", "region": "us-east-1",
            "resources": [format!("arn:aws:ec2:us-east-1:123456789012:instance/{}", victim.id)],
            "detail": {"instance-id": victim.id, "state": "shutting-down"}
        }))?;
        probe.take();
        let (calls_before, _, _) = fleet.counting.taken();
        let t = Instant::now();
        let outcome = events.handle(&change).await?;
        handling.push(t.elapsed());
        // On the simulated clock, as the sweep's checks: the store calls
        // it made, its EC2 calls (the instance's lookup by id, then its
        // deployment's survey) and one cluster probe. Its wall time is
        // printed beside: on moto it is mostly moto copying the table for
        // each transaction, which DynamoDB does not do.
        let (calls_after, _, _) = fleet.counting.taken();
        let ec2: usize = 1 + probe
            .take()
            .surveys
            .iter()
            .map(|(d, i, r)| {
                let (di, ds) = floe_compute::describe_calls(*d, *i, *r);
                di + ds
            })
            .sum::<usize>();
        by_event.push(
            latency::EVENT_DELIVERY_S
                + (calls_after - calls_before) as f64 * latency::STORE_CALL_S
                + ec2 as f64 * latency::EC2_CALL_S
                + latency::CLUSTER_PROBE_S,
        );
        if !matches!(
            outcome,
            floe_plans::EventOutcome::Checked { healing: true, .. }
        ) {
            return Err(format!("the notification started no heal: {outcome:?}").into());
        }
    }
    handling.sort();
    let by_event_handling = handling[handling.len() / 2];
    by_event.sort_by(f64::total_cmp);
    let by_event_s = by_event[by_event.len() / 2];

    let n = fleet.live.len() as f64;
    let per_minute = |total: u64| total as f64 / runs.len() as f64;
    let invocations = per_minute(runs.iter().map(|r| r.invocations).sum());
    let store_calls = per_minute(runs.iter().map(|r| r.store_calls).sum());
    let read_units = per_minute(runs.iter().map(|r| r.read_units).sum());
    let write_units = per_minute(runs.iter().map(|r| r.write_units).sum());
    let ec2_calls = per_minute(
        runs.iter()
            .map(|r| (r.describe_instances + r.describe_status) as u64)
            .sum(),
    );
    let lambda_s = runs.iter().map(|r| r.lambda_s).sum::<f64>() / runs.len() as f64;
    // A shard job's message is sent, received and deleted.
    let sqs_requests = 3.0 * f64::from(FLEET_SHARDS);
    // What a month of it costs, by service.
    let lambda = MINUTES_PER_MONTH
        * (invocations * price::LAMBDA_REQUEST
            + lambda_s * price::WORKER_MEMORY_GB * price::LAMBDA_GB_SECOND_ARM64);
    let dynamodb = MINUTES_PER_MONTH
        * (read_units * price::DYNAMODB_READ_UNIT + write_units * price::DYNAMODB_WRITE_UNIT);
    let queue_and_schedule =
        MINUTES_PER_MONTH * (sqs_requests * price::SQS_REQUEST + price::SCHEDULER_INVOCATION);
    let month = lambda + dynamodb + queue_and_schedule;
    println!(
        "{label} {size}: a month of checks costs ${month:.2}: Lambda ${lambda:.2}, DynamoDB ${dynamodb:.2}, SQS and the Scheduler ${queue_and_schedule:.2}"
    );
    Ok(Figures {
        size,
        interval_p50: percentile(&intervals, 0.5),
        interval_p99: percentile(&intervals, 0.99),
        span_s: runs.iter().map(|r| r.span_s).fold(0.0, f64::max),
        invocations: invocations / n,
        store_calls: store_calls / n,
        ec2_calls: ec2_calls / n,
        by_event_s,
        by_event_handling,
        by_sweep_p50: percentile(&by_sweep, 0.5),
        by_sweep_p99: percentile(&by_sweep, 0.99),
        cost_month: month / n,
        wall: runs.iter().map(|r| r.wall).sum::<Duration>() / runs.len() as u32,
    })
}

fn report(label: &str, f: &Figures, base: &Figures) {
    let size = f.size;
    let b = base.size;
    println!(
        "{label:<16} {size:>6}: interval p50 {:>6.2} s p99 {:>6.2} s | sweep's last check at {:>5.2} s | per deployment-minute: invocations {:.4}, DynamoDB {:.4}, EC2 {:.4} | heal by event {:.2} s (simulated; handling took {:.1?} of wall time here), by sweep p50 {:.1} s p99 {:.1} s | ${:.5}/deployment-month | sweep wall {:.1?}",
        f.interval_p50,
        f.interval_p99,
        f.span_s,
        f.invocations,
        f.store_calls,
        f.ec2_calls,
        f.by_event_s,
        f.by_event_handling,
        f.by_sweep_p50,
        f.by_sweep_p99,
        f.cost_month,
        f.wall,
    );
    let ratio = |a: f64, b: f64| {
        if b > 0.0 {
            format!("{:.2}x", a / b)
        } else {
            "-".into()
        }
    };
    let rows: [(&str, f64, f64, &str); 9] = [
        (
            "check interval p50, s",
            f.interval_p50,
            base.interval_p50,
            "<= 60",
        ),
        (
            "check interval p99, s",
            f.interval_p99,
            base.interval_p99,
            "<= 60",
        ),
        (
            "worker invocations per deployment-minute",
            f.invocations,
            base.invocations,
            "-",
        ),
        (
            "DynamoDB calls per deployment-minute",
            f.store_calls,
            base.store_calls,
            "<= 1.2x",
        ),
        (
            "EC2 calls per deployment-minute",
            f.ec2_calls,
            base.ec2_calls,
            "<= 1.2x",
        ),
        (
            "termination to heal started, by event, s",
            f.by_event_s,
            base.by_event_s,
            "< 5",
        ),
        (
            "termination to heal started, by sweep alone p50, s",
            f.by_sweep_p50,
            base.by_sweep_p50,
            "-",
        ),
        (
            "termination to heal started, by sweep alone p99, s",
            f.by_sweep_p99,
            base.by_sweep_p99,
            "-",
        ),
        (
            "control plane cost per deployment-month, USD",
            f.cost_month,
            base.cost_month,
            "-",
        ),
    ];
    for (figure, value, baseline, target) in rows {
        println!(
            "BENCH\t{figure} ({label}) at {size} vs {b}\t{value:.5}\t{baseline:.5}\t{}\t{target}",
            ratio(value, baseline)
        );
    }
}

/// Where a run keeps its records.
#[derive(Clone)]
enum Target {
    Sqlite(std::path::PathBuf),
    /// Seeded on SQLite, then loaded into a fresh table on moto.
    Dynamo(Box<aws_config::SdkConfig>),
}

async fn run_all(label: &str, target: &Target, sizes: &[usize], shape: Shape) -> Fallible<()> {
    let mut base: Option<Figures> = None;
    for (n, &size) in sizes.iter().enumerate() {
        let target = match target {
            Target::Sqlite(dir) => Target::Sqlite(dir.join(format!("fleet-{n}.db"))),
            other => other.clone(),
        };
        let figures = measure(label, &target, size, shape).await?;
        let baseline = *base.get_or_insert(figures);
        report(label, &figures, &baseline);
    }
    Ok(())
}

/// Copies the fleet's records (deployments and their fleet copies) from
/// `from` into a fresh DynamoDB table on moto, with BatchWriteItem in the
/// adapter's layout: moto copies the whole table for every transaction,
/// which makes a large load through the port quadratic there.
async fn load_into_dynamo(
    from: &dyn Backend,
    sdk: &aws_config::SdkConfig,
) -> Fallible<Arc<dyn Backend>> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let table = format!("floe-fleet-{nanos}");
    let backend = DynamoBackend::new(sdk, table.clone());
    backend.ensure_table().await?;
    let partitions = (0..ORGS)
        .map(|o| (format!("org-{o}"), Kind::Deployment))
        .chain((0..FLEET_SHARDS).map(|s| (format!("~fleet-{s:02}"), Kind::Fleet)));
    let mut records = Vec::new();
    for (org, kind) in partitions {
        let mut after = None;
        loop {
            let page = from
                .list(&ListQuery {
                    org: org.clone(),
                    kind,
                    key_prefix: String::new(),
                    after,
                    limit: 1000,
                    filter: Filter::default(),
                })
                .await?;
            records.extend(page.records);
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
    }
    support::Loader::Dynamo(aws_sdk_dynamodb::Client::new(sdk), table)
        .load(records)
        .await?;
    Ok(Arc::new(backend))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Fallible<()> {
    let sizes: Vec<usize> = std::env::var("FLOE_FLEET_SIZES")
        .unwrap_or_else(|_| "100,1000,10000".into())
        .split(',')
        .map(|s| s.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|_| "FLOE_FLEET_SIZES must be numbers separated by commas")?;
    if sizes.first() != Some(&100) {
        return Err("FLOE_FLEET_SIZES must start with 100, the baseline".into());
    }
    let shape = Shape::from_env()?;
    println!(
        "The fleet's health check (issue 36): {ORGS} organizations, {NODES} nodes a deployment, {} deployments replaced between sweeps, {} sweeps measured after the first.",
        shape.churn, shape.sweeps
    );
    println!(
        "Run for real: the sweep, each shard's job in a fresh health check, the store, the survey over the simulated compute, judge, heals, the notification's handler. Simulated: the clusters (green at once) and the clock."
    );
    println!(
        "Simulated clock: a shard's job starts {} s after the sweep fires; a DynamoDB call {} s; an EC2 Describe {} s; a cluster's probe {} s, {} at once; a notification reaches the worker in {} s. Prices: us-east-1 list prices as of {}.",
        latency::SHARD_JOB_START_S,
        latency::STORE_CALL_S,
        latency::EC2_CALL_S,
        latency::CLUSTER_PROBE_S,
        HealthConfig::default().concurrency,
        latency::EVENT_DELIVERY_S,
        price::DATE,
    );
    let dir = tempfile::tempdir()?;
    if std::env::var("FLOE_FLEET_SQLITE").as_deref() != Ok("off") {
        let sqlite = Target::Sqlite(dir.path().to_path_buf());
        run_all("SQLite", &sqlite, &sizes, shape).await?;
    }
    if std::env::var("FLOE_FLEET_DYNAMO").as_deref() == Ok("off") {
        return Ok(());
    }
    let sdk = support::moto_config().await?;
    run_all(
        "DynamoDB (moto)",
        &Target::Dynamo(Box::new(sdk)),
        &sizes,
        shape,
    )
    .await?;
    Ok(())
}

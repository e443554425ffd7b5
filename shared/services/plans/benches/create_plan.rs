//! Benchmark (not a test): create plans on simulated compute with zero
//! delays. Prints the control plane's own time per plan and per step next
//! to the time of the bare store writes such a plan needs, measured in the
//! same run on the same SQLite file. Run: `cargo bench -p floe-plans`.

use async_trait::async_trait;
use chrono::Utc;
use floe_compute::Compute;
use floe_compute_sim::{SimulatedCompute, SimulatedConfig};
use floe_domain::deployment::{Deployment, DeploymentSpec, DeploymentStatus};
use floe_domain::plan::{Plan, PlanParams, StepError};
use floe_plans::engine::{EngineConfig, Outcome, RunResult, StepContext, Steps};
use floe_plans::{DeploymentSteps, Engine, LocalQueue, PlanJob, StepPorts, StepSettings};
use floe_store::Store;
use floe_store_sqlite::SqliteBackend;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PLANS: usize = 200;

/// Times each step's own work, so the engine's overhead can be told apart.
struct Timed {
    inner: DeploymentSteps,
    per_step: Mutex<BTreeMap<String, Vec<Duration>>>,
}

#[async_trait]
impl Steps for Timed {
    fn settle(&self, plan: &Plan, next: &mut Deployment) {
        self.inner.settle(plan, next);
    }
    fn layout(&self, plan: &Plan, d: &Deployment) -> Result<Vec<String>, StepError> {
        self.inner.layout(plan, d)
    }
    async fn run(&self, step_id: &str, ctx: &StepContext<'_>) -> Outcome {
        let start = Instant::now();
        let outcome = self.inner.run(step_id, ctx).await;
        let kind = step_id.split(':').next().unwrap_or(step_id).to_string();
        if let Ok(mut m) = self.per_step.lock() {
            m.entry(kind).or_default().push(start.elapsed());
        }
        outcome
    }
    async fn undo(&self, step_id: &str, ctx: &StepContext<'_>) -> Outcome {
        self.inner.undo(step_id, ctx).await
    }
}

fn stats(label: &str, mut v: Vec<Duration>) {
    if v.is_empty() {
        return;
    }
    v.sort();
    let total: Duration = v.iter().sum();
    let pct = |p: f64| v[((v.len() - 1) as f64 * p) as usize];
    println!(
        "{label:<34} n={:<5} mean={:>9.1?} p50={:>9.1?} p95={:>9.1?} max={:>9.1?}",
        v.len(),
        total / v.len() as u32,
        pct(0.5),
        pct(0.95),
        pct(1.0)
    );
}

fn spec() -> Result<DeploymentSpec, serde_json::Error> {
    serde_json::from_value(
        serde_json::json!({"name": "bench", "version": "8.15.3", "node_groups": [
            {"id": "masters", "roles": ["master"], "instance_type": "c7g.large", "count": 3, "zone_count": 3, "storage": {"size_gb": 20}},
            {"id": "hot", "roles": ["data_hot", "data_content"], "instance_type": "m6g.xlarge", "count": 6, "zone_count": 3, "storage": {"size_gb": 500}}
        ]}),
    )
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store = Store::new(Arc::new(SqliteBackend::open(&dir.path().join("bench.db"))?));
    let compute = Arc::new(SimulatedCompute::new(SimulatedConfig::default()));
    let settings = StepSettings {
        poll: Duration::ZERO,
        ..StepSettings::default()
    };
    let clusters = sim_clusters(&compute);
    let steps = Arc::new(Timed {
        inner: DeploymentSteps::new(
            StepPorts {
                compute: compute.clone(),
                clusters: clusters.clone(),
                parameters: Arc::new(floe_compute_sim::SimulatedParameters::new(Vec::new())),
                cipher: Arc::new(floe_secrets::LocalCipher::from_key(&[5u8; 32])),
                snapshots: floe_snapshots::Snapshotter::new(store.clone(), clusters),
            },
            settings,
        ),
        per_step: Mutex::new(BTreeMap::new()),
    });
    let (queue, mut rx) = LocalQueue::new();
    let engine = Engine::new(
        store.clone(),
        Arc::new(queue),
        steps.clone(),
        "bench",
        EngineConfig::default(),
    );

    let spec = spec()?;
    let mut per_plan = Vec::new();
    let mut creates = Vec::new();
    let mut plan_writes = 0u64;
    for _ in 0..PLANS {
        let now = Utc::now();
        let plan = Plan::new(
            "bench",
            &floe_domain::names::new_resource_id(),
            PlanParams::Create(spec.clone()),
            "bench",
            "bench",
            now,
        );
        let d = Deployment {
            last_drill: None,
            id: plan.deployment_id.clone(),
            org: "bench".into(),
            spec: spec.clone(),
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
        let t = Instant::now();
        store.create_deployment(&d, &plan, None).await?;
        creates.push(t.elapsed());
        let job = PlanJob {
            org: "bench".into(),
            deployment_id: d.id.clone(),
            plan_id: plan.id.clone(),
        };
        let t = Instant::now();
        let mut result = engine.run(&job).await?;
        while !matches!(result, RunResult::Finished(_)) {
            if result != RunResult::Requeued {
                return Err(format!("plan run ended as {result:?}").into());
            }
            let Ok(next) = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await else {
                let p = store
                    .get_plan("bench", &d.id, &plan.id)
                    .await?
                    .ok_or("plan")?
                    .value;
                return Err(format!(
                    "stuck: {:?}",
                    p.steps
                        .iter()
                        .map(|s| (&s.step_id, s.status, &s.info_log))
                        .collect::<Vec<_>>()
                )
                .into());
            };
            let next = next.ok_or("queue closed")?;
            result = engine.run(&next).await?;
        }
        per_plan.push(t.elapsed());
        // Free the simulated subnets' addresses for the next plans (untimed).
        let ids: Vec<String> = compute
            .instances(&d.id)
            .await?
            .into_iter()
            .map(|i| i.id)
            .collect();
        compute.terminate(&ids).await?;
        let done = store
            .get_plan("bench", &d.id, &plan.id)
            .await?
            .ok_or("plan")?;
        plan_writes += done.version - 1;
    }
    let writes_per_plan = plan_writes / PLANS as u64;

    // The baseline: the same number of conditional plan writes, bare.
    let now = Utc::now();
    let plan = Plan::new(
        "bench",
        &floe_domain::names::new_resource_id(),
        PlanParams::Create(spec.clone()),
        "bench",
        "bench",
        now,
    );
    let d = Deployment {
        last_drill: None,
        id: plan.deployment_id.clone(),
        org: "bench".into(),
        spec: spec.clone(),
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
    store.create_deployment(&d, &plan, None).await?;
    let mut version = 1;
    let mut bare = Vec::new();
    for _ in 0..PLANS {
        let t = Instant::now();
        for _ in 0..writes_per_plan {
            version = store.update_plan(&plan, version).await?;
        }
        bare.push(t.elapsed());
    }

    println!(
        "create plans on simulated compute, zero delays, SQLite file store, {PLANS} plans of 9 nodes in 2 groups"
    );
    println!(
        "plan writes per plan (from record versions): {writes_per_plan}, plus 1 create batch and 1 finish batch"
    );
    stats("whole plan (engine + steps + store)", per_plan.clone());
    stats("bare plan writes of one plan", bare.clone());
    stats("create batch (deployment+plan+index)", creates);
    if let Ok(m) = steps.per_step.lock() {
        for (step, v) in m.iter() {
            stats(&format!("step {step} (its own work)"), v.clone());
        }
    }
    let mean = |v: &Vec<Duration>| v.iter().sum::<Duration>() / v.len().max(1) as u32;
    let overhead = mean(&per_plan).saturating_sub(mean(&bare));
    println!("engine overhead beyond bare writes per plan: {overhead:.1?}");
    // The steps' own work (the simulated cluster's join wait, most of it)
    // is not the engine's: the row takes it out too.
    let step_work: Duration = steps
        .per_step
        .lock()
        .map(|m| m.values().flatten().sum::<Duration>())
        .unwrap_or_default()
        / PLANS as u32;
    let overhead = overhead.saturating_sub(step_work);
    println!("engine overhead beyond bare writes and the steps' own work per plan: {overhead:.1?}");
    // The row scripts/bench.sh gathers: what the engine costs a plan beyond
    // the store writes it cannot avoid, next to those writes.
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "BENCH\tcreate plan: engine overhead beyond its bare store writes and steps, ms\t{:.2}\t{:.2}\t{:.2}x\t<= 2x",
        ms(overhead),
        ms(mean(&bare)),
        ms(overhead) / ms(mean(&bare)).max(f64::MIN_POSITIVE)
    );
    Ok(())
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

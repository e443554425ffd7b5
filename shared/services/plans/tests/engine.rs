//! The plan engine with scripted steps, in the style of omicron's saga
//! tests: every step is run twice, a failure is injected at every step in
//! turn, and nothing a step made may be left behind.

use async_trait::async_trait;
use chrono::Utc;
use floe_domain::deployment::{Deployment, DeploymentSpec, DeploymentStatus};
use floe_domain::plan::{Plan, PlanKind, PlanParams, PlanStatus, StepError, StepStatus};
use floe_plans::engine::{EngineConfig, Outcome, RunResult, StepContext, Steps, fail};
use floe_plans::{Engine, LocalQueue, PlanJob};
use floe_store::Store;
use floe_store_sqlite::SqliteBackend;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

/// A plan of `kind` over `spec`, as the use cases would record it.
fn params_of(kind: PlanKind, spec: &DeploymentSpec) -> PlanParams {
    match kind {
        PlanKind::Create => PlanParams::Create(spec.clone()),
        PlanKind::Update => PlanParams::Update(spec.clone()),
        PlanKind::Shutdown => PlanParams::Shutdown(Default::default()),
        PlanKind::Delete => PlanParams::Delete,
        PlanKind::Restore => unreachable!("restore plans are made with their target"),
        PlanKind::Start => PlanParams::Start(floe_domain::plan::StartParams {
            spec: spec.clone(),
            restore: None,
        }),
        PlanKind::ResetPassword => PlanParams::ResetPassword,
        PlanKind::License => PlanParams::License,
        PlanKind::Heal => unreachable!("heal plans are made with their replacements"),
        PlanKind::Drill => unreachable!("drill plans are made with their snapshot's records"),
    }
}

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Steps that each create one "resource" (undo removes it), with failures,
/// waits and transient errors scripted per step.
#[derive(Default)]
struct Scripted {
    count: usize,
    fail_at: Option<usize>,
    fail_undo_at: Option<usize>,
    wait_once_at: Option<usize>,
    transient_at: Option<(usize, u32)>,
    resources: Mutex<BTreeSet<String>>,
    runs: Mutex<Vec<String>>,
    waited: Mutex<BTreeSet<usize>>,
    transient_left: Mutex<u32>,
    /// Run every step twice in a row: the second run must change nothing.
    twice: bool,
}

fn index(step_id: &str) -> usize {
    step_id
        .trim_start_matches("step-")
        .parse()
        .unwrap_or(usize::MAX)
}

#[async_trait]
impl Steps for Scripted {
    /// These steps record nothing on the deployment.
    fn settle(&self, _plan: &Plan, _next: &mut Deployment) {}
    fn layout(&self, _plan: &Plan, _d: &Deployment) -> Result<Vec<String>, StepError> {
        Ok((0..self.count).map(|i| format!("step-{i}")).collect())
    }

    async fn run(&self, step_id: &str, ctx: &StepContext<'_>) -> Outcome {
        let i = index(step_id);
        self.runs
            .lock()
            .map(|mut r| r.push(format!("run {step_id}")))
            .ok();
        if self.wait_once_at == Some(i)
            && self.waited.lock().map(|mut w| w.insert(i)).unwrap_or(false)
        {
            return Outcome::Wait {
                after: Duration::from_millis(1),
                note: "not yet".into(),
            };
        }
        if self.transient_at.map(|(at, _)| at) == Some(i) {
            let mut left = self
                .transient_left
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if *left > 0 {
                *left -= 1;
                return Outcome::Retry("throttled".into());
            }
        }
        let rounds = if self.twice { 2 } else { 1 };
        for _ in 0..rounds {
            // Idempotent: inserting the same resource twice leaves one.
            self.resources
                .lock()
                .map(|mut r| r.insert(format!("{}:{step_id}", ctx.plan.id)))
                .ok();
        }
        if self.fail_at == Some(i) {
            return fail("injected", format!("failure injected at {step_id}"));
        }
        ctx.log(format!("made {step_id}"));
        Outcome::Done(json!({"made": step_id}))
    }

    async fn undo(&self, step_id: &str, ctx: &StepContext<'_>) -> Outcome {
        let i = index(step_id);
        self.runs
            .lock()
            .map(|mut r| r.push(format!("undo {step_id}")))
            .ok();
        if self.fail_undo_at == Some(i) {
            return fail("injected", "undo failure injected");
        }
        self.resources
            .lock()
            .map(|mut r| r.remove(&format!("{}:{step_id}", ctx.plan.id)))
            .ok();
        Outcome::Done(Value::Null)
    }
}

struct Harness {
    // Tests may swap the engine (and its queue) for one with other steps or settings.
    store: Store,
    engine: Engine,
    rx: UnboundedReceiver<PlanJob>,
    job: PlanJob,
}

async fn harness(
    steps: Arc<dyn Steps>,
    kind: PlanKind,
) -> Result<Harness, Box<dyn std::error::Error>> {
    let store = Store::new(Arc::new(SqliteBackend::in_memory()?));
    let (queue, rx) = LocalQueue::new();
    let config = EngineConfig {
        backoff: Duration::from_millis(1),
        ..EngineConfig::default()
    };
    let engine = Engine::new(store.clone(), Arc::new(queue), steps, "test-worker", config);
    let spec: DeploymentSpec = serde_json::from_value(json!({"name": "logs", "version": "8.15.3",
        "node_groups": [{"id": "hot", "roles": ["master", "data_hot"], "instance_type": "m6g.xlarge", "count": 1,
        "storage": {"size_gb": 10}}]}))?;
    let now = Utc::now();
    let plan = Plan::new(
        "acme",
        &floe_domain::names::new_resource_id(),
        params_of(kind, &spec),
        "test",
        "tester",
        now,
    );
    let deployment = Deployment {
        last_drill: None,
        id: plan.deployment_id.clone(),
        org: "acme".into(),
        spec,
        status: if kind == PlanKind::Create {
            DeploymentStatus::Initializing
        } else {
            DeploymentStatus::Stopping
        },
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
    let job = PlanJob {
        org: "acme".into(),
        deployment_id: deployment.id.clone(),
        plan_id: plan.id.clone(),
    };
    Ok(Harness {
        store,
        engine,
        rx,
        job,
    })
}

impl Harness {
    /// Runs the plan, delivering re-queued jobs, until it finishes.
    async fn drive(&mut self) -> Result<PlanStatus, Box<dyn std::error::Error>> {
        let mut result = self.engine.run(&self.job).await?;
        for _ in 0..200 {
            match result {
                RunResult::Finished(status) => return Ok(status),
                RunResult::Gone => return Err("plan gone".into()),
                RunResult::Requeued | RunResult::Busy => {
                    let job = tokio::time::timeout(Duration::from_secs(5), self.rx.recv())
                        .await?
                        .ok_or("queue closed")?;
                    result = self.engine.run(&job).await?;
                }
            }
        }
        Err("the plan did not finish".into())
    }

    async fn plan(&self) -> Result<Plan, Box<dyn std::error::Error>> {
        Ok(self
            .store
            .get_plan(&self.job.org, &self.job.deployment_id, &self.job.plan_id)
            .await?
            .ok_or("no plan")?
            .value)
    }

    async fn deployment(&self) -> Result<Option<Deployment>, Box<dyn std::error::Error>> {
        Ok(self
            .store
            .get_deployment(&self.job.org, &self.job.deployment_id)
            .await?
            .map(|v| v.value))
    }
}

#[tokio::test]
async fn a_plan_runs_every_step_in_order_and_records_it() -> TestResult {
    let steps = Arc::new(Scripted {
        count: 4,
        twice: true,
        wait_once_at: Some(2),
        ..Scripted::default()
    });
    let mut h = harness(steps.clone(), PlanKind::Create).await?;
    assert_eq!(h.drive().await?, PlanStatus::Succeeded);
    let plan = h.plan().await?;
    assert!(
        plan.steps.iter().all(|s| s.status == StepStatus::Succeeded),
        "{:?}",
        plan.steps
    );
    assert_eq!(plan.steps[2].attempts, 2, "the waiting step ran again");
    assert!(plan.steps[2].info_log.iter().any(|l| l == "not yet"));
    assert_eq!(plan.steps[0].output, json!({"made": "step-0"}));
    assert!(plan.lease.is_none() && plan.finished.is_some());
    let d = h.deployment().await?.ok_or("deployment")?;
    assert_eq!(
        (d.status, d.pending_plan),
        (DeploymentStatus::Running, None)
    );
    assert_eq!(steps.resources.lock().map(|r| r.len()).unwrap_or(0), 4);
    // The plan left the active index: the sweep finds nothing.
    assert_eq!(h.engine.sweep().await?, 0);
    Ok(())
}

#[tokio::test]
async fn a_failure_at_any_step_unwinds_to_nothing() -> TestResult {
    for at in 0..4 {
        let steps = Arc::new(Scripted {
            count: 4,
            fail_at: Some(at),
            twice: true,
            ..Scripted::default()
        });
        let mut h = harness(steps.clone(), PlanKind::Create).await?;
        assert_eq!(h.drive().await?, PlanStatus::Failed, "failure at step {at}");
        let left = steps
            .resources
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default();
        assert!(left.is_empty(), "failure at step {at} left {left:?}");
        let plan = h.plan().await?;
        assert_eq!(
            plan.error.as_ref().map(|e| e.failure_type.as_str()),
            Some("injected")
        );
        assert_eq!(
            plan.steps[at].status,
            StepStatus::Undone,
            "the failed step's own undo ran"
        );
        for later in plan.steps.iter().skip(at + 1) {
            assert_eq!(
                later.status,
                StepStatus::Pending,
                "steps after the failure never ran"
            );
        }
        // Undos ran in reverse order.
        let runs = steps.runs.lock().map(|r| r.clone()).unwrap_or_default();
        let undos: Vec<_> = runs
            .iter()
            .filter(|r| r.starts_with("undo"))
            .cloned()
            .collect();
        let expected: Vec<_> = (0..=at).rev().map(|i| format!("undo step-{i}")).collect();
        assert_eq!(undos, expected);
        let d = h.deployment().await?.ok_or("deployment")?;
        assert_eq!(
            d.status,
            DeploymentStatus::Stopped,
            "a create that unwound leaves nothing running"
        );
    }
    Ok(())
}

#[tokio::test]
async fn an_undo_that_fails_marks_the_deployment_failed_and_undoes_the_rest() -> TestResult {
    let steps = Arc::new(Scripted {
        count: 3,
        fail_at: Some(2),
        fail_undo_at: Some(1),
        ..Scripted::default()
    });
    let mut h = harness(steps.clone(), PlanKind::Create).await?;
    assert_eq!(h.drive().await?, PlanStatus::Failed);
    let plan = h.plan().await?;
    assert_eq!(plan.steps[1].status, StepStatus::UndoFailed);
    assert_eq!(
        plan.steps[0].status,
        StepStatus::Undone,
        "undo went on past the failed undo"
    );
    assert_eq!(
        h.deployment().await?.ok_or("deployment")?.status,
        DeploymentStatus::Failed
    );
    Ok(())
}

#[tokio::test]
async fn transient_errors_are_retried_then_fail_the_step() -> TestResult {
    let steps = Arc::new(Scripted {
        count: 2,
        transient_at: Some((1, 3)),
        transient_left: Mutex::new(3),
        ..Scripted::default()
    });
    let mut h = harness(steps, PlanKind::Create).await?;
    assert_eq!(h.drive().await?, PlanStatus::Succeeded);
    let plan = h.plan().await?;
    assert_eq!(plan.steps[1].attempts, 4);
    assert_eq!(
        plan.steps[1]
            .info_log
            .iter()
            .filter(|l| l.starts_with("transient error"))
            .count(),
        3
    );
    assert_eq!(plan.steps[1].retries, 3, "the record counts the retries");

    let steps = Arc::new(Scripted {
        count: 2,
        transient_at: Some((0, 99)),
        transient_left: Mutex::new(99),
        ..Scripted::default()
    });
    let mut h = harness(steps, PlanKind::Create).await?;
    assert_eq!(h.drive().await?, PlanStatus::Failed);
    let plan = h.plan().await?;
    assert_eq!(
        plan.error.map(|e| e.failure_type),
        Some("retries_exhausted".to_string())
    );
    let retries = plan.steps[0]
        .info_log
        .iter()
        .filter(|l| l.starts_with("transient error"))
        .count();
    let max = EngineConfig::default().max_retries;
    assert_eq!(retries as u32, max, "every retry after the first try");
    assert_eq!(plan.steps[0].retries, max, "the record counts the retries");
    assert_eq!(
        plan.steps[0].attempts,
        max + 2,
        "the first run, its retries, then its undo"
    );
    assert_eq!(plan.steps[0].status, StepStatus::Undone);
    Ok(())
}

#[tokio::test]
async fn a_cancelled_plan_stops_at_the_next_boundary_and_unwinds() -> TestResult {
    let steps = Arc::new(Scripted {
        count: 4,
        wait_once_at: Some(2),
        ..Scripted::default()
    });
    let mut h = harness(steps.clone(), PlanKind::Create).await?;
    // Runs steps 0 and 1, then waits at step 2.
    assert_eq!(h.engine.run(&h.job).await?, RunResult::Requeued);
    let pv = h
        .store
        .get_plan(&h.job.org, &h.job.deployment_id, &h.job.plan_id)
        .await?
        .ok_or("plan")?;
    let mut plan = pv.value;
    plan.cancel_requested = true;
    h.store.update_plan(&plan, pv.version).await?;
    assert_eq!(h.drive().await?, PlanStatus::Cancelled);
    assert!(
        steps
            .resources
            .lock()
            .map(|r| r.is_empty())
            .unwrap_or(false)
    );
    let plan = h.plan().await?;
    assert_eq!(plan.steps[3].status, StepStatus::Pending);
    Ok(())
}

#[tokio::test]
async fn a_lease_held_by_a_live_worker_is_respected_and_an_expired_one_is_swept() -> TestResult {
    let steps = Arc::new(Scripted {
        count: 2,
        ..Scripted::default()
    });
    let mut h = harness(steps.clone(), PlanKind::Create).await?;
    let pv = h
        .store
        .get_plan(&h.job.org, &h.job.deployment_id, &h.job.plan_id)
        .await?
        .ok_or("plan")?;
    let mut plan = pv.value;
    plan.lease = Some(floe_domain::plan::Lease {
        owner: "other-worker".into(),
        expires: Utc::now() + chrono::Duration::seconds(60),
    });
    let v = h.store.update_plan(&plan, pv.version).await?;
    assert_eq!(h.engine.run(&h.job).await?, RunResult::Busy);
    assert_eq!(h.engine.sweep().await?, 0, "a live lease is not swept");
    assert!(
        steps.runs.lock().map(|r| r.is_empty()).unwrap_or(false),
        "no step ran"
    );

    // The other worker died: its lease expires, the sweep re-queues the plan.
    plan.lease = Some(floe_domain::plan::Lease {
        owner: "other-worker".into(),
        expires: Utc::now() - chrono::Duration::seconds(1),
    });
    h.store.update_plan(&plan, v).await?;
    assert_eq!(h.engine.sweep().await?, 1);
    let job = h.rx.recv().await.ok_or("no job")?;
    assert_eq!(
        h.engine.run(&job).await?,
        RunResult::Finished(PlanStatus::Succeeded)
    );
    Ok(())
}

#[tokio::test]
async fn two_workers_racing_never_run_a_step_at_once() -> TestResult {
    let steps = Arc::new(Scripted {
        count: 6,
        ..Scripted::default()
    });
    let h = harness(steps.clone(), PlanKind::Create).await?;
    let engine = Arc::new(h.engine);
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let (e, job) = (engine.clone(), h.job.clone());
        tasks.push(tokio::spawn(async move { e.run(&job).await }));
    }
    for t in tasks {
        t.await??;
    }
    let runs = steps.runs.lock().map(|r| r.clone()).unwrap_or_default();
    let unique: BTreeSet<_> = runs.iter().collect();
    assert_eq!(runs.len(), unique.len(), "a step ran twice: {runs:?}");
    let plan = h
        .store
        .get_plan(&h.job.org, &h.job.deployment_id, &h.job.plan_id)
        .await?
        .ok_or("plan")?
        .value;
    assert_eq!(plan.status, PlanStatus::Succeeded);
    Ok(())
}

/// Steps whose `run` of one step lets the API's cancel win the race for the
/// plan record while the step is working.
struct CancelDuring {
    inner: Scripted,
    store: Store,
    at: usize,
}

#[async_trait]
impl Steps for CancelDuring {
    /// These steps record nothing on the deployment.
    fn settle(&self, _plan: &Plan, _next: &mut Deployment) {}
    fn layout(&self, plan: &Plan, d: &Deployment) -> Result<Vec<String>, StepError> {
        self.inner.layout(plan, d)
    }
    async fn run(&self, step_id: &str, ctx: &StepContext<'_>) -> Outcome {
        if index(step_id) == self.at
            && let Ok(Some(pv)) = self
                .store
                .get_plan(&ctx.plan.org, &ctx.plan.deployment_id, &ctx.plan.id)
                .await
        {
            let mut plan = pv.value;
            plan.cancel_requested = true;
            let _ = self.store.update_plan(&plan, pv.version).await;
        }
        self.inner.run(step_id, ctx).await
    }
    async fn undo(&self, step_id: &str, ctx: &StepContext<'_>) -> Outcome {
        self.inner.undo(step_id, ctx).await
    }
}

#[tokio::test]
async fn a_cancel_that_wins_the_race_during_a_step_undoes_that_step_too() -> TestResult {
    let store = Store::new(Arc::new(SqliteBackend::in_memory()?));
    let steps = Arc::new(CancelDuring {
        inner: Scripted {
            count: 4,
            ..Scripted::default()
        },
        store: store.clone(),
        at: 1,
    });
    let mut h = harness(steps.clone(), PlanKind::Create).await?;
    // The harness made its own store; point the hook at it.
    let steps = Arc::new(CancelDuring {
        inner: Scripted {
            count: 4,
            ..Scripted::default()
        },
        store: h.store.clone(),
        at: 1,
    });
    let (queue, rx) = LocalQueue::new();
    h.engine = Engine::new(
        h.store.clone(),
        Arc::new(queue),
        steps.clone(),
        "test-worker",
        EngineConfig::default(),
    );
    h.rx = rx;
    assert_eq!(h.drive().await?, PlanStatus::Cancelled);
    let left = steps
        .inner
        .resources
        .lock()
        .map(|r| r.clone())
        .unwrap_or_default();
    assert!(
        left.is_empty(),
        "the step that was running when the cancel landed left {left:?}"
    );
    let plan = h.plan().await?;
    assert_eq!(plan.steps[1].status, StepStatus::Undone);
    Ok(())
}

#[tokio::test]
async fn the_sweep_leaves_a_waiting_plan_alone_until_its_wake_up_is_due() -> TestResult {
    let steps = Arc::new(Scripted {
        count: 2,
        wait_once_at: Some(0),
        ..Scripted::default()
    });
    let mut h = harness(steps, PlanKind::Create).await?;
    let (queue, rx) = LocalQueue::new();
    h.engine = Engine::new(
        h.store.clone(),
        Arc::new(queue),
        Arc::new(Scripted {
            count: 2,
            wait_once_at: Some(0),
            ..Scripted::default()
        }),
        "w",
        EngineConfig::default(),
    );
    h.rx = rx;
    assert_eq!(h.engine.run(&h.job).await?, RunResult::Requeued);
    assert_eq!(
        h.engine.sweep().await?,
        0,
        "its own wake-up is still on the way"
    );
    // Once the wake-up is overdue (the message was lost), the sweep takes over.
    let pv = h
        .store
        .get_plan(&h.job.org, &h.job.deployment_id, &h.job.plan_id)
        .await?
        .ok_or("plan")?;
    let mut plan = pv.value;
    plan.wake_at = Some(Utc::now() - chrono::Duration::seconds(1));
    h.store.update_plan(&plan, pv.version).await?;
    assert_eq!(h.engine.sweep().await?, 1);
    Ok(())
}

#[tokio::test]
async fn a_zero_budget_still_makes_progress_one_step_at_a_time() -> TestResult {
    let steps = Arc::new(Scripted {
        count: 3,
        ..Scripted::default()
    });
    let mut h = harness(steps.clone(), PlanKind::Create).await?;
    let (queue, rx) = LocalQueue::new();
    let config = EngineConfig {
        budget: Duration::ZERO,
        ..EngineConfig::default()
    };
    h.engine = Engine::new(h.store.clone(), Arc::new(queue), steps, "w", config);
    h.rx = rx;
    assert_eq!(h.drive().await?, PlanStatus::Succeeded);
    Ok(())
}

/// A step that reports progress for many polls before it is done.
struct Polls {
    left: Mutex<u32>,
}

#[async_trait]
impl Steps for Polls {
    /// These steps record nothing on the deployment.
    fn settle(&self, _plan: &Plan, _next: &mut Deployment) {}
    fn layout(&self, _plan: &Plan, _d: &Deployment) -> Result<Vec<String>, StepError> {
        Ok(vec!["restore".into()])
    }

    async fn run(&self, _step_id: &str, ctx: &StepContext<'_>) -> Outcome {
        let mut left = self.left.lock().unwrap_or_else(|e| e.into_inner());
        if *left == 0 {
            ctx.log("done");
            return Outcome::Done(Value::Null);
        }
        *left -= 1;
        if *left == 75 {
            ctx.log("halfway: a line of its own");
        }
        Outcome::Wait {
            after: Duration::from_millis(1),
            note: format!("{left} to go"),
        }
    }

    async fn undo(&self, _step_id: &str, _ctx: &StepContext<'_>) -> Outcome {
        Outcome::Done(Value::Null)
    }
}

/// Hours of polling must not grow the plan record: each wait's note
/// replaces the previous one, and only lines a step logs itself stay.
#[tokio::test]
async fn a_long_wait_keeps_only_its_latest_progress_note() -> TestResult {
    let mut h = harness(
        Arc::new(Polls {
            left: Mutex::new(150),
        }),
        PlanKind::Create,
    )
    .await?;
    assert_eq!(h.drive().await?, PlanStatus::Succeeded);
    let plan = h.plan().await?;
    assert_eq!(plan.steps[0].attempts, 151);
    assert_eq!(
        plan.steps[0].info_log,
        ["76 to go", "halfway: a line of its own", "0 to go", "done"]
    );
    Ok(())
}

/// A step that reports a long line on every poll, for many polls, and whose
/// undo waits as long: what a drain or a final snapshot does for hours.
struct Chatty {
    polls: u32,
    runs: Mutex<u32>,
    undos: Mutex<u32>,
}

#[async_trait]
impl Steps for Chatty {
    fn settle(&self, _plan: &Plan, _next: &mut Deployment) {}
    fn layout(&self, _plan: &Plan, _d: &Deployment) -> Result<Vec<String>, StepError> {
        Ok(vec!["step-0".into(), "step-1".into()])
    }

    async fn run(&self, step_id: &str, ctx: &StepContext<'_>) -> Outcome {
        if step_id == "step-1" {
            return fail("injected", "the second step fails, so the first is undone");
        }
        let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        *runs += 1;
        if *runs > self.polls {
            return Outcome::Done(Value::Null);
        }
        ctx.log(format!("poll {runs}: {}", "shard relocating; ".repeat(60)));
        Outcome::Wait {
            after: Duration::from_millis(1),
            note: format!("{runs} of {} polls", self.polls),
        }
    }

    async fn undo(&self, _step_id: &str, _ctx: &StepContext<'_>) -> Outcome {
        let mut undos = self.undos.lock().unwrap_or_else(|e| e.into_inner());
        *undos += 1;
        if *undos > self.polls {
            return Outcome::Done(Value::Null);
        }
        Outcome::Wait {
            after: Duration::from_millis(1),
            note: format!("draining, {undos} of {} polls", self.polls),
        }
    }
}

#[tokio::test]
async fn a_step_polled_for_hours_keeps_its_log_bounded_while_running_and_undoing() -> TestResult {
    let polls = 300;
    let mut h = harness(
        Arc::new(Chatty {
            polls,
            runs: Mutex::new(0),
            undos: Mutex::new(0),
        }),
        PlanKind::Create,
    )
    .await?;
    let mut result = h.engine.run(&h.job).await?;
    let mut largest = 0;
    for _ in 0..(4 * polls) {
        match result {
            RunResult::Finished(_) | RunResult::Gone => break,
            RunResult::Requeued | RunResult::Busy => {
                let plan = h.plan().await?;
                largest = largest.max(serde_json::to_vec(&plan)?.len());
                let job = tokio::time::timeout(Duration::from_secs(5), h.rx.recv())
                    .await?
                    .ok_or("queue closed")?;
                result = h.engine.run(&job).await?;
            }
        }
    }
    assert!(
        matches!(result, RunResult::Finished(PlanStatus::Failed)),
        "{result:?}"
    );
    let plan = h.plan().await?;
    let log = &plan.steps[0].info_log;
    assert!(
        log.len() <= floe_plans::engine::MAX_LOG_LINES,
        "{} lines: {log:#?}",
        log.len()
    );
    assert!(
        log.iter()
            .all(|l| l.chars().count() <= floe_plans::engine::MAX_LOG_LINE_CHARS + 1)
    );
    // The first line, what was dropped, and the latest news survive.
    assert!(log[0].starts_with("poll 1:"), "{log:#?}");
    assert!(
        log.iter().any(|l| l.ends_with("earlier lines dropped")),
        "{log:#?}"
    );
    assert_eq!(log.last().map(String::as_str), Some("undone"));
    // Two steps, 600 polls with a 1 KB line each: still a small record.
    assert!(
        largest < 32 * 1024,
        "the plan record grew to {largest} bytes"
    );
    Ok(())
}

/// A plan whose second step fails, and whose first step's undo waits for
/// something that never comes (nodes that never drain).
struct StuckUndo;

#[async_trait]
impl Steps for StuckUndo {
    fn settle(&self, _plan: &Plan, _next: &mut Deployment) {}
    fn layout(&self, _plan: &Plan, _d: &Deployment) -> Result<Vec<String>, StepError> {
        Ok(vec!["step-0".into(), "step-1".into()])
    }

    async fn run(&self, step_id: &str, _ctx: &StepContext<'_>) -> Outcome {
        if step_id == "step-1" {
            return fail("injected", "the second step fails");
        }
        Outcome::Done(Value::Null)
    }

    async fn undo(&self, _step_id: &str, _ctx: &StepContext<'_>) -> Outcome {
        Outcome::Wait {
            after: Duration::from_millis(2),
            note: "waiting for the new nodes to drain".into(),
        }
    }
}

#[tokio::test]
async fn an_undo_that_waits_past_its_limit_is_undo_failed_and_the_plan_ends() -> TestResult {
    let steps = Arc::new(StuckUndo);
    let mut h = harness(steps.clone(), PlanKind::Create).await?;
    let (queue, rx) = LocalQueue::new();
    let config = EngineConfig {
        backoff: Duration::from_millis(1),
        undo_limit: Duration::from_millis(40),
        ..EngineConfig::default()
    };
    h.engine = Engine::new(h.store.clone(), Arc::new(queue), steps, "w", config);
    h.rx = rx;
    // Before the limit, each undo attempt restarted the step's clock, so
    // this plan waited forever.
    assert_eq!(h.drive().await?, PlanStatus::Failed);
    let plan = h.plan().await?;
    let undone = &plan.steps[0];
    assert_eq!(undone.status, StepStatus::UndoFailed);
    assert_eq!(
        undone.error.as_ref().map(|e| e.failure_type.as_str()),
        Some("undo_timeout")
    );
    assert!(undone.undo_started.is_some() && undone.attempts > 2);
    // A failed undo leaves the deployment failed, for an operator to see.
    let d = h.deployment().await?.ok_or("deployment")?;
    assert_eq!(d.status, DeploymentStatus::Failed);
    Ok(())
}

//! The plan engine. A plan is an ordered list of named steps, each with an
//! idempotent `run` and `undo`. The engine runs steps in order, recording
//! each result in the plan record before the next step starts; on a failure
//! (or a cancellation) it runs the undos of the completed steps in reverse.
//!
//! Only the holder of the plan's lease runs steps; the lease is taken with a
//! conditional write, so two workers given the same plan (at-least-once
//! delivery, the sweep) never run a step at the same time. Waiting is a
//! re-queue with a delay that releases the lease, never a sleep holding it.

use crate::sweep::SweepTask;
use async_trait::async_trait;
use chrono::Utc;
use floe_domain::deployment::Deployment;
use floe_domain::plan::{
    Lease, Plan, PlanEnd, PlanKind, PlanParams, PlanStatus, StepError, StepRecord, StepStatus,
    lifecycle,
};
use floe_ports::{PlanJob, PlanListener, QueueError, WorkQueue};
use floe_store::{DeploymentOutcome, PageRequest, Store, StoreError, Versioned};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::Instrument;

/// What one run (or undo) of a step came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Done; the value is kept as the step's output.
    Done(Value),
    /// Not yet (instances booting): run the step again after `after`.
    Wait { after: Duration, note: String },
    /// A transient error: retried with backoff, a bounded number of times.
    Retry(String),
    /// A permanent error: the plan unwinds.
    Fail(StepError),
}

pub fn fail(failure_type: &str, message: impl Into<String>) -> Outcome {
    Outcome::Fail(StepError {
        failure_type: failure_type.to_string(),
        message: message.into(),
    })
}

/// Done, keeping `output` (a step's typed output) as the step's output.
pub fn done<T: Serialize>(output: &T) -> Outcome {
    match serde_json::to_value(output) {
        Ok(value) => Outcome::Done(value),
        Err(e) => fail(
            "invalid_output",
            format!("the step's output cannot be kept: {e}"),
        ),
    }
}

/// The error of a plan record that does not hold what its steps wrote.
pub fn invalid_plan(message: impl Into<String>) -> StepError {
    StepError {
        failure_type: "invalid_plan".into(),
        message: message.into(),
    }
}

/// What a step sees: the plan, its deployment, earlier steps' outputs, and a
/// log that lands in the step's `info_log`.
pub struct StepContext<'a> {
    pub plan: &'a Plan,
    pub deployment: &'a Deployment,
    pub step: &'a StepRecord,
    outputs: BTreeMap<String, Value>,
    log: Mutex<Vec<String>>,
}

impl StepContext<'_> {
    pub fn output(&self, step_id: &str) -> Option<&Value> {
        self.outputs.get(step_id).filter(|v| !v.is_null())
    }

    /// The output step `step_id` recorded, read as its typed output `T`.
    /// A step with no output, or with one that does not read as `T` (a
    /// record that is not what the steps wrote), is an `invalid_plan` error.
    pub fn output_of<T: DeserializeOwned>(&self, step_id: &str) -> Result<T, StepError> {
        self.optional_output_of(step_id)?
            .ok_or_else(|| invalid_plan(format!("the {step_id} step has no output")))
    }

    /// As [`StepContext::output_of`], for a step that may have recorded
    /// nothing (it has not run, or it had nothing to say).
    pub fn optional_output_of<T: DeserializeOwned>(
        &self,
        step_id: &str,
    ) -> Result<Option<T>, StepError> {
        match self.output(step_id) {
            None => Ok(None),
            Some(value) => T::deserialize(value).map(Some).map_err(|e| {
                invalid_plan(format!(
                    "the output of the {step_id} step cannot be read: {e}"
                ))
            }),
        }
    }

    pub fn log(&self, line: impl Into<String>) {
        if let Ok(mut log) = self.log.lock() {
            log.push(line.into());
        }
    }

    /// How long this step has been at it (for its own timeouts).
    pub fn elapsed(&self) -> Duration {
        self.step
            .started
            .and_then(|s| (Utc::now() - s).to_std().ok())
            .unwrap_or_default()
    }
}

/// The steps of every kind of plan. The engine is generic over it so that
/// its tests can script steps and inject failures at each one.
#[async_trait]
pub trait Steps: Send + Sync + 'static {
    /// The step ids of `plan`, fixed when it starts.
    fn layout(&self, plan: &Plan, deployment: &Deployment) -> Result<Vec<String>, StepError>;
    async fn run(&self, step_id: &str, ctx: &StepContext<'_>) -> Outcome;
    async fn undo(&self, step_id: &str, ctx: &StepContext<'_>) -> Outcome;
    /// What a plan that succeeded writes onto its deployment's record
    /// besides its status (and, for an update, its spec). Required, so a
    /// wrapper cannot drop it by accident.
    fn settle(&self, plan: &Plan, next: &mut Deployment);
}

/// The spec an update plan ends with: its target, with the changes a PUT
/// made to the record while it ran. The name, tags, policies, recovery
/// targets and drill schedule need no plan, so a PUT applies them to the
/// record at once; one written after the plan began is newer than the
/// plan's copy and must not be reverted.
fn with_later_record_changes(
    target: &floe_domain::deployment::DeploymentSpec,
    record: &Deployment,
    plan: &Plan,
) -> floe_domain::deployment::DeploymentSpec {
    let mut spec = target.clone();
    if record.updated <= plan.created {
        return spec;
    }
    spec.name.clone_from(&record.spec.name);
    spec.metadata.clone_from(&record.spec.metadata);
    spec.recovery_targets
        .clone_from(&record.spec.recovery_targets);
    spec.drill_schedule.clone_from(&record.spec.drill_schedule);
    let policies = record.spec.policies().to_vec();
    match &mut spec.snapshot {
        Some(s) => s.policies = policies,
        None if !policies.is_empty() => {
            spec.snapshot = Some(floe_domain::deployment::SnapshotAttachment {
                repository: None,
                policies,
            });
        }
        None => {}
    }
    spec
}

#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// How long a lease holds without renewal; a worker that dies is replaced after it.
    pub lease: Duration,
    /// Transient failures of one step before it fails for good.
    pub max_retries: u32,
    /// First retry delay; doubles each time, up to `max_backoff`.
    pub backoff: Duration,
    /// The longest delay between two tries of a step.
    pub max_backoff: Duration,
    /// One invocation yields (re-queues itself) after this, so a Lambda
    /// never runs into its timeout mid-step.
    pub budget: Duration,
    /// How long one step's undo may keep waiting, over all its attempts,
    /// before it is recorded `undo_failed` and the unwinding goes on: an
    /// undo that waits on something that never comes (nodes that never
    /// drain, a cluster that is gone) must not hold the deployment's one
    /// plan forever.
    pub undo_limit: Duration,
}

impl Default for EngineConfig {
    fn default() -> EngineConfig {
        EngineConfig {
            // Longer than a worker invocation may run (the template's
            // worker timeout), so a live worker never loses its lease.
            lease: Duration::from_secs(180),
            // A step fails for good only after about six minutes of
            // transient errors (2, 4, 8, 16, 32 s, then a minute each):
            // a burst of AWS throttling or 5xx, even on each of a step's
            // calls in turn (the node identity step makes six), is waited
            // out, since failing would unwind through the same service.
            max_retries: 10,
            backoff: Duration::from_secs(2),
            max_backoff: Duration::from_secs(60),
            budget: Duration::from_secs(60),
            undo_limit: Duration::from_secs(2 * 3600),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunResult {
    /// The plan finished (now or before).
    Finished(PlanStatus),
    /// The plan waits or retries; it has been re-queued.
    Requeued,
    /// Another worker holds the lease, or won a race: nothing done.
    Busy,
    /// No such plan (or deployment).
    Gone,
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("queue: {0}")]
    Queue(#[from] QueueError),
}

pub struct Engine {
    store: Store,
    queue: Arc<dyn WorkQueue>,
    steps: Arc<dyn Steps>,
    owner: String,
    config: EngineConfig,
    listener: Option<Arc<dyn PlanListener>>,
    /// Run after each sweep's plans (the health check).
    sweep_tasks: Vec<Arc<dyn SweepTask>>,
    /// Where what operators must hear of goes (a drill that failed).
    events: Arc<dyn floe_ports::Events>,
}

fn lease_duration(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::seconds(120))
}

impl Engine {
    pub fn new(
        store: Store,
        queue: Arc<dyn WorkQueue>,
        steps: Arc<dyn Steps>,
        owner: impl Into<String>,
        config: EngineConfig,
    ) -> Engine {
        Engine {
            store,
            queue,
            steps,
            owner: owner.into(),
            config,
            listener: None,
            sweep_tasks: Vec::new(),
            events: Arc::new(floe_ports::LoggedEvents),
        }
    }

    /// Publishes the events plans raise to `events` (else they are logged).
    pub fn with_events(mut self, events: Arc<dyn floe_ports::Events>) -> Engine {
        self.events = events;
        self
    }

    /// Runs `task` after each sweep's plans (the health check).
    pub fn with_sweep_task(mut self, task: Arc<dyn SweepTask>) -> Engine {
        self.sweep_tasks.push(task);
        self
    }

    pub fn with_listener(mut self, listener: Arc<dyn PlanListener>) -> Engine {
        self.listener = Some(listener);
        self
    }

    /// Runs the plan as far as it can go now: to the end, to a wait, or to
    /// the invocation budget.
    pub async fn run(&self, job: &PlanJob) -> Result<RunResult, EngineError> {
        let started = tokio::time::Instant::now();
        // A lease names one invocation, not one process: two deliveries of
        // the same job to one worker must not both think they hold it.
        let owner = format!("{}/{}", self.owner, floe_domain::names::new_resource_id());
        let mut steps_run = 0;
        // Each pass reloads the plan: after a lost race (someone asked to
        // cancel, say) the record, not memory, is the truth.
        loop {
            let Some(pv) = self
                .store
                .get_plan(&job.org, &job.deployment_id, &job.plan_id)
                .await?
            else {
                return Ok(RunResult::Gone);
            };
            let (mut plan, mut version) = (pv.value, pv.version);
            if plan.status.is_finished() {
                return Ok(RunResult::Finished(plan.status));
            }
            let now = Utc::now();
            if plan
                .lease
                .as_ref()
                .is_some_and(|l| l.owner != owner && l.expires > now)
            {
                return Ok(RunResult::Busy);
            }
            let Some(dv) = self
                .store
                .get_deployment(&job.org, &job.deployment_id)
                .await?
            else {
                return Ok(RunResult::Gone);
            };
            plan.lease = Some(Lease {
                owner: owner.clone(),
                expires: now + lease_duration(self.config.lease),
            });
            if plan.status == PlanStatus::Pending {
                match self.steps.layout(&plan, &dv.value) {
                    Ok(ids) => {
                        plan.steps = ids.into_iter().map(StepRecord::new).collect();
                        plan.status = PlanStatus::Running;
                    }
                    Err(e) => {
                        plan.error = Some(e);
                        plan.status = PlanStatus::Unwinding;
                    }
                }
            }
            version = match self.store.update_plan(&plan, version).await {
                Ok(v) => v,
                Err(StoreError::VersionMismatch { .. }) => return Ok(RunResult::Busy),
                Err(e) => return Err(e.into()),
            };
            match self
                .advance(
                    &owner,
                    &mut steps_run,
                    &mut plan,
                    &mut version,
                    &dv,
                    started,
                )
                .await?
            {
                Some(result) => return Ok(result),
                None => continue,
            }
        }
    }

    /// Steps the plan until it finishes, waits or yields. `None` means a
    /// write lost a race and the caller should reload.
    async fn advance(
        &self,
        owner: &str,
        steps_run: &mut u32,
        plan: &mut Plan,
        version: &mut u64,
        deployment: &Versioned<Deployment>,
        started: tokio::time::Instant,
    ) -> Result<Option<RunResult>, EngineError> {
        loop {
            if plan.cancel_requested && plan.status == PlanStatus::Running {
                tracing::info!(plan = %plan.id, "cancel requested: unwinding");
                plan.status = PlanStatus::Unwinding;
                // A step that was waiting, or running when the cancel won
                // the race for the record (or when a worker died in it), may
                // have started something: undo it too.
                if plan
                    .steps
                    .get(plan.cursor)
                    .is_some_and(|s| matches!(s.status, StepStatus::Waiting | StepStatus::Running))
                {
                    plan.cursor += 1;
                }
            }
            let unwinding = plan.status == PlanStatus::Unwinding;
            let index = if unwinding {
                if plan.cursor == 0 {
                    return self.finish(plan, *version, deployment).await;
                }
                plan.cursor - 1
            } else {
                if plan.cursor >= plan.steps.len() {
                    return self.finish(plan, *version, deployment).await;
                }
                plan.cursor
            };
            // At least one step per invocation, or a tiny budget would only
            // ever re-queue.
            if *steps_run > 0 && started.elapsed() > self.config.budget {
                return self.requeue(plan, *version, Duration::ZERO).await;
            }
            // Unwinding skips steps that never ran.
            if unwinding && plan.steps[index].status == StepStatus::Pending {
                plan.cursor -= 1;
                continue;
            }

            let now = Utc::now();
            // A step that waited last time ends its log with that wait's note.
            let was_waiting = plan.steps[index].status == StepStatus::Waiting;
            {
                let step = &mut plan.steps[index];
                step.attempts += 1;
                if unwinding {
                    // The undo's clock starts once, at its first attempt;
                    // the steps' own waits measure from there too.
                    if step.undo_started.is_none() {
                        step.undo_started = Some(now);
                        step.started = Some(now);
                    }
                } else if step.started.is_none() {
                    step.started = Some(now);
                }
                if !unwinding {
                    step.status = StepStatus::Running;
                }
            }
            // Visible as running before it runs; also renews the lease.
            plan.lease = Some(Lease {
                owner: owner.to_string(),
                expires: now + lease_duration(self.config.lease),
            });
            *version = match self.store.update_plan(plan, *version).await {
                Ok(v) => v,
                Err(StoreError::VersionMismatch { .. }) => return Ok(None),
                Err(e) => return Err(e.into()),
            };

            let ctx = StepContext {
                plan,
                deployment: &deployment.value,
                step: &plan.steps[index],
                outputs: plan
                    .steps
                    .iter()
                    .map(|s| (s.step_id.clone(), s.output.clone()))
                    .collect(),
                log: Mutex::new(Vec::new()),
            };
            let step_id = plan.steps[index].step_id.clone();
            let span = tracing::info_span!("step", plan = %plan.id, deployment = %plan.deployment_id, step = %step_id, undo = unwinding);
            // `instrument`, not `enter`: the step awaits, and a guard held
            // across an await would put other tasks' lines in this span.
            let outcome = if unwinding {
                self.steps.undo(&step_id, &ctx).instrument(span).await
            } else {
                self.steps.run(&step_id, &ctx).instrument(span).await
            };
            *steps_run += 1;
            let lines = ctx.log.into_inner().unwrap_or_default();
            let logged = !lines.is_empty();
            plan.steps[index].info_log.extend(lines);
            if let Some(delay) = self.record(plan, index, outcome, unwinding, was_waiting, logged) {
                return self.requeue(plan, *version, delay).await;
            }
            bound_log(&mut plan.steps[index]);
            *version = match self.store.update_plan(plan, *version).await {
                Ok(v) => v,
                Err(StoreError::VersionMismatch { .. }) => return Ok(None),
                Err(e) => return Err(e.into()),
            };
        }
    }

    /// Records what a run (or undo) of step `index` came to: the step's
    /// status, output and log, and the plan's cursor. `Some(delay)` when
    /// the plan waits or retries, to be re-queued after `delay`.
    fn record(
        &self,
        plan: &mut Plan,
        index: usize,
        outcome: Outcome,
        unwinding: bool,
        was_waiting: bool,
        logged: bool,
    ) -> Option<Duration> {
        let step = &mut plan.steps[index];
        let elapsed = step
            .started
            .and_then(|s| (Utc::now() - s).to_std().ok())
            .unwrap_or_default();
        match outcome {
            Outcome::Done(output) => {
                step.duration_in_millis = Some(elapsed.as_millis() as u64);
                if unwinding {
                    step.status = StepStatus::Undone;
                    step.info_log.push("undone".into());
                    plan.cursor -= 1;
                } else {
                    step.status = StepStatus::Succeeded;
                    step.output = output;
                    plan.cursor += 1;
                }
                step.error = None;
            }
            Outcome::Wait { note, .. } if unwinding && elapsed > self.config.undo_limit => {
                step.info_log.push(note);
                let error = StepError {
                    failure_type: "undo_timeout".into(),
                    message: format!(
                        "the undo of {} waited {} minutes, longer than its limit of {}; what it waited for may need an operator",
                        step.step_id,
                        elapsed.as_secs() / 60,
                        self.config.undo_limit.as_secs() / 60
                    ),
                };
                self.fail_step(plan, index, error, unwinding);
            }
            Outcome::Wait { after, note } => {
                if !unwinding {
                    step.status = StepStatus::Waiting;
                }
                // The latest progress replaces the previous wait's note:
                // a restore or a drain polled for hours would otherwise
                // grow the plan record past what the store takes
                // (DynamoDB's 400 KB item).
                match step.info_log.last_mut() {
                    Some(last) if was_waiting && !logged => *last = note,
                    _ => step.info_log.push(note),
                }
                bound_log(step);
                return Some(after);
            }
            Outcome::Retry(message) => {
                if step.retries < self.config.max_retries {
                    let delay = self.retry_delay(step.retries);
                    step.retries += 1;
                    step.info_log.push(format!(
                        "transient error: {message}; retrying in {} ms",
                        delay.as_millis()
                    ));
                    bound_log(step);
                    return Some(delay);
                }
                let error = StepError {
                    failure_type: "retries_exhausted".into(),
                    message,
                };
                self.fail_step(plan, index, error, unwinding);
            }
            Outcome::Fail(error) => self.fail_step(plan, index, error, unwinding),
        }
        None
    }

    /// The wait before retry `retries + 1`: the backoff doubled for each
    /// earlier retry, at most `max_backoff`, plus up to a quarter of jitter.
    fn retry_delay(&self, retries: u32) -> Duration {
        let delay = self
            .config
            .backoff
            .saturating_mul(2u32.saturating_pow(retries))
            .min(self.config.max_backoff);
        let jitter = rand::random::<u64>() % (delay.as_millis() as u64 / 4 + 1);
        delay + Duration::from_millis(jitter)
    }

    fn fail_step(&self, plan: &mut Plan, index: usize, error: StepError, unwinding: bool) {
        let step = &mut plan.steps[index];
        step.info_log.push(format!("failed: {}", error.message));
        tracing::warn!(plan = %plan.id, step = %step.step_id, failure_type = %error.failure_type, "step failed");
        step.error = Some(error.clone());
        if unwinding {
            // Keep undoing the rest: leave as little behind as possible.
            step.status = StepStatus::UndoFailed;
            plan.cursor -= 1;
        } else {
            step.status = StepStatus::Failed;
            plan.error = Some(error);
            plan.status = PlanStatus::Unwinding;
            // The failed step may have done part of its work; its undo is idempotent.
            plan.cursor = index + 1;
        }
    }

    async fn requeue(
        &self,
        plan: &mut Plan,
        version: u64,
        delay: Duration,
    ) -> Result<Option<RunResult>, EngineError> {
        plan.lease = None;
        // The sweep leaves a plan alone until its wake-up is due: a second
        // chain of wake-ups would never merge with the first.
        plan.wake_at = Some(Utc::now() + lease_duration(delay) + chrono::Duration::seconds(5));
        match self.store.update_plan(plan, version).await {
            Ok(_) => {}
            Err(StoreError::VersionMismatch { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        let job = PlanJob {
            org: plan.org.clone(),
            deployment_id: plan.deployment_id.clone(),
            plan_id: plan.id.clone(),
        };
        self.queue.enqueue(job, delay).await?;
        Ok(Some(RunResult::Requeued))
    }

    /// Records the end of the plan and what it did to the deployment.
    async fn finish(
        &self,
        plan: &mut Plan,
        version: u64,
        deployment: &Versioned<Deployment>,
    ) -> Result<Option<RunResult>, EngineError> {
        let undo_failed = plan
            .steps
            .iter()
            .any(|s| s.status == StepStatus::UndoFailed);
        plan.status = match plan.status {
            PlanStatus::Running => PlanStatus::Succeeded,
            _ if plan.cancel_requested && plan.error.is_none() && !undo_failed => {
                PlanStatus::Cancelled
            }
            _ => PlanStatus::Failed,
        };
        plan.lease = None;
        plan.finished = Some(Utc::now());
        plan.updated = Utc::now();
        let mut next = deployment.value.clone();
        next.updated = Utc::now();
        if next
            .pending_plan
            .as_ref()
            .is_some_and(|p| p.plan_id == plan.id)
        {
            next.pending_plan = None;
        }
        let succeeded = plan.status == PlanStatus::Succeeded;
        let end = if undo_failed {
            PlanEnd::UndoFailed
        } else if succeeded {
            PlanEnd::Succeeded
        } else {
            PlanEnd::RolledBack
        };
        next.status = lifecycle::after_plan(plan, end);
        if succeeded {
            if let PlanParams::Update(spec) = &plan.params {
                next.spec = with_later_record_changes(spec, &deployment.value, plan);
            }
            self.steps.settle(plan, &mut next);
        }
        // A move to a stable endpoint ends with its plan: made the
        // endpoint (settle) or not; the next update starts it again.
        if plan.kind() == PlanKind::Update {
            next.endpoint_moving_to = None;
        }
        let former = if succeeded && plan.kind() == PlanKind::Delete {
            self.former_of(&deployment.value).await?
        } else {
            None
        };
        // A drill's clone goes however the drill ended: its steps or
        // their undos removed what it ran on. Only an undo that failed
        // keeps its record (failed), for an operator to delete.
        let drill_clone_gone = plan.kind() == PlanKind::Drill && !undo_failed;
        let outcome = if let Some(former) = &former {
            DeploymentOutcome::DeleteKeepingSnapshots {
                previous: deployment,
                former,
            }
        } else if (succeeded && plan.kind() == PlanKind::Delete) || drill_clone_gone {
            DeploymentOutcome::Delete(deployment)
        } else {
            DeploymentOutcome::Update {
                deployment: &next,
                previous: deployment,
            }
        };
        let written = match self.store.finish_plan(plan, version, outcome).await {
            // The target's repository or a policy was deleted while the
            // plan ran: the record cannot name it. Retrying cannot help, so
            // the plan ends failed and says why; the record keeps the spec
            // it had, and a PUT of the spec without it brings them in step.
            Err(StoreError::MissingReference { kind, key }) if succeeded => {
                plan.status = PlanStatus::Failed;
                plan.error = Some(StepError {
                    failure_type: "reference_missing".into(),
                    message: format!(
                        "the nodes run the new spec, but its {} {key} was deleted while the plan ran, so the deployment keeps its previous spec; send the spec again without it",
                        match kind {
                            floe_store::Kind::Repository => "snapshot repository",
                            floe_store::Kind::Policy => "snapshot policy",
                            _ => "reference",
                        }
                    ),
                });
                let mut kept = next.clone();
                kept.spec = deployment.value.spec.clone();
                kept.access = deployment.value.access.clone();
                tracing::warn!(plan = %plan.id, key = %key, "a plan's target lost a reference; recorded as failed");
                self.store
                    .finish_plan(
                        plan,
                        version,
                        DeploymentOutcome::Update {
                            deployment: &kept,
                            previous: deployment,
                        },
                    )
                    .await
            }
            other => other,
        };
        match written {
            Ok(_) => {
                tracing::info!(plan = %plan.id, status = plan.status.as_str(), deployment_status = next.status.as_str(), "plan finished");
                if succeeded && plan.kind() == PlanKind::Delete {
                    self.forget_plans(&plan.org, &plan.deployment_id).await;
                }
                if let PlanParams::Drill(params) = &plan.params {
                    crate::drills::end(&self.store, plan, &params.drill, self.events.as_ref())
                        .await;
                }
                if let Some(listener) = &self.listener {
                    listener.finished(&plan.org, &plan.deployment_id).await;
                }
                Ok(Some(RunResult::Finished(plan.status)))
            }
            // The deployment changed under us (a tag edit): reload and finish again.
            Err(StoreError::VersionMismatch { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// What a deleted deployment leaves of itself: a former deployment's
    /// record when it has a repository and snapshot records (the delete
    /// keeps its snapshots; see docs/snapshot-records.md).
    async fn former_of(
        &self,
        d: &Deployment,
    ) -> Result<Option<floe_domain::snapshot::FormerDeployment>, EngineError> {
        let Some(repository) = d.spec.repository() else {
            return Ok(None);
        };
        let one = PageRequest {
            size: Some(1),
            cursor: None,
        };
        let listed = self.store.list_snapshots(&d.org, &d.id, None, &one).await?;
        if listed.items.is_empty() {
            return Ok(None);
        }
        Ok(Some(floe_domain::snapshot::FormerDeployment {
            org: d.org.clone(),
            id: d.id.clone(),
            name: d.spec.name.clone(),
            version: d.spec.version.clone(),
            repository: repository.to_string(),
            deleted: Utc::now(),
        }))
    }

    /// Removes a deleted deployment's plan records and policy run states:
    /// no API reaches them once the deployment is gone. A failure is
    /// logged and leaves them (ids are never reused, so nothing reads
    /// them); the delete itself has succeeded.
    async fn forget_plans(&self, org: &str, deployment_id: &str) {
        match self.store.delete_plans_of(org, deployment_id).await {
            Ok(n) => tracing::debug!(
                deployment = deployment_id,
                removed = n,
                "a deleted deployment's plans forgotten"
            ),
            Err(e) => {
                tracing::warn!(deployment = deployment_id, error = %e, "cannot forget a deleted deployment's plans")
            }
        }
        if let Err(e) = self.store.delete_policy_runs_of(org, deployment_id).await {
            tracing::warn!(deployment = deployment_id, error = %e, "cannot forget a deleted deployment's policy runs");
        }
    }

    /// Re-queues every unfinished plan whose lease has expired or that no
    /// worker holds: plans whose worker died, or whose message was lost.
    /// Then runs the sweep tasks (the health check): after the plans,
    /// whatever became of them, and never failing the sweep.
    pub async fn sweep(&self) -> Result<usize, EngineError> {
        let requeued = self.sweep_plans().await;
        for task in &self.sweep_tasks {
            task.sweep().await;
        }
        requeued
    }

    async fn sweep_plans(&self) -> Result<usize, EngineError> {
        let mut requeued = 0;
        let mut page = PageRequest {
            size: Some(100),
            cursor: None,
        };
        loop {
            let result = self.store.list_active_plans(&page).await?;
            for entry in result.items {
                let Some(pv) = self
                    .store
                    .get_plan(&entry.org, &entry.deployment_id, &entry.plan_id)
                    .await?
                else {
                    continue;
                };
                let now = Utc::now();
                let idle = pv.value.lease.as_ref().is_none_or(|l| l.expires <= now)
                    && pv.value.wake_at.is_none_or(|w| w <= now);
                if !pv.value.status.is_finished() && idle {
                    let job = PlanJob {
                        org: entry.org,
                        deployment_id: entry.deployment_id,
                        plan_id: entry.plan_id,
                    };
                    self.queue.enqueue(job, Duration::ZERO).await?;
                    requeued += 1;
                }
            }
            match result.next_cursor {
                Some(c) => page.cursor = Some(c),
                None => return Ok(requeued),
            }
        }
    }
}

/// How many lines a step's log keeps, and how many characters each line
/// keeps. A step polled for a day, waiting or undoing, appends a line per
/// poll; unbounded, that outgrows the plan record's limit in the store
/// (DynamoDB's 400 KB item), after which the plan can no longer be written
/// at all.
pub const MAX_LOG_LINES: usize = 20;
/// See [`MAX_LOG_LINES`].
pub const MAX_LOG_LINE_CHARS: usize = 300;

/// Holds a step's log to [`MAX_LOG_LINES`] and [`MAX_LOG_LINE_CHARS`]: it
/// keeps the first line (how the step began) and the latest lines, and its
/// second line says how many it dropped in all (counted in the record, so
/// that nothing is read back from the log's text; retries are counted
/// there too, so any line may go).
fn bound_log(step: &mut StepRecord) {
    let log = &mut step.info_log;
    for line in log.iter_mut() {
        if let Some((cut, _)) = line.char_indices().nth(MAX_LOG_LINE_CHARS) {
            line.truncate(cut);
            line.push('…');
        }
    }
    if log.len() <= MAX_LOG_LINES {
        return;
    }
    // The note of what was dropped is the second line once there; it is
    // written again below with the new count.
    if step.log_lines_dropped > 0 && log.len() > 1 {
        log.remove(1);
    }
    // The first line stays; the oldest lines after it go.
    let to_drop = log.len().saturating_sub(MAX_LOG_LINES - 1);
    log.drain(1..1 + to_drop);
    step.log_lines_dropped = step
        .log_lines_dropped
        .saturating_add(u32::try_from(to_drop).unwrap_or(u32::MAX));
    log.insert(
        1,
        format!("… {} earlier lines dropped", step.log_lines_dropped),
    );
}

//! The worker function's event handling, apart from the Lambda runtime so
//! that tests can drive it with any store, queue and compute adapter.
//!
//! Two events wake the worker:
//! - an SQS batch from the work queue, one job per record: a plan's job runs
//!   the plan as far as it can go now (the engine re-queues it when it
//!   waits); a schedule reconciliation (sent by the api function, which
//!   never calls EventBridge Scheduler itself) makes the schedules follow
//!   the records; a drill schedule's firing (its job, put on the queue by
//!   EventBridge Scheduler) starts the deployment's drill;
//! - `{"sweep": true}` from a one-minute EventBridge Scheduler schedule:
//!   plans whose worker died, or whose message was lost, are queued again,
//!   and one health check job per shard of the fleet goes on the queue
//!   (`{"health_shard": n}`), each checked by the worker that takes it.

pub mod adapters;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use floe_plans::engine::EngineError;
use floe_plans::{Engine, InstanceEvents, RunResult};
use floe_ports::{ScheduleSync, WorkMessage};
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Duration;
use tracing::Instrument;

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// Neither an SQS batch nor a sweep: a wiring mistake in the deployment.
    #[error("unrecognised event (top-level fields: {0})")]
    UnrecognisedEvent(String),
    /// Shaped like an SQS batch (it has `Records`) but not readable as one.
    #[error("the SQS event cannot be read: {0}")]
    SqsEvent(#[source] serde_json::Error),
    /// A record failed that has no message id to report it by; failing the
    /// whole batch is the only way left to have it retried.
    #[error("a record without a message id failed: {0}")]
    Unreportable(#[source] EngineError),
    #[error("sweep failed: {0}")]
    Sweep(#[source] EngineError),
    #[error("the response cannot be encoded: {0}")]
    Response(#[source] serde_json::Error),
}

impl WorkerError {
    /// A stable name for the kind of failure: Lambda reports it as the
    /// invocation's `errorType`, which alarms and log queries can match.
    pub fn kind(&self) -> &'static str {
        match self {
            WorkerError::UnrecognisedEvent(_) => "floe.worker.unrecognised_event",
            WorkerError::SqsEvent(_) => "floe.worker.unreadable_sqs_event",
            WorkerError::Unreportable(_) => "floe.worker.unreportable_record_failure",
            WorkerError::Sweep(_) => "floe.worker.sweep_failed",
            WorkerError::Response(_) => "floe.worker.response_not_encodable",
        }
    }
}

/// The schedule's input. Anything else in it is a mistake worth hearing about.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepEvent {
    sweep: bool,
}

/// Handles one invocation's event: an SQS batch gives an `SqsBatchResponse`
/// (so that only the failed records are retried), a sweep `{"requeued": n}`.
pub async fn handle(engine: &Engine, event: Value) -> Result<Value, WorkerError> {
    handle_with(engine, None, event).await
}

/// As [`handle`], with the adapter that reconciles schedules (`None` when
/// the function has no schedule settings: reconciliations are then dropped,
/// and said so).
pub async fn handle_with(
    engine: &Engine,
    schedules: Option<&dyn ScheduleSync>,
    event: Value,
) -> Result<Value, WorkerError> {
    handle_all(
        engine,
        Handlers {
            schedules,
            instances: None,
            drills: None,
            health: None,
        },
        event,
    )
    .await
}

/// What handles the queue's messages besides the engine's plan jobs.
#[derive(Clone, Copy, Default)]
pub struct Handlers<'a> {
    /// Schedule reconciliations (`None`: dropped, and said so).
    pub schedules: Option<&'a dyn ScheduleSync>,
    /// EC2's instance state-change notifications (`None`: dropped, and
    /// said so; the sweep's health check finds the losses).
    pub instances: Option<&'a InstanceEvents>,
    /// Drill schedules' firings (`None`: dropped, and said so).
    pub drills: Option<&'a dyn floe_ports::DrillStarter>,
    /// The health check of the shards the sweep hands out (`None`:
    /// dropped, and said so).
    pub health: Option<&'a floe_plans::HealthCheck>,
}

/// As [`handle_with`], with every handler the function has.
pub async fn handle_all(
    engine: &Engine,
    handlers: Handlers<'_>,
    event: Value,
) -> Result<Value, WorkerError> {
    if event.get("Records").is_some() {
        let batch: SqsEvent = serde_json::from_value(event).map_err(WorkerError::SqsEvent)?;
        let response = run_batch(engine, handlers, &batch.records).await?;
        return serde_json::to_value(response).map_err(WorkerError::Response);
    }
    match serde_json::from_value::<SweepEvent>(event.clone()) {
        Ok(SweepEvent { sweep: true }) => {
            let requeued = engine.sweep().await.map_err(WorkerError::Sweep)?;
            tracing::info!(requeued, "sweep done");
            Ok(json!({ "requeued": requeued }))
        }
        _ => Err(WorkerError::UnrecognisedEvent(top_level_fields(&event))),
    }
}

/// Field names only: enough to tell which integration sent the event,
/// without copying a payload of unknown content into the logs.
fn top_level_fields(event: &Value) -> String {
    match event {
        Value::Object(map) if map.is_empty() => "none".into(),
        Value::Object(map) => map.keys().cloned().collect::<Vec<_>>().join(", "),
        other => format!("not an object but {}", json_type(other)),
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

enum RecordOutcome {
    /// Run (to the end, to a wait, or found busy or gone): delete the message.
    Handled,
    /// Unreadable: delete the message, it can never succeed.
    Dropped,
    /// The run failed on the way (store or queue unavailable): retry it.
    Failed(EngineError),
    /// A schedule reconciliation failed: retry it.
    Retry,
}

/// Runs the batch's plans side by side: they are independent, their steps
/// mostly wait on AWS, and one slow plan must not eat the others' time. Two
/// records of one plan are safe together: the lease lets one of them run.
async fn run_batch(
    engine: &Engine,
    handlers: Handlers<'_>,
    records: &[SqsMessage],
) -> Result<SqsBatchResponse, WorkerError> {
    let outcomes =
        futures_util::future::join_all(records.iter().map(|r| run_record(engine, handlers, r)))
            .await;
    let mut response = SqsBatchResponse::default();
    let mut unreportable = None;
    for (record, outcome) in records.iter().zip(outcomes) {
        let error = match outcome {
            RecordOutcome::Failed(error) => Some(error),
            RecordOutcome::Retry => None,
            RecordOutcome::Handled | RecordOutcome::Dropped => continue,
        };
        match (
            record.message_id.as_deref().filter(|id| !id.is_empty()),
            error,
        ) {
            (Some(id), _) => response.add_failure(id),
            (None, Some(error)) => unreportable = Some(error),
            // Reconciliation is retried by the next change or plan end.
            (None, None) => {}
        }
    }
    match unreportable {
        Some(error) => Err(WorkerError::Unreportable(error)),
        None => Ok(response),
    }
}

async fn run_record(engine: &Engine, handlers: Handlers<'_>, record: &SqsMessage) -> RecordOutcome {
    let message_id = record.message_id.as_deref().unwrap_or("");
    let receive_count = record
        .attributes
        .get("ApproximateReceiveCount")
        .map(String::as_str)
        .unwrap_or("");
    // A body that is not a job can never become one, however often SQS
    // redelivers it: reporting it failed would only bounce it until the
    // redrive policy moves it to the dead-letter queue. Dropping it (and
    // saying so) leaves the same trace sooner and keeps the batch moving.
    let job = match record.body.as_deref().map(serde_json::from_str) {
        Some(Ok(WorkMessage::Plan(job))) => job,
        Some(Ok(WorkMessage::Reconcile {
            reconcile_schedules: job,
        })) => {
            let Some(schedules) = handlers.schedules else {
                tracing::warn!(message_id, org = %job.org, "dropping a schedule reconciliation: this worker has no schedule settings");
                return RecordOutcome::Dropped;
            };
            return match schedules.sync(job).await {
                Ok(()) => RecordOutcome::Handled,
                // Reconciling is idempotent: SQS delivers it again.
                Err(e) => {
                    tracing::warn!(message_id, error = %e, "schedule reconciliation failed; SQS will deliver it again");
                    RecordOutcome::Retry
                }
            };
        }
        Some(Ok(WorkMessage::HealthShard { health_shard })) => {
            let Some(health) = handlers.health else {
                tracing::warn!(
                    message_id,
                    shard = health_shard,
                    "dropping a health check shard: this worker has no health check"
                );
                return RecordOutcome::Dropped;
            };
            if health_shard >= floe_store::FLEET_SHARDS {
                tracing::warn!(
                    message_id,
                    shard = health_shard,
                    "dropping a health check shard that does not exist"
                );
                return RecordOutcome::Dropped;
            }
            // A shard that could not be read is checked again by the next
            // sweep's job, a minute later: nothing to retry here.
            let summary = health.check_shard(health_shard).await;
            tracing::info!(
                message_id,
                shard = health_shard,
                checked = summary.checked,
                unhealthy = summary.unhealthy,
                heals_started = summary.heals_started,
                "health check shard done"
            );
            return RecordOutcome::Handled;
        }
        Some(Ok(WorkMessage::Drill { drill })) => {
            let Some(drills) = handlers.drills else {
                tracing::warn!(message_id, deployment = %drill.deployment_id, "dropping a drill schedule's firing: this worker cannot start drills");
                return RecordOutcome::Dropped;
            };
            return match drills.start_scheduled_drill(&drill).await {
                Ok(outcome) => {
                    tracing::info!(message_id, org = %drill.org, deployment = %drill.deployment_id, outcome = ?outcome, "drill schedule's firing handled");
                    RecordOutcome::Handled
                }
                // The store was unavailable: nothing was written, and SQS
                // delivers the firing again.
                Err(e) => {
                    tracing::warn!(message_id, error = %e, "drill schedule's firing not handled; SQS will deliver it again");
                    RecordOutcome::Retry
                }
            };
        }
        Some(Ok(WorkMessage::InstanceState(change))) => {
            let Some(instances) = handlers.instances else {
                tracing::warn!(message_id, instance = %change.detail.instance_id, "dropping an instance state change: this worker has no compute to look it up");
                return RecordOutcome::Dropped;
            };
            return match instances.handle(&change).await {
                Ok(outcome) => {
                    tracing::info!(message_id, instance = %change.detail.instance_id, state = %change.detail.state, outcome = ?outcome, "instance state change handled");
                    RecordOutcome::Handled
                }
                // Looking again is harmless: SQS delivers it again.
                Err(e) => {
                    tracing::warn!(message_id, error = %e, "instance state change not handled; SQS will deliver it again");
                    RecordOutcome::Retry
                }
            };
        }
        Some(Err(e)) => {
            tracing::warn!(message_id, error = %e, "dropping a message that is not a job");
            return RecordOutcome::Dropped;
        }
        None => {
            tracing::warn!(message_id, "dropping a message without a body");
            return RecordOutcome::Dropped;
        }
    };
    let span = tracing::info_span!("plan_job", message_id, receive_count, org = %job.org, deployment = %job.deployment_id, plan = %job.plan_id);
    // Instrumented, not entered: a guard held across an await would leave
    // the span entered on whichever thread polls other tasks meanwhile.
    async {
        match engine.run(&job).await {
            Ok(result) => {
                match result {
                    RunResult::Finished(status) => {
                        tracing::info!(status = status.as_str(), "plan is finished")
                    }
                    RunResult::Requeued => tracing::info!("plan waits; re-queued"),
                    // The lease holder carries on; if it died, the sweep
                    // re-queues the plan once its lease expires.
                    RunResult::Busy => tracing::info!("plan is busy with another worker"),
                    RunResult::Gone => {
                        tracing::warn!("no such plan or deployment; dropping the job")
                    }
                }
                RecordOutcome::Handled
            }
            Err(e) => {
                tracing::error!(error = %e, "plan run failed; SQS will deliver the job again");
                RecordOutcome::Failed(e)
            }
        }
    }
    .instrument(span)
    .await
}

/// What one invocation may spend running steps before it re-queues the rest:
/// the engine's own budget, shortened so that the step that starts last
/// still has `STEP_ALLOWANCE` before Lambda's deadline (a step cut off by the
/// deadline holds its plan's lease until the lease expires). Never below
/// `MIN_BUDGET`: with no time for a first step, every invocation would only
/// re-queue the plan, forever; a too-short function timeout must instead
/// show up as steps cut off, which the sweep recovers.
pub fn budget(remaining: Duration, engine_budget: Duration) -> Duration {
    engine_budget
        .min(remaining.saturating_sub(STEP_ALLOWANCE))
        .max(MIN_BUDGET.min(engine_budget))
}

/// Time kept for the last step an invocation starts (a few EC2 calls).
pub const STEP_ALLOWANCE: Duration = Duration::from_secs(30);

/// Time for at least one step, whatever the deadline.
pub const MIN_BUDGET: Duration = Duration::from_secs(5);

//! The scheduler port: what the reconciler needs from EventBridge Scheduler
//! or from the in-process scheduler of local mode, and the payload a
//! schedule delivers to the snapshotter. `floe-scheduler-aws` implements
//! it on EventBridge Scheduler, `floe-schedules` in process (and holds the
//! reconciler that calls it).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// What the snapshotter receives when a schedule fires: which policy to run
/// for which deployment. It is the contract between the scheduler (which
/// stores it as the target's input) and the snapshotter, so it carries ids
/// only: the snapshotter reads the current policy and deployment, and a
/// schedule never acts on a stale copy of either.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotJob {
    pub org: String,
    pub deployment_id: String,
    pub policy_id: String,
}

/// What a drill schedule hands on when it fires: which deployment to
/// drill. Like [`SnapshotJob`] it carries ids only; the worker reads the
/// deployment's current drill schedule (mode, topology, queries) when it
/// starts the drill.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DrillJob {
    pub org: String,
    pub deployment_id: String,
}

/// What a schedule delivers when it fires. Its JSON is the schedule's
/// input as written: a snapshot job as it always was
/// (`{"org", "deployment_id", "policy_id"}`, to the snapshotter), or a
/// drill job wrapped as `{"drill": {"org", "deployment_id"}}`, which is
/// also a work-queue message (a drill schedule's target is the work
/// queue, whose worker starts the drill).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ScheduledJob {
    Snapshot(SnapshotJob),
    Drill { drill: DrillJob },
}

impl ScheduledJob {
    pub fn org(&self) -> &str {
        match self {
            ScheduledJob::Snapshot(j) => &j.org,
            ScheduledJob::Drill { drill } => &drill.org,
        }
    }

    pub fn deployment_id(&self) -> &str {
        match self {
            ScheduledJob::Snapshot(j) => &j.deployment_id,
            ScheduledJob::Drill { drill } => &drill.deployment_id,
        }
    }
}

impl From<SnapshotJob> for ScheduledJob {
    fn from(job: SnapshotJob) -> ScheduledJob {
        ScheduledJob::Snapshot(job)
    }
}

impl From<DrillJob> for ScheduledJob {
    fn from(drill: DrillJob) -> ScheduledJob {
        ScheduledJob::Drill { drill }
    }
}

/// What starting a scheduled drill came to. A drill that cannot start now
/// (one still runs, the deployment is not running, no successful snapshot
/// yet) is skipped, not retried: the schedule's next firing tries again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduledDrill {
    Started { drill_id: String },
    Skipped { reason: String },
}

/// Starts the drill a drill schedule's firing asks for (the use case lives
/// above the ports; the worker and local mode's scheduler call it).
#[async_trait]
pub trait DrillStarter: Send + Sync {
    /// `Err` only for what may succeed later (the store unavailable): the
    /// firing is delivered again.
    async fn start_scheduled_drill(
        &self,
        job: &DrillJob,
    ) -> Result<ScheduledDrill, crate::queue::QueueError>;
}

/// One schedule as the reconciler wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleSpec {
    /// See `floe_schedules::names`: deterministic per (org, deployment,
    /// policy), or per (org, deployment) for its drill schedule.
    pub name: String,
    /// EventBridge form: `rate(30 minutes)` or `cron(30 1 * * ? *)`.
    pub expression: String,
    /// IANA time zone the expression is evaluated in.
    pub timezone: String,
    pub input: ScheduledJob,
}

/// A schedule found by [`Scheduler::list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExistingSchedule {
    pub name: String,
    /// What the schedule does, when it is exactly what [`Scheduler::put`]
    /// would write for that spec. `None` when any part differs from that
    /// (target, role, retry policy, dead-letter queue, flexible window,
    /// state) or cannot be read back (an input that is not a `ScheduledJob`):
    /// the reconciler then rewrites it.
    pub spec: Option<ScheduleSpec>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchedulerError {
    /// Throttling, a timeout, a 5xx: the same call may succeed later.
    #[error("the scheduler is unavailable for now: {0}")]
    Transient(String),
    /// The scheduler refused this schedule (a bad expression or time zone):
    /// retrying the same spec fails again.
    #[error("the scheduler refused schedule {name}: {message}")]
    Rejected { name: String, message: String },
    /// Anything else: permissions, a missing schedule group, a quota.
    /// Needs an operator, not a retry.
    #[error("the scheduler failed: {0}")]
    Failed(String),
}

impl SchedulerError {
    pub fn is_transient(&self) -> bool {
        matches!(self, SchedulerError::Transient(_))
    }
}

/// Schedules by name, in one namespace (an EventBridge schedule group, or
/// the in-process scheduler's map).
#[async_trait]
pub trait Scheduler: Send + Sync {
    /// Creates the schedule, or replaces every setting of the one with the
    /// same name.
    async fn put(&self, spec: &ScheduleSpec) -> Result<(), SchedulerError>;

    /// Deletes the schedule; a schedule that is already gone is success.
    async fn delete(&self, name: &str) -> Result<(), SchedulerError>;

    /// Every schedule whose name starts with `prefix`, all pages, in no
    /// particular order.
    async fn list(&self, prefix: &str) -> Result<Vec<ExistingSchedule>, SchedulerError>;
}

#[async_trait]
impl<S: Scheduler + ?Sized> Scheduler for std::sync::Arc<S> {
    async fn put(&self, spec: &ScheduleSpec) -> Result<(), SchedulerError> {
        (**self).put(spec).await
    }

    async fn delete(&self, name: &str) -> Result<(), SchedulerError> {
        (**self).delete(name).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ExistingSchedule>, SchedulerError> {
        (**self).list(prefix).await
    }
}

#[async_trait]
impl<S: Scheduler + ?Sized> Scheduler for &S {
    async fn put(&self, spec: &ScheduleSpec) -> Result<(), SchedulerError> {
        (**self).put(spec).await
    }

    async fn delete(&self, name: &str) -> Result<(), SchedulerError> {
        (**self).delete(name).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ExistingSchedule>, SchedulerError> {
        (**self).list(prefix).await
    }
}

/// Where no scheduler is configured (a function deployed without the
/// schedule settings): every call fails and says so, and reconciliation
/// logs it; nothing is silently dropped.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoScheduler;

#[async_trait::async_trait]
impl Scheduler for NoScheduler {
    async fn put(&self, spec: &ScheduleSpec) -> Result<(), SchedulerError> {
        Err(SchedulerError::Failed(format!(
            "no scheduler is configured; schedule {} was not written",
            spec.name
        )))
    }
    async fn delete(&self, name: &str) -> Result<(), SchedulerError> {
        Err(SchedulerError::Failed(format!(
            "no scheduler is configured; schedule {name} was not deleted"
        )))
    }
    async fn list(&self, _prefix: &str) -> Result<Vec<ExistingSchedule>, SchedulerError> {
        Err(SchedulerError::Failed("no scheduler is configured".into()))
    }
}
